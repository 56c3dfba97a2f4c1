import json
from pathlib import Path

import pytest

from tests.importers._run import answering, recording, verdicts
from trialkit import SuiteError
from trialkit.loaders.importers import ImportFailed, load_openai_evals
from trialkit.models.base import ModelRequest

SYSTEM = {"role": "system", "content": "Answer concisely."}


def _write(path: Path, samples: list[object]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
    return path


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    return _write(
        tmp_path / "presidents.jsonl",
        [
            {
                "input": [SYSTEM, {"role": "user", "content": "First US president?"}],
                "ideal": "George Washington",
            },
            {"input": "Capital of France?", "ideal": ["Paris", "Lutetia"]},
            {"input": "2+2?", "ideal": "4"},
            {"input": "Largest planet?", "ideal": "Jupiter"},
        ],
    )


ANSWERS = {
    "First US president?": "  george washington.",
    "Capital of France?": "The capital is Paris",
    "2+2?": "4, of course",
    "Largest planet?": "Saturn",
}


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        # Match: starts with an ideal, case-sensitive, leading whitespace ignored
        ("match", ["fail", "fail", "pass", "fail"]),
        # Includes: contains an ideal, case-sensitive
        ("includes", ["fail", "pass", "pass", "fail"]),
        # FuzzyMatch: normalised, either contains the other
        ("fuzzy_match", ["pass", "pass", "pass", "fail"]),
    ],
)
def test_each_match_kind_end_to_end(samples: Path, match: str, expected: list[str]) -> None:
    suite = load_openai_evals(samples, match=match, model=answering(ANSWERS))  # type: ignore[arg-type]
    assert suite.id == "presidents"
    ids = ["presidents-1", "presidents-2", "presidents-3", "presidents-4"]
    assert verdicts(suite) == dict(zip(ids, expected, strict=True))


def test_tasks_keep_the_sample(samples: Path) -> None:
    suite = load_openai_evals(samples, id_prefix="us")
    first, second = suite.tasks[0], suite.tasks[1]
    assert (first.id, first.reference, first.metadata) == (
        "us-1",
        "George Washington",
        {"ideal": ["George Washington"], "line": 1},
    )
    assert second.metadata["ideal"] == ["Paris", "Lutetia"]
    assert suite.model is None and suite.kind == "capability"
    assert load_openai_evals(samples, id_prefix="").tasks[0].id == "1"


def test_chat_input_and_few_shot_examples_reach_the_model(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "few.jsonl",
        [
            {
                "input": [
                    SYSTEM,
                    {"role": "system", "name": "example_user", "content": "1+1?"},
                    {"role": "system", "name": "example_assistant", "content": "2"},
                    {"role": "user", "content": "2+3?"},
                ],
                "ideal": "5",
                "source": "arith",
            }
        ],
    )
    seen: list[ModelRequest] = []
    suite = load_openai_evals(path, model=recording(seen, "5"))
    assert suite.tasks[0].metadata["source"] == "arith"
    assert verdicts(suite) == {"few-1": "pass"}
    assert [(m.role, m.content) for m in seen[0].messages] == [
        ("system", "Answer concisely."),
        ("user", "1+1?"),
        ("assistant", "2"),
        ("user", "2+3?"),
    ]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join(
            [
                '{"input": "fine", "ideal": "x"}',
                '{"input": "no ideal"}',
                "{not json",
                '{"input": "q", "ideal": 4}',
                "[1, 2]",
                '{"ideal": "x"}',
                '{"input": [{"role": "robot", "content": "hi"}], "ideal": "x"}',
                '{"input": [{"role": "user", "name": "bob", "content": "hi"}], "ideal": "x"}',
                '{"input": "q", "ideal": [""]}',
                '{"input": "q", "ideal": ["a", null]}',
            ]
        ),
        encoding="utf-8",
    )
    with pytest.raises(ImportFailed) as info:
        load_openai_evals(path)
    error = info.value
    assert isinstance(error, SuiteError)  # the command line exits 2
    f = str(path)
    assert error.problems == [
        f"{f}:2: ideal: missing (the answer to grade against)",
        f"{f}:3: invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        f"{f}:4: ideal: expected a string or a list of strings, got a number",
        f"{f}:5: expected a JSON object, got a list",
        f"{f}:6: input: missing",
        f"{f}:7: input[0].role: expected one of system, user, assistant, got 'robot'",
        f"{f}:8: input[0].name: 'bob' is not supported (only system messages named "
        "example_user or example_assistant, openai/evals' few-shot examples)",
        f"{f}:9: ideal: empty (an empty answer would match any output)",
        f"{f}:10: ideal: expected a list of strings, got null in it",
    ]
    assert str(error).startswith(f"{f}: cannot import (9 problems):\n  {f}:2: ideal: missing")


def test_unreadable_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ImportFailed, match=r"absent\.jsonl: no such file"):
        load_openai_evals(tmp_path / "absent.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(ImportFailed, match="no samples"):
        load_openai_evals(tmp_path / "empty.jsonl")
    with pytest.raises(ValueError, match="match: expected one of match, includes, fuzzy_match"):
        load_openai_evals(tmp_path / "empty.jsonl", match="exact")  # type: ignore[arg-type]


def test_long_problem_lists_are_cut_in_the_message(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text('{"input": "q"}\n' * 60, encoding="utf-8")
    with pytest.raises(ImportFailed) as info:
        load_openai_evals(path)
    assert len(info.value.problems) == 60
    assert str(info.value).endswith("… and 10 more")
