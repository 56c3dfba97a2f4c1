"""The pytest plugin's hooks (the `pytest11` entry point `trialkit`).

Loaded in every pytest session, so it stays out of the way of ordinary ones: importing it
loads no trialkit internals, and it only acts on `eval_*.py` files, suite files pytest is
pointed at, and tests marked `@pytest.mark.trialkit`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from trialkit.pytest_plugin.collect import (
    SUITE_FILE_NAMES,
    SUITE_FILE_SUFFIXES,
    SuiteFile,
    SuiteModule,
    TaskItem,
)
from trialkit.pytest_plugin.controller import Crash
from trialkit.pytest_plugin.marker import (
    MARKER_HELP,
    REPORT,
    is_marked,
    make_suite,
    run_marked,
    suite_id,
    suite_key,
    task_id,
)
from trialkit.pytest_plugin.options import add_options
from trialkit.pytest_plugin.outcome import TaskFailed, TrialkitOutcome, judge
from trialkit.pytest_plugin.state import STATE, WORKER_KEY, PluginState, state_of

SUITE_ROOTS = pytest.StashKey[list[Path]]()
"""Suite folders and files to collect: those named on the command line, and `trialkit_suites`."""


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    state = PluginState(config)
    config.stash[STATE] = state
    config.stash[SUITE_ROOTS] = _suite_roots(config)
    if config.pluginmanager.hasplugin("xdist") and not state.is_worker:
        config.pluginmanager.register(XdistHooks(state), "trialkit-xdist")
    state.check_options()


def _suite_roots(config: pytest.Config) -> list[Path]:
    roots: list[Path] = []
    if config.args_source is pytest.Config.ArgsSource.ARGS:
        base = config.invocation_params.dir
        roots += [(base / arg.split("::")[0]).resolve() for arg in config.args]
    else:
        listed = [Path(p).resolve() for p in config.getini("trialkit_suites")]
        config.args.extend(str(path) for path in listed if str(path) not in config.args)
        roots += listed
    return roots


def _is_eval_file(path: Path, config: pytest.Config) -> bool:
    return _matches(path, config.getini("trialkit_files"))


def _matches(path: Path, patterns: list[str]) -> bool:
    return any(
        fnmatch.fnmatch(str(path) if "/" in p else path.name, p if "/" not in p else f"*{p}")
        for p in patterns
    )


def _is_suite_file(path: Path, config: pytest.Config) -> bool:
    resolved = path.resolve()
    roots = config.stash.get(SUITE_ROOTS, [])
    if resolved in roots:
        return True
    return path.name in SUITE_FILE_NAMES and any(root in resolved.parents for root in roots)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if file_path.suffix == ".py":
        python_collects = parent.session.isinitpath(file_path) or _matches(
            file_path, config.getini("python_files")
        )
        if not python_collects and _is_eval_file(file_path, config):
            return SuiteModule.from_parent(parent, path=file_path)
        return None  # a file Python's own collection takes: see pytest_pycollect_makemodule
    if file_path.suffix.lower() in SUITE_FILE_SUFFIXES and _is_suite_file(file_path, config):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> Any:
    """An eval file that pytest's Python collection takes (named on the command line, or
    matching `python_files` too) is collected as suites, not as a test module."""
    if _is_eval_file(module_path, parent.config):
        return SuiteModule.from_parent(parent, path=module_path)
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Each suite's run plans the tasks pytest selected of it (after -k, -m, --lf, ...)."""
    state = state_of(session.config)
    marked: dict[str, list[pytest.Item]] = {}
    for item in session.items:
        if isinstance(item, TaskItem):
            suite = item.suite
            state.plan(item.suite_key, lambda suite=suite: suite, item.task.id)  # type: ignore[misc]
        elif is_marked(item):
            marked.setdefault(suite_key(item), []).append(item)
    for key, items in marked.items():
        for item in items:
            state.plan(key, lambda items=items: make_suite(items), task_id(item))  # type: ignore[misc]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    result = yield  # the test's fixtures are set up
    if is_marked(item):
        assert isinstance(item, pytest.Function)
        run_marked(item)
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A marked test's body ran in its trials (in setup): here its gate decides."""
    if not is_marked(pyfuncitem):
        return None
    report = pyfuncitem.stash[REPORT]
    strict = state_of(pyfuncitem.config).strict_capability
    problem = judge(report, suite_id(pyfuncitem), strict_capability=strict)
    if problem is not None:
        raise TaskFailed(problem)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, TrialkitOutcome):
        report.longrepr = str(call.excinfo.value)  # the trials' verdicts, not a traceback
    return report


@pytest.fixture
def trialkit_trial(request: pytest.FixtureRequest) -> Any:
    """The `TrialContext` of the running trial (task, trial_index, run_id, model, ...) in a
    test marked `@pytest.mark.trialkit`."""
    if not is_marked(request.node):
        pytest.fail("the trialkit_trial fixture is for tests marked @pytest.mark.trialkit")
    return None  # each trial's call gets its own TrialContext in its place


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE, None)
    if state is not None:
        state.finish(session, exitstatus)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or not (state.reports or state.notices):
        return
    terminalreporter.section("trialkit")
    for line in state.summary():
        terminalreporter.write_line(line)


class XdistHooks:
    """In the xdist controller: one session token for every worker, and what they ran."""

    def __init__(self, state: PluginState) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_KEY] = [self.state.stamp, self.state.secret]
        self.state.distributed = True

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        text = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if text:
            self.state.add_worker_output(text)

    @pytest.hookimpl(optionalhook=True)  # an xdist hook: older versions have none
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        """A worker crashed while running `crashitem`: its trials in hand never finished."""
        gateway = getattr(getattr(report, "node", None), "gateway", None)
        self.state.crashes.append(Crash(crashitem, str(getattr(gateway, "id", "?"))))
