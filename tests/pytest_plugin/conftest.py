"""Sample projects for the plugin's tests, run in pytest sessions of their own (`pytester`).

The `pytester` plugin itself is enabled in `tests/conftest.py` (pytest allows `pytest_plugins`
only in a top-level conftest).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# Imported here, before any session in this process: pytester's in-process sessions drop the
# modules they imported when they end, and a module imported again does not match the
# classes the first import left registered elsewhere (yaml's constructors, for one).
import trialkit.capture.hook
import trialkit.loaders.suite_file
import trialkit.loaders.target
import trialkit.pytest_plugin.plugin
import trialkit.run.session  # noqa: F401
from trialkit.run.options import OPTIONS
from trialkit.store import Store, resolve_store_url

AGENT = '''
from trialkit import Suite, Task, graders


def agent(prompt, ctx):
    """Answers by the prompt: the flaky task alternates, the crash task raises."""
    if "Spain" in prompt:
        return "Madrid" if ctx.trial_index % 2 == 0 else "Barcelona"
    if "Crash" in prompt:
        raise RuntimeError("the agent crashed")
    return "Paris"
'''

CAPITALS = (
    AGENT
    + """

capitals = Suite(id="capitals", kind="regression", trials=3, harness=agent, tasks=[
    Task(id="france", input="France?", graders=[graders.contains("paris")], tags=["europe"]),
    Task(id="spain", input="Spain?", graders=[graders.contains("madrid")]),
    Task(id="crash", input="Crash", graders=[graders.contains("paris")]),
])
explore = Suite(id="explore", kind="capability", trials=4, harness=agent, tasks=[
    Task(id="spain", input="Spain?", graders=[graders.contains("madrid")]),
    Task(id="never", input="Spain?", graders=[graders.contains("lisbon")]),
])
"""
)

ENV_VARS = tuple(option.env for option in OPTIONS if option.env)
"""Every setting's variable: a value left in the shell would change the sessions here."""


@pytest.fixture(autouse=True)
def _no_trialkit_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def capitals(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with `eval_capitals.py`: a regression suite (a passing, a flaky and a crashing
    task) and a capability suite (a flaky task and one that never passes)."""
    pytester.makepyfile(eval_capitals=CAPITALS)
    return pytester


def default_store(pytester: pytest.Pytester) -> Path:
    return pytester.path / ".trialkit" / "trialkit.db"


def stored_runs(path: Path) -> dict[str, Any]:
    """The runs of the store at `path` by suite id: {suite: Report} (one run per suite)."""
    with Store(resolve_store_url(str(path), create=False), create=False) as store:
        runs = store.list_runs()
        reports = [store.load_report(run.id) for run in runs]
    by_suite: dict[str, Any] = {}
    for report in reports:
        assert report.suite.id not in by_suite, f"two runs of suite {report.suite.id}"
        by_suite[report.suite.id] = report
    return by_suite
