"""Fixtures for the store tests: a store in a temp folder and a sample run to put in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trialkit.store import Store
from trialkit.store.urls import sqlite_url

from ._samples import Sample, make_sample


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return sqlite_url(tmp_path / "store" / "trialkit.db")


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store(db_url) as opened:
        yield opened


@pytest.fixture
def sample() -> Sample:
    return make_sample("run-abc123", name="nightly")
