"""The plugin's state for one pytest session: a stored run per suite, and the figures.

Nothing of trialkit beyond this module is imported, no store is opened and no event loop is
started until the first trialkit item runs, so an ordinary test session is left alone.

With pytest-xdist the process that starts the workers (the controller) picks a session token
and hands it to them (`workerinput`); each suite's run id is made from it, so the workers add
their trials to one stored run per suite. Each worker sends what it ran back
(`workeroutput`), and the controller ends the runs and prints the summary, from the store
(`controller`: a worker that crashed hands nothing back).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from trialkit.pytest_plugin.controller import (
    SESSION_KEY,
    Crash,
    finish_stored,
    finish_unstored,
    session_runs,
)
from trialkit.pytest_plugin.options import RawOptions, run_settings, store_value
from trialkit.pytest_plugin.outcome import TrialsErrored, errored, properties, summary_lines

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from trialkit.pytest_plugin.collect import TaskItem
    from trialkit.report import Report, TaskReport
    from trialkit.run.session import RunSession
    from trialkit.run.settings import RunSettings
    from trialkit.store import Store
    from trialkit.task import Suite

T = TypeVar("T")
STATE = pytest.StashKey["PluginState"]()
WORKER_KEY = "trialkit"
"""The key of the plugin's part of xdist's `workerinput` and `workeroutput`."""


def state_of(config: pytest.Config) -> PluginState:
    return config.stash[STATE]


@dataclass
class Entry:
    """A suite of the session: the tasks collected of it, and its run once one started."""

    key: str
    """The node id of the suite's collector (a test module, for marked tests)."""
    make_suite: Callable[[], Suite]
    task_ids: list[str] = field(default_factory=list)
    session: RunSession | None = None
    problem: str | None = None
    """Why its run cannot start: every item of the suite is an error with this message."""


class PluginState:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        given = getattr(config, "workerinput", {}).get(WORKER_KEY)
        self.is_worker = hasattr(config, "workerinput")
        if given is not None:
            self.stamp, self.secret = str(given[0]), str(given[1])
        else:
            self.stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
            self.secret = secrets.token_hex(8)
        self.session_tag = hashlib.sha256(f"{self.secret}:session".encode()).hexdigest()[:16]
        """Recorded in the config of each run the session stores: the controller finds them."""
        self.distributed = False
        """The session's items run in xdist workers (in the controller)."""
        self.crashes: list[Crash] = []
        """Workers that crashed while running an item (in the controller)."""
        self.entries: dict[str, Entry] = {}
        self.reports: list[tuple[Report, str]] = []
        """Each suite's report and a note, for the terminal summary."""
        self.worker_runs: dict[str, dict[str, Any]] = {}
        """What the workers ran, by run id (in the controller)."""
        self.notices: list[str] = []
        self._raw: RawOptions | None = None
        self._settings: RunSettings | None = None
        self._store: Store | None = None
        self._store_problem: str | None = None
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None

    # -- options ---------------------------------------------------------------------------

    @property
    def raw(self) -> RawOptions:
        if self._raw is None:
            self._raw = RawOptions(self.config)
        return self._raw

    def check_options(self) -> None:
        """Refuse bad option values at once (a usage error); parse nothing when none is given."""
        if self.raw.values:
            self.settings  # noqa: B018  (parsed for its errors)

    @property
    def settings(self) -> RunSettings:
        if self._settings is None:
            self._settings = run_settings(self.raw)
        return self._settings

    @property
    def strict_capability(self) -> bool:
        return self.raw.flag("strict_capability")

    @property
    def store_url(self) -> str | None:
        """The store's URL (None: nothing is stored)."""
        value = store_value(self.raw, self.config)
        if value is None:
            return None
        from trialkit.store import resolve_store_url

        return resolve_store_url(value)

    def store(self) -> Store | None:
        if self._store_problem is not None:
            raise TrialsErrored(self._store_problem)
        url = self.store_url
        if self._store is None and url is not None:
            from trialkit.store import Store, StoreError

            try:
                self._store = Store(url)
            except StoreError as exc:
                self._store_problem = str(exc)
                raise TrialsErrored(self._store_problem) from None
        return self._store

    def run_id(self, key: str) -> str:
        """The id of the run of the suite `key` in this session (the same in every worker)."""
        digest = hashlib.sha256(f"{self.secret}:{key}".encode()).hexdigest()
        return f"{self.stamp}-{digest[:6]}"

    # -- running ---------------------------------------------------------------------------

    def call(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run `work` on the session's event loop (in a thread of its own, for the session)."""
        if self._portal is None:
            from anyio.from_thread import start_blocking_portal

            self._portal = self._stack.enter_context(start_blocking_portal(name="trialkit-pytest"))
        return self._portal.call(work)

    def plan(self, key: str, make_suite: Callable[[], Suite], task_id: str) -> None:
        """Note that the session runs `task_id` of the suite `key` (its run plans it)."""
        entry = self.entries.setdefault(key, Entry(key=key, make_suite=make_suite))
        if task_id not in entry.task_ids:
            entry.task_ids.append(task_id)

    def run_task_item(self, item: TaskItem) -> TaskReport:
        suite = item.suite
        self.plan(item.suite_key, lambda: suite, item.task.id)
        return self.run_task(item, item.suite_key, item.task.id)

    def run_task(
        self, item: pytest.Item, key: str, task_id: str, *, concurrency: int | None = None
    ) -> TaskReport:
        """Run the trials of `task_id` of suite `key` for `item`: its JUnit properties are
        set, and trials that errored raise `TrialsErrored` (the item is a pytest error)."""
        session = self._session(self.entries[key])
        self.call(functools.partial(session.run_task, task_id, concurrency=concurrency))
        report = session.task_report(task_id)
        run_id = session.run.id if session.store is not None else None
        item.user_properties.extend(properties(report, run_id))
        problem = errored(report, session.suite.id)
        if problem is not None:
            raise TrialsErrored(problem)
        return report

    def _session(self, entry: Entry) -> RunSession:
        if entry.problem is not None:
            raise TrialsErrored(entry.problem)
        if entry.session is not None:
            return entry.session
        from trialkit.run.runner import Runner
        from trialkit.run.session import RunSession
        from trialkit.task import SuiteError

        try:
            runner = Runner(self.settings, store=self.store())
            entry.session = RunSession(
                runner, entry.make_suite(), run_id=self.run_id(entry.key), task_ids=entry.task_ids
            )
            entry.session.run.config[SESSION_KEY] = self.session_tag
        except SuiteError as exc:
            entry.problem = str(exc)
            raise TrialsErrored(entry.problem) from None
        return entry.session

    # -- the end ---------------------------------------------------------------------------

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """End every run this process started; in a worker, hand what it ran to the controller."""
        try:
            if self.is_worker:
                runs = [self._close(entry, exitstatus, finish=False) for entry in self._started()]
                workeroutput = getattr(self.config, "workeroutput", None)
                if workeroutput is not None:
                    workeroutput[WORKER_KEY] = json.dumps([r for r in runs if r is not None])
            elif self.distributed:
                self._finish_distributed(exitstatus)
            else:
                for entry in self._started():
                    self._close(entry, exitstatus, finish=True)
                    assert entry.session is not None
                    self.reports.append((entry.session.report(), ""))
        finally:
            for entry in self._started():
                self.notices.extend(entry.session.runner.notices if entry.session else [])
            self._stack.close()
            if self._store is not None:
                self._store.close()

    def _started(self) -> list[Entry]:
        return [entry for entry in self.entries.values() if entry.session is not None]

    def _close(self, entry: Entry, exitstatus: int, *, finish: bool) -> dict[str, Any] | None:
        session = entry.session
        assert session is not None
        status, reason = _status(exitstatus, session.report())
        self.call(functools.partial(session.close, status=status, reason=reason, finish=finish))
        return {
            "run": session.run.model_dump(mode="json"),
            "suite": session.suite_info.model_dump(mode="json"),
            "plans": [p.model_dump(mode="json") for p in session.plans],
            "results": {
                task: [r.model_dump(mode="json") for r in results]
                for task, results in session.results.items()
            },
            "stored": session.store is not None,
        }

    def add_worker_output(self, text: str) -> None:
        """What a worker ran (in the controller)."""
        for run in json.loads(text):
            run_id = run["run"]["id"]
            merged = self.worker_runs.setdefault(run_id, {**run, "results": {}, "workers": 0})
            merged["workers"] += 1
            for task, results in run["results"].items():
                merged["results"].setdefault(task, []).extend(results)

    def _finish_distributed(self, exitstatus: int) -> None:
        """End the runs the workers stored (found in the store: a crashed worker handed
        nothing back) and those they ran without a store, and note what never finished."""
        store = self._controller_store()
        ended: set[str] = set()
        if store is not None:
            found = session_runs(store, self.stamp, self.session_tag)
            found += [r for r, d in self.worker_runs.items() if d["stored"] and r not in found]
            for run_id in found:
                report, notes = finish_stored(
                    store, run_id, exitstatus, self.crashes, self.run_id, _status
                )
                self.notices.extend(notes)
                self.reports.append((report, self._note(run_id)))
                ended.add(run_id)
        for run_id, data in self.worker_runs.items():
            if run_id in ended or data["stored"]:
                continue
            report, notes = finish_unstored(data, exitstatus, self.crashes, self.run_id, _status)
            self.notices.extend(notes)
            self.reports.append((report, self._note(run_id)))

    def _controller_store(self) -> Store | None:
        """The store the workers wrote to, when they wrote to one (an ordinary test session
        that had a worker crash opens none, and makes no store)."""
        if any(data["stored"] for data in self.worker_runs.values()):
            try:
                return self.store()
            except TrialsErrored as exc:
                self.notices.append(f"trialkit: {exc}")
                return None
        value = None
        if self.crashes:
            with contextlib.suppress(pytest.UsageError, TrialsErrored):
                value = store_value(self.raw, self.config)
        if value is None:
            return None
        from trialkit.store import Store, StoreError, resolve_store_url

        url = resolve_store_url(value, create=False)  # no folder made for a store not there
        try:
            self._store = Store(url, create=False)
        except StoreError:
            return None
        return self._store

    def _note(self, run_id: str) -> str:
        workers = self.worker_runs.get(run_id, {}).get("workers", 0)
        crashed = len({c.worker for c in self.crashes})
        note = f"trials from {workers} xdist worker{'s' if workers != 1 else ''}"
        if crashed:
            note += f", {crashed} crashed"
        return f" ({note})"

    def summary(self) -> list[str]:
        per_task = self.config.get_verbosity() > 0
        lines: list[str] = []
        store = None
        with contextlib.suppress(pytest.UsageError, TrialsErrored):
            store = self.store_url
        shown = None if store is None else _shown_store(store)
        for report, note in self.reports:
            lines += summary_lines(report, shown, per_task=per_task, note=note)
        return lines + list(dict.fromkeys(self.notices))


def _status(exitstatus: int, report: Report) -> tuple[Any, str | None]:
    """How a run ended: interrupted (Ctrl-C), stopped (pytest stopped before some of its
    tasks ran: -x, --maxfail), or completed."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted", None
    missing = [t.id for t in report.tasks if t.trials == 0]
    if missing:
        return "stopped", (
            f"pytest stopped before {len(missing)} of its {len(report.tasks)} tasks ran "
            f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''})"
        )
    return "completed", None


def _shown_store(url: str) -> str:
    """A SQLite store as its path, any other as its URL with the password hidden."""
    from trialkit.store.urls import mask_url, parse_url, sqlite_file

    path = sqlite_file(parse_url(url))
    return str(path) if path is not None else mask_url(url)
