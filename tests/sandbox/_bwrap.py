"""The bwrap provider for the tests: skipped where bubblewrap is missing, unless
`TRIALKIT_REQUIRE_BWRAP=1` (`.ci/run` installs it and sets that), which fails them instead."""

from __future__ import annotations

import os
from typing import Any

import pytest

from trialkit.sandbox.bwrap import BwrapProvider

REQUIRE_VAR = "TRIALKIT_REQUIRE_BWRAP"


def bwrap_provider(**options: Any) -> BwrapProvider:
    provider = BwrapProvider(**options)
    why = provider.unavailable()
    if why is not None:
        if os.environ.get(REQUIRE_VAR) == "1":
            pytest.fail(f"{why}, and {REQUIRE_VAR}=1 requires it")
        pytest.skip(why)
    return provider
