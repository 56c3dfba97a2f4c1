"""The values of a command-line agent's trial that another run sees differently (its folder's
slug, its home, today's date and month, the kernel's release, the time zone), each paired
with the placeholder that stands for it in cassette keys and recordings."""

from __future__ import annotations

import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from trialkit.harness import _values
from trialkit.harness._values import (
    DATE,
    HOME,
    MONTH,
    OS_RELEASE,
    TIMEZONE,
    WORKSPACE_SLUG,
    agent_values,
)

MONTHS = "January February March April May June July August September October November December"


def placeholders(pairs: list[tuple[str, str]], placeholder: str) -> set[str]:
    return {value for value, stand_in in pairs if stand_in == placeholder}


def slug(path: Path | str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in str(path))


def dates_in(zone: str | None) -> set[datetime.date]:
    """Today where `zone` is (local time for None), read twice: a test may straddle midnight."""
    if zone is None:
        return {datetime.date.today()}
    return {datetime.datetime.now(ZoneInfo(zone)).date()}


@pytest.fixture
def release(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "6.1.0-18-amd64"
    monkeypatch.setattr(_values.platform, "release", lambda: value)
    return value


def test_the_workspace_slug_is_each_non_alphanumeric_character_as_a_dash(
    tmp_path: Path, release: str
) -> None:
    workspace = tmp_path / "my ws.1_x"
    workspace.mkdir()
    pairs = agent_values(workspace, None, None)
    assert placeholders(pairs, WORKSPACE_SLUG) == {slug(workspace)}
    assert slug(workspace).endswith("-my-ws-1-x")
    assert all(value != str(workspace) for value, _ in pairs)  # the trial keeps the path itself
    assert placeholders(pairs, HOME) == set()


def test_a_folder_reached_by_a_link_has_both_spellings(tmp_path: Path, release: str) -> None:
    real_workspace, real_home = tmp_path / "real-ws", tmp_path / "real-home"
    real_workspace.mkdir()
    real_home.mkdir()
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.symlink_to(real_workspace)
    home.symlink_to(real_home)
    pairs = agent_values(workspace, home, None)
    assert placeholders(pairs, WORKSPACE_SLUG) == {slug(workspace), slug(real_workspace.resolve())}
    assert placeholders(pairs, HOME) == {str(home), str(real_home.resolve())}


def test_a_home_without_links_is_one_pair(tmp_path: Path, release: str) -> None:
    home = (tmp_path / "home").resolve()
    home.mkdir()
    pairs = agent_values(tmp_path, home, None)
    assert [pair for pair in pairs if pair[1] == HOME] == [(str(home), HOME)]


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "Etc/GMT+12", "Etc/UTC", ":Asia/Tokyo"])
def test_the_date_and_month_are_the_agents_in_its_time_zone(
    tmp_path: Path, release: str, zone: str
) -> None:
    before = dates_in(zone.lstrip(":"))
    pairs = agent_values(tmp_path, None, zone)
    expected = before | dates_in(zone.lstrip(":"))
    (date,) = placeholders(pairs, DATE)
    today = datetime.date.fromisoformat(date)
    assert today in expected
    month = MONTHS.split()[today.month - 1]
    assert placeholders(pairs, MONTH) == {f"{month} {today.year}"}
    assert placeholders(pairs, TIMEZONE) == {zone.lstrip(":")}


def test_the_two_ends_of_the_clock_can_be_a_day_apart(tmp_path: Path, release: str) -> None:
    east = placeholders(agent_values(tmp_path, None, "Pacific/Kiritimati"), DATE)
    west = placeholders(agent_values(tmp_path, None, "Etc/GMT+12"), DATE)
    (east_day,), (west_day,) = east, west
    gap = datetime.date.fromisoformat(east_day) - datetime.date.fromisoformat(west_day)
    assert gap in (datetime.timedelta(days=1), datetime.timedelta(days=2))  # UTC+14 vs UTC-12


@pytest.mark.parametrize("zone", [None, "", "UTC", "GMT", "EST5EDT"])
def test_a_zone_without_a_slash_is_no_pair_and_the_date_is_local_or_its_own(
    tmp_path: Path, release: str, zone: str | None
) -> None:
    pairs = agent_values(tmp_path, None, zone)
    assert placeholders(pairs, TIMEZONE) == set()
    (date,) = placeholders(pairs, DATE)
    zone_name = zone or None
    assert datetime.date.fromisoformat(date) in dates_in(zone_name) | dates_in(zone_name)


def test_an_unknown_zone_falls_back_to_local_time(tmp_path: Path, release: str) -> None:
    before = datetime.date.today()
    pairs = agent_values(tmp_path, None, "Nowhere/Atlantis")
    (date,) = placeholders(pairs, DATE)
    assert datetime.date.fromisoformat(date) in {before, datetime.date.today()}


def test_a_zone_file_path_is_no_time_zone_name(tmp_path: Path, release: str) -> None:
    pairs = agent_values(tmp_path, None, ":/etc/localtime")
    assert placeholders(pairs, TIMEZONE) == set()


@pytest.mark.parametrize(
    ("kernel", "kept"),
    [("6.1.0-18-amd64", True), ("23.4.0", True), ("10", False), ("", False), ("generic", False)],
)
def test_the_os_release_is_kept_when_it_is_distinctive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel: str, kept: bool
) -> None:
    monkeypatch.setattr(_values.platform, "release", lambda: kernel)
    pairs = agent_values(tmp_path, None, None)
    assert placeholders(pairs, OS_RELEASE) == ({kernel} if kept else set())


def test_every_pair_has_a_distinct_placeholder_kind_and_a_value(
    tmp_path: Path, release: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    pairs = agent_values(tmp_path, home, "Europe/Paris")
    assert {placeholder for _, placeholder in pairs} == {
        WORKSPACE_SLUG,
        HOME,
        DATE,
        MONTH,
        OS_RELEASE,
        TIMEZONE,
    }
    assert all(value for value, _ in pairs)
    assert (release, OS_RELEASE) in pairs
    assert ("Europe/Paris", TIMEZONE) in pairs
