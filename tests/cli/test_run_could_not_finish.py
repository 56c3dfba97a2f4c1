"""A run whose store fails mid-run: one line naming the store and the cause, exit 4 (DESIGN §6:
the run could not finish), what finished is stored, and `--resume` continues.

The store is a real SQLite file; the agent breaks it from a second connection mid-run, as a
full disk, a dropped table or another process would.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from trialkit import Suite, Task
from trialkit._errors import RunFailed
from trialkit.cli.main import cli
from trialkit.run.runner import Runner, run_sync
from trialkit.store import StoreError

SUITE = """
import os, sqlite3, time
from trialkit import Suite, Task

calls = []


def agent(prompt: str) -> str:
    calls.append(prompt)
    if len(calls) == 3:
        time.sleep(0.5)  # the writer commits the trials before meanwhile
        db = sqlite3.connect(os.environ["DB"])
        db.executescript(os.environ["BREAK"])
        db.close()
    return "ok"


suite = Suite(id="s", harness=agent, tasks=[Task(id=f"t{i}", input=str(i)) for i in range(6)])
"""
FULL = """CREATE TRIGGER full BEFORE INSERT ON trials
WHEN (SELECT count(*) FROM trials) >= 2
BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END;"""
DROP = "DROP TABLE scores; DROP TABLE trials;"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DB", str(tmp_path / "store.db"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("TRIALKIT_STORE", raising=False)
    (tmp_path / "suite.py").write_text(SUITE)
    return tmp_path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli,
        ["run", "suite.py", "--store", "store.db", "--concurrency", "1", "--no-progress", *args],
    )
    return result.exit_code, result.stdout, result.stderr


def stored(work: Path) -> list[str]:
    with sqlite3.connect(work / "store.db") as db:
        return sorted(row[0] for row in db.execute("select task_id from trials"))


def run_id(work: Path) -> str:
    with sqlite3.connect(work / "store.db") as db:
        ((found,),) = db.execute("select id from runs").fetchall()
    return str(found)


@pytest.mark.parametrize("broken", [FULL, DROP], ids=["disk-full", "table-dropped"])
def test_a_store_that_fails_mid_run_is_one_line_and_exit_4(
    work: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    monkeypatch.setenv("BREAK", broken)
    code, out, err = run()
    assert code == 4, err
    (line,) = err.splitlines()
    cause = "database or disk is full" if broken is FULL else "no such table"
    store = f"sqlite:///{work / 'store.db'}"
    if broken is FULL:  # SQLite's own constraint error: trialkit names the store
        assert line.startswith(f"error: the store {store}: cannot save trials of run ")
    else:
        assert line.startswith("error: cannot save trials of run ")
        assert f"in the store {store}: " in line
    assert cause in line
    assert "Traceback" not in err and "ExceptionGroup" not in err and "TaskGroup" not in err
    assert line.endswith(
        f"; 2 finished trials are stored, `trialkit run suite.py --store "
        f"sqlite:///{work / 'store.db'} --resume {run_id(work)}` continues"
    )
    assert "verdict" not in out.lower()  # no report of a run that did not finish


def test_once_the_store_works_again_resume_finishes_the_run(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BREAK", FULL)
    assert run()[0] == 4
    assert stored(work) == ["t0", "t1"]
    with sqlite3.connect(work / "store.db") as db:
        (status,) = db.execute("select status from runs").fetchone()
        db.execute("DROP TRIGGER full")
    assert status == "interrupted"
    monkeypatch.setenv("BREAK", "SELECT 1;")
    # Full again after two more: the count covers the trials stored before the resume too.
    with sqlite3.connect(work / "store.db") as db:
        db.execute(FULL.replace("full", "fuller").replace(">= 2", ">= 4"))
    code, _, err = run("--resume", run_id(work))
    assert code == 4, err
    count = len(stored(work))  # 2 to 4: the batch that fails takes its trials with it
    assert count >= 2 and f"; {count} finished trials are stored, " in err
    with sqlite3.connect(work / "store.db") as db:
        db.execute("DROP TRIGGER fuller")
    code, _, err = run("--resume", run_id(work))
    assert code == 0, err
    assert stored(work) == [f"t{i}" for i in range(6)]


def test_the_library_raises_run_failed_from_the_stores_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    seen: list[str] = []

    def agent(prompt: str) -> str:
        seen.append(prompt)
        if len(seen) == 2:
            with sqlite3.connect(tmp_path / "store.db") as db:
                db.executescript(DROP)
        return "ok"

    suite = Suite(id="s", harness=agent, tasks=[Task(id=f"t{i}", input=str(i)) for i in range(4)])
    runner = Runner(store=url, concurrency=1)
    with pytest.raises(RunFailed) as raised:
        anyio.run(runner.run, suite)
    assert isinstance(raised.value.__cause__, StoreError)
    assert "no such table" in raised.value.reason
    assert runner.last_run is not None and runner.last_run.status == "interrupted"
    assert raised.value.run_id == runner.last_run.id
    assert str(raised.value).endswith(f"resuming run {runner.last_run.id} continues")
    # Without a store nothing can fail so.
    assert run_sync(suite).summary.trials == 4
