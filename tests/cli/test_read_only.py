"""Commands that only read the store never make one, and write their files into new folders."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.analysis._store_runs import write_run
from trialkit.cli.main import cli
from trialkit.store import Store

READERS = [
    ["runs"],
    ["report", "x"],
    ["transcripts", "list"],
    ["transcripts", "show", "x/t#0"],
    ["compare", "a", "b"],
    ["health"],
    ["export", "x", "--to", "jsonl", "-o", "out.jsonl"],
    ["agreement", "x"],
    ["labels", "export", "x", "-o", "labels.jsonl"],
    ["view", "--port", "0"],
]


def invoke(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, list(args), env=env)
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout, result.stderr


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a[:2]))
def test_a_reader_in_an_empty_folder_makes_no_store(tmp_path: Path, args: list[str]) -> None:
    code, out, err = invoke(tmp_path, *args, env={"TRIALKIT_STORE": ""})

    assert code == 2, (out, err)
    store = tmp_path / ".trialkit" / "trialkit.db"
    assert err.splitlines() == [
        f"error: no store at {store}: nothing was run with it yet (`trialkit run` makes it; "
        "--store or TRIALKIT_STORE names another)"
    ]
    assert tree(tmp_path) == []


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a[:2]))
def test_a_reader_given_a_missing_store_makes_no_folder(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "nowhere" / "x.db"

    code, _, err = invoke(tmp_path, *args, "--store", str(missing))

    assert code == 2
    assert err.startswith(f"error: no store at {missing}: ")
    assert len(err.splitlines()) == 1
    assert tree(tmp_path) == []


def test_an_empty_database_is_not_taken_for_a_store_nor_changed(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()

    code, _, err = invoke(tmp_path, "runs", "--store", str(empty))

    assert code == 2
    assert err.startswith(f"error: no store at {empty}: ")
    assert empty.stat().st_size == 0


def test_a_database_without_trialkit_tables_is_not_a_store(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()

    code, _, err = invoke(tmp_path, "runs", "--store", str(other))

    assert code == 2
    assert err.startswith(f"error: no store at sqlite:///{other}: ")
    with sqlite3.connect(other) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    conn.close()
    assert tables == ["notes"]


def test_run_still_makes_the_store_and_its_folder(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "id: s\nmodel: scripted/echo\ntasks:\n  - {id: t, input: hi, graders: [{contains: hi}]}\n",
        encoding="utf-8",
    )
    store = tmp_path / "deep" / "er" / "t.db"

    code, _, err = invoke(tmp_path, "run", str(suite), "--store", str(store), "--no-progress")

    assert (code, err) == (0, "")
    assert store.is_file()
    code, out, _ = invoke(tmp_path, "runs", "--store", str(store), "--json")
    assert code == 0
    assert [r["suite_id"] for r in json.loads(out)] == ["s"]


@pytest.fixture
def two_runs(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/s.db"
    with Store(url) as store:
        write_run(store, "base", {"a": "PP", "b": "PF"})
        write_run(store, "cand", {"a": "PP", "b": "PP"}, hours=1)
    return url


@pytest.mark.parametrize(
    "args",
    [
        ["report", "cand", "--format", "md"],
        ["report", "cand", "--format", "json"],
        ["report", "cand", "--format", "table"],
        ["compare", "base", "cand", "--format", "json"],
        ["compare", "base", "cand"],
        ["health", "--format", "md"],
        ["health"],
        ["labels", "export", "cand"],
    ],
    ids=lambda a: " ".join(a),
)
def test_output_files_go_into_folders_made_for_them(
    tmp_path: Path, two_runs: str, args: list[str]
) -> None:
    suffix = ".jsonl" if args[0] == "labels" else ".txt"
    target = tmp_path / "new" / "deeper" / f"out{suffix}"

    code, _, err = invoke(tmp_path, *args, "-o", str(target), "--store", two_runs)

    assert code == 0, err
    assert target.is_file()
    assert args[0] == "labels" or target.read_text(encoding="utf-8").strip()


def test_an_output_file_that_cannot_be_written_is_one_line(tmp_path: Path, two_runs: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")

    code, _, err = invoke(
        tmp_path, "report", "cand", "-o", str(blocker / "r.md"), "--store", two_runs
    )

    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith(f"error: {blocker / 'r.md'}: cannot write the output: ")
