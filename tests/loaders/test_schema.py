"""The published JSON Schemas: current, valid, and in agreement with the loader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from trialkit.loaders import schema
from trialkit.loaders.suite_file import SuiteFile, TaskFile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "suites"
SUITE_FILES = sorted(p for p in EXAMPLES.glob("*/suite.*"))
TASK_FILES = sorted(p for p in EXAMPLES.glob("*/tasks/*.*"))


def _validator(name: str) -> jsonschema.Draft202012Validator:
    published = json.loads((schema.SCHEMA_DIR / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(published)
    return jsonschema.Draft202012Validator(published)


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def test_the_published_schemas_are_current() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trialkit.loaders.schema", "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert schema.SCHEMA_DIR == ROOT / "src" / "trialkit" / "schemas"


def test_check_names_stale_files(tmp_path: Path) -> None:
    assert sorted(p.name for p in schema.stale(tmp_path)) == [
        "suite.schema.json",
        "task.schema.json",
    ]
    schema.write(tmp_path)
    assert schema.stale(tmp_path) == []
    (tmp_path / "task.schema.json").write_text("{}", encoding="utf-8")
    assert schema.stale(tmp_path) == [tmp_path / "task.schema.json"]


@pytest.mark.parametrize("path", SUITE_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_suite_files_match_the_schema(path: Path) -> None:
    assert list(_validator("suite.schema.json").iter_errors(_read(path))) == []


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_task_files_match_the_schema(path: Path) -> None:
    assert list(_validator("task.schema.json").iter_errors(_read(path))) == []


@pytest.mark.parametrize("path", [*SUITE_FILES, *TASK_FILES], ids=lambda p: p.name)
def test_examples_point_editors_at_the_schema(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        reference = json.loads(text).get("$schema")
        if reference is None:
            return  # JSON task files may leave it out
    else:
        first = text.splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema=")
        reference = first.split("=", 1)[1]
    kind = "suite" if path.name.startswith("suite.") else "task"
    assert (path.parent / reference).resolve() == schema.SCHEMA_DIR / f"{kind}.schema.json"


EVERY_GRADER = {
    "id": "s",
    "graders": [
        {"contains": "x"},
        {"contains": 100},
        {"not_contains": {"text": "x", "case_sensitive": True}},
        {"matches": "a+"},
        {"equals": {"expected": "x", "strip": False}},
        {"valid_json": None},
        {"valid_json": {"schema": {"type": "object"}, "where": "m:f"}},
        {"agent_failed": "no"},
        {"agent_failed": {}},
        {"all_of": [{"contains": "a"}]},
        {"any_of": [{"contains": "a"}, {"equals": "b"}]},
        {"weighted": {"pass_at": 0.5, "graders": [{"grader": {"contains": "a"}, "weight": 2}]}},
        {"predicate": {"description": "d", "fn": "m:f"}},
        {"python": "m:f"},
        {"python": {"ref": "m:f", "args": {"n": 1}}},
        {"judge": {"rubric": "r"}},
        {"human": None},
        {"human": "Polite?"},
        {"human": {"name": "tone", "instructions": "Polite?"}},
    ],
    "harness": {"command": ["agent", "--json"], "env": {"A": "b"}},
    "environment": {"workspace": "fixtures/x"},
    "tasks": [
        {"id": "t", "turns": ["a", [{"role": "user", "content": "b"}]]},
        {
            "id": "u",
            "input": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        },
    ],
    "dataset": {"path": "d.csv", "input": "{{q}}"},
}


@pytest.mark.parametrize(
    ("document", "valid"),
    [
        (EVERY_GRADER, True),
        ({"id": "s", "dataset": [{"path": "a.jsonl"}, {"path": "b.csv"}]}, True),
        ({"id": "s", "colour": "red"}, False),
        ({"id": "s", "graders": [{"contain": "x"}]}, False),
        ({"id": "s", "graders": [{"contains": "x", "matches": "y"}]}, False),
        ({"id": "s", "tasks": [{"id": "t", "input": 3}]}, False),
        ({"id": "s", "trials": 0}, False),
        ({"id": "s", "harness": {"python": "m:f", "model": "x/y"}}, False),
    ],
)
def test_schema_and_models_agree(document: dict[str, Any], valid: bool) -> None:
    schema_ok = not list(_validator("suite.schema.json").iter_errors(document))
    try:
        SuiteFile.model_validate(document)
        model_ok = True
    except ValueError:
        model_ok = False
    assert (schema_ok, model_ok) == (valid, valid)


def test_task_schema_is_the_task_model() -> None:
    published = json.loads((schema.SCHEMA_DIR / "task.schema.json").read_text(encoding="utf-8"))
    assert published["title"] == "TaskFile"
    assert set(published["properties"]) == {
        field.alias or name for name, field in TaskFile.model_fields.items()
    }
