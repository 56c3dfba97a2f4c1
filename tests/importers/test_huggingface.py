import json
import sys
from pathlib import Path

import pytest

from tests.importers._run import answering, verdicts
from trialkit.loaders.importers import ImportFailed, load_hf_dataset

ROWS = [
    {"question": "Capital of France?", "answer": "Paris", "uid": "fr", "level": 1},
    {"question": "Capital of Japan?", "answer": "Tokyo", "uid": "jp", "level": 2},
]
ANSWERS = {"Capital of France?": "Paris.", "Capital of Japan?": "Kyoto"}
FIELDS = {"input_field": "question", "target_field": "answer", "id_field": "uid"}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The importer sets these when they are unset; the test process gets its own back.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def test_missing_datasets_names_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportFailed, match=r"pip install 'trialkit\[hf\]'"):
        load_hf_dataset(path)


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(ImportFailed, match="no such file or folder"):
        load_hf_dataset(tmp_path / "absent.jsonl")
    (tmp_path / "notes.txt").write_text("hi", encoding="utf-8")
    with pytest.raises(ImportFailed, match=r"expected a \.csv, \.json, \.jsonl, \.parquet file"):
        load_hf_dataset(tmp_path / "notes.txt")


def test_jsonl_file(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    path = tmp_path / "capitals.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    suite = load_hf_dataset(path, model=answering(ANSWERS), **FIELDS)
    assert suite.id == "capitals"
    fr = suite.tasks[0]
    assert (fr.id, fr.input, fr.reference, fr.metadata) == (
        "fr",
        "Capital of France?",
        "Paris",
        {"level": 1, "target": ["Paris"]},
    )
    assert verdicts(suite) == {"fr": "pass", "jp": "fail"}


def test_csv_and_parquet_files(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    import pyarrow as pa
    import pyarrow.parquet as pq

    csv_path = tmp_path / "caps.csv"
    csv_path.write_text(
        "uid,question,answer,level\nfr,Capital of France?,Paris,1\njp,Capital of Japan?,Tokyo,2\n",
        encoding="utf-8",
    )
    parquet_path = tmp_path / "caps.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), parquet_path)
    for path in (csv_path, parquet_path):
        suite = load_hf_dataset(path, model=answering(ANSWERS), **FIELDS)
        assert verdicts(suite) == {"fr": "pass", "jp": "fail"}, path


def test_folder_with_splits(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    folder = tmp_path / "caps"
    folder.mkdir()
    (folder / "train.jsonl").write_text(json.dumps(ROWS[0]) + "\n", encoding="utf-8")
    (folder / "test.jsonl").write_text(json.dumps(ROWS[1]) + "\n", encoding="utf-8")
    assert [t.id for t in load_hf_dataset(folder, **FIELDS).tasks] == ["fr"]
    test = load_hf_dataset(folder, split="test", **FIELDS)
    assert ([t.id for t in test.tasks], test.metadata["split"]) == (["jp"], "test")
    with pytest.raises(ImportFailed, match="cannot be read as a dataset"):
        load_hf_dataset(folder, split="validation", **FIELDS)


def test_rows_are_checked_like_samples(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    path = tmp_path / "caps.jsonl"
    path.write_text(json.dumps({"question": "Q?", "answer": None}) + "\n", encoding="utf-8")
    with pytest.raises(ImportFailed) as info:
        load_hf_dataset(path, **FIELDS)
    assert info.value.problems == [
        f"{path}: train row 1: answer: missing (the answer to grade against)"
    ]
