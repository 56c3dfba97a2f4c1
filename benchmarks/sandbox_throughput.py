"""Trials per second of an instant command-line agent suite, without a sandbox and in one, and
what the start bound does to a burst of sandbox starts.

    python benchmarks/sandbox_throughput.py [--trials 1000] [--docker-trials 100]
        [--concurrency 8] [--providers none,bwrap,docker] [--burst 32] [--rounds 5]

**Throughput**: a suite of `--trials` trials (100 tasks) whose agent is a command,
`sh -c 'echo done > answer.txt; echo done'`, in a fresh copy of a one-file workspace per
trial, two graders (the answer, the file), run by `Runner` with the SQLite store on (a temp
file) at `--concurrency`: `none` runs the agent as a bare process (`SubprocessAgent` with no
sandbox); `bwrap` and `docker` put it in that provider's sandbox with its default policy
(`in_sandbox`), one sandbox per trial shared by its agent and graders. Docker runs
`--docker-trials` (its 0.5-0.8 s per container would make 1,000 trials take minutes);
docker's image is `$TRIALKIT_SANDBOX_IMAGE`. `--rounds R` splits `--trials` into R runs per
provider, the providers in turn each round (so a loaded machine's drift falls on all alike;
docker then runs `--trials` too).

**Burst** (`--burst N`, bwrap): N trials' sandboxes started at once, each running `true`, with
the start bound at 1, at the CPU count (the default) and at N (no bound): when the first is
ready, when the last is, and the median.

Prints a table or `--json`. Nothing here is asserted in tests; figures go in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

AGENT = ["sh", "-c", "echo done > answer.txt; echo done"]
TASKS = 100


def throughput(provider: str, total: int, concurrency: int) -> dict[str, Any]:
    from trialkit import Runner, Suite, Task, graders
    from trialkit.environments.workspace import Workspace
    from trialkit.harness import SubprocessAgent
    from trialkit.store import Store

    with tempfile.TemporaryDirectory() as folder:
        fixture = Path(folder) / "fixture"
        fixture.mkdir()
        (fixture / "README").write_text("a one-file project\n")
        agent = SubprocessAgent(AGENT, output="text")
        if provider != "none":
            agent.in_sandbox(provider)
        suite = Suite(
            id=f"throughput-{provider}",
            kind="capability",
            trials=max(1, total // TASKS),
            harness=agent,
            environment=Workspace(fixture),
            tasks=[
                Task(
                    id=f"task-{i}",
                    input=f"task {i}",
                    graders=[graders.contains("done"), graders.file_contains("answer.txt", "done")],
                )
                for i in range(min(TASKS, total))
            ],
        )
        store = Store(f"sqlite:///{Path(folder) / 'bench.db'}")
        runner = Runner(store=store, concurrency=concurrency)
        started = time.perf_counter()
        report = anyio.run(runner.run, suite)
        elapsed = time.perf_counter() - started
        store.close()
    summary = report.summary
    assert summary.trials == max(1, total // TASKS) * min(TASKS, total), summary
    assert summary.passed == summary.trials, (provider, summary)
    return {
        "provider": provider,
        "trials": summary.trials,
        "concurrency": concurrency,
        "seconds": round(elapsed, 2),
        "trials_per_s": round(summary.trials / elapsed, 1),
        "ms_per_trial": round(1000 * elapsed / summary.trials, 2),
    }


def interleaved(
    providers: list[str], total: int, rounds: int, concurrency: int
) -> list[dict[str, Any]]:
    """`total` trials per provider in `rounds` runs each, the providers in turn each round."""
    seconds = dict.fromkeys(providers, 0.0)
    trials = dict.fromkeys(providers, 0)
    for _ in range(rounds):
        for provider in providers:
            row = throughput(provider, total // rounds, concurrency)
            seconds[provider] += row["seconds"]
            trials[provider] += row["trials"]
    return [
        {
            "provider": provider,
            "trials": trials[provider],
            "concurrency": concurrency,
            "seconds": round(seconds[provider], 2),
            "trials_per_s": round(trials[provider] / seconds[provider], 1),
            "ms_per_trial": round(1000 * seconds[provider] / trials[provider], 2),
        }
        for provider in providers
    ]


def burst(size: int, bound: int) -> dict[str, Any]:
    from trialkit.sandbox.bwrap import BwrapProvider

    provider = BwrapProvider(starts=bound)
    policy = provider.default_policy()
    ready: list[float] = []

    async def one(workspace: Path, started: float) -> None:
        async with provider.sandbox(workspace, policy) as sandbox:
            result = await sandbox.exec(["true"], timeout=120)
            assert result.returncode == 0, result
            ready.append(time.perf_counter() - started)

    async def main() -> None:
        with tempfile.TemporaryDirectory() as folder:
            workspaces = [Path(folder) / str(i) for i in range(size)]
            for workspace in workspaces:
                workspace.mkdir()
            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for workspace in workspaces:
                    group.start_soon(one, workspace, started)

    anyio.run(main)
    return {
        "burst": size,
        "starts": bound,
        "first_s": round(min(ready), 3),
        "median_s": round(statistics.median(ready), 3),
        "last_s": round(max(ready), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--docker-trials", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--providers", default="none,bwrap,docker")
    parser.add_argument("--burst", type=int, default=0, help="bwrap sandboxes started at once")
    parser.add_argument(
        "--rounds", type=int, default=1, help="split --trials into rounds, providers in turn"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    if args.rounds > 1:  # interleaved: the machine's drift falls on every provider alike
        rows = interleaved(args.providers.split(","), args.trials, args.rounds, args.concurrency)
    for provider in args.providers.split(",") if args.rounds <= 1 else ():
        total = args.docker_trials if provider in ("docker", "podman") else args.trials
        if provider in ("docker", "podman") and not total:
            continue
        rows.append(throughput(provider, total, args.concurrency))
        if provider in ("docker", "podman") and args.trials != total:
            rows.append(throughput("none", total, args.concurrency))  # the same size bare
    bursts = []
    if args.burst:
        for bound in (1, os.cpu_count() or 1, args.burst):
            bursts.append(burst(args.burst, bound))
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"load": load, "throughput": rows, "bursts": bursts}, indent=2))
        return
    print(f"load average at the end: {load:.1f}, CPUs: {os.cpu_count()}")
    head = ("provider", "trials", "conc", "seconds", "trials/s", "ms/trial")
    print("{:10} {:>7} {:>5} {:>8} {:>9} {:>9}".format(*head))
    for row in rows:
        print(
            f"{row['provider']:10} {row['trials']:>7} {row['concurrency']:>5} "
            f"{row['seconds']:>8} {row['trials_per_s']:>9} {row['ms_per_trial']:>9}"
        )
    for row in bursts:
        print(
            f"burst of {row['burst']}, starts={row['starts']}: first ready {row['first_s']} s, "
            f"median {row['median_s']} s, last {row['last_s']} s"
        )


if __name__ == "__main__":
    sys.exit(main())
