"""A fast, seeded A/A calibration of the gate (benchmarks/aa_calibration.py measures more): the
same stochastic agent as baseline and candidate fails `--fail-on-regression` at most α of the
time, and known drops fail it."""

from __future__ import annotations

import random

from trialkit.analysis.paired import gate_outcome
from trialkit.analysis.stats import Table


def failures(before: list[float], after: list[float], trials: int, reps: int, seed: int) -> float:
    rng = random.Random(seed)
    failed = 0
    for _ in range(reps):
        tables = [
            Table(
                sum(rng.random() < p for _ in range(trials)),
                trials,
                sum(rng.random() < q for _ in range(trials)),
                trials,
            )
            for p, q in zip(before, after, strict=True)
        ]
        failed += gate_outcome(tables, 0.95) == "worse"
    return failed / reps


RATES = [0.95, 0.4, 0.7, 0.55, 0.9, 0.25, 0.8, 0.6, 0.98, 0.5]


def test_the_same_agent_fails_the_gate_at_most_5_percent_of_the_time() -> None:
    assert failures(RATES, RATES, 5, 400, seed=1) <= 0.05
    assert failures(RATES * 3, RATES * 3, 3, 200, seed=2) <= 0.05


def test_known_drops_fail_the_gate() -> None:
    broken = [0.0, *RATES[1:]]  # the easiest task breaks
    assert failures(RATES, broken, 10, 100, seed=3) >= 0.8  # named on its own
    every = [max(0.0, p - 0.3) for p in RATES]
    assert failures(RATES, every, 5, 100, seed=4) >= 0.8
