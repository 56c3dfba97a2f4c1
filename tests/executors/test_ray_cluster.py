"""`--executor ray` beyond one machine: the suite's folder and trialkit are shipped to the
actors, `--ray-env` passes variables by name, and the cassette stays in this process's folder,
served to the actors by a keeper on this node.

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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.capture.helpers import KEY
from tests.executors.conftest import RAY_ADDRESS_VAR, REQUIRE_RAY_VAR
from tests.executors.test_ray import run
from tests.fakes.provider_server import ProviderServer
from trialkit.executors.ray_cassette import CassetteKeeper, RemoteCassette, start_keeper
from trialkit.executors.ray_runtime import localise, parse_names, shipped_folder
from trialkit.loaders.target import SuiteSource, load_target
from trialkit.models.cassette import Cassette, CassetteError
from trialkit.report import Report
from trialkit.run.settings import RunSettings, SettingsError
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


CALLS = """
import openai
from trialkit import Suite, Task, graders
from trialkit.models import get_model

URL = {url!r}
CITIES = ("Paris", "Rome", "Oslo")


def agent(prompt: str) -> str:  # its own SDK client: captured at the HTTP client
    client = openai.OpenAI(base_url=URL, api_key={key!r}, max_retries=0)
    try:
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{{"role": "user", "content": prompt}}]
        )
    finally:
        client.close()
    return answer.choices[0].message.content or ""


def tasks():
    return [Task(id=c.lower(), input=c, graders=[graders.contains(c)]) for c in CITIES]


sdk = Suite(id="sdk", kind="capability", trials=2, harness=agent, tasks=tasks())
chat = Suite(id="chat", kind="capability", trials=2, tasks=tasks(),
             model=get_model("openai/gpt-test", base_url=URL, api_key="not-a-secret"))
"""
"""Two suites that call the fake provider on loopback: `sdk` with the agent's own OpenAI
client (recordings of kind `http`), `chat` through trialkit's model layer (kind `model`)."""


@pytest.fixture
def calls_suite(hidden_suite: Path, provider_server: ProviderServer) -> Path:
    """`calls.py` in the folder the actors' node cannot see; its cassettes go there too."""
    text = CALLS.format(url=provider_server.openai_base_url, key=KEY)
    (hidden_suite / "calls.py").write_text(text)
    return hidden_suite


def recordings(folder: Path) -> dict[str, Any]:
    """A cassette's files (not the manifest) by path, without what differs from one call to
    the next: the time an answer was recorded, and the id and time the server gave it."""
    found = {}
    for path in sorted(folder.glob("*/*/*.json")):
        data = json.loads(path.read_text())
        for entry in data["responses"]:
            entry.pop("recorded_at")
            for field in ("id", "created"):
                entry["response"].get("json", {}).pop(field, None)
        found[str(path.relative_to(folder))] = data
    return found


def manifest_keys(folder: Path) -> list[str]:
    return list(json.loads((folder / ".last-run.json").read_text())["keys"])


def trialkit_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trialkit.cli", "run", "--no-progress", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
        env={**os.environ, "RAY_ADDRESS": os.environ[RAY_ADDRESS_VAR], "NO_COLOR": "1"},
    )


def test_a_recording_on_ray_lands_in_the_drivers_cassette_and_replays_offline(
    ray_cluster: str, calls_suite: Path, provider_server: ProviderServer, tmp_path: Path
) -> None:
    """`--cache record` with the cassette where the actors' node cannot see it: the actors send
    what they record here, and the files are those of a run in this process. A strict replay on
    the cluster then needs no model at all."""
    tasks = ("--task", "paris", "--task", "rome")
    cassette = calls_suite / "cassette"  # hidden from the second node, like the suite
    here = trialkit_run(
        calls_suite, "calls.py:sdk", *tasks, "--cache", str(tmp_path / "here"),
        "--cache-mode", "record", "--store", str(tmp_path / "here.db"),
    )  # fmt: skip
    assert here.returncode == 0, here.stderr[-3000:]
    on_ray = trialkit_run(
        calls_suite, "calls.py:sdk", *tasks, "--executor", "ray", "--workers", "2",
        "--cache", "cassette", "--cache-mode", "record", "--store", str(tmp_path / "ray.db"),
    )  # fmt: skip
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert len(provider_server.requests) == 8  # 2 tasks x 2 trials, in each run

    recorded = recordings(cassette)
    assert recorded == recordings(tmp_path / "here")  # the same files, keys and entries
    assert len(recorded) == 2
    for data in recorded.values():
        assert data["kind"] == "http"
        assert [(e["trial"], e["occurrence"]) for e in data["responses"]] == [(0, 0), (1, 0)]
    assert manifest_keys(cassette) == manifest_keys(tmp_path / "here")  # the actors' keys
    assert len(manifest_keys(cassette)) == 2
    assert KEY not in "".join(p.read_text() for p in cassette.rglob("*.json"))

    provider_server.stop()  # a call that is not replayed cannot be answered now
    replayed = trialkit_run(
        calls_suite, "calls.py:sdk", *tasks, "--executor", "ray", "--workers", "2",
        "--cache", "cassette", "--cache-mode", "replay", "--offline",
        "--store", str(tmp_path / "replay.db"), "--json", str(tmp_path / "replay.json"),
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    summary = json.loads((tmp_path / "replay.json").read_text())["summary"]
    assert (summary["trials"], summary["errors"], summary["passed_tasks"]) == (4, 0, 2)
    assert len(provider_server.requests) == 8


def test_auto_and_strict_replay_on_ray_use_only_the_drivers_cassette(
    ray_cluster: str, calls_suite: Path, provider_server: ProviderServer, tmp_path: Path
) -> None:
    """Through the model layer: `auto` records only what is missing, into the cassette here; a
    strict replay answers from it with no server; a request it lacks is an error for its trial
    (`CassetteMiss`, naming this folder), never a fail and never a call."""
    cassette = calls_suite / "cassette"
    chat = f"{calls_suite / 'calls.py'}:chat"

    def on_ray(mode: str, **options: Any) -> Report:
        return run(
            load_target(chat), executor="ray", workers=2, cassette=Cassette(cassette, mode),
            **options,
        )  # fmt: skip

    first = on_ray("record", task_ids=["paris", "rome"])
    assert (first.summary.trials, first.summary.errors) == (4, 0)
    more = on_ray("auto", task_ids=["paris", "rome"], trials=3)
    assert (more.summary.trials, more.summary.errors) == (6, 0)
    assert len(provider_server.requests) == 6  # auto called the model for trial 2 only
    recorded = recordings(cassette)
    assert len(recorded) == 2
    for data in recorded.values():
        assert data["kind"] == "model" and data["model"] == "openai/gpt-test"
        assert [e["trial"] for e in data["responses"]] == [0, 1, 2]

    provider_server.stop()
    replayed = on_ray("replay", task_ids=["paris", "rome"], trials=3)
    assert (replayed.summary.trials, replayed.summary.errors) == (6, 0)
    assert [t.verdict for t in replayed.tasks] == ["pass", "pass"]

    missed = on_ray("replay", trials=3)  # oslo was never recorded
    assert (missed.summary.trials, missed.summary.failed, missed.summary.errors) == (9, 0, 3)
    oslo = next(t for t in missed.tasks if t.id == "oslo")
    for result in oslo.results:
        assert result.verdict == "error"
        assert result.error is not None and result.error.type == "CassetteMiss"
        message = result.error.message
        assert f"replay found no recording for task 'oslo', trial {result.trial}" in message
        assert "how it differs from the closest recording of openai/gpt-test" in message
        assert str(cassette / "openai__gpt-test") in message  # the folder here, not a copy
    assert len(provider_server.requests) == 6
    assert recordings(cassette) == recorded  # a replay writes nothing

    import ray

    with pytest.raises(ValueError, match="Failed to look up actor"):
        ray.get_actor(f"trialkit-{missed.run.id}-cassette")  # the keeper is gone with the run


def test_a_remote_cassette_reads_and_writes_through_its_keeper(
    ray_cluster: str, tmp_path: Path
) -> None:
    """The two halves alone, in this process: what a remote cassette records is in the folder
    as a local cassette writes it, what is there it replays, and a keeper that is gone is a
    `CassetteError` for the call, not a hang or a miss."""
    import ray

    from tests.models.test_cassette import MODEL, req, resp

    name = f"trialkit-test-{tmp_path.name}"
    keeper = start_keeper(ray, str(tmp_path), "auto", name=name, py_modules=[])
    ray.get(keeper.ready.remote(), timeout=120)
    remote = RemoteCassette(str(tmp_path), "auto", keeper)
    here = Cassette(tmp_path / "local", "auto")
    for cassette in (remote, here):
        assert cassette.lookup(MODEL, req(), trial=0, occurrence=0) is None
        cassette.record(MODEL, req(), resp(), trial=0, occurrence=0)
    assert recordings(tmp_path) == recordings(tmp_path / "local")
    assert remote.has_recordings(MODEL)
    fresh = RemoteCassette(str(tmp_path), "replay", keeper)  # another actor: reads the file
    answer = fresh.lookup(MODEL, req(), trial=0, occurrence=0)
    assert answer is not None and answer.message.content == "Paris"
    miss = fresh.miss(MODEL, req("Rome?"), task_id="t", trial=0, occurrence=0)
    assert "how it differs from the closest recording" in str(miss)

    ray.kill(keeper)  # asynchronous: a call sent at once may still reach the keeper
    _wait_until_dead(ray, keeper)
    with pytest.raises(CassetteError, match="did not answer"):
        fresh.lookup(MODEL, req("Oslo?"), trial=0, occurrence=0)


def _wait_until_dead(ray: Any, actor: Any, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ready.remote(), timeout=5)
        except ray.exceptions.RayError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the actor still answered {limit_s:g} s after ray.kill")


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


def test_a_keeper_that_does_not_see_the_drivers_folder_refuses_to_start(tmp_path: Path) -> None:
    """On the driver's node, but in another container or mount: another folder at that path."""
    with pytest.raises(CassetteError, match="do not see the run's cassette folder there"):
        CassetteKeeper(str(tmp_path), "record", (0, 0))
    found = tmp_path.stat()
    CassetteKeeper(str(tmp_path), "record", (found.st_dev, found.st_ino))


def test_the_home_folder_is_never_shipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(SettingsError, match="run trialkit from the suite's project folder"):
        shipped_folder(SuiteSource(target="pkg.mod:s", cwd=str(tmp_path)))
