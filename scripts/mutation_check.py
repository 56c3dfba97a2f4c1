"""Mutation-test the modules that hold trialkit's central rules, with mutmut.

    python scripts/mutation_check.py                       # the default modules, below
    python scripts/mutation_check.py src/trialkit/report.py --tests tests/test_central_rules.py

It copies HEAD to a temporary folder, makes a virtual environment there with mutmut and
trialkit's dependencies but not trialkit itself (so the tests import the mutated copy), runs
mutmut on the given modules with the given tests, and prints the survivors, grouped by
function. Nothing in this checkout is changed. It takes minutes: run it by hand, not in CI.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["src/trialkit/graders/base.py", "src/trialkit/models/base.py", "src/trialkit/report.py"]
TESTS = [
    "tests/test_central_rules.py",
    "tests/graders/test_trial_verdict.py",
    "tests/graders/test_base.py",
]
TEST_DEPENDENCIES = ["mutmut", "pytest", "hypothesis", "inline-snapshot", "dirty-equals"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", default=MODULES)
    parser.add_argument("--tests", nargs="+", default=TESTS)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="trialkit-mutation-"))
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive.stdout, check=True)
    configure(work, args.modules, args.tests)
    venv = work / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    project = tomllib.loads((work / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pip = [str(venv / "bin" / "pip"), "install", "--quiet"]
    subprocess.run([*pip, *project["dependencies"], *TEST_DEPENDENCIES], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(venv / "bin" / "mutmut"), "run"], cwd=work, env=env, check=False)
    results = subprocess.run(
        [str(venv / "bin" / "mutmut"), "results"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    survivors = Counter(
        re.sub(r"__mutmut_\d+$", "", line.split(":")[0].strip())
        for line in results.splitlines()
        if line.strip().endswith("survived")
    )
    print(f"survivors by function ({sum(survivors.values())}); `mutmut show NAME` in {work}:")
    for name, count in sorted(survivors.items()):
        print(f"{count:5d}  {name}")


def configure(work: Path, modules: list[str], tests: list[str]) -> None:
    """mutmut's settings in the copy's pyproject.toml: mutate only `modules`, run `tests`, and
    import the copy's src/ first."""
    others = sorted(
        f
        for f in glob.glob("src/trialkit/**/*.py", root_dir=work, recursive=True)
        if f not in modules
    )
    text = (work / "pyproject.toml").read_text(encoding="utf-8")
    text = text.replace('testpaths = ["tests"]', 'testpaths = ["tests"]\npythonpath = ["src", "."]')
    text += (
        "\n[tool.mutmut]\n"
        'source_paths = ["src/trialkit"]\n'
        'also_copy = ["tests", "examples"]\n'
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
        f"do_not_mutate = {json.dumps(others)}\n"
    )
    (work / "pyproject.toml").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
