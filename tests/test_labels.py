"""Labels files: JSONL and CSV, every bad row reported as file:line: field, atomic writes."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trialkit.labels import LABEL_FIELDS, Label, LabelsError, read_labels, write_labels

WHEN = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)


def problems(path: Path) -> list[str]:
    """The problems of a labels file, with the folder left out of the file names."""
    with pytest.raises(LabelsError) as caught:
        read_labels(path)
    return [str(p).removeprefix(f"{path.parent}/") for p in caught.value.problems]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_score_defaults_from_the_verdict() -> None:
    assert Label(task_id="t", trial=0, verdict="pass").score == 1.0
    assert Label(task_id="t", trial=0, verdict="fail").score == 0.0
    assert Label(task_id="t", trial=0, verdict="unknown").score is None
    assert Label(task_id="t", trial=0, verdict="pass", score=0.7).score == 0.7
    assert Label(task_id="t", trial=0, verdict="pass").grader == "human"


def test_jsonl_reads_each_label_and_skips_blank_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path / "labels.jsonl",
        '{"run_id": "r1", "task_id": "france", "trial": 0, "verdict": "pass"}\n'
        "\n"
        '{"task_id": "france", "trial": 1, "verdict": "fail", "score": 0.25, "grader": "judge",'
        ' "reviewer": "ana", "labeled_at": "2026-11-03T09:30:00Z", "comment": "vague"}\n',
    )

    assert read_labels(path) == [
        Label(run_id="r1", task_id="france", trial=0, verdict="pass", score=1.0),
        Label(
            task_id="france",
            trial=1,
            grader="judge",
            verdict="fail",
            score=0.25,
            reviewer="ana",
            labeled_at=WHEN,
            comment="vague",
        ),
    ]


def test_csv_reads_columns_by_name_and_empty_cells_as_absent(tmp_path: Path) -> None:
    path = write(
        tmp_path / "labels.csv",
        "\ufefftask_id, trial ,verdict,score,run_id,comment\n"
        "france,0,pass,,,\n"
        ' france , 1 , fail ,0.5,r1," kept as written, with a\nnewline"\n',
    )

    assert read_labels(path) == [
        Label(task_id="france", trial=0, verdict="pass"),
        Label(
            run_id="r1",
            task_id="france",
            trial=1,
            verdict="fail",
            score=0.5,
            comment=" kept as written, with a\nnewline",
        ),
    ]


def test_every_bad_jsonl_row_is_reported_with_its_line_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path / "labels.jsonl",
        '{"task_id": "a", "trial": 0, "verdict": "pass"}\n'
        '{"task_id": "a", "trial": 1, "verdict": "maybe"}\n'
        '{"task_id": "a", "trial": 2, "verdict": "pass", "score": 1.5}\n'
        "{not json\n"
        '{"task_id": "a", "trial": 3, "verdict": "pass", "colour": "red"}\n'
        '{"trial": 4, "verdict": "fail"}\n'
        '{"task_id": "a", "trial": -1, "verdict": "fail"}\n'
        "[1, 2]\n"
        '{"task_id": "a", "trial": 5, "verdict": "fail", "labeled_at": "yesterday"}\n',
    )

    found = problems(path)

    assert found[:3] == [
        "labels.jsonl:2: verdict: Input should be 'pass', 'fail' or 'unknown'",
        "labels.jsonl:3: score: Input should be less than or equal to 1",
        "labels.jsonl:4: not valid JSON: Expecting property name enclosed in double quotes",
    ]
    assert found[3].startswith("labels.jsonl:5: colour: unknown field; the fields are run_id, ")
    assert found[4:7] == [
        "labels.jsonl:6: task_id: Field required",
        "labels.jsonl:7: trial: Input should be greater than or equal to 0",
        "labels.jsonl:8: expected a JSON object, one label per line",
    ]
    assert found[7].startswith("labels.jsonl:9: labeled_at: Input should be a valid datetime")
    assert len(found) == 8


def test_bad_csv_rows_name_their_line_counting_multiline_cells(tmp_path: Path) -> None:
    path = write(
        tmp_path / "labels.csv",
        'task_id,trial,verdict,comment\na,0,pass,"two\nlines"\na,one,pass,\na,2,PASS,\na,3,pass\n',
    )

    assert problems(path) == [
        "labels.csv:4: trial: Input should be a valid integer, unable to parse string as an "
        "integer",
        "labels.csv:5: verdict: Input should be 'pass', 'fail' or 'unknown'",
        "labels.csv:6: 3 cells, but the header has 4",
    ]


def test_a_bad_csv_header_is_reported_once(tmp_path: Path) -> None:
    path = write(tmp_path / "labels.csv", "task,trial,verdict,verdict\na,0,pass,pass\n")

    found = problems(path)

    assert found[0].startswith("labels.csv:1: task: unknown column; the columns are run_id, ")
    assert found[1:] == [
        "labels.csv:1: verdict: the column appears twice",
        "labels.csv:1: task_id: required column is missing",
    ]


def test_a_second_label_for_the_same_trial_and_grader_is_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path / "labels.jsonl",
        '{"task_id": "a", "trial": 0, "verdict": "pass"}\n'
        '{"task_id": "a", "trial": 0, "verdict": "pass", "grader": "judge"}\n'
        '{"task_id": "a", "trial": 0, "verdict": "pass", "run_id": "r1"}\n'
        '{"task_id": "a", "trial": 0, "verdict": "fail", "grader": "human"}\n',
    )

    assert problems(path) == [
        "labels.jsonl:4: trial a#0 for grader 'human' is labeled again (line 1)",
    ]


def test_a_file_that_cannot_be_read_is_one_problem(tmp_path: Path) -> None:
    assert problems(tmp_path / "missing.csv") == [
        "missing.csv: cannot read: No such file or directory"
    ]
    assert problems(write(tmp_path / "labels.txt", "")) == [
        "labels.txt: a labels file ends in .jsonl or .csv"
    ]
    (tmp_path / "latin.csv").write_bytes(b"task_id,trial,verdict,comment\na,0,pass,caf\xe9\n")
    assert problems(tmp_path / "latin.csv") == ["latin.csv:2: not UTF-8 text: save it as UTF-8"]


def test_many_problems_are_all_kept_but_the_message_is_capped(tmp_path: Path) -> None:
    rows = "".join(
        json.dumps({"task_id": "a", "trial": i, "verdict": "no"}) + "\n" for i in range(30)
    )
    with pytest.raises(LabelsError) as caught:
        read_labels(write(tmp_path / "labels.jsonl", rows))

    assert len(caught.value.problems) == 30
    lines = str(caught.value).splitlines()
    assert len(lines) == 21
    assert lines[-1] == "… and 10 more problems"


def test_an_empty_file_has_no_labels(tmp_path: Path) -> None:
    assert read_labels(write(tmp_path / "labels.jsonl", "")) == []
    assert read_labels(write(tmp_path / "labels.csv", "")) == []


def test_write_labels_writes_csv_with_every_field_as_a_column(tmp_path: Path) -> None:
    labels = [
        Label(run_id="r1", task_id="a", trial=0, verdict="pass", labeled_at=WHEN),
        Label(task_id="b", trial=2, verdict="unknown", comment='says "maybe", twice'),
    ]
    path = tmp_path / "out.csv"

    write_labels(labels, path)

    assert path.read_bytes().decode() == (
        ",".join(LABEL_FIELDS) + "\r\n"
        "r1,a,0,human,pass,1.0,,2026-11-03T09:30:00Z,\r\n"
        ',b,2,human,unknown,,,,"says ""maybe"", twice"\r\n'
    )
    assert read_labels(path) == labels


def test_write_labels_writes_jsonl_without_absent_fields(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"

    write_labels([Label(task_id="a", trial=0, verdict="fail")], path)

    assert path.read_text(encoding="utf-8") == (
        '{"task_id":"a","trial":0,"grader":"human","verdict":"fail","score":0.0}\n'
    )


def test_write_labels_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "labels.jsonl"
    write_labels([Label(task_id="old", trial=0, verdict="pass")], path)
    before = path.read_text(encoding="utf-8")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_labels([Label(task_id="new", trial=0, verdict="pass")], path)

    assert path.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.jsonl"]


def test_write_labels_refuses_other_suffixes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"ends in \.jsonl or \.csv"):
        write_labels([], tmp_path / "labels.json")


_ids = st.text(st.characters(codec="utf-8", categories=["L", "N"]), min_size=1, max_size=8)
_text = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]) | st.sampled_from('\n\t\r,"'),
    min_size=1,
    max_size=30,
)
_labels = st.builds(
    Label,
    run_id=st.none() | _ids,
    task_id=_ids,
    trial=st.integers(0, 10_000),
    grader=_ids,
    verdict=st.sampled_from(["pass", "fail", "unknown"]),
    score=st.none() | st.floats(0, 1),
    reviewer=st.none() | _ids,
    labeled_at=st.none() | st.datetimes(timezones=st.just(UTC)),
    comment=st.none() | _text,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # each example overwrites
)
@given(labels=st.lists(_labels, max_size=5, unique_by=lambda label: label.key))
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_labels_survive_a_round_trip(labels: list[Label], suffix: str, tmp_path: Path) -> None:
    path = tmp_path / f"labels{suffix}"

    write_labels(labels, path)

    assert read_labels(path) == labels
