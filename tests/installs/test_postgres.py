"""`pip install 'trialkit[postgres]'` alone: a run stored in PostgreSQL (the server
`TRIALKIT_TEST_POSTGRES_URL` names, from `.ci/postgres.sh`), then listed and reported from
there."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url
from sqlalchemy.pool import NullPool

from tests.installs.helpers import said, trialkit, write_capitals

INSTALL = "postgres"
URL_VAR = "TRIALKIT_TEST_POSTGRES_URL"


@pytest.fixture
def store_url() -> Iterator[str]:
    """The test server's URL pointed at a new, empty schema, dropped afterwards."""
    url = os.environ.get(URL_VAR)
    if not url:  # an install test is never skipped where it runs
        pytest.fail(f"{URL_VAR} is not set: run .ci/postgres.sh and export the URL it prints")
    engine = create_engine(url, poolclass=NullPool)
    schema = f"trialkit_install_{uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield (
            make_url(url)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        engine.dispose()


def test_a_run_is_stored_in_postgresql(tmp_path: Path, store_url: str) -> None:
    write_capitals(tmp_path)
    env = {"TRIALKIT_STORE": store_url}
    done = trialkit("run", "capitals.py", "--name", "pg", cwd=tmp_path, env=env)
    assert done.returncode == 0, said(done)
    assert not (tmp_path / ".trialkit").exists()

    listed = trialkit("runs", "--json", cwd=tmp_path, env=env)
    assert listed.returncode == 0, said(listed)
    (run,) = json.loads(listed.stdout)
    assert (run["name"], run["trials"], run["passed"], run["failed"]) == ("pg", 4, 2, 2)

    shown = trialkit("report", "pg", "--format", "json", cwd=tmp_path, env=env)
    assert shown.returncode == 0, said(shown)
    assert json.loads(shown.stdout)["summary"]["passed_tasks"] == 1
