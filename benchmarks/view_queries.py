"""The web viewer's queries on a big store: one 100,000-trial run among ~50 small ones.

The store gets one run of 1,000 tasks × 100 trials (suite `bench`: 10% of trials failing, 1%
erroring, each with a tool call, an output of ~40 words and two graders' rationales), ten
smaller runs of the same suite, and 40 runs of four other suites (20 tasks × 3 trials),
written through `Store.save_trials` in batches like the runner's (search documents included).
Then each query of `trialkit.store.browse` and `trialkit.store.search`, and a page of the big
run's trials through `queries.list_trials` and `trial_pages.trials_page`, is timed in this
process: the median of `--repeats` calls after one warm-up call. Usage:

    python benchmarks/view_queries.py                      # SQLite, in a temp folder
    python benchmarks/view_queries.py --store URL          # another store (an empty one)
    python benchmarks/view_queries.py --keep /tmp/view.db  # keep the SQLite file

Figures are reported in docs/performance.md; nothing here is asserted in tests. The target is
under 300 ms for every query.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store import WORDS  # the words of benchmarks/store.py's realistic trials
from trialkit.outcome import Outcome
from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.score import Score, Verdict
from trialkit.store import Store, browse, queries, search, trial_pages
from trialkit.store.urls import sqlite_url
from trialkit.task import SuiteKind
from trialkit.transcript import Message, ToolCall, Transcript, Turn, Usage
from trialkit.trial import Trial, TrialStatus

BIG_TASKS, BIG_TRIALS = 1000, 100
SMALL_TASKS, SMALL_TRIALS = 20, 3
BATCH = 256
T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
TARGET_S = 0.3
TOOLS = ["search", "read_file", "calculator", "browser"]
MODELS = ["openai/gpt-4o-mini", "openai/gpt-4o", "anthropic/claude-3-5-haiku"]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _trial(run_id: str, task: int, index: int, rng: random.Random, model: str) -> Trial:
    draw = rng.random()
    verdict = Verdict.ERROR if draw < 0.01 else Verdict.FAIL if draw < 0.11 else Verdict.PASS
    question = f"Question {task}: " + _text(rng, 15)
    answer = _text(rng, 40)
    tool = TOOLS[task % len(TOOLS)]
    call = ToolCall(id=f"c{index}", name=tool, arguments={"q": question[:30]}, result="ok")
    transcript = Transcript(
        messages=[
            Message(role="user", content=question),
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", content="ok", name=tool, tool_call_id=call.id),
            Message(role="assistant", content=answer),
        ],
        tool_calls=[call],
        turns=[Turn(index=0, input=question, output=answer)],
    )
    judge = round(rng.uniform(0.7, 1.0) if verdict is Verdict.PASS else rng.uniform(0, 0.6), 2)
    error = None
    scores = [
        Score.from_bool(verdict is Verdict.PASS, name="contains('capital')", rationale=None),
        Score.from_value(judge, pass_at=0.7, name="judge", rationale="Judged: " + _text(rng, 10)),
    ]
    if verdict is Verdict.ERROR:
        from trialkit._record import ErrorInfo

        error = ErrorInfo(type="TimeoutError", message="timed out after 60 s", phase="timeout")
        scores = []
    usage = Usage(input_tokens=rng.randint(200, 700), output_tokens=rng.randint(20, 120))
    return Trial(
        run_id=run_id,
        task_id=f"task-{task:04d}",
        index=index,
        status=TrialStatus.TIMEOUT if error else TrialStatus.COMPLETED,
        verdict=verdict,
        model=model,
        transcript=transcript,
        outcome=Outcome(output=None if error else answer),
        scores=scores,
        error=error,
        usage=usage,
        cost_usd=usage.input_tokens * 0.15e-6 + usage.output_tokens * 0.6e-6,
        started_at=T0 + timedelta(milliseconds=index),
        duration_s=round(rng.lognormvariate(0.5, 0.4), 4),
    )


def _write_run(
    store: Store,
    run_id: str,
    suite_id: str,
    started: datetime,
    tasks: int,
    trials: int,
    model: str,
    rng: random.Random,
) -> None:
    run = RunInfo(
        id=run_id,
        name=f"{suite_id}-nightly",
        started_at=started,
        status="running",
        config={"trials": trials, "model": model, "harness": "chat"},
    )
    kind = SuiteKind.CAPABILITY if suite_id == "bench" else SuiteKind.REGRESSION
    plans = [TaskPlan(id=f"task-{t:04d}", kind=kind) for t in range(tasks)]
    store.create_run(run, SuiteInfo(id=suite_id, kind=kind), plans)
    batch: list[Trial] = []
    for index in range(trials):
        for task in range(tasks):
            batch.append(_trial(run_id, task, index, rng, model))
            if len(batch) == BATCH:
                store.save_trials(batch)
                batch = []
    if batch:
        store.save_trials(batch)
    finished = started + timedelta(minutes=rng.randint(1, 90))
    store.finish_run(run.model_copy(update={"status": "completed", "finished_at": finished}))


def fill(store: Store) -> dict[str, float]:
    rng = random.Random(19)
    began = time.perf_counter()
    _write_run(store, "big", "bench", T0, BIG_TASKS, BIG_TRIALS, MODELS[0], rng)
    big_s = time.perf_counter() - began
    for i in range(50):
        suite = "bench" if i < 10 else f"suite-{i % 4}"
        tasks = 200 if suite == "bench" else SMALL_TASKS
        started = T0 + timedelta(hours=i + 1)
        _write_run(store, f"small-{i:02d}", suite, started, tasks, SMALL_TRIALS, MODELS[i % 3], rng)
    return {"big_run_write_s": big_s, "all_writes_s": time.perf_counter() - began}


def timed(call: Callable[[], Any], repeats: int) -> float:
    call()  # warm-up: the first call pays for compiling statements and cold pages
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def cases(store: Store) -> dict[str, Callable[[], Any]]:
    bench_runs = [r.id for r in browse.list_runs(store, suite="bench", limit=5).rows]
    return {
        "list_runs (page 1, newest first)": lambda: browse.list_runs(store),
        "list_runs (sort by pass rate)": lambda: browse.list_runs(store, sort="pass_rate"),
        "list_runs (sort by cost, page 2)": lambda: browse.list_runs(store, sort="cost", offset=50),
        "list_runs (model filter)": lambda: browse.list_runs(store, model=MODELS[0]),
        "facets": lambda: browse.facets(store),
        "suite_trend (bench, 11 runs)": lambda: browse.suite_trend(store, "bench"),
        "task_history (bench, 1,000 tasks)": lambda: browse.task_history(store, "bench"),
        "matrix (5 runs × 100 tasks)": lambda: browse.matrix(store, ["big", *bench_runs]),
        "matrix (page 9, glob)": lambda: browse.matrix(
            store, ["big", *bench_runs], task="task-0*", offset=800
        ),
        "search 'capital' (every trial)": lambda: search.search(store, "capital"),
        "search 'harbour treaty'": lambda: search.search(store, "harbour treaty"),
        "search rare word": lambda: search.search(store, "timed"),
        "search + run, verdict filters": lambda: search.search(
            store, "river", run="big", verdict="fail"
        ),
        "search + tool, score filters": lambda: search.search(
            store, "museum", tool="browser", grader="judge", score_max=0.5
        ),
        "search + error type": lambda: search.search(store, "timed", error_type="TimeoutError"),
        "search page 100": lambda: search.search(store, "capital", offset=5000),
        "trials page (queries.list_trials)": lambda: queries.list_trials(store, "big", limit=50),
        "trials page 1,001 (trials_page)": lambda: trial_pages.trials_page(
            store, "big", offset=50_000
        ),
        "failed trials page (trials_page)": lambda: trial_pages.trials_page(
            store, "big", verdict="fail", offset=5000
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="an empty store's URL (default: a temp SQLite file)")
    parser.add_argument("--keep", type=Path, help="the SQLite file to write, and keep")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="the store is filled already")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        url = args.store or sqlite_url(args.keep or Path(temporary) / "view.db")
        with Store(url) as store:
            if not args.reuse:
                filled = fill(store)
                print(
                    f"wrote {BIG_TASKS * BIG_TRIALS:,} + 50 small runs: big run "
                    f"{filled['big_run_write_s']:.1f} s, all {filled['all_writes_s']:.1f} s"
                )
            print(f"{'query':42} {'median ms':>10}")
            for name, call in cases(store).items():
                seconds = timed(call, args.repeats)
                mark = "" if seconds < TARGET_S else "  over target"
                print(f"{name:42} {seconds * 1000:10.1f}{mark}", flush=True)


if __name__ == "__main__":
    main()
