"""The SQLAlchemy engine behind a store, with the SQLite settings that let processes share it."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from sqlalchemy import URL, Connection, Engine, create_engine, event
from sqlalchemy.exc import NoSuchModuleError
from sqlalchemy.pool import StaticPool

from trialkit.store.errors import StoreError
from trialkit.store.urls import (
    STORE_ENV_VAR,
    is_sqlite_memory,
    mask_url,
    parse_url,
    prepare_sqlite_folder,
    sqlite_file,
)

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite connection waits for another writer before giving up."""
WRITE_OPTION = "trialkit_write"
"""Execution option marking a connection that will write (SQLite then begins IMMEDIATE)."""


def create_store_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for `url`; connecting is left to the caller (errors surface there).

    Without `create`, a SQLite file must exist already: the engine would otherwise make it.
    """
    parsed = parse_url(url)
    from trialkit.secrets import register_secret

    # A database error may quote the URL: never print its password. One that is the user's or
    # the database's name (a local test setup's) hides nothing, and redacting it would blank
    # that word everywhere, "trialkit" included.
    if parsed.password not in (parsed.username, parsed.database):
        register_secret(parsed.password)
    kwargs: dict[str, Any] = {}
    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite:
        if create:
            prepare_sqlite_folder(url)
        else:
            _require_sqlite_file(parsed)
        if is_sqlite_memory(parsed):
            # One shared connection, or every pooled connection would see its own empty database.
            kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    try:
        engine = create_engine(parsed, **kwargs)
    except NoSuchModuleError:
        raise StoreError(f"unknown database kind in store URL {mask_url(url)}") from None
    except ImportError as exc:
        hint = "install it"
        if parsed.get_backend_name() == "postgresql":
            hint = "run: pip install 'trialkit[postgres]'"
        raise StoreError(
            f"the database driver for {mask_url(url)} is not installed ({exc.name or exc}); {hint}"
        ) from None
    if sqlite:
        event.listen(engine, "connect", _configure_sqlite)
        event.listen(engine, "begin", _begin_sqlite)
    return engine


def _require_sqlite_file(url: URL) -> None:
    path = sqlite_file(url)
    if path is None or (path.is_file() and path.stat().st_size > 0):
        return
    raise StoreError(
        f"no store at {path}: nothing was run with it yet (`trialkit run` makes it; --store or "
        f"{STORE_ENV_VAR} names another)"
    )


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # trialkit emits BEGIN itself (see `_begin_sqlite`): the sqlite3 module's own transaction
    # handling never begins before SELECT or DDL, which breaks transactional migrations.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _use_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch the file to WAL, once per file. Switching needs the file to itself, and SQLite
    answers "database is locked" at once, without its busy timeout, while another process
    opens or switches the same new file; so it is tried again for up to that timeout."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _begin_sqlite(conn: Connection) -> None:
    # A writer takes the write lock up front: a read transaction upgraded to a write one fails
    # at once (without waiting for the busy timeout) when another process wrote in between.
    immediate = conn.get_execution_options().get(WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
