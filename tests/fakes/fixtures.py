"""Pytest fixtures for the test doubles in `tests.fakes` (registered as a plugin in conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.provider_server import ProviderServer


@pytest.fixture
def provider_server() -> Iterator[ProviderServer]:
    """A fake OpenAI + Anthropic server on loopback, started for one test and stopped after."""
    with ProviderServer() as server:
        yield server
