"""Collection: trialkit suites as pytest collectors, their tasks as test items.

A Python file named like `trialkit_files` (`eval_*.py`) gives a collector per module-level
`Suite`; a suite folder or file gives one collector. Each is named after the suite's id and
holds an item per task, named after the task's id: `eval_x.py::<suite-id>::<task-id>`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from trialkit.pytest_plugin.outcome import TaskFailed, TrialkitOutcome, judge

if TYPE_CHECKING:
    from trialkit.report import TaskReport
    from trialkit.task import Suite, Task

SUITE_FILE_NAMES = ("suite.yaml", "suite.yml", "suite.json")
SUITE_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def _target(path: Path) -> str:
    """`path` as a target for `load_target`: relative to the working directory when inside it
    (so messages name files as the user sees them)."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive
        return str(path)


def clean_failure(excinfo: pytest.ExceptionInfo[BaseException]) -> str | None:
    """A bad suite's message as the CLI shows it (`file:line: field: message`, one problem a
    line), instead of a traceback; None for any other exception."""
    from trialkit.loaders.errors import SuiteFileError
    from trialkit.loaders.python import TargetError
    from trialkit.task import SuiteError

    exc = excinfo.value
    if isinstance(exc, SuiteFileError):
        return "\n".join(str(problem) for problem in exc.problems)
    if isinstance(exc, TargetError | SuiteError):
        return str(exc)
    return None


_PYTEST_MARKERS = {"filterwarnings", "parametrize", "skip", "skipif", "usefixtures", "xfail"}


def _tag_marker(config: pytest.Config, tag: str) -> bool:
    """Whether the task tag `tag` can be a marker (for `-m`): a name no marker has yet, which
    is then registered (so `--strict-markers` takes it). Other tags match with `-k` only."""
    if not tag.isidentifier() or tag in _PYTEST_MARKERS or tag.startswith("trialkit"):
        return False
    ours = config.stash.setdefault(_TAG_MARKERS, set())
    if tag in ours:
        return True
    known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    if tag in known:
        return False
    config.addinivalue_line("markers", f"{tag}: a trialkit task tag")
    ours.add(tag)
    return True


_TAG_MARKERS = pytest.StashKey[set[str]]()


class _SuiteSource(pytest.File):
    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return clean_failure(excinfo) or super().repr_failure(excinfo)


class SuiteModule(_SuiteSource):
    """A Python file of suites (`eval_*.py`): one collector per module-level `Suite`."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from trialkit.loaders.python import TargetError, suite_names
        from trialkit.loaders.target import load_target

        target = _target(self.path)
        names: dict[str, str] = {}
        for name in suite_names(target):
            suite = load_target(f"{target}:{name}")  # records the suite's source, as `run` does
            if suite.id in names:
                raise TargetError(
                    f"{target}: {names[suite.id]} and {name} are both suites with the id "
                    f"{suite.id!r}; give each suite its own id"
                )
            names[suite.id] = name
            yield SuiteCollector.from_parent(self, name=suite.id, suite=suite)


class SuiteFile(_SuiteSource):
    """A suite file (`suite.yaml`, or any file `load_target` reads) or a folder's suite."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from trialkit.loaders.target import load_target

        path = self.path.parent if self.path.name in SUITE_FILE_NAMES else self.path
        suite = load_target(_target(path))
        yield SuiteCollector.from_parent(self, name=suite.id, suite=suite)


class SuiteCollector(pytest.Collector):
    """One suite: an item per task."""

    def __init__(self, *, suite: Suite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        for task in self.suite.tasks:
            yield TaskItem.from_parent(self, name=task.id, task=task)


class TaskItem(pytest.Item):
    """One task of a suite: `setup` runs its trials, `runtest` applies the suite's gate.

    Trials that errored make the item an error (raised in `setup`), a failing regression task a
    failure (raised in `runtest`), as fail and error are kept apart everywhere in trialkit.
    """

    def __init__(self, *, task: Task, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task
        self.report: TaskReport | None = None
        self.add_marker("trialkit")
        self.extra_keyword_matches.update(task.tags)
        for tag in task.tags:
            if _tag_marker(self.config, tag):
                self.add_marker(tag)

    @property
    def suite(self) -> Suite:
        parent = self.parent
        assert isinstance(parent, SuiteCollector)
        return parent.suite

    @property
    def suite_key(self) -> str:
        """One run per suite collector: its node id."""
        assert self.parent is not None
        return self.parent.nodeid

    def setup(self) -> None:
        from trialkit.pytest_plugin.state import state_of

        self.report = state_of(self.config).run_task_item(self)

    def runtest(self) -> None:
        from trialkit.pytest_plugin.state import state_of

        assert self.report is not None
        strict = state_of(self.config).strict_capability
        problem = judge(self.report, self.suite.id, strict_capability=strict)
        if problem is not None:
            raise TaskFailed(problem)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, TrialkitOutcome):
            return str(excinfo.value)
        return clean_failure(excinfo) or super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.suite.id}::{self.task.id}"
