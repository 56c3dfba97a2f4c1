from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.capture_server import CaptureServer


@pytest.fixture
def capture_server() -> Iterator[CaptureServer]:
    """A loopback server recording every request, started for one test and stopped after."""
    with CaptureServer() as server:
        yield server
