"""`@pytest.mark.trialkit(trials=5, kind="capability")`: an ordinary test as a trialkit task.

The marked tests of a test module make one suite, whose id is the module's path in dots
(`tests/test_bot.py` gives `tests.test_bot`) and whose tasks are the tests (named as in their
node id, after the file: `test_answer`, `TestBot::test_greets[fr]`). Its harness runs the test's
body: each trial is one call, with its own transcript into which the model calls made inside
it are captured, and its own cassette slot (the trial's index). A failed assertion (or
`pytest.fail`) fails the trial, any other exception errors it. The test's fixtures are set up
once for all its trials, so the trials of a test run one after the other unless the marker
says `concurrency=N`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from trialkit.harness.base import Reply, TrialContext
    from trialkit.task import Suite

MARKER = "trialkit"
MARKER_HELP = (
    "trialkit(trials=1, kind='regression', timeout=None, concurrency=1): run the test body "
    "as a trialkit task, once per trial, each trial with its own transcript and cassette "
    "slot; kind 'regression' needs every trial to pass, 'capability' reports pass@k"
)
FIXTURE = "trialkit_trial"
ARGUMENTS = ("trials", "kind", "timeout", "concurrency")
SKIPPED = pytest.StashKey[list[BaseException]]()
REPORT = pytest.StashKey[Any]()
"""The task report of a marked test, from its setup to its call."""
_NOT_IN_ID = re.compile(r"[/#\x00-\x1f\x7f-\x9f]")


def is_marked(item: pytest.Item) -> bool:
    return isinstance(item, pytest.Function) and item.get_closest_marker(MARKER) is not None


def suite_key(item: pytest.Item) -> str:
    module = item.getparent(pytest.Module)
    return (module or item).nodeid


def suite_id(item: pytest.Item) -> str:
    path = item.path
    with contextlib.suppress(ValueError):
        path = path.relative_to(item.config.rootpath)
    return ".".join(path.with_suffix("").parts) or path.stem


def task_id(item: pytest.Item) -> str:
    name = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.name
    return _NOT_IN_ID.sub("_", name)


def marker_arguments(item: pytest.Item) -> dict[str, Any]:
    """The marker's arguments; a positional or unknown one is a `SuiteError`."""
    from trialkit.task import SuiteError

    marker = item.get_closest_marker(MARKER)
    assert marker is not None
    if marker.args:
        raise SuiteError(
            f"{item.nodeid}: @pytest.mark.trialkit takes keyword arguments only "
            f"({', '.join(ARGUMENTS)})"
        )
    unknown = sorted(set(marker.kwargs) - set(ARGUMENTS))
    if unknown:
        raise SuiteError(
            f"{item.nodeid}: @pytest.mark.trialkit: unknown argument {', '.join(unknown)} "
            f"(known: {', '.join(ARGUMENTS)})"
        )
    return dict(marker.kwargs)


def make_suite(items: list[pytest.Item]) -> Suite:
    """The suite of a module's marked tests: a task per test, its kind, trials and timeout
    from the marker; a bad argument is a `SuiteError` naming the task."""
    from trialkit.task import Suite, Task

    tasks = []
    for item in items:
        given = marker_arguments(item)
        tasks.append(
            Task(
                id=task_id(item),
                input=item.nodeid,
                trials=given.get("trials"),
                timeout=given.get("timeout"),
                kind=given.get("kind", "regression"),
            )
        )
    return Suite(id=suite_id(items[0]), kind="mixed", tasks=tasks, harness=_run_body)


async def _run_body(prompt: str, ctx: TrialContext) -> Reply:
    """The harness of marked tests: the trial's test body (kept by the item's setup)."""
    body = _BODIES.get((ctx.run_id, ctx.task.id))
    if body is None:
        raise RuntimeError(f"no test body for task {ctx.task.id!r}")
    return await body(ctx)


_BODIES: dict[tuple[str, str], Callable[[TrialContext], Awaitable[Reply]]] = {}
"""The body of each marked test while its trials run, by (run id, task id)."""


def body_of(item: pytest.Function) -> Callable[[TrialContext], Awaitable[Reply]]:
    """One trial of the test: its function called with its fixtures (and this trial's
    `TrialContext` as `trialkit_trial`)."""
    from trialkit._calls import run_blocking
    from trialkit.harness.base import Reply

    function = item.obj
    names = [n for n in item._fixtureinfo.argnames if n in item.funcargs]
    skipped = item.stash.setdefault(SKIPPED, [])

    async def body(ctx: TrialContext) -> Reply:
        kwargs = {name: item.funcargs[name] for name in names}
        if FIXTURE in kwargs:
            kwargs[FIXTURE] = ctx
        try:
            if inspect.iscoroutinefunction(function):
                await function(**kwargs)
            else:
                await run_blocking(functools.partial(function, **kwargs))
        except (AssertionError, pytest.fail.Exception) as exc:
            return Reply(is_error=True, error=_failure(exc))
        except pytest.skip.Exception as exc:
            skipped.append(exc)
            return Reply(output=f"skipped: {exc}")
        return Reply()

    return body


def _failure(exc: BaseException) -> str:
    message = str(exc).strip()
    name = "AssertionError" if isinstance(exc, AssertionError) else "pytest.fail"
    return f"{name}: {message}" if message else name


def run_marked(item: pytest.Function) -> None:
    """Run the trials of a marked test (after its fixtures are set up)."""
    from trialkit.pytest_plugin.state import state_of

    state = state_of(item.config)
    key = suite_key(item)
    concurrency = marker_arguments(item).get("concurrency", 1)
    entry = state.entries.get(key)
    if entry is None:  # not planned at collection's end: a run of this test alone
        state.plan(key, functools.partial(make_suite, [item]), task_id(item))
    run_id = state.run_id(key)
    _BODIES[(run_id, task_id(item))] = body_of(item)
    try:
        report = state.run_task(item, key, task_id(item), concurrency=concurrency)
    finally:
        _BODIES.pop((run_id, task_id(item)), None)
    item.stash[REPORT] = report
    skipped = item.stash.get(SKIPPED, [])
    if skipped:
        pytest.skip(str(skipped[0]))
