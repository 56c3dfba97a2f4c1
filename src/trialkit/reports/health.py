"""`SuiteHealth` rendered for the terminal and as Markdown; its JSON is `SuiteHealth.to_json`.

A row per task with its pass rate run by run as a sparkline (oldest first), its trend and what
is wrong with it; then the evidence for broken tasks, and the suite's figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from trialkit.reports import _format as f
from trialkit.reports._table import Column, print_figures, print_line, print_table
from trialkit.reports.compare import md_table, named, names
from trialkit.reports.markdown import inline

if TYPE_CHECKING:  # the records import this module to render themselves (`to_markdown`)
    from trialkit.analysis.health import HealthRun, SuiteHealth, TaskHealth

BARS = "▁▂▃▄▅▆▇█"
NO_RATE = "·"
FLAG_STYLES = {"broken": "bold red", "flaky": "yellow", "saturated": "cyan"}


def sparkline(rates: list[float | None]) -> str:
    """One bar per run, its height the pass rate; `·` where the run decided no trial."""
    last = len(BARS) - 1
    return "".join(NO_RATE if r is None else BARS[round(r * last)] for r in rates)


def trend_text(trend: float | None) -> str:
    if trend is None:
        return f.NA
    shown = f"{abs(trend) * 100:.1f}"
    if float(shown) == 0:
        return "0.0 pts/run"
    return f"{'+' if trend > 0 else '−'}{shown} pts/run"


def flags(task: TaskHealth) -> list[str]:
    found = []
    if task.broken:
        found.append("broken")
    if task.flaky:
        found.append("flaky")
    if task.saturated:
        found.append("saturated")
    return found


def flag_words(task: TaskHealth) -> list[str]:
    words = []
    for flag in flags(task):
        if flag == "flaky":
            words.append(f"flaky ({task.flaky_runs} of {task.runs} runs)")
        elif flag == "saturated" and task.graduation_candidate:
            words.append("saturated: graduate to regression")
        else:
            words.append(flag)
    return words


def title(health: SuiteHealth) -> str:
    suite = health.suite
    n = len(health.runs)
    runs = f"last {n} run{'' if n == 1 else 's'}"
    if n < health.last:
        runs += f" (all there are; asked for {health.last})"
    return f"trialkit health · suite {suite.id} ({suite.kind.value}) · {runs}"


def summary_rows(health: SuiteHealth) -> list[tuple[str, str]]:
    n = len(health.tasks)
    share = f.percent(health.saturated_share)
    d = health.discrimination
    models = ", ".join(f"{m} ({d.passed_tasks.get(m, 0)} passed)" for m in d.models)
    return [
        ("Tasks", str(n)),
        ("Saturated", f"{len(health.saturated)} of {n} ({share})" + _listed(health.saturated)),
        ("Graduation candidates", named(health.graduation_candidates)),
        ("Broken", named(health.broken)),
        ("Flaky", named(health.flaky)),
        ("Models (latest runs)", models or f.NA),
        ("Discrimination", d.conclusion),
        *_judge_rows(health),
    ]


def _judge_rows(health: SuiteHealth) -> list[tuple[str, str]]:
    """The repeated judges' flip rates, those over the limit first (none without one)."""
    if not health.judges:
        return []
    limit = f.percent(health.max_judge_flips)
    over = set(health.flipping_judges)
    ordered = sorted(health.judges, key=lambda j: j.grader not in over)
    lines = [("FLIPS: " if j.grader in over else "") + j.line() for j in ordered]
    head = f"{len(over)} over {limit} of outputs flipped" if over else f"none over {limit} flipped"
    return [("Judge consistency", f"{head}; " + "; ".join(lines))]


def _listed(tasks: list[str]) -> str:
    return f": {names(tasks)}" if tasks else ""


def task_row(task: TaskHealth) -> list[str]:
    """The task's figures; `Passed` is of the decided trials, as the pass rate is, and the
    errored and unknown ones are counted apart (`Undecided`)."""
    return [
        task.id,
        task.kind.value,
        str(task.runs),
        f"{task.passed}/{task.passed + task.failed}",
        f.percent(task.pass_rate),
        str(task.errors + task.unknown),
        sparkline(task.pass_rates),
        trend_text(task.trend),
    ]


TASK_HEADER = [
    "Task",
    "Kind",
    "Runs",
    "Passed",
    "Pass rate",
    "Undecided",
    "By run",
    "Trend",
    "Health",
]


# -- terminal ----------------------------------------------------------------------------------


def render_health_terminal(health: SuiteHealth, console: Console) -> None:
    print_line(console, _plain(title(health), style="bold"))
    print_table(console, RUN_COLUMNS, [_run_cells(i, run) for i, run in enumerate(health.runs, 1)])
    console.print()
    print_table(console, _task_columns(health), [_task_cells(task) for task in health.tasks])
    broken = [t for t in health.tasks if t.broken]
    if broken:
        console.print()
        print_line(console, _plain("Broken tasks", style="bold red"))
        for task in broken:
            print_line(console, _plain(task.id, style="bold"), indent=2)
            for line in task.evidence:
                print_line(console, _plain(f"- {line}"), indent=4)
    console.print()
    print_figures(console, [(label, _plain(value)) for label, value in summary_rows(health)])
    for note in health.notes:
        print_line(console, _plain(note, style="dim"))


def _plain(text: str, style: str = "") -> Text:
    return Text(f.escape_controls(text), style=style)


RUN_COLUMNS = [
    Column("#", justify="right"),
    Column("Run"),
    Column("Name", fit="fold", drop=2),
    Column("Model", fit="fold", drop=1),
    Column("Started", fit="words", drop=4),
    Column("Status", drop=3),
]


def _run_cells(i: int, run: HealthRun) -> list[Text]:
    started = run.started_at.strftime("%Y-%m-%d %H:%M")
    cells = [str(i), run.id, run.name or "", run.agent, started, run.status]
    return [_plain(cell) for cell in cells]


def _task_columns(health: SuiteHealth) -> list[Column]:
    """`TASK_HEADER`, laid out; the kind only when a task's differs from the suite's."""
    kinds = {task.kind for task in health.tasks}
    return [
        Column("Task"),
        Column("Kind", drop=1 if kinds != {health.suite.kind} else 8),
        Column("Runs", justify="right", drop=6),
        Column("Passed", justify="right", drop=2),
        Column("Pass rate", justify="right", drop=2),
        Column("Undecided", justify="right", drop=7),
        Column("By run", drop=4),
        Column("Trend", justify="right", drop=5),
        Column("Health", fit="fold", drop=3),
    ]


def _task_cells(task: TaskHealth) -> list[Text]:
    cells = [_plain(value) for value in task_row(task)]
    status = Text()
    for flag, word in zip(flags(task), flag_words(task), strict=True):
        if status:
            status.append(", ")
        status.append(word, style=FLAG_STYLES[flag])
    return [*cells, status]


# -- Markdown ----------------------------------------------------------------------------------


def render_health_markdown(health: SuiteHealth) -> str:
    lines = [f"## {inline(title(health))}", ""]
    runs = [
        [
            str(i),
            inline(f"{run.name} ({run.id})" if run.name else run.id),
            inline(run.agent),
            run.started_at.strftime("%Y-%m-%d %H:%M"),
            run.status,
        ]
        for i, run in enumerate(health.runs, start=1)
    ]
    lines += md_table(["#", "Run", "Model", "Started", "Status"], runs, ["---:", *["---"] * 4])
    summary = [[label, inline(value)] for label, value in summary_rows(health)]
    lines += ["", *md_table(["Figure", "Value"], summary, ["---", "---"])]
    if health.notes:
        lines += ["", *(f"_{inline(note)}_" for note in health.notes)]
    rows = [
        [
            *(inline(value, newline="<br>") for value in task_row(task)),
            inline(", ".join(flag_words(task))),
        ]
        for task in health.tasks
    ]
    align = ["---", "---", "---:", "---:", "---:", "---:", "---", "---:", "---"]
    lines += ["", "### Tasks", "", *md_table(TASK_HEADER, rows, align)]
    broken = [t for t in health.tasks if t.broken]
    if broken:
        lines += ["", "### Broken tasks"]
        for task in broken:
            lines += ["", f"#### {inline(task.id)}", ""]
            lines += [f"- {inline(line)}" for line in task.evidence]
    return "\n".join(lines) + "\n"
