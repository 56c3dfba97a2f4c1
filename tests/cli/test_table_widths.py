"""Every table the CLI prints, with ids as long as real ones, on terminals of 60 to 120 columns
and in a log: ids are never cut or wrapped, a terminal's lines fit, headers never stand one
letter a line, and a log gets plain lines with nothing cut."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from tests.analysis._store_runs import T0, trial
from trialkit.cli.main import cli
from trialkit.models.base import ModelRequest, ModelResponse
from trialkit.models.cassette import Cassette
from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.store import Store
from trialkit.task import SuiteKind
from trialkit.transcript import Message, Usage

SUITE = "customer-support-regression-suite-v2"
RUNS = ["20261130T000734-3c9986", "20261201T101500-a1b2c3", "20261202T230159-0f9e8d"]
NAME = "nightly-baseline-gpt-4o-mini-with-a-long-name"
MODELS = [
    "openai/gpt-4o-mini-2024-07-18",
    "anthropic/claude-3-5-sonnet-20241022",
    "google/gemini-1.5-pro-002",
]
TASKS = {
    "refund-policy-multi-turn-escalation-01": ["PPPFG", "PPPFG", "PPPPP"],
    "shipping-address-change-after-dispatch": ["PPPPP", "FFPFF", "FFFFF"],
    "tone-check-angry-customer-long-thread-7": ["GGGGP", "GGGGP", "PPPPP"],
    "greeting": ["FFFFF", "FFFFF", "FFFFF"],
}
IDS = [SUITE, *RUNS, *TASKS]
WIDTHS = [60, 80, 100, 120]
CASSETTE_MODELS = ["anthropic/claude-3-5-sonnet-20241022-extended-thinking", "openai/gpt-4o"]


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Three runs of one suite by three models; the first has a long name."""
    url = f"sqlite:///{tmp_path_factory.mktemp('widths')}/s.db"
    with Store(url) as store:
        for i, (run_id, model) in enumerate(zip(RUNS, MODELS, strict=True)):
            started = T0 + timedelta(hours=i)
            config = {"model": model, "harness": "chat"}
            run = RunInfo(
                id=run_id, name=NAME if i == 0 else None, started_at=started, config=config
            )
            plans = [TaskPlan(id=task, kind=SuiteKind.REGRESSION) for task in TASKS]
            store.create_run(run, SuiteInfo(id=SUITE, kind=SuiteKind.REGRESSION), plans)
            store.save_trials(
                [
                    trial(run_id, task, index, letter)
                    for task, runs in TASKS.items()
                    for index, letter in enumerate(runs[i])
                ]
            )
            store.finish_run(run.model_copy(update={"finished_at": started + timedelta(minutes=5)}))
    return url


@pytest.fixture(scope="module")
def cassette_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cassette") / "cassette"
    cassette = Cassette(root, "record")
    for model in CASSETTE_MODELS:
        request = ModelRequest(messages=[Message(role="user", content="hi")])
        response = ModelResponse(
            message=Message(role="assistant", content="hello"),
            usage=Usage(input_tokens=3, output_tokens=1),
        )
        cassette.record(model, request, response, trial=0, occurrence=0)
    return root


COMMANDS = {
    "runs": ["runs"],
    "compare": ["compare", RUNS[0], RUNS[1]],
    "compare three": ["compare", *RUNS],
    "health": ["health"],
    "report": ["report", RUNS[1]],
    "transcripts list": ["transcripts", "list", "--run", RUNS[0]],
}
SHOWN = {
    "runs": RUNS,
    "compare": [SUITE, *RUNS[:2], *TASKS],
    "compare three": IDS,
    "health": IDS,
    "report": [SUITE, RUNS[1], *TASKS],
    "transcripts list": [RUNS[0], *TASKS],
}
"""The ids each command must show (on the narrowest terminal a table drops less important
columns, such as the suite of `trialkit runs`)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_BOX = re.compile("[\u2500-\u257f]")


def invoke(args: list[str], store_url: str, *, width: int | None) -> str:
    """The command's output; on a terminal of `width` columns, or else piped into a log."""
    env = {"COLUMNS": str(width or 60), "NO_COLOR": "1"}
    env["TTY_COMPATIBLE"] = "1" if width else "0"
    store = [] if args[0] == "cache" else ["--store", store_url]
    result = CliRunner().invoke(cli, [*args, *store], env=env)
    assert (result.exit_code, result.stderr) == (0, "")
    return _ANSI.sub("", result.stdout)


def assert_ids_whole(out: str, ids: list[str], shown: list[str]) -> None:
    """Each id in `shown` appears, and no line holds the start or the end of an id without
    the whole of it."""
    lines = out.splitlines()
    for id_ in shown:
        assert any(id_ in line for line in lines), f"{id_} is not shown"
    for id_ in ids:
        for part in (id_[:10], id_[-10:]):
            cut = [line for line in lines if part in line and id_ not in line]
            assert not cut, f"{id_} is cut or wrapped: {cut}"


def assert_no_letter_stacks(out: str) -> None:
    """No header (or cell) printed one letter a line: no three lines in a row with a lone
    lowercase letter in the same place, not all the same (as the `s` of `1.00 s` is)."""
    lines = out.splitlines()
    lone = [{m.start() for m in re.finditer(r"(?<!\S)[a-z](?!\S)", line)} for line in lines]
    for i in range(len(lines) - 2):
        for x in lone[i] & lone[i + 1] & lone[i + 2]:
            letters = {lines[j][x] for j in range(i, i + 3)}
            assert len(letters) == 1, "one letter a line:\n" + "\n".join(lines[i : i + 3])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", COMMANDS)
def test_on_a_terminal_tables_fit_and_ids_stay_whole(
    store_url: str, command: str, width: int
) -> None:
    out = invoke(COMMANDS[command], store_url, width=width)

    too_long = [line for line in out.splitlines() if cell_len(line.rstrip()) > width]
    assert not too_long, f"lines over {width} columns: {too_long}"
    assert_ids_whole(out, IDS, SHOWN[command])
    assert_no_letter_stacks(out)


@pytest.mark.parametrize("command", COMMANDS)
def test_in_a_log_tables_are_plain_and_nothing_is_cut(store_url: str, command: str) -> None:
    out = invoke(COMMANDS[command], store_url, width=None)

    assert not _BOX.search(out), "box characters in a log"
    assert "\x1b" not in out
    assert_ids_whole(out, IDS, SHOWN[command])
    if command != "report":  # the report is of the run without a name
        assert NAME in out
    assert all(line == line.rstrip() for line in out.splitlines())


ALL_RUNS_COLUMNS = [
    "run",
    "name",
    "suite",
    "kind",
    "started",
    "status",
    "trials",
    "pass",
    "fail",
    "error",
    "rate",
]


def test_in_a_log_each_run_is_one_line_with_all_its_columns(store_url: str) -> None:
    lines = invoke(["runs"], store_url, width=None).splitlines()

    assert lines[0].split() == ALL_RUNS_COLUMNS
    assert len(lines) == 1 + len(RUNS)
    when = ["2025-06-01", "09:00"]
    counts = ["20", "9", "6", "5", "60%"]
    assert lines[-1].split() == [RUNS[0], NAME, SUITE, "regression", *when, "completed", *counts]


def test_a_narrow_terminal_drops_columns_before_it_cuts_anything(store_url: str) -> None:
    wide = invoke(["runs"], store_url, width=200).splitlines()
    narrow = invoke(["runs"], store_url, width=60).splitlines()

    assert wide[0].split() == ALL_RUNS_COLUMNS
    assert narrow[0].split() == ["run", "name", "status", "rate"]


def test_compare_many_runs_on_a_narrow_terminal_becomes_blocks(store_url: str) -> None:
    out = invoke(["compare", *RUNS], store_url, width=60)

    task = "refund-policy-multi-turn-escalation-01"
    lines = out.splitlines()
    at = lines.index(task)
    assert [line.split(maxsplit=1)[0] for line in lines[at + 1 : at + 4]] == ["A", "B", "C"]


@pytest.mark.parametrize("width", [*WIDTHS, None])
def test_cache_stats(cassette_dir: Path, width: int | None) -> None:
    out = invoke(["cache", "stats", str(cassette_dir)], "", width=width)

    for model in CASSETTE_MODELS:
        assert any(line.split()[0] == model for line in out.splitlines())
    if width:
        assert all(cell_len(line.rstrip()) <= width for line in out.splitlines())
    else:
        assert not _BOX.search(out)


def test_health_counts_the_trials_its_pass_rate_is_of(store_url: str) -> None:
    """`Passed` is of the decided trials, like the pass rate beside it; the errored and
    unknown trials are counted apart."""
    lines = invoke(["health"], store_url, width=None).splitlines()

    header = next(line for line in lines if line.startswith("Task "))
    row = next(line for line in lines if line.startswith("refund-policy"))
    assert header.split()[3:7] == ["Passed", "Pass", "rate", "Undecided"]
    assert row.split()[3:6] == ["11/13", "84.6%", "2"]  # 2 trials errored


def test_compare_cells_count_the_decided_trials(store_url: str) -> None:
    out = invoke(["compare", RUNS[0], RUNS[1]], store_url, width=None)

    row = next(line for line in out.splitlines() if line.startswith("tone-check"))
    assert "! 1/1 100.0%" in row
