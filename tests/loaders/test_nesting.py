"""Deeply nested and self-referential files: a problem naming the file (and the line when it
is known), never a `RecursionError`; and a file whose shape is looked at is parsed once."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialkit.loaders.errors import SuiteFileError
from trialkit.loaders.importers import ImportFailed
from trialkit.loaders.suite_file import documents
from trialkit.loaders.target import load_target
from trialkit.task import SuiteError

HEAD = "id: deep\nmodel: scripted/x\ntasks:\n- id: a\n  input: hi\n  metadata:\n"


def _block_yaml(depth: int) -> str:
    nested = "".join("  " * (i + 2) + f"k{i}:\n" for i in range(depth))
    return HEAD + nested + "  " * (depth + 2) + "v\n"


CASES = {
    "flow.yaml": HEAD.replace("metadata:\n", "metadata: ") + "[" * 500 + "]" * 500 + "\n",
    "block.yaml": _block_yaml(500),
    "deep.json": '{"id": "deep", "model": "scripted/x", "tasks": [{"id": "a", "input": "hi", '
    '"metadata": {"k": ' + "[" * 1000 + "]" * 1000 + "}}]}",
    "deeper.json": '{"id": "deep", "tasks": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "medium.json": '{"id": "deep", "tasks": [{"id": "a", "input": "hi", "metadata": '
    + "[" * 150
    + "]" * 150
    + "}]}",
    "promptfooconfig.yaml": "prompts: [q]\ntests:\n- vars: {x: " + "[" * 500 + "]" * 500 + "}\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_deep_nesting_is_a_problem_not_a_crash(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(CASES[name], encoding="utf-8")
    with pytest.raises(SuiteError) as caught:
        load_target(str(path))
    message = str(caught.value)
    assert str(path) in message
    assert "nested" in message or "nesting" in message
    assert "Recursion" not in message


def test_deep_nesting_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(_block_yaml(150), encoding="utf-8")
    with pytest.raises(SuiteFileError) as caught:
        load_target(str(path))
    [problem] = caught.value.problems
    assert problem.line is not None and problem.line > 6
    assert f"nested more than {documents.MAX_DEPTH} levels deep" in problem.message


def test_nesting_under_the_limit_loads(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(_block_yaml(60), encoding="utf-8")
    assert [t.id for t in load_target(str(path)).tasks] == ["a"]


@pytest.mark.parametrize(
    "body",
    [
        "prompts: ['Q {{x}}']\ntests:\n  - vars: &v {x: [*v]}\n",
        "prompts: &p [a, *p]\ntests: [{vars: {x: 1}}]\n",
        "prompts: [Q]\ntests: [{vars: {x: 1}, metadata: &m {a: *m}}]\n",
        "prompts: [Q]\ndefaultTest: &d {vars: {a: *d}}\ntests: [{vars: {x: 1}}]\n",
    ],
)
@pytest.mark.parametrize("name", ["promptfooconfig.yaml", "config.yaml"])
def test_self_referential_promptfoo_aliases(tmp_path: Path, body: str, name: str) -> None:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    for target in (str(path), f"promptfoo:{path}"):
        with pytest.raises(SuiteError) as caught:
            load_target(target, model="scripted/x")
        assert isinstance(caught.value, SuiteFileError | ImportFailed)
        assert "an alias refers to the value that holds it" in str(caught.value)
        assert f"{path}:" in str(caught.value)


def test_a_suite_file_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Format detection parses the file and the suite loader takes that parse."""
    path = tmp_path / "big.yaml"
    tasks = "".join(f"- {{id: t{i}, input: q{i}}}\n" for i in range(50))
    path.write_text(f"id: big\nmodel: scripted/x\ntasks:\n{tasks}", encoding="utf-8")
    calls: list[str] = []
    parse = documents._parse_yaml

    def counting(text: str, file: str) -> tuple[documents.Document | None, list[object]]:
        calls.append(file)
        return parse(text, file)  # type: ignore[return-value]

    monkeypatch.setattr(documents, "_parse_yaml", counting)
    assert len(load_target(str(path)).tasks) == 50
    assert calls == [str(path)]
    path.write_text("id: changed\nmodel: scripted/x\ntasks: [{id: a, input: b}]\n")
    assert load_target(str(path)).id == "changed"  # a changed file is read again


def test_the_c_parser_is_used_when_present() -> None:
    yaml = pytest.importorskip("yaml")
    if not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML without libyaml")
    assert documents._Loader is yaml.CSafeLoader


DEEP = "[" * 5000 + "]" * 5000
MEDIUM = "[" * 150 + "]" * 150


@pytest.mark.parametrize(
    ("target", "text"),
    [
        ("evals:s.jsonl", '{"input": "x", "ideal": "y"}\n{"input": "x", "ideal": ' + DEEP + "}\n"),
        ("s.jsonl", '{"input": "x", "ideal": "y"}\n{"input": "x", "ideal": ' + MEDIUM + "}\n"),
        ("inspect:s.jsonl", '{"input": "x", "target": "y"}\n{"input": ' + DEEP + "}\n"),
        ("s.jsonl", '{"input": "x", "target": "y", "metadata": "' + MEDIUM + '"}\n'),
        ("inspect:s.json", '[{"input": "x", "target": "y"}, {"input": ' + DEEP + "}]"),
    ],
)
def test_deep_json_in_imported_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, text: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / target.rpartition(":")[2]).write_text(text, encoding="utf-8")
    with pytest.raises(SuiteError) as caught:
        load_target(target, model="scripted/x")
    assert "nested" in str(caught.value)
    assert "Recursion" not in str(caught.value)
