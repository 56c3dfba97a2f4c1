"""Recorded, append-only migrations, and the SQLite settings every connection gets."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import Connection, create_engine, inspect, select, text

from trialkit.store import Store, StoreError
from trialkit.store.engine import create_store_engine
from trialkit.store.migrations import MIGRATIONS, applied_migrations, migrate
from trialkit.store.schema import metadata
from trialkit.store.schema import migrations as migrations_table
from trialkit.store.search_index import POSTGRES_INDEX


def _recorded(url: str) -> list[tuple[str, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(migrations_table).order_by(migrations_table.c.name))
            return [(row.name, row.applied_at) for row in rows]
    finally:
        engine.dispose()


def test_opening_a_new_store_applies_and_records_every_migration(db_url: str) -> None:
    Store(db_url).close()

    recorded = _recorded(db_url)

    assert [name for name, _ in recorded] == [m.__name__ for m in MIGRATIONS]
    assert all(datetime.fromisoformat(at).utcoffset() is not None for _, at in recorded)


def test_reopening_applies_nothing_again(db_url: str) -> None:
    Store(db_url).close()
    first = _recorded(db_url)

    Store(db_url).close()
    Store(db_url).close()

    assert _recorded(db_url) == first


def test_the_migrated_tables_match_the_schema_queries_use(db_url: str) -> None:
    Store(db_url).close()
    engine = create_engine(db_url)
    try:
        inspector = inspect(engine)
        for table in metadata.sorted_tables:
            columns = [c["name"] for c in inspector.get_columns(table.name)]
            assert columns == [c.name for c in table.columns], table.name
            indexes = {
                i["name"]: i["column_names"]
                for i in inspector.get_indexes(table.name)
                if i["name"] != POSTGRES_INDEX  # on an expression (see search_index.py)
            }
            assert indexes == {i.name: [c.name for c in i.columns] for i in table.indexes}
            pk = inspector.get_pk_constraint(table.name)["constrained_columns"]
            assert pk == [c.name for c in table.primary_key.columns], table.name
    finally:
        engine.dispose()


def test_a_store_from_a_newer_trialkit_is_refused(db_url: str) -> None:
    Store(db_url).close()
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(
            migrations_table.insert().values(
                name="m999_from_the_future", applied_at="2099-01-01T00:00:00.000000+00:00"
            )
        )
    engine.dispose()

    with pytest.raises(StoreError) as caught:
        Store(db_url)

    message = str(caught.value)
    assert "m999_from_the_future" in message
    assert "upgrade trialkit" in message


def test_a_new_migration_is_applied_once_on_top_of_the_shipped_ones(db_url: str) -> None:
    Store(db_url).close()
    calls = []

    def m900_add_notes(conn: Connection) -> None:
        calls.append(1)
        conn.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY)"))

    engine = create_store_engine(db_url)
    try:
        migrate(engine, where=db_url, migrations=[*MIGRATIONS, m900_add_notes])
        migrate(engine, where=db_url, migrations=[*MIGRATIONS, m900_add_notes])
        with engine.connect() as conn:
            shipped = [m.__name__ for m in MIGRATIONS]
            assert applied_migrations(conn) == [*shipped, "m900_add_notes"]
            assert inspect(conn).has_table("notes")
    finally:
        engine.dispose()
    assert calls == [1]


def test_a_failing_migration_leaves_nothing_behind(db_url: str) -> None:
    def m900_broken(conn: Connection) -> None:
        conn.execute(text("CREATE TABLE half_done (id INTEGER)"))
        raise RuntimeError("boom")

    engine = create_store_engine(db_url)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            migrate(engine, where=db_url, migrations=[*MIGRATIONS, m900_broken])
        with engine.connect() as conn:
            assert applied_migrations(conn) == []
            assert not inspect(conn).has_table("runs")
            assert not inspect(conn).has_table("half_done")
    finally:
        engine.dispose()


def test_sqlite_connections_use_wal_and_wait_for_other_writers(sqlite_db_url: str) -> None:
    with Store(sqlite_db_url) as store, store._engine.connect() as conn:
        pragma = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        }

    assert pragma == {
        "journal_mode": "wal",
        "synchronous": 1,
        "foreign_keys": 1,
        "busy_timeout": 30_000,
    }
