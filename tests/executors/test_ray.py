"""`Runner(executor="ray")`: trials in actors on a real Ray cluster, same results as here.

The cluster is a real Ray head node at `$TRIALKIT_TEST_RAY_ADDRESS`. `.ci/ray.sh` starts one
inside a network namespace that has only a loopback interface (Ray binds some of its servers
to the machine's external address otherwise), and CI runs these tests in that namespace with
`TRIALKIT_REQUIRE_RAY=1`. Without the variable they are skipped; with `TRIALKIT_REQUIRE_RAY=1`
and no cluster they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.executors.test_processes import MIXED_STORED, MIXED_TALLY, SUITE, stored, tally
from tests.fakes.provider_server import ProviderServer
from trialkit import Runner
from trialkit._errors import RunFailed
from trialkit.executors import WorkerError
from trialkit.loaders.target import load_target
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.report import Report
from trialkit.store import Store
from trialkit.task import SuiteError


@pytest.fixture
def suite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "suites.py"
    path.write_text(SUITE)
    return path


def run(suite: Any, **options: Any) -> Report:
    runner = Runner(**options)

    async def main() -> Report:
        with anyio.fail_after(180):  # never a hang
            return await runner.run(suite)

    return anyio.run(main)


def pids(report: Report) -> set[str]:
    return {
        (r.output or "").rsplit("pid=", 1)[1]
        for t in report.tasks
        for r in t.results
        if r.output and "pid=" in r.output
    }


def test_ray_actors_run_the_trials_like_this_process(
    ray_cluster: str, suite_file: Path, tmp_path: Path
) -> None:
    suite = load_target(f"{suite_file}:mixed")
    here = run(suite, concurrency=4)
    on_ray = run(suite, concurrency=4, executor="ray", workers=2, store=str(tmp_path / "r.db"))

    assert tally(on_ray) == tally(here) == MIXED_TALLY
    assert stored(tmp_path / "r.db") == MIXED_STORED
    ran_in = pids(on_ray)
    assert len(ran_in) == 2 and str(os.getpid()) not in ran_in  # two actors, none here
    assert on_ray.run.config["executor"] == "ray"
    assert on_ray.run.config["ray_actors"] == 2
    crash = next(t for t in on_ray.tasks if t.id == "crash").results[0]
    assert crash.error is not None and "agent crashed" in crash.error.message


def test_regression_verdicts_and_judge_controls_on_ray(ray_cluster: str, suite_file: Path) -> None:
    regression = load_target(f"{suite_file}:regression")
    assert tally(run(regression, executor="ray", workers=2)) == tally(run(regression))

    judged = load_target(f"{suite_file}:judged")
    here, on_ray = run(judged, concurrency=4), run(judged, concurrency=4, executor="ray", workers=2)
    assert tally(on_ray) == tally(here)
    controls = on_ray.run.config["judge_controls"]
    assert controls["calls"] == 2 * len(pids(on_ray))  # each actor checks its judge once


def test_a_killed_actor_errors_its_trial_and_is_replaced(
    ray_cluster: str, suite_file: Path
) -> None:
    report = run(load_target(f"{suite_file}:killer"), concurrency=2, executor="ray", workers=2)
    die = next(t for t in report.tasks if t.id == "die")
    (result,) = die.results
    assert result.verdict == "error"
    assert result.error is not None and result.error.type == "WorkerDied"
    assert "Ray actor" in result.error.message
    others = [t for t in report.tasks if t.id != "die"]
    assert [t.verdict for t in others] == ["pass"] * 7  # the run went on


def test_actors_that_keep_dying_fail_the_run(ray_cluster: str, suite_file: Path) -> None:
    with pytest.raises(RunFailed, match="Ray actors were lost"):  # exit 4: could not finish
        run(load_target(f"{suite_file}:always_dies"), concurrency=2, executor="ray", workers=1)


def test_a_cancelled_run_leaves_no_actor_running(ray_cluster: str, suite_file: Path) -> None:
    import ray

    suite = load_target(f"{suite_file}:slow")  # agents that block for 30 s
    runner = Runner(concurrency=4, executor="ray", workers=2)

    async def main() -> None:
        with anyio.move_on_after(8):
            await runner.run(suite)

    started = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - started < 25  # not the agents' 30 s
    assert runner.last_run is not None and runner.last_run.status == "interrupted"
    assert ray.is_initialized()  # the test's own connection is left open
    for number in (1, 2):  # the actors are named after the run; killed ones are gone
        with pytest.raises(ValueError, match="Failed to look up actor"):
            ray.get_actor(f"trialkit-{runner.last_run.id}-{number}")


def test_a_suite_that_does_not_load_on_the_actors_is_a_clear_error(
    ray_cluster: str, suite_file: Path
) -> None:
    suite = load_target(f"{suite_file}:mixed")
    suite_file.write_text("raise RuntimeError('broken on the cluster')\n")  # after loading here
    store = Store("sqlite://")
    with pytest.raises(WorkerError, match=r"could not load the suite.*broken on the cluster"):
        run(suite, executor="ray", workers=1, store=store)
    assert store.list_runs() == []  # executors start before the run is stored


def test_a_cassette_recorded_on_ray_replays_here(
    ray_cluster: str, tmp_path: Path, provider_server: ProviderServer
) -> None:
    """Actors have the Ray node's environment, not this process's: the suite names its
    server itself."""
    path = tmp_path / "chat.py"
    path.write_text(
        "from trialkit import Suite, Task\n"
        "from trialkit.models import get_model\n"
        f"model = get_model('openai/gpt-test', base_url={provider_server.openai_base_url!r}, "
        "api_key='not-a-secret')\n"
        "suite = Suite(id='chat', kind='capability', trials=2, model=model, tasks=[\n"
        "    Task(id='france', input='What is the capital of France?'),\n"
        "    Task(id='spain', input='What is the capital of Spain?')])\n"
    )
    cassette_dir = tmp_path / "cassette"
    record = Cassette(cassette_dir, CacheMode.RECORD)
    recorded = run(load_target(f"{path}:suite"), executor="ray", workers=2, cassette=record)
    replayed = run(load_target(f"{path}:suite"), cassette=Cassette(cassette_dir, "replay"))

    assert recorded.summary.errors == 0 and recorded.summary.trials == 4, tally(recorded)
    assert tally(replayed) == tally(recorded)

    def outputs(report: Report) -> list[tuple[str, int, str | None]]:
        return sorted((t.id, r.trial, r.output) for t in report.tasks for r in t.results)

    assert outputs(replayed) == outputs(recorded)
    manifest = json.loads((cassette_dir / ".last-run.json").read_text())
    assert len(manifest["keys"]) == 2  # the actors' keys reached the run's manifest


def test_the_command_runs_on_ray(ray_cluster: str, suite_file: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *(sys.executable, "-m", "trialkit.cli", "run", f"{suite_file}:regression"),
            *("--executor", "ray", "--workers", "2", "--no-progress"),
            *("--store", str(tmp_path / "c.db")),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "RAY_ADDRESS": ray_cluster},
    )
    assert result.returncode == 1, result.stderr[-2000:]  # the flaky regression task fails
    assert "flaky" in result.stdout


def test_actors_default_to_the_clusters_cpus(ray_cluster: str, suite_file: Path) -> None:
    import ray

    cpus = int(ray.cluster_resources()["CPU"])
    report = run(load_target(f"{suite_file}:regression"), concurrency=cpus + 5, executor="ray")
    assert report.run.config["ray_actors"] == cpus
    report = run(load_target(f"{suite_file}:regression"), concurrency=1, executor="ray")
    assert report.run.config["ray_actors"] == 1  # never more actors than trials at once


# --- without a cluster ----------------------------------------------------------------------


def test_the_runner_checks_the_executor() -> None:
    with pytest.raises(ValueError, match="executor must be 'local' or 'ray'"):
        Runner(executor="slurm")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be sent to worker processes or Ray actors"):
        Runner(executor="ray", harness=lambda p: p)


def test_without_ray_the_error_names_the_extra(
    suite_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    store = Store("sqlite://")
    with pytest.raises(SuiteError, match=r"pip install 'trialkit\[ray\]'; nothing was run$"):
        run(load_target(f"{suite_file}:mixed"), executor="ray", store=store)
    assert store.list_runs() == []  # nothing stored: no empty "interrupted" run


def test_runs_at_once_share_the_ray_they_connected_to(
    ray_cluster: str, suite_file: Path, tmp_path: Path
) -> None:
    """`--models` runs several runs at once in one process: the first to end must not shut
    Ray down under the others."""
    db = tmp_path / "m.db"
    result = subprocess.run(
        [
            *(sys.executable, "-m", "trialkit.cli", "run", f"{suite_file}:mixed"),
            *("--models", "scripted/a,scripted/b", "--executor", "ray", "--workers", "1"),
            *("--no-progress", "--store", str(db)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "RAY_ADDRESS": ray_cluster},
    )
    assert result.returncode == 3, result.stderr[-3000:]  # `crash` errors, as it should
    from trialkit.store import Store

    with Store(f"sqlite:///{db}") as store:
        runs = store.list_runs()
        assert len(runs) == 2
        for run_ in runs:
            assert (run_.trials, run_.passed, run_.failed, run_.errors) == (16, 10, 2, 4)
