"""The pieces of a run moved into `trialkit.run`; their old import paths work for one release."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from trialkit._moved import MOVED


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_old_path_is_the_moved_module_with_a_warning(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new


def test_from_import_of_a_documented_name_still_works() -> None:
    # What a user's script wrote before the move (the guide named these paths).
    code = (
        "import warnings\n"
        "warnings.simplefilter('error')\n"
        "try:\n"
        "    from trialkit.settings import RunSettings\n"
        "except DeprecationWarning as warning:\n"
        "    print('warned:', warning)\n"
        "warnings.simplefilter('ignore')\n"
        "from trialkit.settings import RunSettings\n"
        "from trialkit.regrade import regrade_sync\n"
        "from trialkit.runner import Runner\n"
        "import trialkit\n"
        "print(RunSettings.__module__, regrade_sync.__module__, Runner is trialkit.Runner)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "warned: trialkit.settings moved to trialkit.run.settings" in out
    assert out.splitlines()[-1] == "trialkit.run.settings trialkit.run.regrade True"


def test_an_unknown_module_is_still_missing() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("trialkit.no_such_module")
