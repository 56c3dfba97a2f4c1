"""Fuzzing the loaders: random and mutated YAML, JSON, JSONL and CSV files give a suite with
every declared task, or a `SuiteFileError` whose problems name a file and say something — never
another exception, never a silently dropped task."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trialkit.loaders.errors import SuiteFileError
from trialkit.loaders.suite_file import GRADERS, load_suite_file
from trialkit.loaders.suite_file.models import SuiteFile, TaskFile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "suites"
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

VOCAB = sorted(
    {*SuiteFile.model_fields, *TaskFile.model_fields, *GRADERS}
    | {"path", "text", "pattern", "role", "content", "ref", "args", "weight", "grader", "$schema"}
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for every example of a test (a fresh one per example would grow sys.path)."""
    return tmp_path_factory.mktemp("fuzz")


def _reset(folder: Path, files: dict[str, str | bytes]) -> None:
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")


def _check(folder: Path, declared: int | None) -> None:
    """Loading gives every declared task or well-formed problems; anything else fails."""
    try:
        suite = load_suite_file(folder)
    except SuiteFileError as exc:
        problems = exc.problems
        assert problems
        for problem in problems:
            assert problem.file and problem.message
            assert problem.line is None or problem.line >= 1
            assert str(problem).startswith(problem.file)
        event("refused")
        return
    event("loaded")
    if declared is not None:
        assert len(suite.tasks) == declared


def _rows(path: Path) -> int:
    """An independent count of a data file's rows (only called when it loaded)."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix == ".csv":
        return sum(1 for record in csv.reader(io.StringIO(text, newline="")) if record) - 1
    if path.suffix == ".json":
        return len(json.loads(text))
    return sum(1 for line in text.split("\n") if line.strip())


def _declared(folder: Path, suite_name: str) -> int | None:
    """How many tasks the folder declares, read without the loader."""
    text = (folder / suite_name).read_text(encoding="utf-8-sig")
    try:
        raw = json.loads(text) if suite_name.endswith(".json") else yaml.safe_load(text)
    except Exception:
        return None  # the loader must refuse it; `_check` sees that or fails
    if not isinstance(raw, dict):
        return None
    tasks = raw.get("tasks")
    count = len(tasks) if isinstance(tasks, list) else 0
    tasks_dir = folder / "tasks"
    if tasks_dir.is_dir():
        count += sum(1 for p in tasks_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    blocks = raw.get("dataset")
    blocks = [blocks] if isinstance(blocks, dict) else blocks if isinstance(blocks, list) else []
    for block in blocks:
        path = block.get("path") if isinstance(block, dict) else None
        if not isinstance(path, str) or not (folder / path).is_file():
            return None
        try:
            count += _rows(folder / path)
        except Exception:
            return None
    return count


_text = st.text(max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 5)
    | st.floats()
    | _text
    | st.sampled_from(
        ["scripted/x", "agent:answer", "{{input}}", "{{missing}}", "(", "a+", "capability", "mixed"]
    )
)
_keys = st.sampled_from(VOCAB) | _text
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=15,
)
_graders = st.lists(
    st.dictionaries(st.sampled_from(sorted(GRADERS)), _values, min_size=1, max_size=2), max_size=3
)
_tasks = st.lists(
    st.fixed_dictionaries(
        {"id": st.sampled_from(["a", "b", "c/d", ""]) | _text},
        optional={"input": _values, "graders": _graders, "turns": _values, "kind": _scalars},
    )
    | _values,
    max_size=4,
)
_documents = (
    st.fixed_dictionaries(
        {"id": _scalars},
        optional={
            "model": _scalars,
            "kind": _scalars,
            "trials": _scalars,
            "tasks": _tasks,
            "graders": _graders,
            "dataset": st.fixed_dictionaries(
                {"path": st.just("data.jsonl")}, optional={"input": _values}
            )
            | _values,
            "harness": _values,
            "environment": _values,
        },
    )
    | _values
)
_good_graders = st.sampled_from(
    [{"contains": "x"}, {"matches": "a+"}, {"valid_json": None}, {"any_of": [{"equals": 1}]}]
)
_plausible_tasks = st.lists(
    st.fixed_dictionaries(
        {"input": _text},
        optional={
            "graders": st.lists(_good_graders, max_size=2),
            "tags": st.lists(_text, max_size=2),
            "metadata": st.dictionaries(_text, _values, max_size=2),
            "kind": st.sampled_from(["capability", "regression"]),
        },
    ),
    max_size=4,
).map(lambda tasks: [{"id": f"t{i}", **task} for i, task in enumerate(tasks)])
_plausible = st.fixed_dictionaries(
    {"id": st.just("plausible"), "model": st.just("scripted/x"), "tasks": _plausible_tasks},
    optional={
        "dataset": st.just({"path": "data.jsonl"}),
        "kind": st.sampled_from(["capability", "regression", "mixed"]),
        "graders": st.lists(_good_graders, max_size=2),
    },
)
"""Documents that are often valid, so the count of loaded tasks is checked too."""


@FUZZ
@given(
    document=_documents | _plausible,
    extra=st.dictionaries(_keys, _values, max_size=2),
    as_json=st.booleans(),
    rows=st.lists(
        st.dictionaries(st.sampled_from(["input", "x"]), _values, max_size=2)
        | st.builds(lambda text: {"input": text}, _text),
        max_size=3,
    ),
)
def test_random_documents(
    folder: Path, document: Any, extra: dict[str, Any], as_json: bool, rows: list[dict[str, Any]]
) -> None:
    if isinstance(document, dict):
        document = {**extra, **document}
    name = "suite.json" if as_json else "suite.yaml"
    text = json.dumps(document) if as_json else yaml.safe_dump(document, allow_unicode=True)
    data = "".join(json.dumps(row) + "\n" for row in rows)
    _reset(folder, {name: text, "data.jsonl": data})
    _check(folder, _declared(folder, name))


def _mutate(text: str, data: st.DataObject) -> str:
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        size = len(text)
        at = data.draw(st.integers(0, size), label="at")
        kind = data.draw(st.sampled_from(["delete", "insert", "replace", "line", "key"]))
        if kind == "delete":
            text = text[:at] + text[at + data.draw(st.integers(1, 8)) :]
        elif kind == "insert":
            text = (
                text[:at]
                + data.draw(
                    st.text(max_size=6) | st.sampled_from([":", "-", "{", "\n  ", '"', ","])
                )
                + text[at:]
            )
        elif kind == "replace":
            text = text[:at] + data.draw(st.text(min_size=1, max_size=4)) + text[at + 1 :]
        elif kind == "line":
            lines = text.split("\n")
            i = data.draw(st.integers(0, len(lines) - 1))
            if data.draw(st.booleans()):
                del lines[i]
            else:
                lines.insert(i, lines[i])
            text = "\n".join(lines)
        else:
            old, new = data.draw(st.sampled_from(VOCAB)), data.draw(st.sampled_from(VOCAB))
            text = text.replace(old, new, 1)
    return text


def _example_files(name: str) -> dict[str, str | bytes]:
    root = EXAMPLES / name
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


_MUTABLE = {
    "capitals": [
        "suite.yaml",
        "tasks/json-answer.yaml",
        "tasks/multi-turn.yaml",
        "data/countries.jsonl",
        "data/more.csv",
    ],
    "echo-json": ["suite.json", "tasks/messages.json", "tasks/turns.json", "data/phrases.json"],
}


@FUZZ
@given(data=st.data(), example=st.sampled_from(sorted(_MUTABLE)))
def test_mutated_examples(folder: Path, data: st.DataObject, example: str) -> None:
    files = _example_files(example)
    target = data.draw(st.sampled_from(_MUTABLE[example]), label="file")
    original = files[target]
    assert isinstance(original, bytes)
    files[target] = _mutate(original.decode("utf-8"), data)
    _reset(folder, files)
    _check(folder, _declared(folder, "suite.json" if example == "echo-json" else "suite.yaml"))


_cells = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8) | (
    st.sampled_from(['"', ",", "\n", '"a,b"', "{{x}}", ""])
)
_headers = st.lists(st.sampled_from(["input", "q", "a", "", " q"]), min_size=1, max_size=3)


@st.composite
def _csv_texts(draw: st.DrawFn) -> str:
    """Mostly well-formed CSV (a header, rows as long as it), sometimes any text at all."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.text(max_size=40))
    header = draw(_headers | _headers.map(lambda h: list(dict.fromkeys(["input", *h]))))
    size = max(0, len(header) + draw(st.sampled_from([0, 0, 0, 1, -1])))
    records = draw(st.lists(st.lists(_cells, min_size=size, max_size=size), max_size=5))
    buffer = io.StringIO()
    csv.writer(buffer).writerows([header, *records])
    return buffer.getvalue()


@FUZZ
@given(
    text=_csv_texts(),
    template=st.sampled_from(["{{input}}", "{{input}}", "{{q}} and {{a}}", "{{nope}}"]),
)
def test_random_csv_datasets(folder: Path, text: str, template: str) -> None:
    suite = f"id: csv\nmodel: scripted/x\ndataset: {{path: d.csv, input: '{template}'}}\n"
    _reset(folder, {"suite.yaml": suite, "d.csv": text})
    _check(folder, _declared(folder, "suite.yaml"))


@FUZZ
@given(
    lines=st.lists(
        st.one_of(
            st.builds(
                json.dumps, st.dictionaries(st.sampled_from(["input", "id"]), _values, max_size=2)
            ),
            st.builds(lambda text: json.dumps({"input": text}), _text),
            st.text(max_size=10),
            st.just(""),
        ),
        max_size=5,
    ),
    as_json=st.booleans(),
    ids=st.sampled_from(["", ", id: 'row-{{id}}'"]),
)
def test_random_jsonl_and_json_datasets(
    folder: Path, lines: list[str], as_json: bool, ids: str
) -> None:
    if as_json:
        name, text = "d.json", "[" + ",\n".join(lines) + "]"
    else:
        name, text = "d.jsonl", "\n".join(lines)
    suite = f"id: rows\nmodel: scripted/x\ndataset: {{path: {name}{ids}}}\n"
    _reset(folder, {"suite.yaml": suite, name: text})
    _check(folder, _declared(folder, "suite.yaml"))
