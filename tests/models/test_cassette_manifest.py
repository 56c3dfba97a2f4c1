"""`prune` keeps what each suite's last run used: suites that share a cassette (the
quickstart's two) keep each other's recordings, and a partial run forgets nothing."""

from __future__ import annotations

import json
from pathlib import Path

from trialkit import Suite, Task, graders, run_sync
from trialkit.models.cassette import MANIFEST, CacheMode, Cassette, read_manifest
from trialkit.models.cassette_tools import cassette_files, prune_cassette


def suite(suite_id: str, *inputs: str) -> Suite:
    tasks = [Task(id=i, input=i, graders=[graders.contains(i)]) for i in inputs]
    return Suite(id=suite_id, model="scripted/echo", tasks=tasks)


def run(root: Path, s: Suite, mode: str, **options: object) -> None:
    report = run_sync(s, cassette=Cassette(root, CacheMode(mode)), **options)  # type: ignore[arg-type]
    assert report.summary.errors == 0


def test_two_suites_sharing_a_cassette_keep_each_others_recordings(tmp_path: Path) -> None:
    capability, regression = suite("cap", "a", "b"), suite("reg", "c")
    run(tmp_path, capability, "record")
    run(tmp_path, regression, "record")
    assert len(cassette_files(tmp_path)) == 3

    run(tmp_path, capability, "replay")
    run(tmp_path, regression, "replay")

    assert prune_cassette(tmp_path, dry_run=False) == []
    assert len(cassette_files(tmp_path)) == 3
    assert sorted(read_manifest(tmp_path / MANIFEST)) == ["cap", "reg"]


def test_a_whole_run_replaces_its_suites_keys(tmp_path: Path) -> None:
    run(tmp_path, suite("cap", "a", "b"), "record")
    run(tmp_path, suite("reg", "c"), "record")

    run(tmp_path, suite("cap", "a"), "replay")  # the suite no longer has task b

    stale = prune_cassette(tmp_path, dry_run=True)
    assert len(stale) == 1
    assert '"b"' in stale[0].read_text(encoding="utf-8")  # task b's recording, alone


def test_a_selection_of_tasks_adds_to_the_suites_keys(tmp_path: Path) -> None:
    whole = suite("cap", "a", "b")
    run(tmp_path, whole, "record")

    run(tmp_path, whole, "replay", task_ids=["a"])

    assert prune_cassette(tmp_path, dry_run=True) == []


def test_a_first_version_manifest_still_counts(tmp_path: Path) -> None:
    run(tmp_path, suite("cap", "a"), "record")
    keys = read_manifest(tmp_path / MANIFEST)["cap"]["keys"]
    (tmp_path / MANIFEST).write_text(
        json.dumps({"schema_version": 1, "written_at": "2026-11-30T00:00:00+00:00", "keys": keys}),
        encoding="utf-8",
    )
    run(tmp_path, suite("reg", "c"), "record")

    assert prune_cassette(tmp_path, dry_run=True) == []  # the old keys are kept, as suite ""
    assert sorted(read_manifest(tmp_path / MANIFEST)) == ["", "reg"]
