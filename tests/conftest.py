from collections.abc import Iterator

import pytest

from trialkit.sandbox import netns

pytest_plugins = ["pytester", "tests.fakes.fixtures"]


@pytest.fixture(autouse=True)
def _test_process_stays_outside_namespaces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`trialkit run --offline` moves its whole process into a network namespace; a test that
    calls the command in this process (CliRunner) must not take pytest in with it, or every
    later test would run confined. Tests of the namespace run `trialkit` as a subprocess."""

    def kept_out() -> netns.Namespace:
        raise netns.Unavailable("in-process test")

    monkeypatch.setattr(netns, "_enter", kept_out)
    monkeypatch.setattr(netns, "_why_not", None)  # as it was, after the test
    yield
    assert netns.entered() is None, "a test took the test process into a network namespace"
