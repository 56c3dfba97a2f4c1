"""Trials run again after an error (`trialkit run --resume RUN --retry-errors`), and how the
pass rate reads with first attempts only.

A retry replaces an errored trial with a new attempt. Errors are left out of the pass rate,
so the errored first attempt counted for nothing; its retry then adds a pass or a fail. When
the inputs that error are not like the others (the hard ones time out, say), retrying them
until they run re-rolls exactly those inputs and can move the score. The run therefore keeps
which trials were retried, how many attempts each took and how the retry ended
(`RunInfo.config["retried"]`), and reports give both figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trialkit import metrics
from trialkit.score import Verdict

CONFIG_KEY = "retried"
"""The key of the run config that holds the retried trials and the first-attempt figures."""

Key = tuple[str, int]


def record_retries(
    previous: Mapping[str, Any] | None,
    retried: set[Key],
    verdicts: Mapping[Key, Verdict],
) -> dict[str, Any] | None:
    """The run config's `retried` value once the trials `retried` have been run again.

    `previous`: the value a run resumed before held (its trials keep their counts; one retried
    again takes one more attempt). `verdicts`: every stored trial's verdict, retried ones as
    they are now. None when no trial was ever retried.
    """
    attempts: dict[Key, int] = {}
    for item in (previous or {}).get("trials", []):
        attempts[(str(item["task"]), int(item["trial"]))] = int(item["attempts"])
    for key in retried:
        attempts[key] = attempts.get(key, 1) + 1
    if not attempts:
        return None
    rate, _ = _pass_rate(verdicts, set())
    first_rate, first_ci = _pass_rate(verdicts, set(attempts))
    return {
        "trials": [
            {
                "task": task,
                "trial": index,
                "attempts": count,
                "verdict": verdicts.get((task, index), Verdict.ERROR).value,
            }
            for (task, index), count in sorted(attempts.items())
        ],
        "pass_rate": rate,
        "first_attempt_pass_rate": first_rate,
        "first_attempt_pass_rate_ci": None if first_ci is None else list(first_ci),
    }


def retry_attempts(previous: Mapping[str, Any] | None, retried: set[Key]) -> dict[Key, int]:
    """The attempt each trial in `retried` is about to make (2 at its first retry), counting
    the attempts `previous` (the run's `retried` record) holds."""
    before = {
        (str(item["task"]), int(item["trial"])): int(item["attempts"])
        for item in (previous or {}).get("trials", [])
    }
    return {key: before.get(key, 1) + 1 for key in retried}


def _pass_rate(
    verdicts: Mapping[Key, Verdict], left_out: set[Key]
) -> tuple[float | None, tuple[float, float] | None]:
    """The suite's pass rate (`metrics.suite_pass_rate`) of the trials not `left_out`: with
    the retried trials left out it is the rate of first attempts (each retried trial's first
    attempt errored, and errors are not decided)."""
    counts: dict[str, list[int]] = {}
    for (task, index), verdict in verdicts.items():
        passed_decided = counts.setdefault(task, [0, 0])
        if (task, index) in left_out or verdict not in (Verdict.PASS, Verdict.FAIL):
            continue
        passed_decided[0] += verdict is Verdict.PASS
        passed_decided[1] += 1
    return metrics.suite_pass_rate([(p, d) for p, d in counts.values()])


def retried_of(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run config's record of retried trials, or None when no trial was retried."""
    value = config.get(CONFIG_KEY)
    return value if isinstance(value, dict) and value.get("trials") else None


def retry_note(config: Mapping[str, Any]) -> str | None:
    """One line for reports: how many trials were retried after an error and the pass rate
    with first attempts only; None when no trial was retried."""
    value = retried_of(config)
    if value is None:
        return None
    items = value["trials"]
    n = len(items)
    passed = sum(item["verdict"] == "pass" for item in items)
    first = _percent(value.get("first_attempt_pass_rate"))
    ci = value.get("first_attempt_pass_rate_ci")
    shown_ci = "" if not ci else f" (95% CI {_percent(ci[0])}–{_percent(ci[1])})"
    trials = "trial was" if n == 1 else "trials were"
    return (
        f"{n} {trials} run again after an error ({passed} then passed); with first attempts "
        f"only the pass rate reads {first}{shown_ci}, against {_percent(value.get('pass_rate'))} "
        "with the retries: retries re-roll error-prone inputs and can inflate a score."
    )


def summary_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON report summary's fields on retried trials (none when no trial was retried):
    `retried_trials` (the count), `first_attempt_pass_rate` and its interval, and `retried`
    (each retried trial: task, trial index, attempts, verdict now)."""
    value = retried_of(config)
    if value is None:
        return {}
    return {
        "retried_trials": len(value["trials"]),
        "first_attempt_pass_rate": value.get("first_attempt_pass_rate"),
        "first_attempt_pass_rate_ci": value.get("first_attempt_pass_rate_ci"),
        "retried": value["trials"],
    }


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
