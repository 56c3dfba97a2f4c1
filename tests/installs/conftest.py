"""Install tests run only where `TRIALKIT_TEST_INSTALL` names their install (`.ci/installs.sh`
sets it in each fresh environment); anywhere else, such as the `dev` environment of the main
test run, they are skipped with that reason. There, a test must pass with nothing but its
install and pytest: the modules of this folder import only the standard library, pytest,
trialkit and `tests.fakes` (standard library only) at the top, and their install's packages
inside the tests."""

from __future__ import annotations

import os

import pytest

from tests.installs.helpers import INSTALL_VAR, spec_of


def pytest_configure(config: pytest.Config) -> None:
    chosen = os.environ.get(INSTALL_VAR)
    if not chosen:
        return
    import trialkit

    if "site-packages" not in trialkit.__file__:
        raise pytest.UsageError(
            f"{INSTALL_VAR}={chosen} but trialkit is imported from {trialkit.__file__}, not "
            "from an installed copy: run the install tests in a fresh environment "
            f"(pip install '{spec_of(chosen)}' pytest; .ci/installs.sh does)"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = os.environ.get(INSTALL_VAR)
    for item in items:
        module = getattr(item, "module", None)
        install = getattr(module, "INSTALL", None)
        if install is None or install == chosen or (install == "*" and chosen):
            continue
        what = "each install" if install == "*" else f"`pip install '{spec_of(install)}'`"
        item.add_marker(
            pytest.mark.skip(
                reason=f"a test of {what} on its own: .ci/installs.sh runs it in a fresh "
                f"environment holding only that and pytest ({INSTALL_VAR}=NAME)"
            )
        )
