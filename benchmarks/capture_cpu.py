"""Capture's cost: CPU per model call, with and without capturing the agent's own SDK calls.

An agent that makes its own `openai` SDK calls inside a trial has them captured at the HTTP
client (`trialkit/capture/`): recorded into the transcript and, with a cassette, recorded or
replayed. This benchmark measures what that costs per call. A fake OpenAI server
(`tests/fakes/provider_server.py`, in a process of its own, on loopback, so that its CPU is not
counted) answers every chat completion after L (50 ms), echoing the prompt. Every call is
`AsyncOpenAI.chat.completions.create`, C = 50 at a time, on one shared client, as:

- **sdk**: the bare SDK in a process of its own, trialkit not even imported, default gc: C
  tasks sharing a counter make 2,400 calls (after a warm-up), in `--sdk-runs` processes (3).

and, taking turns in one other process, a batch of 300 calls (or a run of 300 trials) at a
time, ABCDE then EDCBA, 6 batches of each (after a warm-up batch of each):

- **sdk, outside trials**: the same loop, with capture's hook installed; each call gets a
  fresh `TranscriptRecorder` that is not made current, so the hook passes the call through.
- **sdk, in trials**: the same, with that recorder made current, as a trial makes it: the
  call is captured. The difference from the row above is capture's own cost, alone.
- **trialkit**: a suite of 300 trials (100 tasks, a string input, one `contains` grader) whose
  async harness makes one call per trial on its own shared client, run by
  `Runner(concurrency=C, capture=False)`, no store.
- **trialkit+capture**: the same with capture on (the default).
- **trialkit+record**: the same, recording into a new cassette (a temp folder) each time.

Every batch starts a new event loop and client, as a trialkit run does; gc thresholds are a
run's throughout (`trialkit/_gc.py`). CPU is the process's user + system time over a batch
(`resource.getrusage`), divided by its calls. The machine's speed drifts, by tens of percent
over seconds on a shared virtual machine, so the comparisons are made within each turn: the
report gives, for each pair, the median over the turns of the difference in CPU per call, as
a share of the bare SDK's (the issue's target: capture adds at most 10 %). All of it is done
twice: for plain answers, and for streamed ones (`stream=True`, usage in the last chunk),
where capture's tee sees every chunk.

`--instructions` counts instead: each kind (and the bare SDK) runs under valgrind
(`cachegrind`, no cache simulation) twice, 100 and 500 calls after a warm-up, and the
difference over 400 is its user-space instructions per call. That is immune to the drift, and
blind to the kernel's share of a call (sockets, polling), so its ratios are a little high.

The parent also measures the CPU that other processes used during each child, and runs a
child again (at most `--retries` times) while they took more than `--busy` cores; a child
with no quiet attempt is marked `*`. Every child has a time limit, every loop a count, and
the server is always stopped. `benchmarks/replay.py` measures replay with the same agent.

    python benchmarks/capture_cpu.py                  # plain and streamed, about 4 minutes
    python benchmarks/capture_cpu.py --no-stream --batches 16
    python benchmarks/capture_cpu.py --instructions   # the same kinds, counted by valgrind
    python benchmarks/capture_cpu.py --quick          # a smoke run, about half a minute

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from latency import _children_cpu_s, _machine_busy_s, _ticks, fake_server  # this folder

ROOT = Path(__file__).resolve().parent.parent
TASKS = 100
MODEL = "gpt-4o-mini"
TURNS = ("sdk, outside trials", "sdk, in trials", "trialkit", "trialkit+capture", "trialkit+record")
"""The kinds that take turns in one process (the bare SDK runs in processes of its own)."""
PAIRS = (  # (what is measured, kind, the kind it is compared with in the same process)
    ("capture of a call, alone", "sdk, in trials", "sdk, outside trials"),
    ("capture in trialkit runs", "trialkit+capture", "trialkit"),
    ("capture and recording", "trialkit+record", "trialkit"),
)
CHILD_TIMEOUT = 300.0  # seconds for one child, imports included

# --- what the trials run --------------------------------------------------------------------


def _prompt(task: int) -> str:
    return f"Repeat this token: tok-{task:05d}"


def _client() -> Any:
    from openai import AsyncOpenAI

    url = os.environ["CAPTURE_URL"]
    return AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)


async def ask(client: Any, prompt: str, stream: bool) -> str:
    """One chat completion, plain or streamed (usage in the last chunk); the answer's text."""
    messages = [{"role": "user", "content": prompt}]
    if not stream:
        answer = await client.chat.completions.create(model=MODEL, messages=messages)
        return str(answer.choices[0].message.content or "")
    parts = []
    chunks = await client.chat.completions.create(
        model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    async for chunk in chunks:  # a handful of chunks: the fake server's stream is finite
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


_shared: dict[str, Any] = {}
"""The harness's one client in this process, made on the run's event loop at first use."""


async def agent(prompt: str) -> str:
    """The agent under test: its own SDK client (shared by every trial), one call a trial."""
    client = _shared.get("client")
    if client is None:
        client = _shared["client"] = _client()
    return await ask(client, prompt, os.environ.get("CAPTURE_STREAM") == "1")


def _no_network(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and isinstance(args[1], tuple):  # an IP address, not a pipe
        raise ConnectionRefusedError(f"a replay must not connect; it tried {args[1]}")


def bench_suite() -> Any:
    """The suite, built from the environment: what worker processes load (`load_target`)."""
    from trialkit import Suite, Task, graders

    if os.environ.get("CAPTURE_NO_NETWORK") == "1":
        sys.addaudithook(_no_network)  # in the main process and in each worker
    total, tasks = int(os.environ["CAPTURE_TRIALS"]), int(os.environ["CAPTURE_TASKS"])
    return Suite(
        id="capture",
        kind="capability",
        trials=max(1, total // tasks),
        harness=agent,
        tasks=[
            Task(id=f"task-{i}", input=_prompt(i), graders=[graders.contains(f"tok-{i:05d}")])
            for i in range(min(tasks, total))
        ],
    )


# --- the child measurements -------------------------------------------------------------------


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have exited (the workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _sdk_calls(
    client: Any, total: int, concurrency: int, stream: bool, in_trials: bool | None = None
) -> None:
    """C tasks sharing a counter make `total` calls. `in_trials`: each call is made in a trial
    scope of its own, as a trial makes it: a fresh transcript recorder made current (else the
    recorder is made all the same, and not used, so that only capture differs)."""
    import anyio

    if in_trials is not None:
        from trialkit.transcript import TranscriptRecorder, activate, deactivate
    state = {"next": 0, "wrong": 0}

    async def caller() -> None:
        while state["next"] < total:  # bounded by the count (and the child's time limit)
            i = state["next"]
            state["next"] += 1
            prompt = _prompt(i % TASKS)
            if in_trials is None:  # the bare SDK: trialkit is not imported
                text = await ask(client, prompt, stream)
            else:
                recorder = TranscriptRecorder(f"task-{i % TASKS}", i // TASKS)
                token = activate(recorder if in_trials else None)
                try:
                    text = await ask(client, prompt, stream)
                finally:
                    deactivate(token)
            state["wrong"] += text != prompt

    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(caller)
    assert state["wrong"] == 0, f"{state['wrong']} answers were not the echo"


def _trialkit_run(
    total: int,
    concurrency: int,
    *,
    capture: bool = True,
    cassette: tuple[str, str] | None = None,
    store: bool = False,
    workers: int = 1,
) -> tuple[float, float, float]:
    """One run of the suite; (seconds, CPU seconds, steady seconds). Every trial must pass."""
    import anyio

    from trialkit import Runner
    from trialkit.loaders.target import load_target
    from trialkit.models.cassette import Cassette
    from trialkit.run.progress import Progress
    from trialkit.store import Store

    os.environ["CAPTURE_TRIALS"] = str(total)
    # with workers, loaded by its path as they will load it; else this module's own, so that
    # the client in `_shared` is the one closed below
    target = f"{Path(__file__).resolve()}:bench_suite"
    suite = load_target(target) if workers > 1 else bench_suite()
    finished: list[float] = []

    class Clock(Progress):
        def advance(self, trial: Any) -> None:
            finished.append(time.perf_counter())

    with tempfile.TemporaryDirectory(prefix="trialkit-capture-bench-") as folder:
        db = Store(f"sqlite:///{Path(folder) / 'bench.db'}") if store else None
        runner = Runner(
            store=db,
            concurrency=concurrency,
            cassette=None if cassette is None else Cassette(*cassette),
            capture=capture,
            workers=workers,
            progress=Clock(),
        )

        async def run() -> Any:
            try:
                return await runner.run(suite)
            finally:
                client = _shared.pop("client", None)
                if client is not None:
                    await client.close()

        cpu, started = _cpu_s(), time.perf_counter()
        report = anyio.run(run)
        elapsed, cpu = time.perf_counter() - started, _cpu_s() - cpu
        stored = sum(r.trials for r in db.list_runs(limit=1)) if db else total
        if db:
            db.close()
    summary = report.summary
    assert summary.trials == total == stored, (summary.trials, total, stored)
    assert summary.errors == 0 and summary.passed == total, (summary.passed, summary.errors)
    steady = (finished[-1] - finished[0]) * len(finished) / max(1, len(finished) - 1)
    return elapsed, cpu, steady


def measure_sdk(calls: int, concurrency: int, stream: bool, warm_up: int) -> dict[str, Any]:
    """The bare SDK in a process of its own, trialkit not imported, default gc."""
    import anyio

    async def main() -> tuple[float, float]:
        client = _client()
        try:
            await _sdk_calls(client, warm_up, concurrency, stream)
            cpu, started = _cpu_s(), time.perf_counter()
            await _sdk_calls(client, calls, concurrency, stream)
            return time.perf_counter() - started, _cpu_s() - cpu
        finally:
            await client.close()

    elapsed, cpu = anyio.run(main)
    assert "trialkit" not in sys.modules
    return {"per_s": round(calls / elapsed, 1), "cpu_ms": round(1000 * cpu / calls, 4)}


def measure_turns(
    batch: int, batches: int, concurrency: int, stream: bool, warm_up: int
) -> dict[str, Any]:
    """Every kind of `TURNS` in one process, a batch of calls (or a run of as many trials) at
    a time, taking turns (ABCDE, EDCBA, ...), so that whatever slows the machine down for a
    while slows every kind alike. Each batch starts a new event loop and client, as each
    trialkit run does. The gc thresholds are a run's throughout; capture's hook is installed
    by the first run with capture on, so later runs with it off still pass each request
    through its first checks (whose trial is it, which API): a few microseconds."""
    import anyio

    from trialkit._gc import fewer_collections
    from trialkit.models.context import ModelSettings, use_settings

    async def sdk_batch(calls: int, in_trials: bool) -> None:
        client = _client()
        try:
            await _sdk_calls(client, calls, concurrency, stream, in_trials)
        finally:
            await client.close()

    def run(kind: str, calls: int, folder: Path) -> tuple[float, float]:
        if kind.startswith("sdk"):
            cpu, started = _cpu_s(), time.perf_counter()
            with fewer_collections(), use_settings(ModelSettings(capture=True)):
                anyio.run(sdk_batch, calls, kind == "sdk, in trials")
            return time.perf_counter() - started, _cpu_s() - cpu
        cassette = (str(folder), "record") if kind == "trialkit+record" else None
        capture = kind != "trialkit"
        elapsed, cpu, _ = _trialkit_run(calls, concurrency, capture=capture, cassette=cassette)
        return elapsed, cpu

    found: dict[str, list[dict[str, float]]] = {kind: [] for kind in TURNS}
    with tempfile.TemporaryDirectory(prefix="trialkit-cassette-") as root:
        for kind in reversed(TURNS):  # the first run with capture on installs the hook
            run(kind, warm_up, Path(root) / "warm-up")
        for turn in range(batches):
            for kind in TURNS if turn % 2 == 0 else TURNS[::-1]:
                elapsed, cpu = run(kind, batch, Path(root) / f"batch-{turn}")  # a new cassette
                found[kind].append({"per_s": batch / elapsed, "cpu_ms": 1000 * cpu / batch})
    return found


def measure_count(kind: str, calls: int, concurrency: int, stream: bool) -> None:
    """What `--instructions` runs under valgrind: a warm-up of 100 calls (or a run of 100
    trials), then `calls` more, of one kind; the parent subtracts two sizes' counts."""
    import anyio

    if not kind.startswith("sdk"):
        with tempfile.TemporaryDirectory(prefix="trialkit-cassette-") as folder:
            for size, name in ((TASKS, "warm-up"), (calls, "counted")):
                cassette = (f"{folder}/{name}", "record") if kind == "trialkit+record" else None
                _trialkit_run(size, concurrency, capture=kind != "trialkit", cassette=cassette)
        return
    in_trials = None if kind == "sdk" else kind == "sdk, in trials"

    async def main() -> None:
        client = _client()
        try:
            for size in (TASKS, calls):
                await _sdk_calls(client, size, concurrency, stream, in_trials)
        finally:
            await client.close()

    if in_trials is None:
        anyio.run(main)
        return
    from trialkit._gc import fewer_collections
    from trialkit.capture.hook import install
    from trialkit.models.context import ModelSettings, use_settings

    install()
    with fewer_collections(), use_settings(ModelSettings(capture=True)):
        anyio.run(main)


# --- the parent -------------------------------------------------------------------------------


def run_child(
    args: argparse.Namespace, label: str, command: list[str], server_pid: int = 0
) -> dict[str, Any]:
    """One child measurement, run again (a bounded number of times) while other work on the
    machine took more than `--busy` cores; the quietest attempt, marked `noisy` if none was."""
    best: dict[str, Any] | None = None
    for attempt in range(1 + args.retries):
        if attempt:
            time.sleep(args.settle)
        server = _ticks(server_pid) if server_pid else 0.0
        busy, own, started = _machine_busy_s(), _children_cpu_s(), time.perf_counter()
        out = subprocess.run(
            [sys.executable, *command],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=CHILD_TIMEOUT,
            check=False,
        )
        if out.returncode != 0:
            raise SystemExit(f"the {label} measurement failed:\n{out.stderr[-3000:]}")
        wall = time.perf_counter() - started
        server = _ticks(server_pid) - server if server_pid else 0.0
        row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        others = _machine_busy_s() - busy - (_children_cpu_s() - own) - server
        row["others_cores"] = round(max(0.0, others) / wall, 2)
        if best is None or row["others_cores"] < best["others_cores"]:
            best = row
        if row["others_cores"] <= args.busy:
            break
    assert best is not None
    best["noisy"] = best["others_cores"] > args.busy
    return best


def _ours(kind: str, url: str, *extra: str) -> list[str]:
    return [__file__, "--child", kind, "--url", url, *extra]


def _mark(row: dict[str, Any]) -> str:
    return "*" if row.get("noisy") else ""


def _median(rows: list[dict[str, Any]], field: str) -> dict[str, Any]:
    """The run with the median `field` (the lower middle one for an even count)."""
    return sorted(rows, key=lambda r: r[field])[(len(rows) - 1) // 2]


def _others(rows: list[dict[str, Any]]) -> str:
    cores = [r["others_cores"] for r in rows]
    return f"other work on the machine: {min(cores):.2f}-{max(cores):.2f} cores"


def cpu_part(args: argparse.Namespace, batch: int, batches: int, warm_up: int) -> None:
    streams = [False] if args.no_stream else [False, True]
    print(
        f"CPU per call at C = {args.concurrency}: {len(TURNS)} kinds taking turns in one process, "
        f"{batches} batches of {batch} calls each (after {warm_up}); the bare SDK in "
        f"{args.sdk_runs} processes of its own ({batch * batches} calls each); fake server in its "
        f"own process, latency {args.latency * 1000:g} ms"
    )
    others: list[float] = []
    with fake_server(args.latency) as (url, pid):
        for stream in streams:
            common = ["--concurrency", str(args.concurrency), "--warm-up", str(warm_up)]
            common += ["--stream"] if stream else []
            sdk_command = _ours("sdk", url, "--batch", str(batch * batches), *common)
            turns_command = _ours("turns", url, "--batch", str(batch), *common)
            turns_command += ["--batches", str(batches)]
            sdk = [run_child(args, "sdk", sdk_command, pid) for _ in range(args.sdk_runs)]
            turns = run_child(args, "turns", turns_command, pid)
            others += [r["others_cores"] for r in [*sdk, turns]]
            _print_turns(stream, sdk, turns)
    print(f"other work on the machine: {min(others):.2f}-{max(others):.2f} cores", flush=True)


def _print_turns(stream: bool, sdk: list[dict[str, Any]], turns: dict[str, Any]) -> None:
    bare = statistics.median(r["cpu_ms"] for r in sdk)
    print(f"{'streamed' if stream else 'plain'} answers{' *' if turns['noisy'] else ''}")
    print(f"{'':>20} {'calls/s':>8} {'CPU/call ms':>11} {'(quartiles)':>13} {'vs sdk':>7}")
    shown = ", ".join(f"{r['cpu_ms']:.2f}{_mark(r)}" for r in sdk)
    rate = statistics.median(r["per_s"] for r in sdk)
    print(f"{'sdk':>20} {rate:>8.0f} {bare:>11.3f}   (runs: {shown})")
    for kind in TURNS:
        cpu = [cell["cpu_ms"] for cell in turns[kind]]
        low, mid, high = statistics.quantiles(cpu, n=4) if len(cpu) > 1 else cpu * 3
        rate = statistics.median(cell["per_s"] for cell in turns[kind])
        spread = f"({low:>5.2f}-{high:<5.2f})"
        print(f"{kind:>20} {rate:>8.0f} {mid:>11.3f} {spread} {mid / bare - 1:>+7.0%}")
    print("capture's own CPU per call: median of the differences within each turn")
    for label, kind, base in PAIRS:
        diffs = [a["cpu_ms"] - b["cpu_ms"] for a, b in zip(turns[kind], turns[base], strict=True)]
        extra = statistics.median(diffs)
        low, high = min(diffs), max(diffs)
        print(
            f"  {label:>26}: {1000 * extra:+5.0f} µs = {extra / bare:+6.1%} of the bare SDK's "
            f"(batches: {1000 * low:+.0f} to {1000 * high:+.0f} µs)"
        )
    print("  (the issue's target: capture adds at most +10%)")


COUNT_SIZES = (100, 500)
"""Calls (trials) counted after the warm-up, in two runs: the difference is 400 calls' worth."""
VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]


def _count(url: str, kind: str, calls: int, args: argparse.Namespace, stream: bool) -> int:
    command = [*VALGRIND, sys.executable, *_ours("count", url, "--kind", kind)]
    command += ["--batch", str(calls), "--concurrency", str(args.concurrency)]
    command += ["--stream"] if stream else []
    out = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=CHILD_TIMEOUT * 4,  # valgrind runs Python some 50 times slower
        check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"the counted {kind} run failed:\n{out.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))


def count_part(args: argparse.Namespace) -> None:
    """User-space instructions per call, counted by valgrind: immune to the machine's drift,
    blind to the kernel's share (sockets, polling), so a ratio here is a little high."""
    streams = [False] if args.no_stream else [False, True]
    kinds = ("sdk", *TURNS)
    low, high = COUNT_SIZES
    print(
        f"instructions per call (valgrind, user space), C = {args.concurrency}: runs of "
        f"{low} and {high} calls of each kind after 100, the difference over {high - low}; "
        f"{os.cpu_count()} at a time"
    )
    jobs = [(stream, kind, size) for stream in streams for kind in kinds for size in COUNT_SIZES]
    with fake_server(args.latency) as (url, _), ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        found = pool.map(lambda job: _count(url, job[1], job[2], args, job[0]), jobs)
        counts = dict(zip(jobs, found, strict=True))
    per_call = {
        (stream, kind): (counts[stream, kind, high] - counts[stream, kind, low]) / (high - low)
        for stream in streams
        for kind in kinds
    }
    for stream in streams:
        bare = per_call[stream, "sdk"]
        print(f"{'streamed' if stream else 'plain'} answers")
        for kind in kinds:
            count = per_call[stream, kind]
            print(f"{kind:>20} {count / 1e6:>7.3f} M {count / bare - 1:>+7.1%}")
        for label, kind, base in PAIRS:
            extra = per_call[stream, kind] - per_call[stream, base]
            print(f"  {label:>26}: {extra / 1e6:+.3f} M = {extra / bare:+6.1%} of the bare SDK's")


def add_shared_options(parser: argparse.ArgumentParser) -> None:
    """The options both capture benchmarks take (this one and `replay.py`)."""
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05, help="server latency, seconds")
    parser.add_argument("--busy", type=float, default=0.15, help="other work (cores) that is noise")
    parser.add_argument("--retries", type=int, default=1, help="re-runs of a noisy child")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before a re-run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)


def banner() -> None:
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {load:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--batch", type=int, help="calls (trials) in a batch, a multiple of 100 (300)"
    )
    parser.add_argument("--batches", type=int, help="batches of each kind (6)")
    parser.add_argument("--warm-up", type=int, help="calls of each kind before those (100)")
    parser.add_argument("--sdk-runs", type=int, default=3, help="processes of the bare SDK")
    parser.add_argument("--no-stream", action="store_true", help="skip the streamed calls")
    parser.add_argument("--quick", action="store_true", help="a smoke run (about half a minute)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions under valgrind instead (about 15 minutes)",
    )
    parser.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    add_shared_options(parser)
    args = parser.parse_args()
    if args.child:
        os.environ["CAPTURE_URL"] = args.url
        os.environ["CAPTURE_STREAM"] = str(int(args.stream))
        os.environ["CAPTURE_TASKS"] = str(TASKS)
        if args.child == "count":
            measure_count(args.kind, args.batch, args.concurrency, args.stream)
            return
        if args.child == "sdk":
            row = measure_sdk(args.batch, args.concurrency, args.stream, args.warm_up)
        else:
            row = measure_turns(
                args.batch, args.batches, args.concurrency, args.stream, args.warm_up
            )
        print(json.dumps(row))
        return
    batch, batches, warm_up = (100, 2, 100) if args.quick else (300, 6, 100)
    if args.quick:
        args.retries, args.sdk_runs = 0, 1
    batch, batches = args.batch or batch, args.batches or batches
    warm_up = warm_up if args.warm_up is None else args.warm_up
    if batch % TASKS or warm_up % TASKS:
        parser.error(f"--batch and --warm-up: a multiple of {TASKS} (the suite's tasks)")
    banner()
    if args.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions needs valgrind (apt-get install valgrind)")
        count_part(args)
        return
    cpu_part(args, batch, batches, warm_up)
    print(f"(* = other work on the machine took more than {args.busy:g} cores during that run)")


if __name__ == "__main__":
    main()
