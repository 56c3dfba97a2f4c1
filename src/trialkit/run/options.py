"""Every option of a run, declared once: its name, kind, default, help, environment variable and
where it may be set. The click options of `trialkit run` (and of the commands that share
them), the pytest plugin's `--trialkit-*` options and `trialkit_*` ini keys, the keys of
`[tool.trialkit]` and the settings table of docs/cli.md are all made from `OPTIONS`.

A value is looked up in one order everywhere (`trialkit.run.sources`): the flag, then the
environment variable, then (under pytest) the ini key, then `[tool.trialkit]`, then the default.
A setting that overrides the suite (`trials`, `timeout`) wins over the suite's own value; the
model and judge model are fallbacks instead: a task's or suite's own model wins (DESIGN §2).

This module imports nothing beyond the standard library: `trialkit run --help` and every pytest
session read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from trialkit.run.option_kinds import (
    Choice,
    Flag,
    Kind,
    Location,
    Many,
    Names,
    Number,
    Text,
    Whole,
)

__all__ = [
    "OPTIONS",
    "Choice",
    "Flag",
    "Kind",
    "Location",
    "Many",
    "Names",
    "Number",
    "Option",
    "Source",
    "Text",
    "Whole",
    "by_key",
    "cli_options",
]

Source = Literal["flag", "env", "ini", "pyproject", "default"]


@dataclass(frozen=True)
class Option:
    """One option of a run, and everywhere it may be set."""

    name: str
    """The field: `--name-with-dashes`, ini `trialkit_name`, `[tool.trialkit]` `name-with-dashes`,
    and the keyword of `RunSettings.parse` when `settings`."""
    help: str
    kind: Kind = field(default_factory=Text)
    default: Any = None
    default_text: str | None = None
    """How the default reads in help and docs, when it is not just `default`."""
    env: str | None = None
    metavar: str | None = None
    commands: tuple[str, ...] = ("run",)
    """The `trialkit` commands that take it as a flag (`*`: every command with a store)."""
    pytest: bool = False
    """A `--trialkit-*` option and a `trialkit_*` ini key of the pytest plugin."""
    pyproject: bool = False
    """A key of `[tool.trialkit]`."""
    settings: bool = False
    """A keyword of `RunSettings.parse`."""
    suite: str | None = None
    """The field of a suite file (and of `Suite`) that says the same: the setting overrides it,
    unless `suite_wins`."""
    suite_wins: bool = False
    """The suite's own value wins: the setting only stands in where the suite names none."""
    flag: str | None = None
    """The command line's spelling, when it is not `--name-with-dashes`."""
    short: str | None = None
    dest: str | None = None
    """The parameter of the commands' functions, when it is not `name`."""
    help_for: Mapping[str, str] = field(default_factory=dict)
    """The help of one command (or of `pytest`), where the option means something narrower."""

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def param(self) -> str:
        return self.dest or self.name

    @property
    def pytest_flag(self) -> str:
        return "--trialkit-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "trialkit_" + self.name

    @property
    def key(self) -> str:
        """Its key in `[tool.trialkit]` (`cache-mode`; `cache_mode` is read too)."""
        return self.name.replace("_", "-")

    @property
    def is_flag(self) -> bool:
        return isinstance(self.kind, Flag)

    def help_of(self, where: str) -> str:
        """The help for command (or `pytest`) `where`, with its default and variable."""
        notes = []
        if self.default_text is not None or self.default not in (None, False, ()):
            notes.append(f"default: {self.default_text or self.default}")
        if self.env is not None:
            notes.append(f"env {self.env}")
        text = self.help_for.get(where, self.help)
        return f"{text} [{'; '.join(notes)}]" if notes else text


def cli_options(command: str, options: Sequence[Option] | None = None) -> list[Option]:
    """The options command `command` takes as flags, in their order of declaration."""
    chosen = OPTIONS if options is None else options
    return [o for o in chosen if command in o.commands or "*" in o.commands]


def by_key(options: Sequence[Option] | None = None) -> dict[str, Option]:
    """The options `[tool.trialkit]` may set, by key (`cache-mode`)."""
    return {o.key: o for o in (OPTIONS if options is None else options) if o.pyproject}


OPTIONS: tuple[Option, ...] = (
    Option(
        "trials",
        "Trials per task (overrides the suite), or `auto`: sample each task only while its "
        "verdict or pass rate is undecided (see --precision and --max-trials); with --baseline, "
        "also only while more trials could change its comparison with the baseline.",
        Text("a whole number >= 1 or auto", numbers=True),
        env="TRIALKIT_TRIALS",
        metavar="N|auto",
        pytest=True,
        help_for={
            "pytest": "Trials per task (overrides the suite's, the tasks' and the marker's)."
        },
        pyproject=True,
        settings=True,
        suite="trials",
    ),
    Option(
        "max_trials",
        "With --trials auto: the most trials any task gets.",
        Whole(1),
        default_text="each task's own trial count, so an adaptive run never takes more trials "
        "than a fixed one",
        env="TRIALKIT_MAX_TRIALS",
        pyproject=True,
        settings=True,
    ),
    Option(
        "precision",
        "With --trials auto: a task stops once the 95% interval of its pass rate is at most "
        "this wide.",
        Number("a number above 0, at most 1", maximum=1),
        default_text="0.2",
        env="TRIALKIT_PRECISION",
        pyproject=True,
        settings=True,
    ),
    Option(
        "models",
        "Run the suite once per model (comma-separated), all at once so their trials "
        "interleave, and print the runs side by side.",
        metavar="A,B,...",
    ),
    Option(
        "concurrency",
        "Trials running at once.",
        Whole(1),
        default=10,
        metavar="N",
        env="TRIALKIT_CONCURRENCY",
        commands=("run", "regrade"),
        pytest=True,
        help_for={"regrade": "Trials graded at once.", "pytest": "Trials of one task at once."},
        pyproject=True,
        settings=True,
    ),
    Option(
        "workers",
        "Processes that run trials, sharing --concurrency: for latency-bound runs (many model "
        "calls at once) that one core cannot keep up with. Per-model limits (max concurrency, "
        "rpm, tpm) then hold in each process. With --executor ray: Ray actors.",
        Whole(1),
        default_text="1; with --executor ray, one per CPU of the cluster",
        env="TRIALKIT_WORKERS",
        pyproject=True,
        settings=True,
    ),
    Option(
        "executor",
        "Where trials run: here (local, with --workers processes), or in actors on a Ray "
        "cluster (ray: the one RAY_ADDRESS names, or a local one started for the run; needs "
        "pip install 'trialkit[ray]').",
        Choice("local", "ray"),
        default="local",
        env="TRIALKIT_EXECUTOR",
        pyproject=True,
        settings=True,
    ),
    Option(
        "ray_env",
        "With --executor ray: pass this environment variable, with its value here, to the Ray "
        "actors (repeatable). Only the name is ever shown; the value is never logged or stored.",
        Names(),
        env="TRIALKIT_RAY_ENV",
        metavar="NAME[,NAME...]",
        pyproject=True,
        settings=True,
    ),
    Option(
        "timeout",
        "Per-trial timeout in seconds (overrides the suite's and tasks'; default 60).",
        Number("a number of seconds > 0"),
        env="TRIALKIT_TIMEOUT",
        metavar="SECONDS",
        pytest=True,
        pyproject=True,
        settings=True,
        suite="timeout",
    ),
    Option(
        "task_ids",
        "Run only this task (glob patterns allowed; repeatable).",
        Many(),
        metavar="ID",
        flag="--task",
        settings=True,
    ),
    Option(
        "tags", "Run only tasks with this tag (repeatable).", Many(), flag="--tag", settings=True
    ),
    Option(
        "name",
        "A name for this run (`trialkit report NAME` finds its latest).",
        env="TRIALKIT_NAME",
        commands=("run", "regrade"),
        pytest=True,
        help_for={
            "regrade": "A name for the new run.",
            "pytest": "A name for the runs (`trialkit report NAME` finds the latest).",
        },
        pyproject=True,
        settings=True,
    ),
    Option(
        "model",
        "The model under test when neither the task nor the suite names one "
        "(provider/name, e.g. openai/gpt-4o-mini).",
        env="TRIALKIT_MODEL",
        metavar="MODEL",
        pytest=True,
        pyproject=True,
        settings=True,
        suite="model",
        suite_wins=True,
    ),
    Option(
        "judge_model",
        "The model judges use when they name none.",
        env="TRIALKIT_JUDGE_MODEL",
        metavar="MODEL",
        commands=("run", "regrade"),
        pytest=True,
        help_for={"regrade": "The model judges use when they name none (default: the run's)."},
        pyproject=True,
        settings=True,
    ),
    Option(
        "cache",
        "Cassette folder for recorded model calls.",
        Location(folder=True),
        env="TRIALKIT_CACHE",
        metavar="DIR",
        commands=("run", "regrade"),
        pytest=True,
        help_for={
            "regrade": "Cassette folder the judges' calls are recorded in and replayed from."
        },
        pyproject=True,
        settings=True,
    ),
    Option(
        "cache_mode",
        "live: no cassette; record: call and store; replay: never call (a miss is an error); "
        "auto: replay what exists, record the rest.",
        Choice("live", "record", "replay", "auto"),
        default_text="auto with a cache folder, else live",
        env="TRIALKIT_CACHE_MODE",
        metavar="MODE",
        commands=("run", "regrade"),
        pytest=True,
        pyproject=True,
        settings=True,
    ),
    Option(
        "no_capture",
        "Do not capture the model calls the agent makes with its own SDK clients (httpx, "
        "httpx2): only calls through trialkit's models, and those of command-line agents through "
        "the model proxy, are recorded and replayed.",
        Flag(),
        env="TRIALKIT_NO_CAPTURE",
        pytest=True,
        pyproject=True,
        settings=True,
    ),
    Option(
        "offline",
        "Refuse every request of a trial to a host other than this machine (a trial error "
        "naming it), in a loopback-only network namespace where the machine allows one (else a "
        "line at start says what is not covered): proves a replayed run is hermetic.",
        Flag(),
        env="TRIALKIT_OFFLINE",
        commands=("run", "regrade"),
        pytest=True,
        help_for={
            "regrade": "Refuse every request of a grader to a host other than this machine, in "
            "a loopback-only network namespace where the machine allows one.",
            "pytest": "Refuse every request of a trial to a host other than this machine.",
        },
        pyproject=True,
        settings=True,
    ),
    Option(
        "sandbox",
        "Run each trial in this sandbox provider (bwrap, docker, podman, local): the suite's "
        "command-line agent, and ctx.sandbox of a Python agent and of the graders; with its "
        "default policy, whatever the suite file's `sandbox` says; refused "
        "before any trial when the provider is missing or cannot enforce it "
        "(docs/sandbox.md).",
        Text("a sandbox provider's name"),
        env="TRIALKIT_SANDBOX",
        metavar="PROVIDER",
        pyproject=True,
        suite="sandbox",
    ),
    Option(
        "max_cost",
        "Stop scheduling new trials once this much has been spent.",
        Number("an amount of dollars > 0"),
        env="TRIALKIT_MAX_COST",
        metavar="DOLLARS",
        pyproject=True,
        settings=True,
    ),
    Option(
        "store",
        "Where runs are kept: a SQLAlchemy URL or a SQLite file path.",
        Location(url=True),
        default_text=".trialkit/trialkit.db",
        env="TRIALKIT_STORE",
        metavar="URL",
        commands=("*",),
        pytest=True,
        pyproject=True,
        dest="store_url",
        help_for={
            "pytest": "Where runs are kept: a SQLAlchemy URL or a SQLite file path (relative "
            "to the rootdir by default), or `none` to keep nothing."
        },
    ),
    Option(
        "resume",
        "Finish a stored run of this suite: run only its missing trials, then report it whole.",
        metavar="RUN",
    ),
    Option("retry_errors", "With --resume: run again the trials that errored.", Flag()),
    Option(
        "rerun",
        "A new run of only the tasks of stored run RUN that did not pass (see --only); its "
        "config names RUN.",
        metavar="RUN",
    ),
    Option(
        "only",
        "With --rerun: the tasks to run again, by their verdict in RUN: failed, errored, or "
        "not-passed (failed, errored or unknown).",
        Choice("failed", "errored", "not-passed"),
        default_text="not-passed",
    ),
    Option(
        "baseline",
        "Compare this run with a baseline: a JSON report file (e.g. the artifact of a run on "
        "the base branch; no shared store needed) or a stored run; print the comparison with "
        "its significance.",
        metavar="FILE|RUN",
    ),
    Option(
        "fail_on_regression",
        "With --baseline: fail the gate (exit 1) when this run is significantly worse.",
        Flag(),
    ),
    Option("json", "Write the JSON report here.", Location(), metavar="FILE"),
    Option(
        "markdown",
        "Write the Markdown report here (e.g. $GITHUB_STEP_SUMMARY), under GitHub's 1 MiB "
        "limit; with --baseline it begins with the comparison.",
        Location(),
        metavar="FILE",
    ),
    Option("junit", "Write a JUnit XML report here.", Location(), metavar="FILE"),
    Option(
        "html",
        "Write the HTML report here: one page that opens offline.",
        Location(),
        metavar="FILE",
    ),
    Option(
        "csv",
        "Write the trials as CSV here: one row per trial, with each grader's score.",
        Location(),
        metavar="FILE",
    ),
    Option(
        "github_comment",
        "With --baseline: write the comparison as a pull request comment here (Markdown with a "
        "hidden marker line, under GitHub's 65,536 characters).",
        Location(),
        metavar="FILE",
    ),
    Option(
        "report_url",
        "With --baseline and --github-comment or --markdown: a link to the HTML report of "
        "this run (once), or of the baseline and this run (twice, in that order).",
        Many(),
        metavar="URL",
    ),
    Option(
        "annotations",
        "Print GitHub workflow annotations (::error file=…,line=…::) for the failing, errored "
        "and flaky tasks (with --baseline: and the new failures) on standard output.",
        Flag(),
    ),
    Option(
        "trace_jsonl",
        "Write each trial with its events to FILE as JSON Lines as the run goes.",
        Location(),
        metavar="FILE",
    ),
    Option(
        "include_content",
        "With --trace-jsonl: include prompts, answers, tool arguments and results.",
        Flag(),
    ),
    Option(
        "min_pass_rate",
        "Fail the gate (exit 1) when the pass rate is under X (0.8 or 80%).",
        Text("a number like 0.8 or 80%", numbers=True),
        env="TRIALKIT_MIN_PASS_RATE",
        metavar="X",
        pyproject=True,
        settings=True,
    ),
    Option(
        "fail_on_error",
        "Errored trials allowed before exit 3: a count or a fraction.",
        Text("a count (e.g. 2) or a fraction (e.g. 0.05)", numbers=True),
        default="0",
        env="TRIALKIT_FAIL_ON_ERROR",
        metavar="N|FRACTION",
        pyproject=True,
        settings=True,
    ),
    Option(
        "strict_capability",
        "Fail a capability task's test when no trial passed (by default it passes and reports "
        "its pass@k, as the CI gate does).",
        Flag(),
        env="TRIALKIT_STRICT_CAPABILITY",
        commands=(),
        pytest=True,
        pyproject=True,
    ),
    Option("no_progress", "Do not show the progress bar.", Flag()),
    Option("quiet", "Print only the final verdict line.", Flag(), short="-q"),
)
