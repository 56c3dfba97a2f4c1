"""Harness overhead: trials per second and peak memory for an instant agent.

Each measurement runs in a fresh process so peak RSS belongs to that run alone:
an instant agent, two code graders per task, the SQLite store on (a temp file), no progress
bar. Usage:

    python benchmarks/overhead.py                 # 1,000 and 10,000 trials
    python benchmarks/overhead.py --trials 500    # one size
    python benchmarks/overhead.py --agent sync    # a blocking agent (runs in worker threads)

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASKS = 100


def measure(total: int, agent_kind: str, concurrency: int) -> dict[str, float]:
    import anyio

    from trialkit import Runner, Suite, Task, graders
    from trialkit.store import Store

    async def instant_async(prompt: str) -> str:
        return f"The capital is Paris ({prompt})."

    def instant_sync(prompt: str) -> str:
        return f"The capital is Paris ({prompt})."

    agent = instant_async if agent_kind == "async" else instant_sync
    per_task = max(1, total // TASKS)
    suite = Suite(
        id="overhead",
        kind="capability",
        trials=per_task,
        harness=agent,
        tasks=[
            Task(
                id=f"task-{i}",
                input=f"question {i}",
                graders=[graders.contains("paris"), graders.not_contains("berlin")],
            )
            for i in range(min(TASKS, total))
        ],
    )
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{Path(folder) / 'bench.db'}")
        runner = Runner(store=store, concurrency=concurrency)
        started = time.perf_counter()
        report = anyio.run(runner.run, suite)
        elapsed = time.perf_counter() - started
        stored = sum(r.trials for r in store.list_runs(limit=1))
        store.close()
    assert report.summary.trials == total == stored, (report.summary.trials, total, stored)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "trials": total,
        "seconds": round(elapsed, 3),
        "trials_per_s": round(total / elapsed, 1),
        "ms_per_trial": round(1000 * elapsed / total, 3),
        "peak_rss_mb": round(peak_kb / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, action="append", help="trials (repeatable)")
    parser.add_argument("--agent", choices=["async", "sync"], default="async")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = args.trials or [1000, 10000]
    if args.child:
        print(json.dumps(measure(sizes[0], args.agent, args.concurrency)))
        return
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, agent={args.agent}, "
        f"concurrency={args.concurrency}, {TASKS} tasks, 2 code graders, SQLite store on"
    )
    print(f"{'trials':>8} {'seconds':>8} {'trials/s':>9} {'ms/trial':>9} {'peak RSS MB':>12}")
    for size in sizes:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                "--trials",
                str(size),
                "--agent",
                args.agent,
                "--concurrency",
                str(args.concurrency),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{row['trials']:>8} {row['seconds']:>8} {row['trials_per_s']:>9} "
            f"{row['ms_per_trial']:>9} {row['peak_rss_mb']:>12}"
        )


if __name__ == "__main__":
    main()
