"""`pip install 'trialkit[ray]'` alone: `trialkit run --executor ray` runs the trials in the
actors of a local Ray cluster (`ray.init()` with no address starts one on this machine)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.installs.helpers import said, trialkit, write_capitals

INSTALL = "ray"


def test_a_run_on_a_local_ray_cluster(tmp_path: Path) -> None:
    write_capitals(tmp_path)
    # A home of its own: a local Ray cluster writes ~/.ray/auth_token, and a token left there
    # turns on token authentication for every later `ray start --head` of this user (.ci/ray.sh's
    # second node was then refused by its head).
    home = tmp_path / "home"
    home.mkdir()
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": "", "HOME": str(home)}
    done = trialkit(
        "run", "capitals.py", "--executor", "ray", "--json", "report.json",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, said(done)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["trials"] == 4 and report["summary"]["errors"] == 0
    assert report["summary"]["passed_tasks"] == 1
    assert report["run"]["config"]["executor"] == "ray", report["run"]
