"""RunSettings: the one record of a run's options, and running a suite where a loop runs."""

import asyncio
import threading
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from trialkit import Runner, Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.models.cassette import CacheMode
from trialkit.run.settings import RunSettings, SettingsError

SUITE_PY = """
from trialkit import Suite, Task, graders

suite = Suite(
    id="loop",
    kind="regression",
    harness=lambda prompt: prompt.upper(),
    tasks=[Task(id="a", input="paris", graders=[graders.contains("PARIS")])],
)
"""


def loud(prompt: str) -> str:
    return prompt.upper()


def suite() -> Suite:
    return Suite(
        id="s",
        kind="regression",
        harness=loud,
        tasks=[
            Task(id="a", input="paris", graders=[graders.contains("PARIS")]),
            Task(id="b[1]", input="rome", graders=[graders.contains("ROME")]),
        ],
    )


def test_parse_takes_options_as_typed() -> None:
    settings = RunSettings.parse(trials="3", min_pass_rate="80%", fail_on_error="0.05")
    assert (settings.trials, settings.min_pass_rate, settings.fail_on_error) == (3, 0.8, 0.05)
    adaptive = RunSettings.parse(trials="auto", max_trials=9)
    assert adaptive.trials is None
    assert adaptive.adaptive is not None and adaptive.adaptive.max_trials == 9


def test_parse_names_the_option_as_the_caller_spells_it(tmp_path: Path) -> None:
    names = {"trials": "--trialkit-trials", "cache": "--trialkit-cache"}
    with pytest.raises(SettingsError, match=r"^--trialkit-trials: expected a whole number"):
        RunSettings.parse(trials="many", option_names=names)
    with pytest.raises(SettingsError, match=r"^--min-pass-rate: must be between 0 and 1"):
        RunSettings.parse(min_pass_rate="120%")
    with pytest.raises(SettingsError, match=r"^--fail-on-error: expected a whole count"):
        RunSettings.parse(fail_on_error="1.5")
    with pytest.raises(SettingsError, match=r"--cache-mode replay needs --trialkit-cache DIR"):
        RunSettings.parse(cache_mode="replay", option_names=names)
    with pytest.raises(SettingsError, match=r"^--cache-mode: expected one of live, record"):
        RunSettings.parse(cache="x", cache_mode="sometimes")
    with pytest.raises(SettingsError, match=r"^--max-trials goes with --trials auto"):
        RunSettings.parse(trials="3", max_trials=5)
    missing = tmp_path / "nowhere"
    with pytest.raises(SettingsError, match="no such folder to replay from"):
        RunSettings.parse(cache=str(missing), cache_mode="replay")


def test_parse_makes_the_cassette(tmp_path: Path) -> None:
    assert RunSettings.parse().cassette is None
    assert RunSettings.parse(cache=str(tmp_path), cache_mode="live").cassette is None
    cassette = RunSettings.parse(cache=str(tmp_path)).cassette
    assert cassette is not None and cassette.mode is CacheMode.AUTO


def test_values_are_checked_however_the_settings_are_made() -> None:
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        RunSettings(concurrency=0)
    with pytest.raises(ValueError, match="min_pass_rate must be between 0 and 1"):
        RunSettings(min_pass_rate=2)
    with pytest.raises(ValueError, match="either trials or adaptive"):
        RunSettings.parse(trials="auto").replace(trials=3)


def test_the_runner_takes_settings_or_their_fields() -> None:
    settings = RunSettings(trials=2, task_ids=("a",))
    report = anyio.run(Runner(settings).run, suite())
    assert [(t.id, t.trials) for t in report.tasks] == [("a", 2)]
    # fields given beside the settings win, as flags win over a config file
    report = anyio.run(Runner(settings, trials=1).run, suite())
    assert report.summary.trials == 1


def test_an_exact_task_id_selects_even_when_it_looks_like_a_glob() -> None:
    report = run_sync(suite(), task_ids=["b[1]"])
    assert [t.id for t in report.tasks] == ["b[1]"]


def test_run_sync_inside_an_async_test() -> None:
    async def main() -> tuple[int, str]:
        report = run_sync(suite(), trials=2)
        return report.summary.trials, threading.current_thread().name

    trials, thread = anyio.run(main)
    assert trials == 4
    assert thread == "MainThread"  # the caller's loop went on in its own thread


def test_run_sync_from_a_jupyter_style_cell() -> None:
    """A notebook runs each cell's code from inside the kernel's running loop."""
    loop = asyncio.new_event_loop()
    try:
        ticks: list[int] = []

        async def cell() -> int:
            loop.call_soon(ticks.append, 1)  # the kernel's own work, after the cell
            return run_sync(suite()).summary.passed_tasks

        assert loop.run_until_complete(cell()) == 2
        loop.run_until_complete(asyncio.sleep(0))
        assert ticks == [1]
    finally:
        loop.close()


def test_trialkit_run_inside_a_running_loop(tmp_path: Path) -> None:
    path = tmp_path / "evals.py"
    path.write_text(SUITE_PY)
    store = tmp_path / "store.db"

    async def main() -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["run", str(path), "--store", str(store), "--no-progress"])
        return result.exit_code, result.output

    code, output = anyio.run(main)
    assert code == 0, output
    assert "1/1 tasks passed" in output
