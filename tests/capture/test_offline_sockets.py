"""`--offline` without a network namespace (`Runner(offline=True)`, the pytest plugin): the audit
hook refuses every way out a Python process can see, and the stored run says what it does not
cover. The ways out run inside a network namespace of the test's own (tests/sandbox/outside.py),
so whatever got through would reach a listener there, never the real network."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.sandbox.outside import OUTER_ADDRESS, run_outside
from tests.sandbox.test_offline_namespace import REFUSED, Probe, tasks
from trialkit.capture import _loopback
from trialkit.capture._loopback import is_loopback, listed


def test_every_way_the_process_sees_is_refused_without_a_namespace(tmp_path: Path) -> None:
    probe = Probe(tmp_path, "library", *tasks(*REFUSED, "loopback_python"))
    for way, named in REFUSED.items():
        message = probe.error(way)
        assert named in message, (way, message)
    assert probe.trials["loopback_python"]["verdict"] == "pass"  # this machine stays reachable
    summary = probe.summary
    assert (summary["tcp"], summary["udp"], summary["dns"]) == (0, 0, 0), summary
    assert probe.cache["offline_confined"] is False
    note = probe.cache["offline_note"]
    assert note.startswith("no network namespace (only `trialkit run`")
    assert "subprocesses, os.system, ctypes and C extensions are not confined" in note


WINDOW = textwrap.dedent(
    f"""
    import json, socket, sys, threading
    import trialkit.models  # noqa: F401  (first, as trialkit itself imports it)
    from trialkit.capture.scope import OfflineRefused, carry_into_threads, guard_sockets
    from trialkit.capture.scope import offline_run
    from trialkit.models.context import ModelSettings
    from trialkit.transcript import mark_outside_trials

    listener = socket.create_server(("{OUTER_ADDRESS}", 0))
    port = listener.getsockname()[1]
    seen = {{}}

    def connect(name):
        try:
            socket.create_connection(("{OUTER_ADDRESS}", port), timeout=3).close()
            seen[name] = "connected"
        except OfflineRefused as exc:
            seen[name] = str(exc)

    def start(name):
        thread = threading.Thread(target=connect, args=(name,), name=name)
        thread.start()
        thread.join(10)

    foreign = threading.Thread(target=lambda: None)  # started before the run: foreign
    guard_sockets()
    carry_into_threads()
    refused = []
    with offline_run(ModelSettings(offline=True), refused):
        start("before-any-trial")  # started from a thread no run marked: foreign
        mark_outside_trials()  # from here, this thread is the run's own code
        start("the-runs-own")
    start("after-the-run")
    print(json.dumps({{"seen": seen, "refused": refused}}))
    """
)


def test_a_foreign_thread_is_refused_between_trials_and_the_run_says_so() -> None:
    done = run_outside([sys.executable, "-c", WINDOW])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    seen, refused = result["seen"], result["refused"]
    assert "from thread 'before-any-trial', which belongs to no trial" in seen["before-any-trial"]
    assert refused == [seen["before-any-trial"]]  # no trial was in flight to be told
    assert seen["the-runs-own"] == "connected"  # trialkit's own machinery is not refused
    assert seen["after-the-run"] == "connected"  # no --offline run any more


BETWEEN_TRIALS = textwrap.dedent(
    f"""
    import json, queue, socket, threading
    import anyio
    from trialkit import Suite, Task, graders
    from trialkit.exporters.base import Exporter
    from trialkit.run.runner import Runner

    jobs = queue.Queue()

    def connect_for_whoever_asks():
        while True:
            answer = jobs.get()
            try:
                socket.create_connection(("{OUTER_ADDRESS}", 9), timeout=3).close()
                answer.put("connected")
            except OSError as exc:
                answer.put(str(exc))

    threading.Thread(target=connect_for_whoever_asks, name="pre-started", daemon=True).start()

    class AsksAfterEachTrial(Exporter):  # the trial is over: none is in flight now
        def __init__(self):
            self.answers = []

        def on_trial(self, trial):
            answer = queue.Queue()
            jobs.put(answer)
            self.answers.append(answer.get(timeout=10))

    suite = Suite(id="between", harness=lambda prompt: prompt, trials=1,
                  tasks=[Task(id="a", input="a", graders=[graders.contains("a")])])
    exporter = AsksAfterEachTrial()
    runner = Runner(offline=True, concurrency=1, exporters=[exporter])
    report = anyio.run(runner.run, suite)
    print(json.dumps({{"answers": exporter.answers, "notices": runner.notices,
                      "cache": report.run.config["cache"],
                      "verdicts": [t.verdict for t in report.tasks]}}))
    """
)


def test_a_refusal_while_no_trial_runs_is_a_run_notice_and_in_the_stored_run() -> None:
    done = run_outside([sys.executable, "-c", BETWEEN_TRIALS])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    (answer,) = result["answers"]
    assert "from thread 'pre-started', which belongs to no trial" in answer
    assert result["notices"] == [answer]
    assert result["cache"]["offline_refused"] == [answer]
    assert result["verdicts"] == ["pass"]  # the trial had ended: it is not blamed


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "127.0.0.1 localhost  # the usual\n"
        "::1 localhost ip6-localhost\n"
        "127.0.1.1 box box.localhost\n"
        "127.0.0.1 split.example\n"
        "192.0.2.7 split.example lan.example\n"
        "not-an-address nothing.example\n"
    )
    nsswitch = tmp_path / "nsswitch.conf"
    nsswitch.write_text("passwd: files\nhosts:          files dns\n")
    monkeypatch.setattr(_loopback, "HOSTS_FILE", hosts)
    monkeypatch.setattr(_loopback, "NSSWITCH_FILE", nsswitch)
    return hosts


def test_a_name_is_this_machine_only_when_the_hosts_file_maps_it_to_loopback(hosts: Path) -> None:
    for here in ("localhost", "LOCALHOST.", "ip6-localhost", "box", "box.localhost"):
        assert is_loopback(here), here
    for elsewhere in ("api.localhost", "split.example", "lan.example", "nothing.example"):
        assert not is_loopback(elsewhere), elsewhere
    for address in ("127.0.0.1", "127.9.9.9", "::1", "[::1]", "::ffff:127.0.0.1"):
        assert is_loopback(address), address
    for address in ("192.0.2.7", "::ffff:192.0.2.7", "fe80::1%eth0", "127.1"):
        assert not is_loopback(address), address
    hosts.write_text("192.0.2.8 localhost\n")  # read again when it changes
    assert not is_loopback("localhost")


def test_a_reverse_lookup_stays_here_only_for_an_address_the_hosts_file_lists(
    hosts: Path,
) -> None:
    assert listed("127.0.1.1") and listed("::1") and listed("box")
    assert not listed("127.0.0.9")  # loopback, but the C library would ask DNS for its name
    assert not listed("192.0.2.99") and not listed("api.localhost")


def test_no_name_is_trusted_when_dns_comes_before_the_hosts_file(
    hosts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nsswitch = tmp_path / "nsswitch-dns-first.conf"
    nsswitch.write_text("hosts: dns files\n")
    monkeypatch.setattr(_loopback, "NSSWITCH_FILE", nsswitch)
    hosts.write_text(hosts.read_text() + "\n")  # a new file stamp: read again
    assert not is_loopback("localhost") and is_loopback("127.0.0.1")
