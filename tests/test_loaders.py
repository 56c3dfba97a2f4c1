import subprocess
import sys
from pathlib import Path

import pytest

from trialkit.loaders import TargetError, load_suite

ONE = """
from trialkit import Suite, Task
suite = Suite(id="one", tasks=[Task(id="t", input="x")], harness=lambda p: p)
alias = suite
"""

TWO = """
from trialkit import Suite, Task
a = Suite(id="a", tasks=[Task(id="t", input="x")])
b = Suite(id="b", tasks=[Task(id="t", input="x")])
def make():
    return Suite(id="made", tasks=[Task(id="t", input="x")])
number = 3
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "one.py").write_text(ONE)
    (tmp_path / "two.py").write_text(TWO)
    (tmp_path / "none.py").write_text("x = 1\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('oops')\n")
    (tmp_path / "badtask.py").write_text(
        "from trialkit import Task\nTask(id='t', input='x', trials=0)\n"
    )
    return tmp_path


def test_file_with_one_suite(files: Path) -> None:
    assert load_suite(str(files / "one.py")).id == "one"


def test_named_suite_and_factory(files: Path) -> None:
    assert load_suite(f"{files / 'two.py'}:b").id == "b"
    assert load_suite(f"{files / 'two.py'}:make").id == "made"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("two.py", "defines 2 suites (a, b); pick one with"),
        ("none.py", "defines no trialkit.Suite at module level"),
        ("two.py:missing", "has no attribute 'missing'"),
        ("two.py:number", "is a int, not a trialkit.Suite"),
        ("broken.py", "broken.py:1: import failed: RuntimeError: oops"),
        ("badtask.py", "badtask.py:2: task 't': trials: must be a whole number"),
        ("absent.py", "absent.py: no such file"),
        ("suite.yaml", "suite.yaml: no such file"),
    ],
)
def test_bad_targets(files: Path, target: str, message: str) -> None:
    with pytest.raises(TargetError) as info:
        load_suite(str(files / target))
    assert message in str(info.value)


def test_errors_in_a_python_suite_name_the_file_and_line(files: Path, tmp_path: Path) -> None:
    """The line in the suite's own file, however deep in trialkit the error was raised."""
    cases = {
        "nested.py": (
            "from trialkit import Suite, Task, graders\n\n"
            "suite = Suite(\n    id='s',\n    tasks=[\n        Task(id='ok', input='x'),\n"
            "        Task(id='bad', input='x', timeout=-1),\n    ],\n)\n",
            7,
            "task 'bad': timeout",
        ),
        "syntax.py": ("x = 1\ny = (\n", 2, "'(' was never closed"),
        "typo.py": ("from trialkit import Suite\n\nsuite = Suite(id='s', tsks=[])\n", 3, "tsks"),
    }
    for name, (source, line, said) in cases.items():
        path = tmp_path / name
        path.write_text(source, encoding="utf-8")
        with pytest.raises(TargetError) as info:
            load_suite(str(path))
        assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
        assert said in str(info.value)


def test_module_targets() -> None:
    with pytest.raises(TargetError, match="no such module"):
        load_suite("not_a_module_anywhere:suite")
    with pytest.raises(TargetError, match="has no attribute 'nope'"):
        load_suite("trialkit:nope")


def test_a_python_target_loads_no_suite_file_machinery(files: Path) -> None:
    """The suite-file models cost a run's start about 0.14 s: a Python suite never needs them."""
    code = (
        "import sys\n"
        "from trialkit.loaders import load_target\n"
        f"assert load_target({str(files / 'one.py')!r}).id == 'one'\n"
        "assert 'trialkit.loaders.suite_file' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
