"""`SuiteHealth` rendered for the terminal and as Markdown; its JSON is `SuiteHealth.to_json`.

A row per task with its pass rate run by run as a sparkline (oldest first), its trend and what
is wrong with it; then the evidence for broken tasks, and the suite's figures.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from trialkit.analysis.health import SuiteHealth, TaskHealth
from trialkit.reports import _format as f
from trialkit.reports.compare import md_table, named, names
from trialkit.reports.markdown import inline

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
    ]


def _listed(tasks: list[str]) -> str:
    return f": {names(tasks)}" if tasks else ""


def task_row(task: TaskHealth) -> list[str]:
    return [
        task.id,
        task.kind.value,
        str(task.runs),
        f"{task.passed}/{task.trials}",
        f.percent(task.pass_rate),
        sparkline(task.pass_rates),
        trend_text(task.trend),
    ]


TASK_HEADER = ["Task", "Kind", "Runs", "Passed", "Pass rate", "By run", "Trend", "Health"]


# -- terminal ----------------------------------------------------------------------------------


def render_health_terminal(health: SuiteHealth, console: Console) -> None:
    console.print(_plain(title(health), style="bold"))
    console.print(_runs_table(health))
    console.print(_tasks_table(health))
    broken = [t for t in health.tasks if t.broken]
    if broken:
        console.print(_plain("Broken tasks", style="bold red"))
        for task in broken:
            console.print(_plain(f"  {task.id}", style="bold"))
            for line in task.evidence:
                console.print(_plain(f"    - {line}"))
        console.print(Text(""))
    table = Table(show_header=False, box=box.SIMPLE)
    table.add_column("figure", style="bold")
    table.add_column("value", overflow="fold")
    for label, value in summary_rows(health):
        table.add_row(_plain(label), _plain(value))
    console.print(table)
    for note in health.notes:
        console.print(_plain(note, style="dim"))


def _plain(text: str, style: str = "") -> Text:
    return Text(f.escape_controls(text), style=style)


def _runs_table(health: SuiteHealth) -> Table:
    table = Table(box=box.SIMPLE_HEAD)
    for name in ("#", "Run", "Model", "Started", "Status"):
        table.add_column(name, overflow="fold")
    for i, run in enumerate(health.runs, start=1):
        who = f"{run.name} ({run.id})" if run.name else run.id
        started = run.started_at.strftime("%Y-%m-%d %H:%M")
        table.add_row(str(i), _plain(who), _plain(run.agent), started, run.status)
    return table


def _tasks_table(health: SuiteHealth) -> Table:
    table = Table(box=box.SIMPLE_HEAD)
    for i, name in enumerate(TASK_HEADER):
        table.add_column(name, justify="right" if 2 <= i <= 4 else "left", overflow="fold")
    for task in health.tasks:
        cells = [_plain(value) for value in task_row(task)]
        status = Text()
        for flag, word in zip(flags(task), flag_words(task), strict=True):
            if status:
                status.append(", ")
            status.append(word, style=FLAG_STYLES[flag])
        table.add_row(*cells, status)
    return table


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
    align = ["---", "---", "---:", "---:", "---:", "---", "---:", "---"]
    lines += ["", "### Tasks", "", *md_table(TASK_HEADER, rows, align)]
    broken = [t for t in health.tasks if t.broken]
    if broken:
        lines += ["", "### Broken tasks"]
        for task in broken:
            lines += ["", f"#### {inline(task.id)}", ""]
            lines += [f"- {inline(line)}" for line in task.evidence]
    return "\n".join(lines) + "\n"
