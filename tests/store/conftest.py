"""Fixtures for the store tests: an empty store on each backend, and a sample run to put in it.

`db_url` is parametrized: SQLite (a file in a temp folder) and PostgreSQL (a fresh schema in
the database at `$TRIALKIT_TEST_POSTGRES_URL`, dropped after the test). Without that variable
the PostgreSQL cases are skipped, unless `TRIALKIT_REQUIRE_POSTGRES=1` (CI), which fails them.
`.ci/postgres.sh` starts a local server and prints the URL.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from trialkit.store import Store
from trialkit.store.urls import sqlite_url

from ._samples import Sample, make_sample

POSTGRES_URL_VAR = "TRIALKIT_TEST_POSTGRES_URL"
REQUIRE_POSTGRES_VAR = "TRIALKIT_REQUIRE_POSTGRES"
BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[Engine]:
    """An engine on the test database, for making and dropping one schema per test."""
    url = os.environ.get(POSTGRES_URL_VAR)
    if not url:
        if os.environ.get(REQUIRE_POSTGRES_VAR) == "1":
            pytest.fail(
                f"{REQUIRE_POSTGRES_VAR}=1 but {POSTGRES_URL_VAR} is not set: "
                "run .ci/postgres.sh and export the URL it prints"
            )
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_URL_VAR} (.ci/postgres.sh)")
    engine = create_engine(url, poolclass=NullPool)
    yield engine
    engine.dispose()


def postgres_schema_url(admin: Engine) -> Iterator[str]:
    """The admin URL pointed at a new, empty schema (its search path), dropped afterwards."""
    schema = f"trialkit_test_{uuid.uuid4().hex[:12]}"
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = make_url(admin.url).update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.exec_driver_sql("SET LOCAL lock_timeout = '10s'")  # a leaked connection fails fast
        conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "store" / "trialkit.db")
        return
    yield from postgres_schema_url(request.getfixturevalue("postgres_admin"))


@pytest.fixture
def sqlite_db_url(tmp_path: Path) -> str:
    """For what only SQLite has (its PRAGMAs, its files)."""
    return sqlite_url(tmp_path / "store" / "trialkit.db")


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store(db_url) as opened:
        yield opened


@pytest.fixture
def sample() -> Sample:
    return make_sample("run-abc123", name="nightly")
