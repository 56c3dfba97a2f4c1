"""Adaptive trials against a fixed trial count, on simulated agents with known success rates.

Each task's agent passes each trial with a known probability p (seeded, so every trial's
outcome is fixed in advance: both strategies see the same coin for trial i of a task). Over
many suites of such tasks this measures, for a regression suite and for a capability suite:

- trials used (the cost), and
- decision accuracy: for a regression task, whether its verdict (pass only if every trial
  passed) matches the truth "the agent is reliable" (p = 1); for a capability task, whether the
  reported 95% interval of the pass rate contains p, and how far the estimate is from p.

Usage:

    python benchmarks/adaptive.py                       # 40 suites of 25 tasks each
    python benchmarks/adaptive.py --suites 10 --fixed 10 --max-trials 20 --precision 0.2

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import dataclass

# Per-task success rates: a mix of reliable, nearly reliable, flaky and broken agents.
REGRESSION_RATES = [1.0] * 15 + [0.98, 0.95, 0.9, 0.8, 0.6, 0.4, 0.2, 0.0, 0.0, 0.97]
CAPABILITY_RATES = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0] * 2


@dataclass
class Outcome:
    trials: int = 0
    correct: int = 0
    tasks: int = 0
    covered: int = 0
    errors: list[float] | None = None


def _coin(seed: int, task: int, trial: int) -> float:
    return random.Random(f"{seed}/{task}/{trial}").random()


def run_suite(kind: str, rates: list[float], seed: int, **runner: object) -> Outcome:
    from trialkit import Suite, Task, TrialContext, graders, run_sync

    def agent(prompt: str, ctx: TrialContext) -> str:
        index = int(prompt)
        return "pass" if _coin(seed, index, ctx.trial_index) < rates[index] else "fail"

    suite = Suite(
        id=f"sim-{kind}",
        kind=kind,  # type: ignore[arg-type]
        harness=agent,
        tasks=[
            Task(id=f"t{i}", input=str(i), graders=[graders.equals("pass")])
            for i in range(len(rates))
        ],
    )
    report = run_sync(suite, concurrency=4, **runner)  # type: ignore[arg-type]
    outcome = Outcome(errors=[])
    for i, task in enumerate(report.tasks):
        p = rates[i]
        outcome.trials += task.trials
        outcome.tasks += 1
        if kind == "regression":
            outcome.correct += (task.verdict == "pass") == (p == 1.0)
        else:
            low, high = task.pass_rate_ci or (0.0, 1.0)
            outcome.covered += low - 1e-9 <= p <= high + 1e-9
            assert outcome.errors is not None and task.pass_rate is not None
            outcome.errors.append(abs(task.pass_rate - p))
    return outcome


def compare(kind: str, rates: list[float], suites: int, fixed: int, adaptive: object) -> None:
    totals = {"fixed": Outcome(errors=[]), "adaptive": Outcome(errors=[])}
    for seed in range(suites):
        for label, options in (("fixed", {"trials": fixed}), ("adaptive", {"adaptive": adaptive})):
            one = run_suite(kind, rates, seed, **options)
            total = totals[label]
            total.trials += one.trials
            total.tasks += one.tasks
            total.correct += one.correct
            total.covered += one.covered
            assert total.errors is not None and one.errors is not None
            total.errors.extend(one.errors)
    print(f"\n{kind} suite: {len(rates)} tasks x {suites} simulated suites")
    for label, total in totals.items():
        per_task = total.trials / total.tasks
        line = f"  {label:9} {per_task:5.2f} trials/task"
        if kind == "regression":
            line += f"   verdicts right {total.correct / total.tasks:.1%}"
        else:
            assert total.errors is not None
            line += (
                f"   interval covers p {total.covered / total.tasks:.1%}"
                f"   mean |estimate - p| {statistics.fmean(total.errors):.3f}"
            )
        print(line)
    saved = 1 - totals["adaptive"].trials / totals["fixed"].trials
    print(f"  adaptive used {saved:.0%} fewer trials")


def main() -> None:
    from trialkit.run.adaptive import Adaptive

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", type=int, default=40)
    parser.add_argument("--fixed", type=int, default=10, help="the fixed trial count")
    parser.add_argument("--max-trials", type=int, default=10)
    parser.add_argument("--precision", type=float, default=0.3)
    args = parser.parse_args()
    policy = Adaptive(max_trials=args.max_trials, precision=args.precision)
    print(
        f"fixed: {args.fixed} trials per task; adaptive: max {args.max_trials}, "
        f"precision {args.precision}"
    )
    compare("regression", REGRESSION_RATES, args.suites, args.fixed, policy)
    compare("capability", CAPABILITY_RATES, args.suites, args.fixed, policy)


if __name__ == "__main__":
    main()
