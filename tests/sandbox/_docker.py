"""The docker and podman providers for the tests, against a real daemon and a local image.

`$TRIALKIT_TEST_DOCKER_IMAGE` names the image (`.ci/docker.sh start` builds one from Debian
packages, with python3, and prints its tag); `$TRIALKIT_TEST_PODMAN_IMAGE` the same for podman
(e.g. `docker save IMAGE | podman load`). Without a daemon or an image the tests are skipped,
unless `TRIALKIT_REQUIRE_DOCKER=1` (`.ci/run` sets it), which fails them instead.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from trialkit.sandbox.docker import DockerProvider, PodmanProvider

REQUIRE_VAR = "TRIALKIT_REQUIRE_DOCKER"
IMAGE_VARS = {"docker": "TRIALKIT_TEST_DOCKER_IMAGE", "podman": "TRIALKIT_TEST_PODMAN_IMAGE"}
CLASSES: dict[str, type[DockerProvider]] = {"docker": DockerProvider, "podman": PodmanProvider}


def _missing(name: str, why: str) -> None:
    if name == "docker" and os.environ.get(REQUIRE_VAR) == "1":
        pytest.fail(f"{why}, and {REQUIRE_VAR}=1 requires it (.ci/docker.sh start)")
    pytest.skip(why)


def image_for(name: str) -> str:
    image = os.environ.get(IMAGE_VARS[name])
    if not image:
        _missing(name, f"no test image for {name}: set {IMAGE_VARS[name]}")
    assert image is not None
    return image


def container_provider(name: str = "docker", **options: Any) -> DockerProvider:
    """The provider `name` with the test image as its default, or a skip (a failure in CI)."""
    image = image_for(name)
    provider = CLASSES[name](image=image, **options)
    why = provider.unavailable()
    if why is not None:
        _missing(name, why)
    return provider
