"""Harness overhead: trials per second and peak memory for an instant agent.

Each measurement runs in a fresh process so peak RSS belongs to that run alone:
an instant agent, two code graders per task, the SQLite store on (a temp file), no progress
bar. Usage:

    python benchmarks/overhead.py                 # 1,000 and 10,000 trials
    python benchmarks/overhead.py --trials 500    # one size
    python benchmarks/overhead.py --agent sync    # a blocking agent (runs in worker threads)
    python benchmarks/overhead.py --cli           # whole `trialkit run` processes, by shape

`--cli` runs the command a user types, `trialkit run suite.py:suite --quiet`, on a suite file
written for each shape (TASKS×TRIALS: 10000x1, 100x100, 100x500, 100x1000 by default, or
`--shape 1000x50`, repeatable): wall time of the whole process (start-up, loading the suite,
the run, its report) and its peak RSS, from `wait4`.

`--cli --report json` (repeatable: json, markdown, junit, html, csv) adds runs that also write
that report file (`--json out.json`, ...). Each round runs the plain run, then each report
run, one after another (interleaved, so a slower minute of the machine hits them all); each
row gives the median over `--repeats` rounds and its ratio to the plain run of the same rounds:

    python benchmarks/overhead.py --cli --shape 10000x1 --report json --repeats 5

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


SUITE = """\
from trialkit import Suite, Task, graders


async def instant(prompt: str) -> str:
    return f"The capital is Paris ({{prompt}})."


suite = Suite(
    id="overhead",
    kind="capability",
    trials={trials},
    harness=instant,
    tasks=[
        Task(
            id=f"task-{{i}}",
            input=f"question {{i}}",
            graders=[graders.contains("paris"), graders.not_contains("berlin")],
        )
        for i in range({tasks})
    ],
)
"""

SHAPES = ["10000x1", "100x100", "100x500", "100x1000"]


REPORTS = {
    "json": ["--json", "report.json"],
    "markdown": ["--markdown", "report.md"],
    "junit": ["--junit", "report.xml"],
    "html": ["--html", "report.html"],
    "csv": ["--csv", "trials.csv"],
}
"""The report files `--report` can add to a run, by name, with the options that write them."""


def measure_cli(tasks: int, trials: int, report: str | None = None) -> dict[str, float]:
    """Wall seconds and peak RSS of one `trialkit run` of `tasks` × `trials` (that also writes
    the `report` file, one of `REPORTS`, when given)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "suite.py").write_text(SUITE.format(tasks=tasks, trials=trials))
        command = [sys.executable, "-m", "trialkit", "run", "suite.py:suite", "--quiet"]
        command += REPORTS[report] if report is not None else []
        env = {**os.environ, "TRIALKIT_STORE": str(root / "bench.db")}
        began = time.perf_counter()
        child = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL)
        helpers = _HelperPeaks(child.pid)  # the store's writer process, if the run starts one
        _, status, usage = os.wait4(child.pid, 0)
        helpers.stop()
        elapsed = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"trialkit run exited {child.returncode} on {tasks}x{trials}")
        if report is not None and not (root / REPORTS[report][1]).stat().st_size:
            raise SystemExit(f"trialkit run wrote an empty {report} report")
        from trialkit.store import Store

        with Store(f"sqlite:///{root / 'bench.db'}") as store:
            stored = store.list_runs(limit=1)[0].trials
    assert stored == tasks * trials, (stored, tasks * trials)
    return {
        "trials": tasks * trials,
        "seconds": round(elapsed, 2),
        "trials_per_s": round(tasks * trials / elapsed),
        "cpu_ms_per_trial": round(1000 * (usage.ru_utime + usage.ru_stime) / stored, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "writer_rss_mb": round(helpers.peak_kb / 1024),
    }


class _HelperPeaks:
    """The highest peak RSS (VmHWM) of the processes `parent` starts, read from /proc every
    20 ms while it runs: `wait4` reports the run's own process, not them."""

    def __init__(self, parent: int) -> None:
        import threading

        self.parent = parent
        self.peak_kb = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.02):  # bounded: stops when the run's process has exited
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    self.peak_kb = max(self.peak_kb, _hwm_of_child(entry, self.parent))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _hwm_of_child(entry: Path, parent: int) -> int:
    try:
        status = (entry / "status").read_text()
    except OSError:
        return 0
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("PPid", "").strip() != str(parent):
        return 0
    return int(fields.get("VmHWM", "0 kB").split()[0])


def main_cli(shapes: list[str], repeats: int) -> None:
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores: whole `trialkit run` processes"
    )
    print(
        f"{'shape':>10} {'trials':>8} {'seconds':>8} {'trials/s':>9} {'CPU ms/trial':>13}"
        f" {'peak RSS MB':>12} {'writer MB':>10}"
    )
    for shape in shapes:
        tasks, trials = (int(n) for n in shape.lower().split("x"))
        rows = sorted(  # by rate, not by seconds (rounded, they tie)
            (measure_cli(tasks, trials) for _ in range(repeats)), key=lambda r: r["trials_per_s"]
        )
        row = rows[len(rows) // 2]
        rates = f"{rows[0]['trials_per_s']}–{rows[-1]['trials_per_s']}" if repeats > 1 else ""
        print(
            f"{shape:>10} {row['trials']:>8} {row['seconds']:>8} {row['trials_per_s']:>9} "
            f"{row['cpu_ms_per_trial']:>13} {row['peak_rss_mb']:>12} {row['writer_rss_mb']:>10}"
            f"  {rates}",
            flush=True,
        )


def main_reports(shapes: list[str], reports: list[str], repeats: int) -> None:
    """Each shape's plain run and its runs with each report file, interleaved round by round."""
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores: whole `trialkit run` processes, "
        f"{repeats} interleaved rounds, medians"
    )
    print(
        f"{'shape':>10} {'report':>9} {'seconds':>8} {'x plain':>8} {'CPU ms/trial':>13}"
        f" {'peak RSS MB':>12} {'x plain':>8}"
    )
    for shape in shapes:
        tasks, trials = (int(n) for n in shape.lower().split("x"))
        variants: list[str | None] = [None, *reports]
        rounds = [[measure_cli(tasks, trials, v) for v in variants] for _ in range(repeats)]
        for column, variant in enumerate(variants):
            rows = [measures[column] for measures in rounds]
            plain = [measures[0] for measures in rounds]
            print(
                f"{shape:>10} {variant or '(none)':>9} {_median(rows, 'seconds'):>8.2f} "
                f"{_median_ratio(rows, plain, 'seconds'):>8.2f} "
                f"{_median(rows, 'cpu_ms_per_trial'):>13.3f} "
                f"{_median(rows, 'peak_rss_mb'):>12.0f} "
                f"{_median_ratio(rows, plain, 'peak_rss_mb'):>8.2f}",
                flush=True,
            )


def _median(rows: list[dict[str, float]], key: str) -> float:
    values = sorted(row[key] for row in rows)
    return values[len(values) // 2]


def _median_ratio(rows: list[dict[str, float]], plain: list[dict[str, float]], key: str) -> float:
    """The median over rounds of each round's ratio to its own plain run."""
    ratios = sorted(row[key] / base[key] for row, base in zip(rows, plain, strict=True))
    return ratios[len(ratios) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", action="store_true", help="whole `trialkit run` processes")
    parser.add_argument("--shape", action="append", help="with --cli: TASKSxTRIALS (repeatable)")
    parser.add_argument("--repeats", type=int, default=1, help="with --cli: runs of each shape")
    parser.add_argument(
        "--report",
        action="append",
        choices=sorted(REPORTS),
        help="with --cli: also runs that write this report file, interleaved (repeatable)",
    )
    parser.add_argument("--trials", type=int, action="append", help="trials (repeatable)")
    parser.add_argument("--agent", choices=["async", "sync"], default="async")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cli and args.report:
        main_reports(args.shape or ["10000x1"], args.report, args.repeats)
        return
    if args.cli:
        main_cli(args.shape or SHAPES, args.repeats)
        return
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
