"""A run whose models or executor cannot work is refused before any trial: one line, exit 2,
nothing stored (DESIGN §6)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trialkit import Suite, SuiteError, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.models.registry import ModelUnavailable, preflight
from trialkit.store import Store

KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
KEYS += ("ANTHROPIC_BASE_URL",)
SUITE = "id: s\ntasks:\n  - {id: t, input: hi, graders: [{contains: hi}]}\n"


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)


def without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make `modules` look uninstalled: `import` fails and `find_spec` finds nothing."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name.partition(".")[0] in modules else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def run_cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    store = tmp_path / "store" / "t.db"
    result = CliRunner().invoke(
        cli, ["run", str(suite), "--store", str(store), "--no-progress", *args]
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("model", "names"),
    [
        ("openai/gpt-4o-mini", "set OPENAI_API_KEY"),
        ("anthropic/claude-sonnet-4-5", "set ANTHROPIC_API_KEY"),
        # Without the `local` extra (the tests' environment) it says so; with it, the file.
        ("local/no-such-weights.gguf", r"no such file|pip install 'trialkit\[local\]'"),
    ],
)
def test_a_model_that_cannot_work_is_one_line_and_stores_nothing(
    tmp_path: Path, model: str, names: str
) -> None:
    code, out, err = run_cli(tmp_path, "--model", model)

    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"error: suite 's': {model}: ")
    assert re.search(names, line)
    assert line.endswith("; nothing was run")
    assert not (tmp_path / "store").exists()  # not even an empty store


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    without(monkeypatch, "openai")

    code, _, err = run_cli(tmp_path, "--model", "openai/gpt-4o-mini")

    assert code == 2
    assert err == (
        "error: suite 's': openai/gpt-4o-mini: the OpenAI SDK is not installed; "
        "pip install 'trialkit[openai]'; nothing was run\n"
    )


def test_local_models_need_the_openai_sdk_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `local` extra once lacked it, and every trial errored after llama.cpp started."""
    real = importlib.util.find_spec
    server = {"llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context"}

    def find_spec(name: str, *args: Any) -> Any:
        if name in server:
            return object()  # as if llama.cpp's server were installed, with every extra
        return None if name == "openai" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(
        ModelUnavailable,
        match=r"^local/smollm2: local models talk to llama.cpp through the OpenAI SDK, which is "
        r"not installed; pip install 'trialkit\[local\]'$",
    ):
        preflight("local/smollm2")


def test_every_model_of_the_run_is_checked_judges_included(tmp_path: Path) -> None:
    suite = Suite(
        id="s",
        model="scripted/echo",
        tasks=[
            Task(id="a", input="x"),
            Task(id="b", input="x", graders=[graders.judge("Fine.", model="anthropic/judge")]),
        ],
    )
    store = Store(f"sqlite:///{tmp_path}/t.db")

    with pytest.raises(SuiteError, match=r"anthropic/judge: no API key"):
        run_sync(suite, store=store)
    assert store.list_runs() == []


def test_a_judge_without_a_model_is_checked_against_judge_model() -> None:
    suite = Suite(
        id="s",
        harness=lambda prompt: prompt,
        tasks=[Task(id="t", input="x", graders=[graders.majority(graders.judge("Fine."))])],
    )
    with pytest.raises(SuiteError, match=r"openai/j: no API key"):
        run_sync(suite, judge_model="openai/j")


def test_a_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    preflight("openai/gpt-4o-mini")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token")
    preflight("anthropic/claude-sonnet-4-5")


def test_a_replay_needs_no_key(tmp_path: Path) -> None:
    preflight("openai/gpt-4o-mini", replaying=True)
    with pytest.raises(ModelUnavailable, match="set OPENAI_API_KEY"):
        preflight("openai/gpt-4o-mini")


def test_auto_needs_the_model_until_the_cassette_holds_its_calls(tmp_path: Path) -> None:
    suite = Suite(id="s", model="openai/gpt-4o-mini", tasks=[Task(id="t", input="x")])
    cassette = Cassette(tmp_path / "cassette", CacheMode.AUTO)

    with pytest.raises(SuiteError, match="no API key"):
        run_sync(suite, cassette=cassette)

    recorded = cassette.path_for("openai/gpt-4o-mini", "ab" + "0" * 62)
    recorded.parent.mkdir(parents=True)
    recorded.write_text("{}", encoding="utf-8")
    other = Suite(id="s", model="openai/other", tasks=[Task(id="t", input="x")])
    with pytest.raises(SuiteError, match="openai/other: no API key"):
        run_sync(other, cassette=cassette)  # recordings of another model do not count
    from trialkit.run.preflight import replaying

    assert replaying(cassette, "openai/gpt-4o-mini")
    assert not replaying(Cassette(tmp_path / "cassette", CacheMode.RECORD), "openai/gpt-4o-mini")


def test_ray_not_installed_stores_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    without(monkeypatch, "ray")

    code, out, err = run_cli(tmp_path, "--model", "scripted/echo", "--executor", "ray")

    assert (code, out) == (2, "")
    assert err == (
        "error: --executor ray needs Ray, which is not installed: pip install 'trialkit[ray]'; "
        "nothing was run\n"
    )
    assert not (tmp_path / "store").exists()


def test_models_runs_are_all_checked_before_any_starts(tmp_path: Path) -> None:
    code, _, err = run_cli(tmp_path, "--models", "scripted/echo,openai/gpt-4o-mini")

    assert code == 2
    assert "openai/gpt-4o-mini: no API key" in err
    assert not (tmp_path / "store").exists()
