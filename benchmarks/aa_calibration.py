"""A/A calibration of `compare --fail-on-regression`: the same stochastic agent as baseline
and candidate, many times over, and the share of comparisons the gate calls a regression
(false alarms; the target is at most α = 5%), then its power on known injected drops: one
task breaking (its pass rate to 0) and every task losing 10 points.

The agent is simulated at the level of the statistics: each task has a fixed pass rate, and a
run draws each trial as a coin with that rate, independently. The gate is the one `compare`
uses (`trialkit.analysis.paired.gate_outcome`, the exact stratified test, B worse at p < α).

    python benchmarks/aa_calibration.py [--reps 500] [--seed 0]

Prints one line per suite shape and scenario: the share of comparisons that failed the gate.
"""

from __future__ import annotations

import argparse
import random
import time

from trialkit.analysis.paired import gate_outcome
from trialkit.analysis.stats import Table

SHAPES = [(5, 3), (10, 5), (20, 5), (20, 10), (50, 3)]
"""(tasks, trials a task) of the suites measured."""


def task_rates(tasks: int, rng: random.Random) -> list[float]:
    """Heterogeneous pass rates: a third of the tasks easy (0.9–1), the rest spread 0.2–0.9."""
    return [rng.uniform(0.9, 1.0) if i % 3 == 0 else rng.uniform(0.2, 0.9) for i in range(tasks)]


def run(rates: list[float], trials: int, rng: random.Random) -> list[int]:
    return [sum(rng.random() < p for _ in range(trials)) for p in rates]


def alarm_rate(
    rates: list[float], after: list[float], trials: int, reps: int, rng: random.Random
) -> float:
    alarms = 0
    for _ in range(reps):
        a, b = run(rates, trials, rng), run(after, trials, rng)
        tables = [Table(x, trials, y, trials) for x, y in zip(a, b, strict=True)]
        alarms += gate_outcome(tables, 0.95) == "worse"
    return alarms / reps


def scenarios(rates: list[float]) -> dict[str, list[float]]:
    broken = [0.0, *rates[1:]]  # the easiest task (index 0) breaks
    return {
        "A/A (false alarms)": rates,
        "one task breaks": broken,
        "every task −10 pts": [max(0.0, p - 0.10) for p in rates],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    started = time.perf_counter()
    print(f"{'tasks × trials':<15} {'scenario':<22} {'gate fails':>10}")
    for tasks, trials in SHAPES:
        rates = task_rates(tasks, rng)
        for name, after in scenarios(rates).items():
            share = alarm_rate(rates, after, trials, args.reps, rng)
            print(f"{f'{tasks} × {trials}':<15} {name:<22} {share:>9.1%}")
    print(f"{args.reps} comparisons each, seed {args.seed}, {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
