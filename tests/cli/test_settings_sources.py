"""`trialkit run` as a subprocess: each setting from its flag, else the environment, else
`[tool.trialkit]` of the nearest pyproject.toml, else the suite; bad values in the environment or
pyproject.toml are one line naming where they are, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from trialkit.store import Store, resolve_store_url

pytestmark = pytest.mark.e2e

# No model of its own: `scripted/NAME` (from --model, the environment or pyproject.toml) answers
# NAME. Two trials a task, unless a setting overrides the suite's.
SUITE = """\
id: levels
kind: capability
trials: 2
tasks:
  - id: who
    input: Who answers?
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository with the suite at its root, and a folder below it to run from."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "suite.yaml").write_text(SUITE)
    (root / "sub").mkdir()
    return root


def trialkit(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRIALKIT_")}
    return subprocess.run(
        [sys.executable, "-m", "trialkit", *args],
        cwd=cwd,
        env={**clean, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def trials_and_answer(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The trials the run's one task got and what the model answered."""
    out = cwd / "report.json"
    done = trialkit(cwd, "run", str(cwd.parent / "suite.yaml"), "--json", str(out), *args, env=env)
    assert done.returncode == 0, done.stderr
    [task] = json.loads(out.read_text())["tasks"]
    return task["trials"], task["results"][0]["output"]


def test_flag_then_environment_then_pyproject_then_suite(project: Path) -> None:
    sub = project / "sub"
    (project / "pyproject.toml").write_text('[tool.trialkit]\nstore = "runs/evals.db"\n')
    env = {"TRIALKIT_MODEL": "scripted/environment"}
    assert trials_and_answer(sub, env=env) == (2, "environment")  # the suite's trials
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.trialkit]\ntrials = 3\nmodel = "scripted/pyproject"\n'
        'store = "runs/evals.db"\n'
    )
    assert trials_and_answer(sub) == (3, "pyproject")
    env = {"TRIALKIT_MODEL": "scripted/environment", "TRIALKIT_TRIALS": "4"}
    assert trials_and_answer(sub, env=env) == (4, "environment")
    assert trials_and_answer(sub, "--trials", "5", "--model", "scripted/flag", env=env) == (
        5,
        "flag",
    )
    # store = "runs/evals.db" is relative to the pyproject.toml that names it
    assert (project / "runs" / "evals.db").is_file()
    assert not (sub / ".trialkit").exists()
    listed = trialkit(sub, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 4


def latest_cache_config(store: Path) -> dict[str, object]:
    """What the latest stored run says of its cassette and network settings."""
    with Store(resolve_store_url(str(store), create=False), create=False) as opened:
        run = opened.list_runs()[0]
        config: dict[str, object] = opened.load_report(run.id).run.config["cache"]
    return config


def test_a_flag_or_the_environment_turns_off_what_pyproject_turns_on(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.trialkit]\noffline = true\nno-capture = true\nmin-pass-rate = "100%"\n'
        'store = "store.db"\n'
    )
    # scripted/no answers "no", which fails the grader: only the pass rate fails the gate of a
    # capability suite
    (project / "failing.yaml").write_text(
        SUITE.replace("Who answers?", 'Who answers?\n    graders: [{contains: "yes"}]')
    )
    run = ("run", "failing.yaml", "--model", "scripted/no")
    done = trialkit(project, *run)
    assert done.returncode == 1, done.stderr
    assert "gate failed" in done.stderr
    config = latest_cache_config(project / "store.db")
    assert (config["offline"], config["capture"]) == (True, False)
    done = trialkit(project, *run, "--no-offline", "--capture", "--min-pass-rate", "0")
    assert done.returncode == 0, done.stderr
    config = latest_cache_config(project / "store.db")
    assert (config["offline"], config["capture"]) == (False, True)
    env = {"TRIALKIT_OFFLINE": "0", "TRIALKIT_NO_CAPTURE": "false", "TRIALKIT_MIN_PASS_RATE": "0"}
    done = trialkit(project, *run, env=env)
    assert done.returncode == 0, done.stderr
    config = latest_cache_config(project / "store.db")
    assert (config["offline"], config["capture"]) == (False, True)


def test_the_nearest_pyproject_with_the_table_wins_and_the_search_stops_at_the_repository(
    project: Path,
) -> None:
    sub = project / "sub"
    (project / "pyproject.toml").write_text('[tool.trialkit]\nmodel = "scripted/root"\n')
    (sub / "pyproject.toml").write_text('[project]\nname = "no-table-here"\n')
    assert trials_and_answer(sub)[1] == "root"
    (sub / "pyproject.toml").write_text('[tool.trialkit]\nmodel = "scripted/nearest"\n')
    assert trials_and_answer(sub)[1] == "nearest"
    # above the repository's root nothing is read: a table there is another project's
    (sub / "pyproject.toml").unlink()
    (project / "pyproject.toml").unlink()
    (project.parent / "pyproject.toml").write_text('[tool.trialkit]\nmodel = "scripted/outside"\n')
    done = trialkit(sub, "run", str(project / "suite.yaml"))
    assert done.returncode == 2
    assert "nothing to evaluate" in done.stderr


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "trials = 3\ncocurrency = 4\n",
            "error: pyproject.toml:6: [tool.trialkit]: unknown setting cocurrency (known: *); "
            "did you mean concurrency?",
        ),
        (
            "trials = 3\nconcurrency = 'many'\n",
            "error: pyproject.toml:6: [tool.trialkit] concurrency: expected a whole number >= 1, "
            "got 'many'",
        ),
        (
            "offline = 'yes'\n",
            "error: pyproject.toml:5: [tool.trialkit] offline: expected true or false, got 'yes'",
        ),
        (
            "timeout = -1\n",
            "error: pyproject.toml:5: [tool.trialkit] timeout: expected a number of seconds > 0, "
            "got -1",
        ),
        (
            "cache-mode = 'sometimes'\n",
            "error: pyproject.toml:5: [tool.trialkit] cache-mode: expected one of live, record, "
            "replay, auto, got 'sometimes'",
        ),
        (
            "trials = 'many'\n",
            "error: pyproject.toml:5: [tool.trialkit] trials: expected a whole number >= 1 or "
            "auto, got 'many'",
        ),
        (
            "cache-mode = 'replay'\n",
            "error: pyproject.toml:5: [tool.trialkit] cache-mode replay needs --cache DIR*",
        ),
        (
            "json = 'out.json'\n",
            "error: pyproject.toml:5: [tool.trialkit]: unknown setting json (known: *); --json is "
            "a flag of a single run, not a setting",
        ),
        (
            "cache_mode = 'auto'\ncache-mode = 'auto'\n",
            "error: pyproject.toml:6: [tool.trialkit] cache-mode: given twice (as cache-mode too)",
        ),
        ("ray-env = [1]\n", "error: pyproject.toml:5: [tool.trialkit] ray-env: expected names*"),
        (
            "[tool.trialkit.retries]\nmost = 3\n",
            "error: pyproject.toml:5: [tool.trialkit]: unknown setting retries (known: *",
        ),
    ],
)
def test_a_bad_pyproject_setting_is_one_line_naming_file_line_and_key(
    project: Path, table: str, message: str
) -> None:
    (project / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.trialkit]\n{table}')
    done = trialkit(project, "run", "suite.yaml", "--model", "scripted/x")
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    pattern = message.replace("[tool.trialkit]", "[[]tool.trialkit]")  # fnmatch's [ ] is a class
    assert fnmatchcase(done.stderr.strip(), pattern), done.stderr


def test_a_pyproject_that_is_not_toml_is_one_line(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.trialkit]\ntrials = \n")
    done = trialkit(project / "sub", "run", "../suite.yaml")
    assert done.returncode == 2
    assert done.stderr.startswith("error: ../pyproject.toml: cannot be read: ")
    assert "line 2" in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TRIALKIT_TRIALS", "many", "TRIALKIT_TRIALS: expected a whole number >= 1 or auto"),
        ("TRIALKIT_CONCURRENCY", "0", "TRIALKIT_CONCURRENCY: expected a whole number >= 1"),
        ("TRIALKIT_OFFLINE", "maybe", "TRIALKIT_OFFLINE: expected true or false, got 'maybe'"),
        ("TRIALKIT_CACHE_MODE", "tape", "TRIALKIT_CACHE_MODE: expected one of live, record"),
        ("TRIALKIT_MIN_PASS_RATE", "lots", "TRIALKIT_MIN_PASS_RATE: expected a number like 0.8"),
        ("TRIALKIT_MAX_COST", "free", "TRIALKIT_MAX_COST: expected an amount of dollars > 0"),
    ],
)
def test_a_bad_environment_value_is_one_line_naming_the_variable(
    project: Path, name: str, value: str, message: str
) -> None:
    done = trialkit(project, "run", "suite.yaml", "--model", "scripted/x", env={name: value})
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {message}"), done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_other_commands_read_the_store_from_pyproject(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.trialkit]\nstore = 'none'\n")
    done = trialkit(project, "runs")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: pyproject.toml:2: [tool.trialkit] store: none (keep nothing) is for the pytest "
        "plugin; trialkit commands keep runs in a store"
    )
