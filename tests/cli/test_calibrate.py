"""`trialkit calibrate` on a real store: a suite whose grader gives numbers stands in for a
judge, and a labels file holds a reviewer's verdicts on its trials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trialkit import GradeContext, Suite, Task, grader, graders, run_sync
from trialkit.cli.calibrate import calibrate_command
from trialkit.cli.main import cli
from trialkit.graders import GraderLike
from trialkit.store import Store

# The stand-in judge's score of each trial; it passes at 0.5.
JUDGE = {
    ("capital", 0): 0.9,
    ("capital", 1): 0.4,
    ("capital", 2): 0.8,
    ("sum", 0): 0.2,
    ("sum", 1): 0.7,
    ("sum", 2): 0.1,
}
# The reviewer: agrees on capital#0, capital#2 and sum#0, not on capital#1 and sum#1, and
# cannot tell on sum#2. Pairs: judge 0.9 0.4 0.8 0.2 0.7 against human 1 1 1 0 0.
VERDICTS = {
    ("capital", 0): "pass",
    ("capital", 1): "pass",
    ("capital", 2): "pass",
    ("sum", 0): "fail",
    ("sum", 1): "fail",
    ("sum", 2): "unknown",
}


@grader(name="judge", pass_at=0.5)
def judge(ctx: GradeContext) -> float:
    return JUDGE[ctx.task.id, ctx.trial_index]


def agent(prompt: str) -> str:
    return "Paris" if "capital" in prompt else "4"


def make_suite(*extra: GraderLike) -> Suite:
    return Suite(
        id="calibration",
        kind="capability",
        trials=3,
        harness=agent,
        tasks=[
            Task(id="capital", input="The capital of France?", graders=[judge, *extra]),
            Task(id="sum", input="2 + 2?", graders=[judge, *extra]),
        ],
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """The store's URL, the run "nightly" (judge only) and the run "mixed" (judge and a code
    check)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('calibrate')}/s.db"
    with Store(url) as opened:
        nightly = run_sync(make_suite(), store=opened, name="nightly").run.id
        mixed = run_sync(make_suite(graders.contains("paris")), store=opened, name="mixed").run.id
    return url, nightly, mixed


def labels_file(folder: Path, run: str | None, name: str = "labels.jsonl") -> Path:
    path = folder / name
    rows = [
        {"task_id": task, "trial": index, "verdict": verdict}
        | ({} if run is None else {"run_id": run})
        for (task, index), verdict in VERDICTS.items()
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def invoke(url: str, *args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(calibrate_command, [*map(str, args), "--store", url])
    return result.exit_code, result.stdout, result.stderr


def test_calibrate_prints_the_figures(store: tuple[str, str, str], tmp_path: Path) -> None:
    url, nightly, _ = store

    code, out, err = invoke(url, "--labels", labels_file(tmp_path, "nightly"))

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"grader 'judge' against human labels · run {nightly}"
    assert lines[1] == "6 labels: 5 compared, 1 left out (1 human said unknown)"
    assert "  mean abs error  0.360" in lines  # (0.1 + 0.6 + 0.2 + 0.2 + 0.7) / 5
    assert "  agreement       60.0%  (95% CI 23.1%–88.2%)" in lines
    assert "  Cohen's kappa   0.167" in lines  # (5·3 − 13) / (25 − 13)
    first = lines.index("largest disagreements (|judge − human|):") + 1
    assert lines[first : first + 2] == [
        f"  0.70  judge 0.70 pass, human 0.00 fail  trialkit transcripts show '{nightly}/sum#1'",
        f"  0.60  judge 0.40 fail, human 1.00 pass  "
        f"trialkit transcripts show '{nightly}/capital#1'",
    ]


def test_the_transcript_command_of_a_disagreement_works(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    url, nightly, _ = store
    invoke(url, "--labels", labels_file(tmp_path, nightly), "--json", tmp_path / "c.json")
    command = json.loads((tmp_path / "c.json").read_text())["disagreements"][0]["command"]
    ref = command.removeprefix("trialkit transcripts show ").strip("'")

    result = CliRunner().invoke(cli, ["transcripts", "show", ref, "--json", "--store", url])

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["task_id"] == "sum"


def test_json_output_carries_every_figure(store: tuple[str, str, str], tmp_path: Path) -> None:
    url, nightly, _ = store

    code, _, _ = invoke(
        url, "--labels", labels_file(tmp_path, nightly), "--json", tmp_path / "out/c.json"
    )

    assert code == 0
    found = json.loads((tmp_path / "out/c.json").read_text())
    assert found["schema_version"] == 1
    assert (found["grader"], found["runs"], found["pairs"]) == ("judge", [nightly], 5)
    assert found["kappa"]["value"] == pytest.approx(1 / 6)
    assert found["excluded"]["human_unknown"] == 1
    assert found["confusion"] == {
        "human_pass_judge_pass": 2,
        "human_pass_judge_fail": 1,
        "human_fail_judge_pass": 1,
        "human_fail_judge_fail": 1,
    }


@pytest.mark.parametrize(
    ("gate", "code", "message"),
    [
        (["--min-kappa", "0.1"], 0, ""),
        (["--min-kappa", "0.6"], 1, "gate failed: Cohen's kappa 0.167 is under --min-kappa 0.6\n"),
        (["--max-mae", "0.4"], 0, ""),
        (
            ["--max-mae", "0.3"],
            1,
            "gate failed: the mean absolute error 0.360 is over --max-mae 0.3\n",
        ),
    ],
)
def test_gates(
    store: tuple[str, str, str], tmp_path: Path, gate: list[str], code: int, message: str
) -> None:
    url, _, _ = store

    found = invoke(url, "--labels", labels_file(tmp_path, "nightly"), *gate)

    assert (found[0], found[2]) == (code, message)


def test_an_undefined_kappa_fails_its_gate_and_says_why(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    url, _, _ = store
    path = tmp_path / "agree.jsonl"
    path.write_text('{"run_id": "nightly", "task_id": "capital", "trial": 0, "verdict": "pass"}\n')

    code, out, err = invoke(url, "--labels", path, "--min-kappa", "0.5")

    assert code == 1
    assert "  Cohen's kappa   undefined: every verdict is pass, so chance agreement is 1" in out
    assert err == (
        "gate failed: Cohen's kappa is undefined (every verdict is pass, so chance agreement "
        "is 1), so it cannot meet --min-kappa 0.5\n"
    )


def test_a_bad_labels_file_is_exit_2_naming_file_line_and_field(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    url, _, _ = store
    path = tmp_path / "labels.csv"
    path.write_text("run_id,task_id,trial,verdict\nnightly,capital,0,pass\nnightly,sum,0,yes\n")

    code, out, err = invoke(url, "--labels", path)

    assert (code, out) == (2, "")
    assert err == (f"error: {path}:3: verdict: Input should be 'pass', 'fail' or 'unknown'\n")


def test_labels_without_a_run_need_run(store: tuple[str, str, str], tmp_path: Path) -> None:
    url, nightly, _ = store
    path = labels_file(tmp_path, None)

    code, _, err = invoke(url, "--labels", path)

    assert code == 2
    assert err == (
        f"error: {path}: the label of capital#0 names no run; give the run with --run RUN\n"
    )
    code, out, _ = invoke(url, "--labels", path, "--run", "nightly")
    assert code == 0
    assert out.startswith(f"grader 'judge' against human labels · run {nightly}\n")


def test_labels_of_several_runs_and_of_another_run(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    url, nightly, mixed = store
    both = tmp_path / "both.jsonl"
    both.write_text(
        labels_file(tmp_path, "nightly").read_text() + labels_file(tmp_path, mixed).read_text()
    )

    code, out, _ = invoke(url, "--labels", both, "--grader", "judge")

    assert code == 0
    assert out.splitlines()[:2] == [
        f"grader 'judge' against human labels · runs {', '.join(sorted([nightly, mixed]))}",
        "12 labels: 10 compared, 2 left out (2 human said unknown)",
    ]
    code, out, _ = invoke(url, "--labels", both, "--run", "mixed", "--grader", "judge")
    assert out.splitlines()[1] == (
        "12 labels: 5 compared, 7 left out (6 for another run, 1 human said unknown)"
    )


def test_the_grader_must_be_chosen_among_several(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    url, _, _ = store
    path = labels_file(tmp_path, "mixed")

    code, _, err = invoke(url, "--labels", path)

    assert code == 2
    assert err == (
        "error: the labeled trials have several graders: contains('paris'), judge; "
        "choose one with --grader\n"
    )
    assert invoke(url, "--labels", path, "--grader", "judge")[0] == 0
    code, _, err = invoke(url, "--labels", path, "--grader", "jugde")
    assert code == 2
    assert err.startswith("error: no labeled trial has a score of grader 'jugde'; their graders: ")


def test_unknown_runs_and_empty_files_are_usage_errors(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    url, _, _ = store

    code, _, err = invoke(url, "--labels", labels_file(tmp_path, "weekly"))
    assert code == 2
    assert err.startswith(f"error: {tmp_path}/labels.jsonl: the label of capital#0: no run ")

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert invoke(url, "--labels", empty)[2] == f"error: {empty}: no labels in the file\n"


def test_csv_labels_and_the_registered_command(store: tuple[str, str, str], tmp_path: Path) -> None:
    url, nightly, _ = store
    path = tmp_path / "labels.csv"
    rows = [f"{nightly},{task},{index},{v}" for (task, index), v in VERDICTS.items()]
    path.write_text("run_id,task_id,trial,verdict\n" + "\n".join(rows) + "\n")

    result = CliRunner().invoke(cli, ["calibrate", "--labels", str(path), "--store", url])

    assert result.exit_code == 0, result.stderr
    assert "  Cohen's kappa   0.167" in result.stdout.splitlines()
