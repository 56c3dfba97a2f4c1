"""Where the store lives, and how a bad location is reported."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

import trialkit.store
from trialkit.store import DEFAULT_STORE_PATH, STORE_ENV_VAR, Store, StoreError, resolve_store_url
from trialkit.store.urls import mask_url, sqlite_url


def _database(url: str) -> Path:
    database = make_url(url).database
    assert database is not None
    return Path(database)


def test_the_public_names_are_pinned() -> None:
    assert sorted(trialkit.store.__all__) == [
        "AmbiguousRun",
        "DEFAULT_STORE_PATH",
        "GraderNotFound",
        "PendingReview",
        "RunNotFound",
        "RunSummary",
        "STORE_ENV_VAR",
        "Store",
        "StoreError",
        "TrialNotFound",
        "resolve_store_url",
    ]


def test_the_default_is_a_sqlite_file_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STORE_ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)

    url = resolve_store_url(None)

    assert make_url(url).get_backend_name() == "sqlite"
    assert _database(url) == tmp_path / DEFAULT_STORE_PATH
    assert (tmp_path / ".trialkit").is_dir()


def test_the_environment_variable_overrides_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STORE_ENV_VAR, str(tmp_path / "env" / "runs.db"))

    url = resolve_store_url(None)

    assert _database(url) == tmp_path / "env" / "runs.db"
    assert (tmp_path / "env").is_dir()


def test_a_value_overrides_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STORE_ENV_VAR, str(tmp_path / "env.db"))
    monkeypatch.chdir(tmp_path)

    assert _database(resolve_store_url("flag/runs.db")) == tmp_path / "flag" / "runs.db"


def test_a_url_is_kept_as_given(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/nested/x.db"

    assert resolve_store_url(url) == url
    assert (tmp_path / "nested").is_dir()
    assert resolve_store_url("postgresql://u@db.example/trialkit") == (
        "postgresql://u@db.example/trialkit"
    )


def test_an_odd_path_still_makes_a_working_url(tmp_path: Path) -> None:
    path = tmp_path / "we?ird #name.db"

    with Store(resolve_store_url(str(path))) as store:
        assert store.list_runs() == []

    assert path.is_file()


def test_store_open_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STORE_ENV_VAR, str(tmp_path / "opened.db"))

    with Store.open() as store:
        assert store.list_runs() == []

    assert (tmp_path / "opened.db").is_file()


def test_passwords_are_masked_in_messages() -> None:
    with pytest.raises(StoreError) as caught:
        Store("postgresql://alice:s3cret@127.0.0.1:1/trialkit")

    message = str(caught.value)
    assert "s3cret" not in message
    assert "alice:***@127.0.0.1" in message
    assert "\n" not in message
    assert mask_url("not parseable://bob:hunter2@host") == "not parseable://bob:***@host"


def test_an_unparseable_url_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="not a valid store URL"):
        Store("no url here")


def test_an_unknown_database_kind_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="unknown database kind in store URL nosuchdb://x"):
        Store("nosuchdb://x")


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are not the tables you are looking for\n" * 100)

    with pytest.raises(StoreError) as caught:
        Store(sqlite_url(path))

    message = str(caught.value)
    assert str(path) in message
    assert "not a database" in message


def test_a_folder_is_not_a_database_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=f"cannot open the store .*{tmp_path.name}"):
        Store(sqlite_url(tmp_path))


def test_a_closed_store_refuses_work(db_url: str) -> None:
    store = Store(db_url)
    store.close()

    with pytest.raises(StoreError, match="is closed"):
        store.list_runs()
