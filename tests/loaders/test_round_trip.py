"""Round trips: load → save → load gives the same file model, and the same suite."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trialkit import Suite
from trialkit.graders import as_grader
from trialkit.loaders.suite_file import (
    SuiteFile,
    dump_suite_model,
    load_suite_file,
    load_suite_model,
    save_suite,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "suites"


@pytest.mark.parametrize("name", ["capitals", "echo-json"])
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_examples_round_trip(name: str, suffix: str, tmp_path: Path) -> None:
    model = load_suite_model(EXAMPLES / name)
    copy = tmp_path / name
    shutil.copytree(EXAMPLES / name, copy)
    for old in (copy / "suite.yaml", copy / "suite.json"):
        old.unlink(missing_ok=True)
    shutil.rmtree(copy / "tasks")  # the saved suite holds every task inline
    saved = save_suite(model, copy / f"suite{suffix}")
    again = load_suite_model(copy)
    assert again == model
    assert dump_suite_model(again) == dump_suite_model(model)
    before, after = load_suite_file(EXAMPLES / name), load_suite_file(saved)
    assert [t.id for t in after.tasks] == [t.id for t in before.tasks]
    assert _grader_names(after) == _grader_names(before)


def _grader_names(suite: Suite) -> list[list[str]]:
    return [[as_grader(g).name for g in t.graders] for t in suite.tasks]


def test_short_forms_are_written_back_short() -> None:
    model = SuiteFile.model_validate(
        {
            "id": "s",
            "graders": [
                {"contains": {"text": "a"}},
                {"contains": {"text": "a", "case_sensitive": True}},
                {"valid_json": None},
                {"agent_failed": {"message": "no"}},
                {"python": {"ref": "m:f"}},
                {"human": {"instructions": "Polite?"}},
                {"human": {"name": "tone", "instructions": "Polite?"}},
                {"human": None},
            ],
            "dataset": {"path": "d.csv"},
        }
    )
    assert dump_suite_model(model) == (
        "id: s\n"
        "graders:\n"
        "- contains: a\n"
        "- contains:\n"
        "    text: a\n"
        "    case_sensitive: true\n"
        "- valid_json: {}\n"
        "- agent_failed: 'no'\n"
        "- python: m:f\n"
        "- human: Polite?\n"
        "- human:\n"
        "    name: tone\n"
        "    instructions: Polite?\n"
        "- human: {}\n"
        "dataset:\n"
        "- path: d.csv\n"
    )


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_ids = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_leaf_graders = st.one_of(
    st.builds(lambda t: {"contains": t}, _text),
    st.builds(
        lambda t, c: {"not_contains": {"text": t, "case_sensitive": c}}, _text, st.booleans()
    ),
    st.builds(lambda t: {"equals": t}, _text),
    st.builds(
        lambda p: {"matches": {"pattern": p, "ignore_case": True}},
        st.sampled_from(["a+", r"\d", "^x$"]),
    ),
    st.builds(lambda m: {"agent_failed": m}, st.none() | _text),
    st.just({"valid_json": {"schema": {"type": "object"}}}),
    st.just({"python": {"ref": "checks:polite", "args": {"n": 1}}}),
    st.builds(lambda i: {"human": i}, st.none() | _text),
)
_graders = st.recursive(
    _leaf_graders,
    lambda inner: (
        st.builds(lambda gs: {"all_of": gs}, st.lists(inner, min_size=1, max_size=2))
        | st.builds(
            lambda gs, p: {
                "weighted": {"pass_at": p, "graders": [{"grader": g, "weight": 2} for g in gs]}
            },
            st.lists(inner, min_size=1, max_size=2),
            st.floats(0, 1),
        )
    ),
    max_leaves=4,
)
_messages = st.lists(
    st.builds(
        lambda r, c: {"role": r, "content": c},
        st.sampled_from(["system", "user", "assistant"]),
        _text,
    ),
    min_size=1,
    max_size=3,
)
_tasks = st.builds(
    lambda i, inp, gs, meta, tags, trials: {
        "id": i,
        "input": inp,
        "graders": gs,
        "metadata": meta,
        "tags": tags,
        **({"trials": trials} if trials else {}),
    },
    _ids,
    _text | _messages,
    st.lists(_graders, max_size=3),
    st.dictionaries(_text, _json, max_size=3),
    st.lists(_text, max_size=2),
    st.none() | st.integers(1, 10),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tasks=st.lists(_tasks, max_size=4),
    graders=st.lists(_graders, max_size=2),
    kind=st.sampled_from(["capability", "regression"]),
    description=st.none() | _text,
    fmt=st.sampled_from(["yaml", "json"]),
)
def test_generated_models_round_trip(
    tasks: list[dict[str, Any]],
    graders: list[dict[str, Any]],
    kind: str,
    description: str | None,
    fmt: str,
) -> None:
    import json

    import yaml

    model = SuiteFile.model_validate(
        {
            "id": "generated",
            "kind": kind,
            "description": description,
            "tasks": tasks,
            "graders": graders,
        }
    )
    text = dump_suite_model(model, "json" if fmt == "json" else "yaml")
    data = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    assert SuiteFile.model_validate(data) == model
