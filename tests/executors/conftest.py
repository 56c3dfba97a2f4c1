"""The Ray cluster of the Ray executor tests (`test_ray.py`, `test_ray_cluster.py`)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

RAY_ADDRESS_VAR = "TRIALKIT_TEST_RAY_ADDRESS"
REQUIRE_RAY_VAR = "TRIALKIT_REQUIRE_RAY"
"""`1` (as in CI): no cluster is a failure, not a skip."""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """The test cluster's address; the driver connects once for each module."""
    address = os.environ.get(RAY_ADDRESS_VAR)
    if not address:
        if os.environ.get(REQUIRE_RAY_VAR) == "1":
            pytest.fail(f"{REQUIRE_RAY_VAR}=1 but {RAY_ADDRESS_VAR} is not set (.ci/ray.sh)")
        pytest.skip(f"no Ray cluster: set {RAY_ADDRESS_VAR} (.ci/ray.sh starts one)")
    ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")
    ray.init(address=address, log_to_driver=False)
    yield address
    ray.shutdown()
