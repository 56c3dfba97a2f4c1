"""Where the store lives: a SQLAlchemy URL from a flag, the environment or the default path."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from trialkit.store.errors import StoreError

DEFAULT_STORE_PATH = ".trialkit/trialkit.db"
"""The default SQLite file, relative to the working directory."""
STORE_ENV_VAR = "TRIALKIT_STORE"
"""The environment variable that overrides the default store (a URL or a path)."""

_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)[^@/]*@")


def resolve_store_url(value: str | None = None, *, create: bool = True) -> str:
    """The store URL to use: `value`, else `$TRIALKIT_STORE`, else SQLite at `DEFAULT_STORE_PATH`.

    A value without `://` is the path of a SQLite file. With `create`, the folder of a SQLite
    file is created when it does not exist yet; without, nothing is touched.
    """
    raw = value or os.environ.get(STORE_ENV_VAR) or DEFAULT_STORE_PATH
    url = raw if "://" in raw else sqlite_url(raw)
    if create:
        prepare_sqlite_folder(url)
    return url


def sqlite_url(path: str | Path) -> str:
    """The URL of the SQLite file at `path` (made absolute against the working directory)."""
    absolute = Path(path).expanduser().absolute()
    return URL.create("sqlite", database=str(absolute)).render_as_string(hide_password=False)


def mask_url(url: str) -> str:
    """`url` with its password hidden, fit for messages (works on unparseable URLs too)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return _PASSWORD_IN_URL.sub(r"\1***@", url)


def parse_url(url: str) -> URL:
    """Parse a store URL; a bad one is a `StoreError` naming it (without its password)."""
    try:
        return make_url(url)
    except ArgumentError:
        raise StoreError(f"not a valid store URL: {mask_url(url)}") from None


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL, or `None` for another database or an in-memory SQLite one."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    if url.database.startswith("file:") or url.query.get("mode") == "memory":
        return None
    return Path(url.database)


def is_sqlite_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and sqlite_file(url) is None


def prepare_sqlite_folder(url: str) -> None:
    """Create the folder of a SQLite file URL if needed; other URLs are left alone."""
    path = sqlite_file(parse_url(url))
    if path is None or path.parent.is_dir():
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the folder {path.parent} for the store: {exc.strerror or exc}"
        ) from None
