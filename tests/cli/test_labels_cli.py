"""`trialkit labels export|import`: labels out to a file, edited elsewhere, and back in."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.graders.human import human
from trialkit.labels import Label, read_labels, write_labels
from trialkit.score import Verdict
from trialkit.store import Store


def agent(prompt: str) -> str:
    return "Paris." if "France" in prompt else "Lima."


@pytest.fixture
def url(tmp_path: Path) -> str:
    """Run "nightly" of two tasks of two trials each, all waiting for a reviewer, and an
    older run "other" of the same suite."""
    store_url = f"sqlite:///{tmp_path}/store.db"
    suite = Suite(
        id="capitals",
        kind="regression",
        trials=2,
        harness=agent,
        tasks=[
            Task(id="france", input="Capital of France?", graders=[human()]),
            Task(id="peru", input="Capital of Peru?", graders=[graders.contains("lima"), human()]),
        ],
    )
    run_sync(suite, store=store_url, name="other")
    run_sync(suite, store=store_url, name="nightly")
    return store_url


def invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--store", url])


def run_id(url: str, name: str = "nightly") -> str:
    with Store(url) as store:
        return store.resolve_run(name)


def stored_labels(url: str) -> list[tuple[str, int, str, float | None, str | None]]:
    with Store(url) as store:
        labels = store.labels(run_id(url))
    return [(lb.task_id, lb.trial, lb.verdict, lb.score, lb.reviewer) for lb in labels]


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_export_edit_import_round_trip(url: str, tmp_path: Path, suffix: str) -> None:
    todo = tmp_path / f"todo.{suffix}"

    exported = invoke(url, "labels", "export", "nightly", "-o", str(todo), "--pending")

    assert exported.exit_code == 0, exported.output
    assert f"wrote 4 pending reviews of run {run_id(url)}" in exported.stdout
    rows = read_labels(todo)
    assert [(r.task_id, r.trial, r.grader, r.verdict) for r in rows] == [
        ("france", 0, "human", "unknown"),
        ("france", 1, "human", "unknown"),
        ("peru", 0, "human", "unknown"),
        ("peru", 1, "human", "unknown"),
    ]
    answers = {("france", 0): "pass", ("france", 1): "fail", ("peru", 0): "pass"}
    edited = [
        row.model_copy(update={"verdict": answers[(row.task_id, row.trial)], "reviewer": "cy"})
        for row in rows
        if (row.task_id, row.trial) in answers
    ]
    write_labels([*edited, rows[3]], todo)  # peru#1 left as exported

    imported = invoke(url, "labels", "import", str(todo))

    assert imported.exit_code == 0, imported.output
    assert imported.stdout.strip() == (
        f"imported 3 labels into run {run_id(url)} (1 left as exported: skipped); "
        "1 review still pending"
    )
    assert stored_labels(url) == [
        ("france", 0, "pass", 1.0, "cy"),
        ("france", 1, "fail", 0.0, "cy"),
        ("peru", 0, "pass", 1.0, "cy"),
    ]
    with Store(url) as store:
        report = store.load_report(run_id(url))
    assert [t.verdict for t in report.tasks] == [Verdict.FAIL, Verdict.UNKNOWN]
    assert (report.summary.passed, report.summary.failed, report.summary.pending) == (2, 1, 1)

    back = tmp_path / f"labels.{suffix}"
    again = invoke(url, "labels", "export", "nightly", "-o", str(back))
    assert again.exit_code == 0
    assert "wrote 3 labels" in again.stdout
    labels = read_labels(back)
    assert all(lb.labeled_at is not None and lb.reviewer == "cy" for lb in labels)
    reimported = invoke(url, "labels", "import", str(back))
    assert reimported.exit_code == 0, reimported.output
    with Store(url) as store:
        assert store.labels(run_id(url)) == labels


def test_scores_are_kept_when_the_file_gives_them(url: str, tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(
        "run_id,task_id,trial,grader,verdict,score,reviewer,labeled_at,comment\n"
        f'{run_id(url)},france,0,human,pass,0.7,dee,2025-03-01T10:00:00+02:00," kind, mostly"\n',
        encoding="utf-8",
    )

    result = invoke(url, "labels", "import", str(path))

    assert result.exit_code == 0, result.output
    with Store(url) as store:
        (label,) = store.labels(run_id(url))
        trial = store.load_trial(run_id(url), "france", 0)
    assert (label.score, label.comment) == (0.7, " kind, mostly")
    assert label.labeled_at is not None and label.labeled_at.isoformat() == (
        "2025-03-01T08:00:00+00:00"
    )
    assert trial.verdict is Verdict.PASS
    assert trial.scores[0].value == 0.7


def test_a_bad_file_exits_2_naming_the_line_and_keeps_what_is_stored(
    url: str, tmp_path: Path
) -> None:
    good = tmp_path / "good.jsonl"
    write_labels([Label(run_id=run_id(url), task_id="france", trial=0, verdict="pass")], good)
    assert invoke(url, "labels", "import", str(good)).exit_code == 0
    bad = tmp_path / "bad.jsonl"
    lines = [
        {"task_id": "france", "trial": 0, "verdict": "fail"},
        {"task_id": "france", "trial": 1, "verdict": "maybe"},
    ]
    bad.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")

    result = invoke(url, "labels", "import", str(bad), "--run", "nightly")

    assert result.exit_code == 2
    assert f"{bad}:2: verdict:" in result.stderr
    assert stored_labels(url) == [("france", 0, "pass", 1.0, None)]


def test_a_label_for_a_trial_that_does_not_exist_changes_nothing(url: str, tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["task_id", "trial", "verdict"])
        writer.writerow(["france", "0", "pass"])
        writer.writerow(["france", "5", "fail"])

    result = invoke(url, "labels", "import", str(path), "--run", "nightly")

    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: {path}: run {run_id(url)!r} has no trial france#5; nothing was imported"
    )
    assert stored_labels(url) == []


def test_a_label_for_a_grader_the_trial_does_not_have_is_an_error(url: str, tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    write_labels([Label(task_id="peru", trial=0, grader="judge", verdict="pass")], path)

    result = invoke(url, "labels", "import", str(path), "--run", "nightly")

    assert result.exit_code == 2
    assert "has no grader 'judge'; its graders: \"contains('lima')\", 'human'" in result.stderr


def test_the_run_comes_from_the_file_or_from_run(url: str, tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    write_labels([Label(task_id="peru", trial=1, verdict="fail")], path)

    missing = invoke(url, "labels", "import", str(path))
    assert missing.exit_code == 2
    assert "names no run; give the run with --run RUN" in missing.stderr

    named = tmp_path / "named.jsonl"
    write_labels([Label(run_id="other", task_id="peru", trial=1, verdict="fail")], named)
    clash = invoke(url, "labels", "import", str(named), "--run", "nightly")
    assert clash.exit_code == 2
    assert f"is for run {run_id(url, 'other')}, not the run {run_id(url)}" in clash.stderr
    unknown = tmp_path / "unknown.jsonl"
    write_labels([Label(run_id="nope", task_id="peru", trial=1, verdict="fail")], unknown)
    assert "no run matches 'nope'" in invoke(url, "labels", "import", str(unknown)).stderr
    assert stored_labels(url) == []

    assert invoke(url, "labels", "import", str(path), "--run", "nightly").exit_code == 0
    assert invoke(url, "labels", "import", str(named)).exit_code == 0  # by run name
    assert stored_labels(url) == [("peru", 1, "fail", 0.0, None)]
    with Store(url) as store:
        assert [lb.task_id for lb in store.labels(run_id(url, "other"))] == ["peru"]


def test_export_refuses_other_file_kinds(url: str, tmp_path: Path) -> None:
    result = invoke(url, "labels", "export", "nightly", "-o", str(tmp_path / "labels.txt"))

    assert result.exit_code == 2
    assert "a labels file ends in .jsonl or .csv" in result.stderr
    assert not (tmp_path / "labels.txt").exists()


def test_importing_a_file_of_untouched_rows_imports_nothing(url: str, tmp_path: Path) -> None:
    todo = tmp_path / "todo.csv"
    invoke(url, "labels", "export", "nightly", "-o", str(todo), "--pending")

    result = invoke(url, "labels", "import", str(todo))

    assert result.exit_code == 0
    assert result.stdout.strip() == f"nothing to import from {todo} (4 left as exported: skipped)"
    with Store(url) as store:
        assert len(store.pending_reviews(run_id(url))) == 4
