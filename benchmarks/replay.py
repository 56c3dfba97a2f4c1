"""Replay throughput of captured model calls: a 10,000-trial cassette, replayed.

The agent of `benchmarks/capture_cpu.py` (its own `AsyncOpenAI` client, shared by every
trial, one chat completion per trial) runs a suite of T trials (10,000: 100 tasks x 100
trials, or `--replay-tasks`; a string input, one `contains` grader). The run is recorded into
a cassette (`CacheMode.RECORD`, C = 50) against the fake OpenAI server
(`tests/fakes/provider_server.py`, in its own process, 50 ms latency); then the server is
stopped and fresh processes replay it (`CacheMode.REPLAY`, C = 50):

- **replay**: one process, no store (`store=None`);
- **replay+store**: one process, the SQLite store on (a temp file);
- **replay w=2**, **replay+store w=2**: the same with `workers=2` (the suite is loaded with
  `load_target("benchmarks/capture_cpu.py:bench_suite")`, so the workers load it too).

An audit hook in every process that runs trials refuses any `socket.connect` to an IP address,
and every trial must pass: no call went to the network. Reported: wall time of the run
(`anyio.run(runner.run, suite)`, so starting the workers is in it), calls per second, "steady"
(the rate from the first finished trial to the last, without that start-up), CPU per call of
the run's processes, peak RSS of the main one, and the rate as a share of the issue's target,
2,000 calls/s. The first row is a ceiling measured in the same run: the bare SDK on an
in-memory transport (`benchmarks/sdk_floor.py`'s `sdk`, C = 50), which no replay through the
SDK can beat in one process.

The machine may be shared: a child during which other processes took more than `--busy`
cores is run again (at most `--retries` times) and marked `*` if none was quiet.

    python benchmarks/replay.py                        # 10,000 trials: 100 tasks x 100 trials
    python benchmarks/replay.py --replay-tasks 10000   # 10,000 tasks x 1 trial
    python benchmarks/replay.py --runs 3               # median of three runs of each
    python benchmarks/replay.py --quick                # a smoke run: 500 trials

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
from pathlib import Path
from typing import Any

from capture_cpu import (  # this folder
    ROOT,
    TASKS,
    _mark,
    _median,
    _others,
    _trialkit_run,
    add_shared_options,
    banner,
    fake_server,
    run_child,
)

REPLAY_KINDS = ("replay", "replay+store", "replay w=2", "replay+store w=2")


def _child(kind: str, url: str, *extra: str) -> list[str]:
    return [__file__, "--child", kind, "--url", url, *extra]


def measure_replay(kind: str, total: int, concurrency: int, cassette: str) -> dict[str, Any]:
    mode = "record" if kind == "record" else "replay"
    os.environ["CAPTURE_STREAM"] = "0"
    os.environ["CAPTURE_NO_NETWORK"] = "1" if mode == "replay" else "0"
    elapsed, cpu, steady = _trialkit_run(
        total,
        concurrency,
        cassette=(cassette, mode),
        store="+store" in kind,
        workers=2 if kind.endswith("w=2") else 1,
    )
    return {
        "kind": kind,
        "trials": total,
        "seconds": round(elapsed, 3),
        "per_s": round(total / elapsed, 1),
        "steady_per_s": round(total / steady, 1),
        "cpu_ms": round(1000 * cpu / total, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def replay_part(args: argparse.Namespace, total: int, runs: int) -> None:
    tasks = min(args.replay_tasks, total)
    print(
        f"replay: {total} trials ({tasks} tasks x {max(1, total // tasks)} trials), one SDK call "
        f"each, C = {args.concurrency}, recorded from the fake server, replayed with the server "
        f"stopped; median of {runs}"
    )
    common = ["--trials", str(total), "--concurrency", str(args.concurrency)]
    floor = [str(ROOT / "benchmarks" / "sdk_floor.py"), "--child", "sdk"]
    floor += ["--calls", str(total), "--concurrency", str(args.concurrency)]
    common += ["--replay-tasks", str(tasks)]
    with tempfile.TemporaryDirectory(prefix="trialkit-cassette-") as cassette:
        common += ["--cassette", cassette]
        with fake_server(args.latency) as (url, pid):
            rec = run_child(args, "record", _child("record", url, *common), pid)
        files = sum(1 for _ in Path(cassette).glob("*/*/*.json"))
        print(
            f"recorded in {rec['seconds']:.1f} s ({rec['per_s']:.0f}{_mark(rec)} trials/s, "
            f"{rec['cpu_ms']:.2f} ms CPU/trial), {files} cassette files"
        )
        rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in ("sdk floor", *REPLAY_KINDS)}
        for _ in range(runs):  # the server is stopped: a call that is not replayed fails
            rows["sdk floor"].append(run_child(args, "sdk floor", floor))
            for kind in REPLAY_KINDS:
                rows[kind].append(run_child(args, kind, _child(kind, url, *common)))
    print(
        f"{'':>17} {'seconds':>8} {'calls/s (runs)':>22} {'steady/s':>9} {'CPU/call ms':>12} "
        f"{'peak MB':>8} {'of 2,000/s':>10}"
    )
    for kind, kind_rows in rows.items():
        row = _median(kind_rows, "per_s")
        shown = ", ".join(f"{r['per_s']:.0f}{_mark(r)}" for r in kind_rows)
        seconds = f"{row['seconds']:>8.2f}" if "seconds" in row else f"{'':>8}"
        steady = f"{row['steady_per_s']:>9.0f}" if "steady_per_s" in row else f"{'':>9}"
        peak = f"{row['peak_rss_mb']:>8.0f}" if "peak_rss_mb" in row else f"{'':>8}"
        print(
            f"{kind:>17} {seconds} {row['per_s']:>6.0f} ({shown:>13}) {steady} "
            f"{row['cpu_ms']:>12.3f} {peak} {row['per_s'] / 2000:>10.0%}"
        )
    print("(sdk floor: the bare SDK on an in-memory transport, sdk_floor.py: no replay is faster)")
    print(_others([r for kind_rows in rows.values() for r in kind_rows]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, help="trials recorded and replayed (10,000)")
    parser.add_argument("--replay-tasks", type=int, default=TASKS, help="over how many tasks")
    parser.add_argument("--runs", type=int, default=1, help="runs of every replay (median)")
    parser.add_argument("--quick", action="store_true", help="a smoke run (500 trials)")
    parser.add_argument("--cassette", help=argparse.SUPPRESS)
    add_shared_options(parser)
    args = parser.parse_args()
    if args.child:
        os.environ["CAPTURE_URL"] = args.url
        os.environ["CAPTURE_TASKS"] = str(args.replay_tasks)
        print(json.dumps(measure_replay(args.child, args.trials, args.concurrency, args.cassette)))
        return
    if args.quick:
        args.retries = 0
    total = args.trials or (500 if args.quick else 10_000)
    if total % min(args.replay_tasks, total):
        parser.error("--trials: a multiple of --replay-tasks")
    banner()
    replay_part(args, total, args.runs)
    print(f"(* = other work on the machine took more than {args.busy:g} cores during that run)")


if __name__ == "__main__":
    main()
