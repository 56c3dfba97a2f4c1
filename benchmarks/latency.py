"""Latency-bound throughput: trialkit against the bare openai SDK, and cassette replay.

A fake OpenAI server (`tests/fakes/provider_server.py`, in a process of its own, on loopback)
answers every chat completion after a fixed latency L (50 ms), echoing the prompt. For each
concurrency C, two measurements, each in a fresh child process:

- **sdk**: the bare SDK ceiling. `openai.AsyncOpenAI(max_retries=0)` and C workers sharing a
  counter make N chat completions in all. On one process this, not C / L, is what a harness
  built on the SDK can reach, so trialkit is reported as a fraction of it *and* of C / L.
- **sdk-post**: the same calls through the route trialkit's `openai/...` models take: the
  SDK's `client.post("/chat/completions", body=..., cast_to=bytes)` and `json.loads`, without
  `create`'s walk of the parameters' types and its response objects. trialkit is reported as a
  fraction of both: of `create` (what an application calls) and of this route (what trialkit
  adds to its own use of the SDK).
- **trialkit**: a suite of N trials (100 tasks, N / 100 trials each, a string input, one
  `contains` grader that checks the echo) with `Suite(model=get_model("openai/gpt-4o-mini",
  base_url=...))`, run by `Runner(concurrency=C, workers=W)` with the SQLite store on (a temp
  file). Every trial must pass, with no errors. With `--workers W` (repeatable) each cell is
  also run with trials spread over W worker processes; the suite is then loaded with
  `load_target("benchmarks/latency.py:bench_suite")`, so the workers can load it too. Their
  time includes starting the workers; "steady" is the rate between the first and the last
  finished trial, without that start-up. CPU counts the workers' too.

Then replay: a 10,000-trial run of the same suite is recorded into a cassette (at the highest
C), the server is stopped, and a fresh process replays it (`CacheMode.REPLAY`, store on). An
audit hook counts every `socket.connect` in that process; the replay must make none.

Reported per run: calls (or trials) per second, CPU per call in the client process and in the
server process, and peak RSS. The machine is shared, so the parent also measures the CPU that
other processes used during each run; a run during which they took more than `--busy` cores
is done again (at most `--retries` times) and marked `*` if none was quiet. Every child has a
time limit, every loop a count, and the server is always stopped.

    python benchmarks/latency.py              # 2,000 calls at C = 10, 50, 200; replay 10,000
    python benchmarks/latency.py --runs 3     # median of three runs per cell
    python benchmarks/latency.py --quick      # a smoke run: 200 calls at C = 10, 50; replay 1,000
    python benchmarks/latency.py --concurrency 50 --concurrency 200 --workers 1 --workers 2

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TASKS = 100
MODEL = "gpt-4o-mini"
SERVER_START_TIMEOUT = 20.0  # seconds to wait for the server's URL line
SERVER_STOP_TIMEOUT = 10.0


# --- the child measurements ---------------------------------------------------------------


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have exited (the workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _prompt(task: int) -> str:
    return f"Repeat this token: tok-{task:04d}"


def measure_sdk(
    url: str, total: int, concurrency: int, limit_s: float, route: str = "create"
) -> dict[str, Any]:
    """C workers share one counter and make `total` chat completions with the bare SDK:
    `chat.completions.create` (route `create`, what an application calls), or the SDK's
    `client.post` with the body as JSON and the answer read with `json.loads` (route `post`,
    the route trialkit's `openai/...` models take)."""
    import anyio
    from openai import AsyncOpenAI

    stats = {"next": 0, "done": 0, "wrong": 0}

    async def create(client: AsyncOpenAI, prompt: str) -> str | None:
        completion = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}]
        )
        return completion.choices[0].message.content

    async def post(client: AsyncOpenAI, prompt: str) -> str | None:
        body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}]}
        content = await client.post("/chat/completions", body=body, cast_to=bytes)
        answer: str | None = json.loads(content)["choices"][0]["message"]["content"]
        return answer

    call = create if route == "create" else post

    async def main() -> float:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)

        async def worker() -> None:
            while stats["next"] < total:  # bounded by the count, and by fail_after below
                i = stats["next"]
                stats["next"] += 1
                prompt = _prompt(i % TASKS)
                if await call(client, prompt) != prompt:
                    stats["wrong"] += 1
                stats["done"] += 1

        try:
            started = time.perf_counter()
            with anyio.fail_after(limit_s):
                async with anyio.create_task_group() as group:
                    for _ in range(concurrency):
                        group.start_soon(worker)
            return time.perf_counter() - started
        finally:
            await client.close()

    cpu = _cpu_s()
    elapsed = anyio.run(main)
    cpu = _cpu_s() - cpu
    assert stats["done"] == total and stats["wrong"] == 0, stats
    return _row("sdk" if route == "create" else "sdk-post", total, concurrency, elapsed, cpu)


def measure_probe(url: str, calls: int, limit_s: float) -> dict[str, Any]:
    """One call at a time: the latency a single call sees end to end (the real L)."""
    import anyio
    from openai import AsyncOpenAI

    async def main() -> list[float]:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
        times = []
        try:
            with anyio.fail_after(limit_s):
                for i in range(calls + 1):  # the first call (imports, connect) is not counted
                    started = time.perf_counter()
                    await client.chat.completions.create(
                        model=MODEL, messages=[{"role": "user", "content": _prompt(i)}]
                    )
                    times.append(time.perf_counter() - started)
        finally:
            await client.close()
        return times[1:]

    times = anyio.run(main)
    return {"kind": "probe", "calls": calls, "median_ms": round(1000 * statistics.median(times), 2)}


def bench_suite() -> Any:
    """The suite, built from the environment: what worker processes load (`load_target`)."""
    from trialkit.models import get_model

    url, total = os.environ["LATENCY_URL"], int(os.environ["LATENCY_TRIALS"])
    model = get_model(f"openai/{MODEL}", base_url=f"{url}/v1", api_key="x", max_concurrency=None)
    return _suite(total, model)


def _suite(total: int, model: Any) -> Any:
    from trialkit import Suite, Task, graders

    return Suite(
        id="latency",
        kind="capability",
        trials=max(1, total // TASKS),
        model=model,
        tasks=[
            Task(id=f"task-{i}", input=_prompt(i), graders=[graders.contains(f"tok-{i:04d}")])
            for i in range(min(TASKS, total))
        ],
    )


def _run_suite(
    url: str,
    total: int,
    concurrency: int,
    limit_s: float,
    cassette_dir: str | None = None,
    mode: str | None = None,
    workers: int = 1,
) -> tuple[float, float, Any, int, float]:
    """Run the suite through trialkit with the store on; (seconds, cpu, report, stored,
    steady seconds: from the first finished trial to the last)."""
    import anyio

    from trialkit import Runner
    from trialkit.loaders.target import load_target
    from trialkit.models.cassette import CacheMode, Cassette
    from trialkit.run.progress import Progress
    from trialkit.store import Store

    os.environ["LATENCY_URL"], os.environ["LATENCY_TRIALS"] = url, str(total)
    suite = load_target(f"{Path(__file__).resolve()}:bench_suite")
    cassette = Cassette(cassette_dir, CacheMode(mode)) if cassette_dir and mode else None
    finished: list[float] = []

    class Clock(Progress):
        def advance(self, trial: Any) -> None:
            finished.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{Path(folder) / 'bench.db'}")
        runner = Runner(
            store=store,
            concurrency=concurrency,
            cassette=cassette,
            workers=workers,
            progress=Clock(),
        )

        async def run() -> Any:
            try:
                with anyio.fail_after(limit_s):
                    return await runner.run(suite)
            finally:
                await suite.model.aclose()

        cpu = _cpu_s()
        started = time.perf_counter()
        report = anyio.run(run)
        elapsed = time.perf_counter() - started
        cpu = _cpu_s() - cpu
        stored = sum(r.trials for r in store.list_runs(limit=1))
        store.close()
    steady = (finished[-1] - finished[0]) * len(finished) / max(1, len(finished) - 1)
    return elapsed, cpu, report, stored, steady


def _check(report: Any, total: int, stored: int) -> None:
    summary = report.summary
    assert summary.trials == total == stored, (summary.trials, total, stored)
    assert summary.errors == 0, f"{summary.errors} trials errored"
    assert summary.passed == total, f"{summary.passed} of {total} trials passed"


def measure_trialkit(
    url: str, total: int, concurrency: int, limit_s: float, workers: int
) -> dict[str, Any]:
    elapsed, cpu, report, stored, steady = _run_suite(
        url, total, concurrency, limit_s, workers=workers
    )
    _check(report, total, stored)
    row = _row("trialkit", total, concurrency, elapsed, cpu)
    row["workers"] = workers
    row["steady_per_s"] = round(total / steady, 1)
    row["workers_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return row


def measure_record(
    url: str, total: int, concurrency: int, limit_s: float, cassette_dir: str
) -> dict[str, Any]:
    elapsed, cpu, report, stored, _ = _run_suite(
        url, total, concurrency, limit_s, cassette_dir, "record"
    )
    _check(report, total, stored)
    return _row("record", total, concurrency, elapsed, cpu)


def measure_replay(
    url: str, total: int, concurrency: int, limit_s: float, cassette_dir: str
) -> dict[str, Any]:
    connects: list[object] = []

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.connect":
            connects.append(args[1])

    sys.addaudithook(audit)  # every TCP (or other socket) connect this process attempts
    elapsed, cpu, report, stored, _ = _run_suite(
        url, total, concurrency, limit_s, cassette_dir, "replay"
    )
    _check(report, total, stored)
    assert not connects, f"the replay connected to {connects[:3]}"
    row = _row("replay", total, concurrency, elapsed, cpu)
    row["connects"] = len(connects)
    return row


def _row(kind: str, total: int, concurrency: int, elapsed: float, cpu: float) -> dict[str, Any]:
    return {
        "kind": kind,
        "trials": total,
        "concurrency": concurrency,
        "seconds": round(elapsed, 3),
        "per_s": round(total / elapsed, 1),
        "cpu_ms": round(1000 * cpu / total, 3),
        "peak_rss_mb": _peak_rss_mb(),
    }


def child(args: argparse.Namespace) -> None:
    total, c, limit = args.trials, args.concurrency[0], args.time_limit
    if args.child == "probe":
        row = measure_probe(args.url, total, limit)
    elif args.child == "sdk":
        row = measure_sdk(args.url, total, c, limit)
    elif args.child == "sdk-post":
        row = measure_sdk(args.url, total, c, limit, route="post")
    elif args.child == "trialkit":
        row = measure_trialkit(args.url, total, c, limit, args.workers[0])
    elif args.child == "record":
        row = measure_record(args.url, total, c, limit, args.cassette)
    else:
        row = measure_replay(args.url, total, c, limit, args.cassette)
    print(json.dumps(row))


# --- the parent ---------------------------------------------------------------------------


def _ticks(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc (0 when unknown)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The stock server writes a response's headers and body in two sends with Nagle's algorithm on,
# so the body waits for the client's delayed ACK: about 40 ms more per call on Linux loopback
# (a 50 ms server answered in ~95 ms). Real providers do not add that, so by default the server
# runs with TCP_NODELAY on its connections (`--stock-server` runs it unchanged).
_NODELAY_SERVER = (
    "import sys, tests.fakes.provider_server as server; "
    "server._Handler.disable_nagle_algorithm = True; "
    "server.main(sys.argv[1:])"
)


def _machine_busy_s() -> float:
    """CPU seconds all processes on the machine have spent busy so far (from /proc/stat)."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def fake_server(latency: float, nagle: bool = False) -> Iterator[tuple[str, int]]:
    """The fake provider in its own process; (URL, pid). Always stopped on the way out."""
    if nagle:
        command = [sys.executable, "-m", "tests.fakes.provider_server"]
    else:
        command = [sys.executable, "-c", _NODELAY_SERVER]
    proc = subprocess.Popen(
        [*command, "--latency", str(latency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], SERVER_START_TIMEOUT)
        line = proc.stdout.readline().strip() if ready else ""
        if not line.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the fake server did not start (said {line!r})")
        yield line, proc.pid
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(SERVER_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def run_child(
    kind: str,
    url: str,
    total: int,
    concurrency: int,
    time_limit: float,
    cassette: str | None = None,
    server_pid: int | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, "--url", url]
    command += ["--trials", str(total), "--concurrency", str(concurrency)]
    command += ["--workers", str(workers)]
    command += ["--time-limit", str(time_limit)]
    if cassette:
        command += ["--cassette", cassette]
    server_cpu = _ticks(server_pid) if server_pid else 0.0
    busy, own, started = _machine_busy_s(), _children_cpu_s(), time.perf_counter()
    try:
        out = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            timeout=time_limit + 60,  # start-up and imports on top of the child's own limit
        )
    except subprocess.CalledProcessError as exc:
        sys.stderr.write(exc.stderr)
        raise
    wall = time.perf_counter() - started
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    server_cpu = _ticks(server_pid) - server_cpu if server_pid else 0.0
    if server_pid:
        row["server_cpu_ms"] = round(1000 * server_cpu / total, 3)
    # CPU that neither this benchmark's child nor its server used, in cores on average:
    # other work on the machine competing for the same cores (0 on a quiet machine)
    others = _machine_busy_s() - busy - (_children_cpu_s() - own) - server_cpu
    row["others_cores"] = round(max(0.0, others) / wall, 2)
    return row


def quiet_child(args: argparse.Namespace, *child_args: Any) -> dict[str, Any]:
    """`run_child`, run again (a bounded number of times) while other work on the machine
    took more than `--busy` cores during the run: the figures are for a quiet machine. If no
    attempt was quiet, the quietest is kept and marked `noisy`."""
    best: dict[str, Any] | None = None
    for attempt in range(1 + args.retries):
        if attempt:
            time.sleep(args.settle)
        row = run_child(*child_args)
        if best is None or row["others_cores"] < best["others_cores"]:
            best = row
        if row["others_cores"] <= args.busy:
            break
    assert best is not None
    best["noisy"] = best["others_cores"] > args.busy
    return best


def _mark(row: dict[str, Any]) -> str:
    return "*" if row.get("noisy") else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, help="calls per cell (2,000)")
    parser.add_argument("--concurrency", type=int, action="append", help="C (10, 50, 200)")
    parser.add_argument("--latency", type=float, default=0.05, help="server latency, seconds")
    parser.add_argument("--replay-trials", type=int, help="trials recorded and replayed (10,000)")
    parser.add_argument("--runs", type=int, default=1, help="runs per cell (median shown)")
    parser.add_argument(
        "--workers",
        type=int,
        action="append",
        help="trialkit's worker processes (repeatable: one row each) [1]",
    )
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds per child")
    parser.add_argument(
        "--busy", type=float, default=0.15, help="other work (cores) that makes a run noisy"
    )
    parser.add_argument("--retries", type=int, default=4, help="re-runs of a noisy run")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before a re-run")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--no-replay", action="store_true", help="skip the cassette runs")
    parser.add_argument(
        "--stock-server", action="store_true", help="leave Nagle on in the server (+~40 ms)"
    )
    parser.add_argument(
        "--child", choices=["probe", "sdk", "sdk-post", "trialkit", "record", "replay"]
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--cassette", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        total, levels, replay_total = 200, [10, 50], 1_000
    else:
        total, levels, replay_total = 2_000, [10, 50, 200], 10_000
    total = args.trials or total
    levels = args.concurrency or levels
    replay_total = args.replay_trials or replay_total
    latency, limit_s = args.latency, args.time_limit

    server = "stock server (Nagle on)" if args.stock_server else "server with TCP_NODELAY"
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, fake server in its own "
        f"process ({server}), latency {latency * 1000:g} ms, {total} calls per cell, "
        f"{TASKS} tasks, 1 contains grader, SQLite store on; median of {args.runs}"
    )
    worker_counts = args.workers or [1]
    with fake_server(latency, args.stock_server) as (url, pid):
        probe = run_child("probe", url, 20, 1, 60.0)
        print(f"one call at a time: median {probe['median_ms']} ms end to end")
        print(
            f"{'C':>4} {'C/L':>6} {'sdk/s':>7} {'post/s':>7} {'W':>2} {'trialkit/s':>10} "
            f"{'steady/s':>8} {'of sdk':>7} {'of post':>7} {'of C/L':>7} {'sdk cpu ms':>10} "
            f"{'post cpu':>8} {'tk cpu ms':>9} {'srv cpu ms':>10} {'sdk MB':>7} {'tk MB':>6} "
            f"{'wk MB':>6}"
        )
        for c in levels:
            runs: dict[str, list[dict[str, Any]]] = {"sdk": [], "sdk-post": []}
            runs |= {f"trialkit w={w}": [] for w in worker_counts}
            for _ in range(args.runs):  # interleaved, so drift hits every kind alike
                for kind in ("sdk", "sdk-post"):
                    runs[kind].append(quiet_child(args, kind, url, total, c, limit_s, None, pid))
                for w in worker_counts:
                    row = quiet_child(args, "trialkit", url, total, c, limit_s, None, pid, w)
                    runs[f"trialkit w={w}"].append(row)
            sdk, post = _median(runs["sdk"]), _median(runs["sdk-post"])
            ideal = c / latency
            for w in worker_counts:
                tk = _median(runs[f"trialkit w={w}"])
                workers_mb = f"{tk['workers_rss_mb']:>6.0f}" if w > 1 else f"{'-':>6}"
                print(
                    f"{c:>4} {ideal:>6.0f} {sdk['per_s']:>6.0f}{_mark(sdk):1} "
                    f"{post['per_s']:>6.0f}{_mark(post):1} {w:>2} "
                    f"{tk['per_s']:>9.0f}{_mark(tk):1} {tk['steady_per_s']:>8.0f} "
                    f"{tk['per_s'] / sdk['per_s']:>7.0%} {tk['per_s'] / post['per_s']:>7.0%} "
                    f"{tk['per_s'] / ideal:>7.0%} {sdk['cpu_ms']:>10.2f} {post['cpu_ms']:>8.2f} "
                    f"{tk['cpu_ms']:>9.2f} {tk['server_cpu_ms']:>10.2f} "
                    f"{sdk['peak_rss_mb']:>7.0f} {tk['peak_rss_mb']:>6.0f} {workers_mb}",
                    flush=True,
                )
            if args.runs > 1:
                for kind, rows in runs.items():
                    shown = ", ".join(f"{r['per_s']:.0f}{_mark(r)}" for r in rows)
                    others = ", ".join(f"{r['others_cores']:.2f}" for r in rows)
                    print(f"     {kind} runs/s: {shown} (others, cores: {others})", flush=True)
    if args.no_replay:
        return

    replay_c = max(levels)
    with tempfile.TemporaryDirectory(prefix="trialkit-cassette-") as cassette:
        with fake_server(latency, args.stock_server) as (url, pid):
            rec = run_child("record", url, replay_total, replay_c, limit_s, cassette, pid)
        # the server is stopped now: a live call would fail, and the audit hook counts connects
        files = sum(1 for _ in Path(cassette).glob("*/*/*.json"))
        replays = [
            quiet_child(args, "replay", url, replay_total, replay_c, limit_s, cassette)
            for _ in range(args.runs)
        ]
    rep = _median(replays)
    print(
        f"record: {rec['trials']} trials at C={replay_c}: {rec['seconds']} s, "
        f"{rec['per_s']:.0f} trials/s, {rec['cpu_ms']:.2f} ms CPU/trial, "
        f"peak {rec['peak_rss_mb']:.0f} MB, {files} cassette files "
        f"(others: {rec['others_cores']:.2f} cores)"
    )
    print(
        f"replay: {rep['trials']} trials at C={replay_c}, server stopped, store on: "
        f"{rep['seconds']} s, {rep['per_s']:.0f}{_mark(rep)} trials/s, "
        f"{rep['cpu_ms']:.2f} ms CPU/trial, peak {rep['peak_rss_mb']:.0f} MB, "
        f"{rep['connects']} socket connects"
    )
    if args.runs > 1:
        shown = ", ".join(f"{r['per_s']:.0f}{_mark(r)}" for r in replays)
        print(f"        replay runs/s: {shown}")
    print(f"(* = other work on the machine took more than {args.busy:g} cores during that run)")


def _median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput (the lower middle one for an even count)."""
    ranked = sorted(rows, key=lambda r: r["per_s"])
    middle = ranked[(len(ranked) - 1) // 2]
    assert middle["per_s"] == statistics.median_low([r["per_s"] for r in rows])
    return middle


if __name__ == "__main__":
    main()
