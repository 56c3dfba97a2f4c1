"""A suite file whose agent runs in docker, through `trialkit run`: the Dockerfile it ships
(relative to its folder) built and used, the agent's file in the trial's workspace; and an image
that is not here refused before any trial (exit 2, one line naming it, nothing stored)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.sandbox._docker import container_provider, image_for
from trialkit.cli.main import cli

LOOK = (
    "import json, os; open('made.txt', 'w').write('x'); "
    "print(json.dumps({'marker': open('/marker.txt').read(), 'home': os.environ['HOME'], "
    "'uid': os.getuid(), 'is_sandbox': os.environ.get('IS_SANDBOX')}))"
)


def suite(folder: Path, sandbox: str) -> Path:
    folder.mkdir()
    command = json.dumps(["python3", "-c", LOOK])
    (folder / "suite.yaml").write_text(
        "id: boxed\n"
        f"harness: {{command: {command}}}\n"
        f"sandbox: {sandbox}\n"
        "tasks:\n"
        '  - {id: t, input: x, graders: [{contains: \'"is_sandbox": "1"\'}]}\n',
        encoding="utf-8",
    )
    return folder


def test_a_suite_runs_its_agent_in_the_image_of_its_dockerfile(tmp_path: Path) -> None:
    container_provider()
    asked = "{provider: docker, dockerfile: image/Dockerfile, network: none}"
    folder = suite(tmp_path / "s", asked)
    (folder / "image").mkdir()
    (folder / "image" / "marker.txt").write_text("built from the suite's Dockerfile")
    (folder / "image" / "Dockerfile").write_text(
        f"FROM {image_for('docker')}\nCOPY marker.txt /marker.txt\n"
    )
    report = tmp_path / "report.json"
    store = f"sqlite:///{tmp_path / 'db.sqlite'}"
    result = CliRunner().invoke(
        cli, ["run", str(folder), "--no-progress", "--store", store, "--json", str(report)]
    )
    assert result.exit_code == 0, result.output
    (trial,) = json.loads(report.read_text())["tasks"][0]["results"]
    seen = json.loads(trial["output"])
    assert seen["marker"] == "built from the suite's Dockerfile"
    assert seen["home"] == "/home/trialkit" and seen["uid"] != 0 and seen["is_sandbox"] == "1"


def test_an_image_that_is_not_here_is_refused_before_any_trial(tmp_path: Path) -> None:
    container_provider()
    absent = "registry.invalid/trialkit/absent:2"
    folder = suite(tmp_path / "s", f"{{provider: docker, image: '{absent}', network: none}}")
    store = tmp_path / "db.sqlite"
    result = CliRunner().invoke(
        cli, ["run", str(folder), "--no-progress", "--store", f"sqlite:///{store}"]
    )
    assert result.exit_code == 2, result.output
    assert f"the image '{absent}' (the suite's image) is not on this machine" in result.output
    assert "suite.yaml:3:" in result.output and "Traceback" not in result.output
    assert not store.exists()
