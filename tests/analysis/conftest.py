"""The analyses read the store with their own queries: run them on SQLite and PostgreSQL."""

from tests.store.conftest import db_url, postgres_admin

__all__ = ["db_url", "postgres_admin"]
