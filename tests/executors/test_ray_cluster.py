"""`--executor ray` beyond one machine: the suite's folder and trialkit are shipped to the
actors, and `--ray-env` passes variables by name.

The cluster of `.ci/ray.sh` has two nodes: a head without CPUs and a second node that runs
every actor, with its own temporary folder and its own mount namespace, in which
`$TRIALKIT_TEST_RAY_HIDDEN` is an empty tmpfs. A suite written there is on this process's
filesystem but not on the actors' node: it runs only if trialkit ships it. Skipped without
`$TRIALKIT_TEST_RAY_ADDRESS` (a failure with `TRIALKIT_REQUIRE_RAY=1`, as in CI).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.executors.conftest import REQUIRE_RAY_VAR
from tests.executors.test_ray import run
from trialkit.executors import WorkerError
from trialkit.executors.ray_runtime import localise, parse_names, shipped_folder
from trialkit.loaders.target import SuiteSource, load_target
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.settings import RunSettings, SettingsError
from trialkit.store import Store

HIDDEN_VAR = "TRIALKIT_TEST_RAY_HIDDEN"
SECRET_VAR = "TRIALKIT_TEST_RAY_SECRET"
SECRET = f"tk-secret-{secrets.token_hex(8)}"  # must reach the actors, and nowhere else
RAY_TEMP_DIRS = (Path("/tmp/ray"), Path("/tmp/ray-second"))
"""The temporary folders of the head and second node of `.ci/ray.sh`: their logs."""

SUITE = """
import hashlib, json, os
import ray
import trialkit
import helper
from trialkit import Suite, Task, graders

ORIGINAL = {original!r}

def agent(prompt: str) -> str:
    value = os.environ.get({secret_var!r})
    facts = {{
        "node": ray.get_runtime_context().get_node_id(),
        "original_visible": os.path.isdir(ORIGINAL),
        "helper": helper.__file__,
        "trialkit": trialkit.__file__,
        "cwd": os.getcwd(),
        "env_file_shipped": os.path.exists(".env"),
        "git_shipped": os.path.exists(".git"),
        "secret_sha256": None if value is None else hashlib.sha256(value.encode()).hexdigest(),
    }}
    return helper.ANSWER + " " + json.dumps(facts)

suite = Suite(id="shipped", kind="capability", trials=2, harness=agent,
              tasks=[Task(id=n, input=n, graders=[graders.contains(helper.ANSWER)])
                     for n in ("one", "two")])
"""


@pytest.fixture
def hidden_suite(tmp_path: Path) -> Iterator[Path]:
    """A suite folder the actors' node cannot see: `suite.py`, the `helper.py` it imports, and
    a `.env` and `.git` that must not be shipped."""
    hidden = os.environ.get(HIDDEN_VAR)
    if not hidden:
        if os.environ.get(REQUIRE_RAY_VAR) == "1":
            pytest.fail(f"{REQUIRE_RAY_VAR}=1 but {HIDDEN_VAR} is not set (.ci/ray.sh)")
        pytest.skip(f"no folder hidden from the second Ray node: set {HIDDEN_VAR} (.ci/ray.sh)")
    folder = Path(hidden) / tmp_path.name
    folder.mkdir(parents=True)
    (folder / "helper.py").write_text('ANSWER = "shipped-ok"\n')
    (folder / "suite.py").write_text(SUITE.format(original=str(folder), secret_var=SECRET_VAR))
    (folder / ".env").write_text(f"{SECRET_VAR}={SECRET}\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=True)


def second_node() -> str:
    import ray

    (node,) = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "second" in n["Resources"]]
    return str(node)


def facts_of(outputs: list[str | None]) -> list[dict[str, Any]]:
    facts = []
    for output in outputs:
        assert output is not None and output.startswith("shipped-ok "), output
        facts.append(json.loads(output.removeprefix("shipped-ok ")))
    return facts


def assert_ran_shipped(facts: list[dict[str, Any]], folder: Path) -> None:
    """Every trial ran on the second node, from copies of the suite and of trialkit that Ray
    unpacked there, and had the variable `--ray-env` named."""
    node = second_node()
    for fact in facts:
        assert fact["node"] == node
        assert fact["original_visible"] is False  # the node cannot see the suite's folder
        for shipped in ("helper", "trialkit", "cwd"):
            assert fact[shipped].startswith("/tmp/ray-second/"), (shipped, fact[shipped])
        assert not fact["helper"].startswith(str(folder))
        assert fact["env_file_shipped"] is False and fact["git_shipped"] is False
        assert fact["secret_sha256"] == hashlib.sha256(SECRET.encode()).hexdigest()


def test_a_suite_the_node_cannot_see_runs_there_shipped(
    ray_cluster: str,
    hidden_suite: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Loaded from outside its folder (here, an absolute path): the suite file's folder is
    shipped."""
    monkeypatch.setenv(SECRET_VAR, SECRET)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "api.db"
    suite = load_target(f"{hidden_suite / 'suite.py'}:suite")
    report = run(suite, executor="ray", workers=2, ray_env=[SECRET_VAR], store=str(db))

    assert (report.summary.trials, report.summary.errors) == (4, 0)
    assert [t.verdict for t in report.tasks] == ["pass", "pass"]
    assert_ran_shipped(facts_of([r.output for t in report.tasks for r in t.results]), hidden_suite)
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("api.db*"))


def test_the_command_ships_its_working_directory_and_keeps_values_secret(
    ray_cluster: str, hidden_suite: Path, tmp_path: Path
) -> None:
    """Run from the suite's folder: that folder is shipped, and the target is relative to it."""
    db, report_file = tmp_path / "cli.db", tmp_path / "report.json"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "trialkit.cli", "run", "suite.py:suite"),
            *("--executor", "ray", "--workers", "2", "--no-progress", "--debug"),
            *("--ray-env", f"PATH,{SECRET_VAR}", "--ray-env", SECRET_VAR),
            *("--store", str(db), "--json", str(report_file)),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=hidden_suite,
        env={**os.environ, "RAY_ADDRESS": ray_cluster, SECRET_VAR: SECRET},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(report_file.read_text())
    outputs = [r["output"] for t in report["tasks"] for r in t["results"]]
    assert len(outputs) == 4
    assert_ran_shipped(facts_of(outputs), hidden_suite)
    written = b"".join(p.read_bytes() for p in tmp_path.glob("cli.db*"))
    for where in (result.stdout, result.stderr, report_file.read_text(), written.decode("latin-1")):
        assert SECRET not in where
    logged = [
        path
        for folder in RAY_TEMP_DIRS
        for path in folder.glob("session_latest/logs/**/*")
        if path.is_file() and SECRET.encode() in path.read_bytes()
    ]
    assert logged == []  # not even Ray's own logs of the runtime environments it made


def test_a_variable_that_is_not_set_is_a_usage_error(
    ray_cluster: str, hidden_suite: Path, tmp_path: Path
) -> None:
    db = tmp_path / "none.db"
    env = {k: v for k, v in os.environ.items() if k != SECRET_VAR}
    result = subprocess.run(
        [
            *(sys.executable, "-m", "trialkit.cli", "run", "suite.py:suite"),
            *("--executor", "ray", "--ray-env", f"PATH,{SECRET_VAR}", "--store", str(db)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=hidden_suite,
        env={**env, "RAY_ADDRESS": ray_cluster},
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"--ray-env: {SECRET_VAR} not set in this environment" in result.stderr
    assert "Traceback" not in result.stderr
    assert not db.exists() or Store(f"sqlite:///{db}").list_runs() == []


def test_a_folder_over_rays_limit_is_a_clear_error(
    ray_cluster: str, hidden_suite: Path, tmp_path: Path
) -> None:
    """Ray's limit, lowered for this process to 1 MiB, against a folder of 2 MiB."""
    (hidden_suite / "big.bin").write_bytes(os.urandom(2 << 20))
    result = subprocess.run(
        [
            *(sys.executable, "-m", "trialkit.cli", "run", "suite.py:suite"),
            *("--executor", "ray", "--workers", "1", "--store", str(tmp_path / "big.db")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=hidden_suite,
        env={**os.environ, "RAY_ADDRESS": ray_cluster, "RAY_max_grpc_message_size": str(1 << 20)},
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"cannot ship the suite's folder {hidden_suite} to the Ray actors" in result.stderr
    assert "at most 1 MiB zipped" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_cassette_folder_the_node_cannot_see_is_a_clear_error(
    ray_cluster: str, hidden_suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Actors use the cassette folder where it is here; on a node without it, none starts."""
    monkeypatch.chdir(tmp_path)
    cassette = Cassette(hidden_suite / "cassette", CacheMode.RECORD)
    store = Store("sqlite://")
    with pytest.raises(WorkerError) as raised:
        run(
            load_target(f"{hidden_suite / 'suite.py'}:suite"),
            executor="ray",
            workers=1,
            cassette=cassette,
            store=store,
        )
    message = str(raised.value)
    assert message.startswith(
        "a Ray actor could not load the suite: RuntimeError: the cassette "
        f"folder {hidden_suite / 'cassette'} is not on Ray node "
    ), message
    assert "Traceback" not in message and "File " not in message
    assert store.list_runs() == []


# --- without a cluster ----------------------------------------------------------------------


def test_ray_env_names_are_repeatable_and_comma_separated() -> None:
    assert parse_names(["A", "B, C", "A,", ""]) == ("A", "B", "C")


def test_ray_env_needs_the_ray_executor(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"--ray-env .* needs --executor ray"):
        RunSettings(ray_env=("HOME",))
    (tmp_path / "s.py").write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "trialkit.cli", "run", "s.py", "--ray-env", "HOME"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.strip().endswith("it needs --executor ray"), result.stderr


def test_the_shipped_folder_and_the_paths_in_its_copy(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "evals").mkdir(parents=True)
    (project / "evals" / "suite.py").write_text("")
    elsewhere.mkdir()
    (elsewhere / "other.py").write_text("")

    inside = SuiteSource(target="evals/suite.py:s", cwd=str(project))
    folder, source = shipped_folder(inside)
    assert folder == project.resolve() and source["target"] == "evals/suite.py:s"
    module = SuiteSource(target="evals.suite:s", cwd=str(project))
    assert shipped_folder(module)[0] == project.resolve()  # modules resolve from there
    outside = SuiteSource(target="../elsewhere/other.py:s", cwd=str(project))
    folder, source = shipped_folder(outside)
    assert folder == elsewhere.resolve()
    assert source == {
        "target": f"{elsewhere.resolve()}/other.py:s",
        "model": None,
        "cwd": str(folder),
    }

    copy = tmp_path / "copy"
    setup = {"shipped": str(folder), "source": source, "sys_path": [str(folder / "lib"), "/usr"]}
    moved = localise(setup, copy)
    assert moved["source"]["target"] == f"{copy}/other.py:s"
    assert moved["source"]["cwd"] == str(copy)
    assert moved["sys_path"] == [str(copy / "lib"), "/usr"]


def test_the_home_folder_is_never_shipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(SettingsError, match="run trialkit from the suite's project folder"):
        shipped_folder(SuiteSource(target="pkg.mod:s", cwd=str(tmp_path)))
