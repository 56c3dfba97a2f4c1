"""How long the `trialkit` command takes to start: `--version`, `--help`, `runs`, the import.

Each command runs in a fresh process, N times, the commands taking turns so that a change in the
machine's load falls on all of them alike. Two floors are timed in the same rounds: `python -c
pass`, the interpreter's own start-up, and importing the libraries `trialkit runs` cannot do
without (click, rich, pydantic, SQLAlchemy). `trialkit runs` reads an empty SQLite store,
created first in a temporary folder, which is also the working directory, so no `.trialkit/`
of yours is touched. Usage:

    python benchmarks/cli_startup.py                  # 21 rounds of the installed trialkit
    python benchmarks/cli_startup.py --runs 51
    python benchmarks/cli_startup.py --tree /tmp/old  # and the src/ of another checkout

A `--tree` is timed in the same rounds, with its src/ first on PYTHONPATH (make one with
`git archive COMMIT src | tar -x -C /tmp/old`).

Wall time is from starting the process to its exit; CPU is its user + system time (less
sensitive than wall time to other work on the machine). Bytecode is cached in the temporary
folder, as it would be for an installed package. Figures are reported in docs/performance.md;
nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS_LIBRARIES = ["click", "rich.console", "rich.table", "pydantic", "sqlalchemy.dialects.sqlite"]
CREATE_STORE = "import sys; from trialkit.store import Store; Store(sys.argv[1]).close()"


def commands(url: str) -> dict[str, list[str]]:
    """What is timed, by label: the console script where it is installed, as users run it."""
    script = Path(sys.executable).with_name("trialkit")
    trialkit = [str(script)] if script.exists() else [sys.executable, "-m", "trialkit"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        # The floor of `trialkit runs`: the libraries it cannot do without, and nothing of ours.
        "libraries of runs": [sys.executable, "-c", f"import {', '.join(RUNS_LIBRARIES)}"],
        'python -c "import trialkit"': [sys.executable, "-c", "import trialkit"],
        # The whole public API, which a suite file or a script using trialkit loads.
        'python -c "from trialkit import *"': [sys.executable, "-c", "from trialkit import *"],
        "trialkit --version": [*trialkit, "--version"],
        "trialkit --help": [*trialkit, "--help"],
        "trialkit runs": [*trialkit, "runs", "--store", url],
    }


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `command`; a failed command stops the benchmark."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=errors, env=env, cwd=cwd
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed: {errors.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def environment(tree: Path | None, cache: Path) -> dict[str, str]:
    """The children's environment: bytecode cached in `cache` (the first run writes it), as
    for an installed package, even where PYTHONDONTWRITEBYTECODE is set or the tree is
    read-only; `tree`'s src/ first on the path."""
    env = dict(os.environ)
    env.pop("TRIALKIT_STORE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    if tree is not None:
        src = str((tree / "src").resolve())
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="rounds (default 21)")
    parser.add_argument(
        "--tree", type=Path, action="append", default=[], help="also time this checkout"
    )
    args = parser.parse_args()
    trees: dict[str, Path | None] = {"installed": None}
    trees.update({str(tree): tree for tree in args.tree})
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        url = f"sqlite:///{folder / 'trialkit.db'}"
        envs = {label: environment(tree, folder / "pycache") for label, tree in trees.items()}
        for env in envs.values():
            subprocess.run([sys.executable, "-c", CREATE_STORE, url], env=env, check=True)
        todo = [
            (label, name, command)
            for label in trees
            for name, command in commands(url).items()
            if label == "installed" or name not in ("python -c pass", "libraries of runs")
        ]
        figures: dict[tuple[str, str], list[tuple[float, float]]] = {
            (label, name): [] for label, name, _ in todo
        }
        for label, _, command in todo:  # once each first: bytecode cached, files in memory
            timed(command, envs[label], folder)
        for _ in range(args.runs):
            for label, name, command in todo:
                figures[label, name].append(timed(command, envs[label], folder))
    floor = statistics.median(wall for wall, _ in figures["installed", "python -c pass"])
    program = commands(url)["trialkit runs"][0]
    print(f"{args.runs} runs each, seconds: median wall (min-max), wall over `python -c pass`,")
    print(f"median CPU. Python {sys.version.split()[0]}, trialkit run as {program}")
    print(f"load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    width = max(len(label) for label in trees)
    print(f"{'tree':<{width}}  {'command':<34} {'wall':>21} {'over pass':>9} {'CPU':>6}")
    for (label, name), runs in figures.items():
        walls = sorted(wall for wall, _ in runs)
        wall = statistics.median(walls)
        cpu = statistics.median(c for _, c in runs)
        spread = f"{wall:.3f} ({walls[0]:.3f}-{walls[-1]:.3f})"
        print(f"{label:<{width}}  {name:<34} {spread:>21} {wall - floor:>9.3f} {cpu:>6.3f}")


if __name__ == "__main__":
    main()
