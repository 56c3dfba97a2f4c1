"""Ctrl-C while `trialkit run` starts (its command's import, loading the suite and what the
suite imports, preflight, opening the store, starting the run) ends as a Ctrl-C later does:
one line on stderr and exit 130, never click's "Aborted!" and exit 1, nor a traceback.

Each case runs the command as the console script does, in an interpreter whose import of one
module (the stage) writes a marker file and then sleeps; SIGINT is sent once the marker is
there, so the signal lands in that stage and nowhere else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

PROBE = """
import importlib.abc, os, sys, time

class SlowImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == os.environ["SLOW_MODULE"]:
            open(os.environ["MARKER"], "w").close()
            time.sleep(60)
        return None

sys.meta_path.insert(0, SlowImport())
from trialkit.cli.main import main
sys.argv = ["trialkit", *sys.argv[1:]]
main()
"""

SUITE = """
import helper_of_the_suite
from trialkit import Suite, Task, graders

suite = Suite(id="s", harness=lambda prompt: "yes", tasks=[
    Task(id="a", input="hello", graders=[graders.contains("yes")]),
])
"""


@pytest.mark.parametrize(
    "stage",
    [
        "trialkit.cli.run",  # the command's module, imported when the command is looked up
        "trialkit.run.settings",  # the run's settings, parsed
        "trialkit.loaders.target",  # loading the suite
        "helper_of_the_suite",  # what the suite file imports
        "trialkit.run.runner",  # the runner
        "trialkit.run.preflight",  # the preflight of the models
        "trialkit.store.migrations",  # opening the store
        "trialkit.run._writer",  # the start of the run
    ],
)
def test_ctrl_c_at_start_up_exits_130_with_one_line(tmp_path: Path, stage: str) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    (tmp_path / "helper_of_the_suite.py").write_text("VALUE = 1\n")
    marker = tmp_path / "marker"
    env = {
        **os.environ,
        "SLOW_MODULE": stage,
        "MARKER": str(marker),
        "TRIALKIT_STORE": str(tmp_path / "store.db"),
        "PYTHONPATH": str(tmp_path),
        "NO_COLOR": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", PROBE, "run", "suite.py", "--no-progress"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), f"{stage} was not imported while the command started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (proc.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("interrupted"), err
    assert "Aborted" not in err and "Traceback" not in err
    assert "tasks passed" not in out  # nothing ran to its end
