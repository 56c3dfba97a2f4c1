import json
from pathlib import Path

import pytest

from tests.importers._run import answering, recording, verdicts
from trialkit.loaders.importers import ImportFailed, SampleFields, load_inspect_samples
from trialkit.models.base import ModelRequest
from trialkit.transcript import Message

RECORDS: list[dict[str, object]] = [
    {"id": "fr", "input": "Capital of France?", "target": "Paris", "metadata": {"level": 1}},
    {"input": "Capital of Japan?", "target": ["Tokyo", "東京"], "difficulty": "easy"},
    {
        "id": 7,
        "input": [
            {"role": "system", "content": "One word."},
            {"role": "user", "content": "Capital of Kenya?"},
        ],
        "target": "Nairobi",
    },
]
ANSWERS = {
    "Capital of France?": "It is PARIS.",
    "Capital of Japan?": "東京です",
    "Capital of Kenya?": "Mombasa",
}


def _jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_end_to_end(tmp_path: Path) -> None:
    suite = load_inspect_samples(_jsonl(tmp_path / "caps.jsonl", RECORDS), model=answering(ANSWERS))
    assert [t.id for t in suite.tasks] == ["fr", "2", "7"]
    fr, japan, kenya = suite.tasks
    assert fr.metadata == {"level": 1, "target": ["Paris"]}
    assert japan.metadata == {"difficulty": "easy", "target": ["Tokyo", "東京"]}
    assert isinstance(kenya.input, list) and kenya.input[0] == Message(
        role="system", content="One word."
    )
    # includes(), case-insensitive by default, as inspect_ai's includes()
    assert verdicts(suite) == {"fr": "pass", "2": "pass", "7": "fail"}


def test_json_list_and_match_options(tmp_path: Path) -> None:
    path = tmp_path / "caps.json"
    path.write_text(json.dumps(RECORDS), encoding="utf-8")
    model = answering(ANSWERS)
    assert verdicts(load_inspect_samples(path, case_sensitive=True, model=model))["fr"] == "fail"
    assert verdicts(load_inspect_samples(path, match="match", model=model))["fr"] == "fail"
    assert verdicts(load_inspect_samples(path, match="fuzzy_match", model=model))["fr"] == "pass"
    starting = answering({**ANSWERS, "Capital of France?": "paris, of course"})
    assert verdicts(load_inspect_samples(path, match="match", model=starting))["fr"] == "pass"


def test_csv_with_choices_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "mc.csv"
    path.write_text(
        "id,input,target,choices,metadata\n"
        'au,Capital of Australia?,B,"Sydney, Canberra, Perth","{""region"": ""Oceania""}"\n'
        "ca,Capital of Canada?,Ottawa,Toronto Ottawa Vancouver,\n"
        "plain,Capital of Peru?,Lima,,\n",
        encoding="utf-8",
    )
    seen: list[ModelRequest] = []
    suite = load_inspect_samples(path, model=recording(seen, "ANSWER: B"))
    au, ca, _ = suite.tasks
    assert au.metadata == {
        "region": "Oceania",
        "choices": ["Sydney", "Canberra", "Perth"],
        "target": ["B"],
    }
    assert ca.metadata["choices"] == ["Toronto", "Ottawa", "Vancouver"]  # split on spaces
    assert au.input == (
        "Answer the following multiple-choice question. Reply with a line 'ANSWER: <letter>' "
        "giving the letter of the correct choice (one of A, B, C).\n\n"
        "Capital of Australia?\n\nA) Sydney\nB) Canberra\nC) Perth"
    )
    # "Ottawa" is the text of choice B, so B is the answer to give
    assert verdicts(suite) == {"au": "pass", "ca": "pass", "plain": "fail"}


def test_several_correct_choices_and_chat_questions(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "multi.jsonl",
        [
            {
                "input": [
                    {"role": "system", "content": "Be careful."},
                    {"role": "user", "content": "Which are primes?"},
                ],
                "choices": ["2", "4", "5", "9"],
                "target": ["A", "C"],
            }
        ],
    )
    seen: list[ModelRequest] = []
    suite = load_inspect_samples(path, model=recording(seen, "ANSWER: C, A"))
    assert verdicts(suite) == {"1": "pass"}
    system, user = seen[0].messages
    assert system.content == "Be careful."
    assert "'ANSWER: <letters>'" in user.content and user.content.endswith("C) 5\nD) 9")
    assert "Which are primes?" in user.content


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "bad.jsonl",
        [
            {"input": "ok", "target": "x", "id": "a"},
            {"input": "dup", "target": "x", "id": "a"},
            {"input": "no target"},
            {"target": "no input"},
            {"input": "q", "target": "x", "files": {"a.txt": "hi"}, "setup": "pip install x"},
            {"input": "q", "target": "E", "choices": ["x", "y"]},
            {"input": "q", "target": "x", "metadata": [1]},
            {"input": "q", "target": "x", "id": "a/b"},
        ],
    )
    with pytest.raises(ImportFailed) as info:
        load_inspect_samples(path)
    f = str(path)
    assert info.value.problems == [
        f"{f}:2: id: 'a' is also the id of {f}:1",
        f"{f}:3: target: missing (the answer to grade against)",
        f"{f}:4: input: missing",
        f"{f}:5: files: needs an inspect_ai sandbox, which trialkit does not import; remove "
        "the field or write the task in Python with an Environment",
        f"{f}:5: setup: needs an inspect_ai sandbox, which trialkit does not import; remove "
        "the field or write the task in Python with an Environment",
        f"{f}:6: target: 'E' is neither a choice letter (A-B) nor the text of a choice",
        f"{f}:7: metadata: expected an object, got a list",
        f"{f}:8: task 'a/b': id: must not contain '/', '#' or control characters",
    ]


def test_custom_field_names(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "qa.jsonl", [{"key": "k1", "question": "Q?", "answer": "A"}])
    fields = SampleFields(input="question", target="answer", id="key")
    suite = load_inspect_samples(path, fields=fields)
    assert [(t.id, t.input, t.reference) for t in suite.tasks] == [("k1", "Q?", "A")]


def test_unknown_suffix(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hi", encoding="utf-8")
    with pytest.raises(ImportFailed, match=r"expected a \.json, \.jsonl or \.csv file"):
        load_inspect_samples(tmp_path / "x.txt")
