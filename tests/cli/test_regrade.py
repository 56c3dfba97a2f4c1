"""`trialkit regrade RUN`: a stored run scored again with the suite's current graders, into a
new run; the old run is never changed, and judges go through the cassette."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trialkit import Suite, Task, graders
from trialkit._record import ErrorInfo
from trialkit.cli.main import cli
from trialkit.outcome import Outcome
from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.run.regrade import RegradeError, regrade_sync, source_suite
from trialkit.sandbox import netns
from trialkit.score import Score, Verdict
from trialkit.store import Store
from trialkit.task import SuiteKind
from trialkit.transcript import Message, Transcript
from trialkit.trial import Trial, TrialStatus

SUITE_YAML = """\
id: caps
kind: regression
trials: 2
model: scripted/echo
tasks:
  - id: france
    input: Paris is the capital of France
    graders:
      - {{contains: {france}}}
      - {{not_contains: {avoid}}}
  - id: germany
    input: Berlin is the capital of Germany
    graders: [{{contains: berlin}}]{extra}
"""


def write_yaml(folder: Path, france: str = "paris", avoid: str = "rome", extra: str = "") -> Path:
    path = folder / "suite.yaml"
    path.write_text(SUITE_YAML.format(france=france, avoid=avoid, extra=extra), encoding="utf-8")
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def run_id_of(out: str) -> str:
    return out.strip().splitlines()[-1].rsplit("run ", 1)[1]


def trials_of(store: Path, run_id: str) -> list[dict[str, Any]]:
    with Store(f"sqlite:///{store}") as opened:
        return [t.model_dump(mode="json") for t in opened.iter_trials(run_id)]


def verdicts(store: Path, run_id: str) -> dict[tuple[str, int], str]:
    return {(t["task_id"], t["index"]): t["verdict"] for t in trials_of(store, run_id)}


def score_names(store: Path, run_id: str, task: str) -> list[list[str]]:
    return [
        [s["name"] for s in t["scores"]] for t in trials_of(store, run_id) if t["task_id"] == task
    ]


def config_of(store: Path, run_id: str) -> dict[str, Any]:
    from trialkit.store.resume import load_run

    with Store(f"sqlite:///{store}") as opened:
        return load_run(opened, run_id)[0].config


def run_count(store: Path) -> int:
    with Store(f"sqlite:///{store}") as opened:
        return len(opened.list_runs())


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A passing run of suite.yaml (loaded relative to tmp_path), and its store."""
    monkeypatch.chdir(tmp_path)
    write_yaml(tmp_path)
    store = tmp_path / "t.db"
    code, out, err = invoke("run", "suite.yaml", "--store", str(store), "--no-progress")
    assert (code, err) == (0, "")
    return store, run_id_of(out)


def test_regrade_scores_the_stored_outputs_with_the_changed_suite(
    stored: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, old = stored
    before = trials_of(store, old)
    write_yaml(tmp_path, france="lyon", extra="\n  - id: spain\n    input: Madrid")
    # The run recorded where its suite came from: the regrade finds it from any folder.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    code, out, err = invoke("regrade", old, "--store", str(store))

    assert code == 1, err  # a regression task fails now: the gate of the new run
    assert f"regrade of run {old}: 2 verdicts changed (pass→fail 2, fail→pass 0, other 0) " in out
    new = out.strip().splitlines()[-1].split()[2].rstrip(":")
    assert new != old
    assert "gate failed (exit 1): regression tasks did not pass: france" in out
    assert verdicts(store, new) == {
        ("france", 0): "fail",
        ("france", 1): "fail",
        ("germany", 0): "pass",
        ("germany", 1): "pass",
    }  # the same tasks and trial numbers; the suite's new task is not the run's
    assert score_names(store, new, "france") == [["contains('lyon')", "not_contains('rome')"]] * 2
    config = config_of(store, new)
    assert config["regrade_of"] == old
    assert config["graders"] is None
    assert config["source"]["target"] == "suite.yaml"
    after_new = {(t["task_id"], t["index"]): t for t in trials_of(store, new)}
    for trial in before:  # what the agent did is copied, only the grading is new
        copy = after_new[trial["task_id"], trial["index"]]
        for field in ("transcript", "outcome", "usage", "duration_s", "started_at", "model"):
            assert copy[field] == trial[field], field
    assert trials_of(store, old) == before  # the old run is untouched


def test_a_grader_added_to_the_suite_is_graded(stored: tuple[Path, str], tmp_path: Path) -> None:
    store, old = stored
    write_yaml(tmp_path, avoid="capital")  # now every france output fails it

    code, _, _ = invoke("regrade", old, "--store", str(store), "--name", "strict")

    assert code == 1
    with Store(f"sqlite:///{store}") as opened:
        new = opened.resolve_run("strict")
    assert (
        score_names(store, new, "france") == [["contains('paris')", "not_contains('capital')"]] * 2
    )
    assert verdicts(store, new)["france", 0] == "fail"


def test_grader_regrades_only_the_named_ones_and_keeps_the_other_scores(
    stored: tuple[Path, str], tmp_path: Path
) -> None:
    store, old = stored
    write_yaml(tmp_path, france="lyon", avoid="paris")  # both checks of france would fail now

    code, out, _ = invoke("regrade", old, "--store", str(store), "--grader", "contains")

    assert code == 1
    new = out.strip().splitlines()[-1].split()[2].rstrip(":")
    assert config_of(store, new)["graders"] == ["contains"]
    france = [t for t in trials_of(store, new) if t["task_id"] == "france"]
    for trial in france:
        by_name = {s["name"]: s["verdict"] for s in trial["scores"]}
        # contains('paris') was replaced by the suite's contains('lyon'), in its place;
        # not_contains('rome') is kept as stored (the suite's not_contains('paris') is not run)
        assert list(by_name) == ["contains('lyon')", "not_contains('rome')"]
        assert by_name == {"contains('lyon')": "fail", "not_contains('rome')": "pass"}
        assert trial["verdict"] == "fail"

    # A full name keeps a stored score of another name: both are on the trial.
    code, out, _ = invoke(
        "regrade", old, "--store", str(store), "--grader", "not_contains('paris')"
    )
    new = out.strip().splitlines()[-1].split()[2].rstrip(":")
    assert score_names(store, new, "france")[0] == [
        "contains('paris')",
        "not_contains('rome')",
        "not_contains('paris')",
    ]
    assert verdicts(store, new)["france", 0] == "fail"
    assert verdicts(store, new)["germany", 0] == "pass"  # it has no such grader: as stored


def test_bad_usage_is_one_line_and_stores_nothing(stored: tuple[Path, str], tmp_path: Path) -> None:
    store, old = stored
    runs = run_count(store)

    code, _, err = invoke("regrade", "nope", "--store", str(store))
    assert code == 2
    assert err.startswith("error: no run matches 'nope'") and err.count("\n") == 1

    code, _, err = invoke("regrade", old, "--store", str(store), "--grader", "judge")
    assert code == 2
    assert err == (
        "error: suite 'caps' has no grader named 'judge'; its graders: contains('berlin'), "
        "contains('paris'), not_contains('rome')\n"
    )

    (tmp_path / "suite.yaml").write_text(
        SUITE_YAML.format(france="paris", avoid="rome", extra="").split("  - id: germany")[0]
    )
    code, _, err = invoke("regrade", old, "--store", str(store))
    assert code == 2
    assert err == (
        f"error: run {old!r} has tasks suite 'caps' no longer has: germany; nothing was regraded\n"
    )

    other = tmp_path / "other.yaml"
    other.write_text("id: other\nmodel: scripted/echo\ntasks: [{id: t, input: hi}]\n")
    code, _, err = invoke("regrade", old, "--store", str(store), "--suite", str(other))
    assert code == 2
    assert "ran suite 'caps', not 'other'" in err
    assert run_count(store) == runs


JUDGE_SUITE = """\
from pathlib import Path

from trialkit import Suite, Task, graders
from trialkit.models import ScriptedModel

CALLS = Path(__file__).with_name("judge_calls.log")


def answer(request, trial_index):
    with CALLS.open("a") as log:
        log.write(f"{trial_index}\\n")
    return '{"reasoning": "names Paris", "score": 1}'


def agent(prompt):
    return "Paris"


suite = Suite(
    id="judged",
    trials=2,
    harness=agent,
    tasks=[
        Task(
            id="france",
            input="Capital of France?",
            graders=[graders.judge("Names Paris.", model=ScriptedModel("judge", answer))],
        )
    ],
)
"""


def test_judges_record_then_replay_from_the_cassette_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "judged.py").write_text(JUDGE_SUITE)
    calls = tmp_path / "judge_calls.log"
    store = str(tmp_path / "t.db")
    code, out, _ = invoke("run", "judged.py", "--store", store, "--no-progress")
    assert code == 0
    old = run_id_of(out)
    assert calls.read_text().split() == ["0", "1"]
    cassette = str(tmp_path / "cassette")

    code, out, _ = invoke(
        "regrade", old, "--store", store, "--cache", cassette, "--cache-mode", "record"
    )
    assert code == 0
    recorded = out.strip().splitlines()[-1].split()[2].rstrip(":")
    assert calls.read_text().split() == ["0", "1", "0", "1"]

    def kept_out() -> None:  # never this test process into a namespace of its own
        raise netns.Unavailable("in-process test")

    monkeypatch.setattr(netns, "_enter", kept_out)
    monkeypatch.setattr(netns, "_why_not", None)  # as it was, after the test
    code, out, err = invoke(
        "regrade", old, "--store", store, "--cache", cassette, "--cache-mode", "replay", "--offline"
    )
    assert code == 0
    assert err.startswith("--offline: no network namespace (in-process test): ")
    assert len(err.splitlines()) == 1
    replayed = out.strip().splitlines()[-1].split()[2].rstrip(":")
    assert calls.read_text().split() == ["0", "1", "0", "1"]  # no call reached the judge
    scores = [t["scores"] for t in trials_of(Path(store), replayed)]
    assert scores == [t["scores"] for t in trials_of(Path(store), recorded)]
    assert [s[0]["value"] for s in scores] == [1.0, 1.0]
    calls_made = [t["transcript"]["model_calls"] for t in trials_of(Path(store), replayed)]
    assert [[c["replayed"] for c in made] for made in calls_made] == [[True], [True]]
    config = config_of(Path(store), replayed)["cache"]
    assert config["mode"] == "replay" and config["offline_confined"] is False
    assert config["offline_note"] == err.strip().removeprefix("--offline: ")

    # Replay is strict: an empty cassette answers nothing, and the judge's score errors.
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, _ = invoke(
        "regrade", old, "--store", store, "--cache", str(empty), "--cache-mode", "replay"
    )
    assert code == 3
    assert calls.read_text().split() == ["0", "1", "0", "1"]


# -- the library, over hand-made trials ---------------------------------------------------------

STARTED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def trial(index: int, *, status: TrialStatus, phase: str | None = None) -> Trial:
    error = None if phase is None else ErrorInfo(type="Boom", message="it broke", phase=phase)
    verdict = Verdict.PASS if status is TrialStatus.COMPLETED else Verdict.ERROR
    scores = [Score.from_bool(True, name="contains('paris')")] if phase != "agent" else []
    return Trial(
        run_id="old",
        task_id="france",
        index=index,
        status=status,
        verdict=verdict,
        transcript=Transcript(messages=[Message(role="user", content="hi")]),
        outcome=Outcome(output="Paris"),
        scores=scores,
        error=error,
        started_at=STARTED,
        duration_s=1.0,
    )


def test_a_trial_that_errored_before_grading_stays_an_error(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path}/t.db") as store:
        store.create_run(
            RunInfo(id="old", started_at=STARTED),
            SuiteInfo(id="caps", kind=SuiteKind.REGRESSION),
            [TaskPlan(id="france", kind=SuiteKind.REGRESSION)],
        )
        store.save_trials(
            [
                trial(0, status=TrialStatus.COMPLETED),
                trial(1, status=TrialStatus.ERROR, phase="agent"),
                trial(2, status=TrialStatus.ERROR, phase="grading"),  # a judge's replay missed
                trial(3, status=TrialStatus.TIMEOUT, phase="capture"),
            ]
        )
        suite = Suite(
            id="caps",
            kind="regression",
            tasks=[Task(id="france", input="hi", graders=[graders.contains("par")])],
        )

        done = regrade_sync(store, "old", suite)

        new = {t.index: t for t in store.iter_trials(done.report.run.id)}
        assert [new[i].verdict for i in range(4)] == [
            Verdict.PASS,
            Verdict.ERROR,
            Verdict.PASS,  # graded again, now that the grader works
            Verdict.ERROR,
        ]
        assert new[1].error == ErrorInfo(type="Boom", message="it broke", phase="agent")
        assert new[1].scores == []  # its outcome is not graded into a pass
        assert new[2].status is TrialStatus.COMPLETED and new[2].error is None
        assert [s.name for s in new[0].scores] == ["contains('par')"]
        assert done.changes.other == 1 and done.changes.unchanged == 3
        with pytest.raises(RegradeError, match="does not record its suite's source"):
            source_suite({}, None, run_id="old")
        assert json.loads(done.report.to_json())["run"]["id"] == done.report.run.id


def test_a_reviewers_label_is_kept_and_copied_to_the_new_run(tmp_path: Path) -> None:
    from trialkit.labels import Label

    with Store(f"sqlite:///{tmp_path}/t.db") as store:
        store.create_run(
            RunInfo(id="old", started_at=STARTED),
            SuiteInfo(id="caps", kind=SuiteKind.REGRESSION),
            [TaskPlan(id="france", kind=SuiteKind.REGRESSION)],
        )
        store.save_trials([trial(i, status=TrialStatus.COMPLETED) for i in range(2)])
        # A reviewer overruled the check on trial 0: its output does not count as a pass.
        store.save_label(
            Label(task_id="france", trial=0, grader="contains('paris')", verdict="fail"),
            run_id="old",
        )
        suite = Suite(
            id="caps",
            kind="regression",
            tasks=[Task(id="france", input="hi", graders=[graders.contains("paris")])],
        )

        done = regrade_sync(store, "old", suite)

        new_id = done.report.run.id
        new = {t.index: t for t in store.iter_trials(new_id)}
        assert [new[0].verdict, new[1].verdict] == [Verdict.FAIL, Verdict.PASS]
        assert [label.verdict for label in store.labels(new_id)] == ["fail"]
        assert [label.trial for label in store.labels("old")] == [0]
