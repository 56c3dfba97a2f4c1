"""Broken suite files: every problem is reported at once, as `file:line: field: message`."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialkit.loaders.errors import Problem, SuiteFileError
from trialkit.loaders.suite_file import load_suite_file, load_suite_model, validate_suite_file
from trialkit.task import SuiteError

from ._files import problems_of, write

GRADER_LIST = (
    "graders: contains, not_contains, matches, equals, valid_json, agent_failed, all_of, "
    "any_of, weighted, predicate, starts_with, contains_any, contains_all, fuzzy_match, "
    "levenshtein, tool_called, tool_not_called, tool_order, max_tool_calls, max_turns, "
    "no_tool_errors, file_exists, file_absent, file_contains, file_json, only_changed, "
    "unchanged, python, judge, human"
)


def test_every_problem_of_a_folder_at_once(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: broken
            trails: 3
            kind: regresion
            graders:
              - contain: paris
            tasks:
              - id: a
                input: hi
                graders:
                  - matches: "(unclosed"
              - id: b
                input: 5
            dataset:
              path: data/rows.jsonl
              input: "Capital of {{country}}?"
              graders: [{contains: "{{capitl}}"}]
            """,
            "tasks/a.yaml": "id: a\ninput: again\n",
            "tasks/c.yaml": "id: c\ninput: x\ngraders:\n  - equals: {expected: x, strp: true}\n",
            "data/rows.jsonl": '{"country": "France", "capital": "Paris"}\n{"country": \n[1]\n',
        },
    )
    assert problems_of(tmp_path) == [
        "data/rows.jsonl:1: dataset.graders[0].contains: no field 'capitl' in row 1 "
        "(its fields: country, capital)",
        "data/rows.jsonl:2: not valid JSON: Expecting value (column 13)",
        "data/rows.jsonl:3: expected a JSON object, got a list",
        "suite.yaml:2: trails: unknown field; did you mean 'trials'?",
        "suite.yaml:3: kind: Input should be 'capability', 'regression' or 'mixed', "
        "got a string 'regresion'",
        f"suite.yaml:5: graders[0]: unknown grader 'contain'; did you mean 'contains'? "
        f"({GRADER_LIST})",
        "suite.yaml:10: tasks[0].graders[0].matches: invalid regular expression: "
        "missing ), unterminated subpattern at position 0",
        "suite.yaml:12: tasks[1].input: expected a string or a list of chat messages "
        "({role, content})",
        f"tasks/a.yaml:1: id: duplicate task id 'a' (first in {tmp_path}/suite.yaml:7)",
        "tasks/c.yaml:4: graders[0].equals.strp: unknown field; did you mean 'strip'?",
    ]


def test_tasks_are_still_checked_when_suite_fields_are_bad(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            trials: many
            tasks:
              - id: a
                input: x
                graders: [{judge: {rubric: Right?, model: nope/x}}, {python: "checks:missing"}]
            """,
            "checks.py": "x = 1\n",
        },
    )
    assert problems_of(tmp_path) == [
        "suite.yaml:1: id: required field is missing",
        "suite.yaml:1: trials: Input should be a valid integer, got a string 'many'",
        "suite.yaml:5: tasks[0].graders[0].judge: model 'nope/x': unknown provider 'nope' "
        "(known: openai, anthropic, local, scripted)",
        "suite.yaml:5: tasks[0].graders[1].python: checks:missing: checks has no attribute "
        "'missing'",
    ]


def test_the_error_is_a_suite_error_listing_problems(tmp_path: Path) -> None:
    write(tmp_path, {"suite.yaml": "id: x\ntrials: 0\ncolour: red\ntasks: [{id: t, input: x}]\n"})
    with pytest.raises(SuiteFileError) as info:
        load_suite_file(tmp_path)
    assert isinstance(info.value, SuiteError)
    file = str(tmp_path / "suite.yaml")
    assert info.value.problems == [
        Problem(file, 2, "trials", "Input should be greater than or equal to 1, got a number 0"),
        Problem(file, 3, "colour", "unknown field"),
    ]
    assert str(info.value) == "\n".join(str(p) for p in info.value.problems)
    assert validate_suite_file(tmp_path) == info.value.problems
    with pytest.raises(SuiteFileError):
        load_suite_model(tmp_path)


def test_json_files_name_lines_too(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.json": (
                '{\n  "id": "j",\n  "model": "scripted/x",\n  "tasks": [\n'
                '    {"id": "a", "input": "x",\n     "grader": []}\n  ],\n  "timeout": -1\n}\n'
            )
        },
    )
    assert problems_of(tmp_path) == [
        "suite.json:6: tasks[0].grader: unknown field; did you mean 'graders'?",
        "suite.json:8: timeout: Input should be greater than 0, got a number -1",
    ]


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"suite.json": '{\n  "id": "j",\n  "tasks": [\n}\n'},
            ["suite.json:4: not valid JSON: Expecting value (column 1)"],
        ),
        (
            {"suite.yaml": "id: y\ntasks:\n  - id: a\n    input: [unclosed\n"},
            [
                "suite.yaml:5: not valid YAML: while parsing a flow sequence "
                "did not find expected ',' or ']'"
            ],
        ),
        (
            {
                "suite.yaml": "id: y\nmodel: scripted/x\ntasks: [{id: a, input: x}]\n"
                "tasks: [{id: b, input: y}]\n",
                "tasks/t.json": '{"id": "c", "input": "x",\n "input": "y"}',
            },
            [
                "suite.yaml:4: tasks: duplicate key (first on line 3)",
                "tasks/t.json:2: input: duplicate key (first on line 1)",
            ],
        ),
        (
            {"suite.yaml": ""},
            ["suite.yaml: the file is empty: a suite file is a mapping of suite fields"],
        ),
        (
            {"suite.yaml": "- a\n- b\n"},
            ["suite.yaml:1: expected a mapping of suite fields, got a list"],
        ),
        (
            {"suite.yaml": "id: 2024-01-01\nmodel: scripted/x\ntasks: [{id: a, input: x}]\n"},
            [
                "suite.yaml:1: id: Input should be a valid string, "
                "got a date (quote it to make it text)"
            ],
        ),
        (
            {"suite.yaml": "id: a\nmetadata: &m {self: *m}\n"},
            ["suite.yaml:2: not valid YAML: an alias refers to the value that holds it"],
        ),
        (
            {
                "suite.yaml": "id: a\ntimeout: .nan\nmodel: scripted/x\n"
                "tasks: [{id: a, input: x, metadata: {x: .inf}}]\n",
                "tasks/b.json": '{"id": "b", "input": "x", "trials": NaN}',
            },
            [
                "suite.yaml:2: timeout: Input should be a finite number, got a number nan",
                "suite.yaml:4: tasks[0].metadata.x: Input should be a finite number, "
                "got a number inf",
                "tasks/b.json: not valid JSON: NaN is not a JSON number",
            ],
        ),
    ],
    ids=["json-syntax", "yaml-syntax", "duplicate-keys", "empty", "list", "date", "cycle", "nan"],
)
def test_unreadable_files(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    write(tmp_path, files)
    assert problems_of(tmp_path) == expected


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_bytes(b"id: a\nx: \xff\n")
    assert problems_of(tmp_path) == ["suite.yaml:2: not UTF-8 text: invalid start byte"]


def test_task_shapes(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: i
            tasks:
              - {id: a, input: x, turns: [y]}
              - {id: b}
              - {id: 'c/d', input: x}
              - 3
              - {id: e, input: [{role: robot, content: x}]}
            """
        },
    )
    assert problems_of(tmp_path) == [
        "suite.yaml:3: tasks[0]: give the task either `input` or `turns`",
        "suite.yaml:4: tasks[1]: give the task either `input` or `turns`",
        "suite.yaml:5: tasks[2].id: must not contain '/', '#' or control characters",
        "suite.yaml:6: tasks[3]: expected a mapping of task fields, got a number 3",
        "suite.yaml:7: tasks[4].input[0].role: Input should be 'system', 'user' or "
        "'assistant', got a string 'robot'",
    ]


def test_python_references(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: r
            harness: {python: agent:missing}
            environment: {python: "nomodule:Env"}
            tasks:
              - id: a
                input: x
                graders:
                  - python: broken:g
                  - python: checks:number
                  - python: {ref: checks:factory, args: {n: 1}}
                  - valid_json: {where: "checks:number"}
                  - predicate: {description: d, fn: "checks:number"}
              - id: b
                input: x
                graders:
                  - predicate: {description: d, fn: "bad ref"}
            """,
            "agent.py": "x = 1\n",
            "broken.py": "raise RuntimeError('boom')\n",
            "checks.py": "number = 3\ndef factory(n):\n    raise ValueError('no')\n",
        },
    )
    assert problems_of(tmp_path) == [
        "suite.yaml:2: harness.python: agent:missing: agent has no attribute 'missing'",
        f"suite.yaml:3: environment.python: nomodule: no such module (looked in {tmp_path} "
        "and on sys.path)",
        f"suite.yaml:8: tasks[0].graders[0].python: {tmp_path}/broken.py:1: import failed: "
        "RuntimeError: boom",
        "suite.yaml:9: tasks[0].graders[1].python: checks:number is a number 3, not a grader "
        "(a trialkit Grader or a function of the GradeContext)",
        "suite.yaml:10: tasks[0].graders[2].python: checks:factory: calling it raised "
        "ValueError: no",
        "suite.yaml:11: tasks[0].graders[3].valid_json.where: checks:number is a number 3",
        "suite.yaml:12: tasks[0].graders[4].predicate.fn: checks:number is a number 3, "
        "not a function",
        "suite.yaml:16: tasks[1].graders[0].predicate.fn: expected a Python reference "
        "module:name (e.g. my_graders:polite), got 'bad ref'",
    ]


def test_command_harness_and_workspace_problems(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: n
            harness: {command: [my-agent, "{mcp_url}"], env: {A: b}, tools: [nowhere:fn]}
            environment: {workspace: fixtures/repo}
            tasks:
              - id: a
                input: x
                graders: [{judge: {rubric: Names Paris., pass_at: 0.7}}]
            """
        },
    )
    problems = problems_of(tmp_path)
    assert problems[0].startswith("suite.yaml:2: harness.tools[0]: ")
    assert "nowhere" in problems[0]
    assert problems[1:] == [
        f"suite.yaml:3: environment.workspace: no such folder: {tmp_path}/fixtures/repo",
    ]  # judges are in this version: the judge grader is no problem
    (tmp_path / "fixtures" / "repo").mkdir(parents=True)
    assert all("environment" not in p for p in problems_of(tmp_path))


def test_models_kinds_and_an_empty_suite(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "mixed/suite.yaml": """
            id: m
            kind: mixed
            model: nope/x
            tasks:
              - {id: a, input: x}
              - {id: b, kind: regression, input: x, model: bad}
            """,
            "empty/suite.yaml": "id: e\nmodel: scripted/x\n",
        },
    )
    assert problems_of(tmp_path / "mixed") == [
        "suite.yaml:3: model: model 'nope/x': unknown provider 'nope' "
        "(known: openai, anthropic, local, scripted)",
        "suite.yaml:5: tasks[0].kind: a task in a mixed suite needs its own kind "
        "(capability or regression)",
        "suite.yaml:6: tasks[1].model: model 'bad': expected provider/name, e.g. "
        "openai/gpt-4o-mini (providers: openai, anthropic, local, scripted)",
    ]
    assert problems_of(tmp_path / "empty") == [
        "suite.yaml:1: the suite has no tasks: add `tasks:`, files in tasks/, or a `dataset:`"
    ]


def test_folders_and_task_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "none/other.txt": "x",
            "two/suite.yaml": "id: a\n",
            "two/suite.json": "{}",
            "tasks/suite.yaml": "id: a\nmodel: scripted/x\ntasks: [{id: a, input: x}]\n",
            "tasks/tasks/readme.md": "hi",
            "tasks/tasks/b.yaml": "- not a mapping\n",
            "tasks/tasks/c.yaml": "id: [\n",
        },
    )
    assert [str(p) for p in validate_suite_file(tmp_path / "none")] == [
        f"{tmp_path}/none: no suite file here (suite.yaml, suite.yml, suite.json)"
    ]
    assert [str(p) for p in validate_suite_file(tmp_path / "two")] == [
        f"{tmp_path}/two: suite.yaml and suite.json: keep one suite file"
    ]
    assert [str(p) for p in validate_suite_file(tmp_path / "absent")] == [
        f"{tmp_path}/absent: no such file or folder"
    ]
    assert problems_of(tmp_path / "tasks") == [
        "tasks/b.yaml:1: expected a mapping of task fields, got a list",
        "tasks/c.yaml:2: not valid YAML: while parsing a flow node did not find expected node "
        "content",
        "tasks/readme.md: not a task file (tasks/ holds .yaml, .yml or .json)",
    ]


def test_data_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: d
            model: scripted/x
            dataset:
              - path: none.jsonl
              - path: empty.csv
              - path: data.txt
              - path: header.csv
              - path: bad.json
              - path: ok.jsonl
                input: '{{m}}'
              - path: short.csv
              - path: fields.csv
                input: "{{q}} {{nope}}"
            """,
            "empty.csv": "",
            "data.txt": "x",
            "header.csv": "a,b\n",
            "bad.json": '[\n  {"input": "x"},\n  3\n]',
            "ok.jsonl": '{"m": {"a": 1}}\n',
            "short.csv": "input,a,a\nx,1\n",
            "fields.csv": 'q,a\nx,1\n\n"multi\nline",2\n',
        },
    )
    assert problems_of(tmp_path) == [
        "bad.json:3: [1]: expected an object, got a number 3",
        "data.txt: unknown data format '.txt' (known: .jsonl, .ndjson, .csv, .json)",
        "empty.csv:1: no header row (the first line names the columns)",
        "fields.csv:2: dataset[7].input: no field 'nope' in row 1 (its fields: q, a)",
        "fields.csv:4: dataset[7].input: no field 'nope' in row 2 (its fields: q, a)",
        "ok.jsonl:1: dataset[5].input: expected a string or a list of chat messages "
        "({role, content})",
        "short.csv:1: duplicate column 'a'",
        f"suite.yaml:4: dataset[0].path: no such file: {tmp_path}/none.jsonl",
        f"suite.yaml:7: dataset[3].path: {tmp_path}/header.csv has no rows",
    ]


def test_csv_rows_of_the_wrong_length(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": "id: c\nmodel: scripted/x\ndataset: {path: d.csv}\n",
            "d.csv": "input,a\nx,1\ny,2,3\nz\n",
        },
    )
    assert problems_of(tmp_path) == [
        "d.csv:3: row 2 has 3 fields; the header has 2",
        "d.csv:4: row 3 has 1 fields; the header has 2",
    ]


def test_duplicate_ids_between_tasks_and_rows(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: d
            model: scripted/x
            tasks: [{id: rows-2, input: x}]
            dataset: {path: rows.jsonl}
            """,
            "rows.jsonl": '{"input": "a"}\n{"input": "b"}\n',
            "tasks/one.yaml": "id: same\ninput: x\n",
            "tasks/two.yaml": "id: same\ninput: y\n",
        },
    )
    assert problems_of(tmp_path) == [
        f"rows.jsonl:2: dataset.id: duplicate task id 'rows-2' (first in {tmp_path}/suite.yaml:3)",
        f"tasks/two.yaml:1: id: duplicate task id 'same' (first in {tmp_path}/tasks/one.yaml:1)",
    ]


def test_a_human_grader_with_a_misspelt_field_or_a_blank_name(tmp_path: Path) -> None:
    suite = "id: r\nmodel: scripted/x\ntasks: [{id: t, input: x, graders: [{human: %s}]}]\n"
    write(tmp_path, {"suite.yaml": suite % "{instruction: Polite?}"})
    assert problems_of(tmp_path) == [
        "suite.yaml:3: tasks[0].graders[0].human.instruction: unknown field; "
        "did you mean 'instructions'?"
    ]
    write(tmp_path, {"suite.yaml": suite % '{name: " "}'})
    assert problems_of(tmp_path) == [
        "suite.yaml:3: tasks[0].graders[0].human: human: name must be a non-empty string"
    ]


def test_a_harness_that_is_no_mapping_lists_the_harnesses(tmp_path: Path) -> None:
    write(tmp_path, {"suite.yaml": "id: s\nharness: 3\ntasks: [{id: a, input: x}]\n"})

    (problem,) = problems_of(tmp_path)

    assert "(harnesses: python, " in problem
    assert "harnesss" not in problem
