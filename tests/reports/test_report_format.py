"""The shared wording of the human-readable reports: tokens, costs, and how a run ended."""

from __future__ import annotations

import pytest

from trialkit.report import RunInfo
from trialkit.reports import _format as f
from trialkit.score import Verdict
from trialkit.transcript import Usage

from ._factory import FINISHED, STARTED, STOP_REASON, judged_report, make_report, result

AGENT = Usage(input_tokens=1400, output_tokens=280)
JUDGE = Usage(input_tokens=120, output_tokens=30)


@pytest.mark.parametrize(
    ("usage", "grader_usage", "expected"),
    [
        (Usage(), None, "n/a"),
        (Usage(), Usage(), "n/a"),
        (AGENT, None, "1,680 (1,400 in, 280 out)"),
        (AGENT, Usage(), "1,680 (1,400 in, 280 out)"),
        (AGENT, JUDGE, "1,830 (agent 1,400 in / 280 out; graders 120 in / 30 out)"),
        (Usage(), JUDGE, "150 (agent n/a; graders 120 in / 30 out)"),
    ],
)
def test_tokens_show_the_graders_apart_when_they_used_any(
    usage: Usage, grader_usage: Usage | None, expected: str
) -> None:
    assert f.tokens(usage, grader_usage) == expected


@pytest.mark.parametrize(
    ("total", "graders", "grader_usage", "expected"),
    [
        (0.014, None, Usage(), "$0.0140"),
        (None, None, Usage(), "n/a"),
        (0.014, 0.002, JUDGE, "$0.0140 (graders $0.0020)"),
        (0.014, 0.002, Usage(), "$0.0140 (graders $0.0020)"),
        (0.014, None, JUDGE, "$0.0140 (graders n/a)"),
        (None, None, JUDGE, "n/a (graders n/a)"),
    ],
)
def test_cost_shows_the_graders_part_when_graders_made_calls(
    total: float | None, graders: float | None, grader_usage: Usage, expected: str
) -> None:
    assert f.total_cost(total, graders, grader_usage) == expected


def _run(**update: object) -> RunInfo:
    return RunInfo(id="r1", started_at=STARTED, finished_at=FINISHED).model_copy(update=update)


def test_the_title_names_the_model_under_test_when_there_is_one() -> None:
    assert f.run_title(judged_report()).endswith("· run run-9c1d · model openai/gpt-4o-mini")
    for config in ({}, {"model": None}, {"model": ""}):
        report = make_report({}, run=_run(config=config))
        assert "model" not in f.run_title(report)


@pytest.mark.parametrize(
    ("status", "config", "ending"),
    [
        ("completed", {}, "+00:00"),
        ("running", {}, " · running"),
        ("interrupted", {}, " · interrupted: only the trials that finished are counted"),
        ("stopped", {"stop_reason": STOP_REASON}, f" · stopped: {STOP_REASON}"),
        ("stopped", {}, " · stopped"),
    ],
)
def test_the_subtitle_says_how_the_run_ended(
    status: str, config: dict[str, object], ending: str
) -> None:
    report = make_report({"t": [result(0, Verdict.PASS)]}, run=_run(status=status, config=config))

    subtitle = f.run_subtitle(report)

    assert subtitle.startswith("started 2026-11-29T12:00:00+00:00")
    assert subtitle.endswith(ending)
