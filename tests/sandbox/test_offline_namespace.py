"""`trialkit run --offline` in a loopback-only network namespace: every way out the probe agent
tries is refused by the audit hook (a trial error naming it) or closed at the kernel (the trial
sees "network unreachable" and the listener outside hears nothing); this machine's loopback
services stay reachable; where no namespace can be made, the run says what is not covered.

Everything runs inside a namespace of the test's own (outside.py): whatever got through would
reach a listener there, never the real network.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox.outside import run_outside
from tests.sandbox.ways import CLOSED_AT_THE_KERNEL, REACHABLE

REFUSED = {
    "udp_sendto": "a datagram sent to 198.18.0.1:",
    "udp_sendmsg": "a datagram sent to 198.18.0.1:",
    "fastopen": "(TCP fast open)",
    "thread": "from thread 'pre-started', which belongs to no trial",
    "localhost_name": "a lookup of probe.localhost",
    "fork": "a connection to 198.18.0.1:",
}
"""Ways the audit hook sees, and what the trial's error names."""
NO_CAP_SYS_ADMIN = "setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin"


class Probe:
    """One run of the probe suite in the outer namespace: its summary and its trials."""

    def __init__(self, out: Path, mode: str, *extra: str) -> None:
        done = run_outside([sys.executable, "-m", "tests.sandbox.probe", mode, str(out), *extra])
        assert done.returncode == 0, done.stderr
        self.summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
        assert (out / "report.json").exists(), self.summary["stderr"]
        report = json.loads((out / "report.json").read_text())
        self.cache: dict[str, Any] = report["run"]["config"]["cache"]
        self.trials = {task["id"]: task["results"][0] for task in report["tasks"]}

    def error(self, way: str) -> str:
        error = self.trials[way]["error"]
        assert error is not None, f"{way}: {self.trials[way]['verdict']}"
        assert error["type"] == "OfflineRefused", error
        return str(error["message"])


def tasks(*ways: str) -> list[str]:
    return [arg for way in ways for arg in ("--task", way)]


@pytest.fixture(scope="module")
def confined(tmp_path_factory: pytest.TempPathFactory) -> Probe:
    ways = [*REFUSED, *CLOSED_AT_THE_KERNEL, *REACHABLE]
    return Probe(tmp_path_factory.mktemp("cli"), "cli", *tasks(*ways))


@pytest.mark.parametrize("way", list(REFUSED))
def test_a_way_the_process_sees_is_a_trial_error_naming_it(confined: Probe, way: str) -> None:
    message = confined.error(way)
    assert REFUSED[way] in message and "--offline refused" in message
    assert confined.trials[way]["verdict"] == "error"


@pytest.mark.parametrize("way", list(CLOSED_AT_THE_KERNEL))
def test_a_way_the_process_cannot_see_is_closed_at_the_kernel(confined: Probe, way: str) -> None:
    trial = confined.trials[way]
    assert trial["verdict"] == "pass", trial  # the agent saw what its graders expect
    assert CLOSED_AT_THE_KERNEL[way] in trial["output"]


@pytest.mark.parametrize("way", list(REACHABLE))
def test_the_machines_loopback_services_stay_reachable(confined: Probe, way: str) -> None:
    trial = confined.trials[way]
    assert trial["verdict"] == "pass", trial
    assert REACHABLE[way] in trial["output"]


def test_nothing_reached_the_listeners_outside(confined: Probe) -> None:
    summary = confined.summary
    assert (summary["tcp"], summary["udp"], summary["dns"]) == (0, 0, 0), summary
    assert summary["local"] == 3  # the loopback services, through the bridge


def test_the_stored_run_says_it_was_confined_and_nothing_is_printed(confined: Probe) -> None:
    assert confined.cache["offline"] is True and confined.cache["offline_confined"] is True
    assert "loopback-only network namespace" in confined.cache["offline_note"]
    assert "user namespace" not in confined.cache["offline_note"]  # root: CLONE_NEWNET alone
    assert "--offline:" not in confined.summary["stderr"]


def needs_setpriv() -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop CAP_SYS_ADMIN")


def test_without_cap_sys_admin_a_user_namespace_confines_the_run(tmp_path: Path) -> None:
    needs_setpriv()
    ways = ("udp_sendto", "curl", "ctypes_connect", "no_route", "loopback_curl")
    probe = Probe(tmp_path, "cli", "--wrap", NO_CAP_SYS_ADMIN, *tasks(*ways))
    assert probe.cache["offline_confined"] is True
    assert "in a user namespace of its own" in probe.cache["offline_note"]
    assert "a datagram sent to" in probe.error("udp_sendto")
    for way in ways[1:]:
        assert probe.trials[way]["verdict"] == "pass", probe.trials[way]
    assert (probe.summary["tcp"], probe.summary["udp"]) == (0, 0)


def test_where_no_namespace_can_be_made_one_line_says_what_is_not_covered(
    tmp_path: Path,
) -> None:
    needs_setpriv()
    ways = ("udp_sendto", "fork", "curl")
    probe = Probe(tmp_path, "cli", "--wrap", NO_CAP_SYS_ADMIN, "--no-userns", *tasks(*ways))
    lines = [line for line in probe.summary["stderr"].splitlines() if "--offline" in line]
    assert len(lines) == 1 and lines[0].startswith("--offline: no network namespace ("), lines
    for said in ("subprocesses", "os.system", "ctypes", "C extensions", "not confined"):
        assert said in lines[0]
    assert probe.cache["offline_confined"] is False
    assert probe.cache["offline_note"] == lines[0].removeprefix("--offline: ")
    assert "a datagram sent to" in probe.error("udp_sendto")  # the audit hook still holds
    assert "a connection to 198.18.0.1" in probe.error("fork")
    # ... and what the line says is not covered indeed is not: curl reached the listener
    assert probe.trials["curl"]["verdict"] == "fail" and probe.summary["tcp"] >= 1


def test_a_refused_thread_makes_every_trial_in_flight_an_error(tmp_path: Path) -> None:
    probe = Probe(tmp_path, "cli", "--concurrency", "2", *tasks("asks_thread", "bystander"))
    for way in ("asks_thread", "bystander"):
        assert "from thread 'pre-started', which belongs to no trial" in probe.error(way)
        assert "every trial in flight is an error" in probe.error(way)
    assert probe.summary["tcp"] == 0
