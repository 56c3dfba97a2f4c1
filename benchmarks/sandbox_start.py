"""What a sandbox costs per trial: its start and stop around one short command, against a bare
process start, in the same run.

    python benchmarks/sandbox_start.py [--rounds 200] [--providers local,bwrap]

Each round, in turn (so that the machine's drift falls on all alike):

- **bare**: `true` started and waited for through `anyio.open_process` (what a trial without
  a sandbox pays for its command);
- **<provider>**: a whole trial's sandbox: `provider.sandbox(workspace, policy)` entered, `true`
  run with `exec`, the sandbox left (its /tmp and HOME made and removed), with the provider's
  default policy (bwrap as root: model-only, one endpoint bridged) and, for
  `<provider>+limits`, memory and process limits too (a cgroup per command where one can be
  made).

Prints the median, p90 and the median's excess over bare per provider, as a table or JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from trialkit.sandbox.base import Limits, SandboxPolicy
from trialkit.sandbox.registry import load_provider


async def bare() -> float:
    start = time.perf_counter()
    process = await anyio.open_process(["true"])
    await process.wait()
    await process.aclose()
    return time.perf_counter() - start


async def trial(provider_name: str, limits: bool, workspace: Path, endpoint: str) -> float:
    provider = load_provider(provider_name)
    policy = provider.default_policy()
    if limits:
        policy = SandboxPolicy(
            provider_name,
            policy.network,
            policy.grader_network,
            limits=Limits(memory_bytes=512 << 20, processes=256),
        )
    provider.check(policy)
    start = time.perf_counter()
    async with provider.sandbox(workspace, policy, [endpoint]) as sandbox:
        result = await sandbox.exec(["true"])
    elapsed = time.perf_counter() - start
    assert result.returncode == 0 and result.limit is None, result
    return elapsed


async def main(rounds: int, names: list[str]) -> dict[str, list[float]]:
    listener = socket.create_server(("127.0.0.1", 0))  # the "model proxy" bridged in
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    cases = ["bare"]
    for name in names:
        cases += [name] if name == "local" else [name, f"{name}+limits"]
    times: dict[str, list[float]] = {case: [] for case in cases}
    with tempfile.TemporaryDirectory() as folder:
        for case in cases[1:]:  # warm each once (imports, the capability probes)
            name, _, extra = case.partition("+")
            await trial(name, bool(extra), Path(folder), endpoint)
        for _ in range(rounds):
            for case in cases:
                if case == "bare":
                    times[case].append(await bare())
                else:
                    name, _, extra = case.partition("+")
                    times[case].append(await trial(name, bool(extra), Path(folder), endpoint))
    listener.close()
    return times


def summary(times: dict[str, list[float]]) -> list[dict[str, object]]:
    base = statistics.median(times["bare"])
    rows = []
    for case, values in times.items():
        ordered = sorted(values)
        median = statistics.median(ordered)
        rows.append(
            {
                "case": case,
                "median_ms": round(median * 1000, 2),
                "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
                "over_bare_ms": round((median - base) * 1000, 2),
            }
        )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--providers", default="local,bwrap")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = anyio.run(main, args.rounds, args.providers.split(","))
    rows = summary(found)
    if args.json:
        print(json.dumps(rows, indent=2))
        sys.exit(0)
    print(f"{args.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':<16}{'median ms':>12}{'p90 ms':>10}{'over bare ms':>14}")
    for row in rows:
        print(
            f"{row['case']:<16}{row['median_ms']:>12}{row['p90_ms']:>10}{row['over_bare_ms']:>14}"
        )
