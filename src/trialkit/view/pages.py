"""The viewer's pages: HTML built from the store, in the HTML report's style.

A run's page is the HTML report itself, with its trial numbers linked to their transcripts. A
transcript, a transcript diff and a comparison of runs are the terminal renderings of
`trialkit transcripts show`, `transcripts diff` and `compare`, recorded by rich and exported as
HTML, so the viewer and the command line always show the same thing. Every piece of stored
text is escaped; the pages have no script.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from datetime import datetime
from urllib.parse import quote, urlencode

from rich.console import Console
from rich.terminal_theme import DEFAULT_TERMINAL_THEME

from trialkit.reports import _format as f
from trialkit.reports.html import (
    Links,
    document,
    nav_line,
    render_html,
    text,
    verdict_badge,
    verdict_class,
)
from trialkit.score import Verdict
from trialkit.store import Store, queries
from trialkit.store.store import RunSummary

TRIALS_SHOWN = 1000
"""Trials listed on one page; filters (verdict, task) narrow a bigger run."""
TERMINAL_WIDTH = 120
REFRESH_S = 5
"""Pages of a run still going reload themselves this often (seconds)."""

EXTRA_CSS = """\
pre.terminal{background:#fff;color:#1f2328;border-color:var(--line);max-height:none;
white-space:pre;overflow-x:auto}
form.filters{margin:.4rem 0 .8rem;display:flex;gap:.6rem;flex-wrap:wrap;align-items:end}
td.nowrap{white-space:nowrap}
form.filters label{display:flex;flex-direction:column;font-size:.85rem;color:var(--muted)}
"""


def page(
    title: str, body: list[str], nav: list[tuple[str, str]], *, refresh: int | None = None
) -> str:
    """A whole page around `body` (markup), with the report's stylesheet."""
    header = ["<header>", *nav_line(nav), f"<h1>{text(title)}</h1>", "</header>"]
    main = [*header, "<main>", *body, "</main>"]
    return document(title, main, css=EXTRA_CSS, refresh=refresh)


# --- addresses ------------------------------------------------------------------------------


def run_url(run_id: str) -> str:
    return f"/runs/{quote(run_id, safe='')}"


def trials_url(run_id: str, **filters: str) -> str:
    query = urlencode({k: v for k, v in filters.items() if v})
    return f"{run_url(run_id)}/trials" + (f"?{query}" if query else "")


def trial_url(run_id: str, task_id: str, index: int) -> str:
    return f"{run_url(run_id)}/trials/{quote(task_id, safe='')}/{index}"


HOME = ("Runs", "/")


# --- pages ----------------------------------------------------------------------------------


def runs_page(runs: list[RunSummary], store_url: str) -> str:
    if not runs:
        body = [
            '<p class="muted">No runs yet: <code>trialkit run TARGET</code> makes one.</p>',
            f'<p class="muted">Store: <code>{text(store_url)}</code></p>',
        ]
        return page("trialkit · runs", body, [])
    rows = []
    for run in runs:
        counts = [
            _count(run.passed, Verdict.PASS),
            _count(run.failed, Verdict.FAIL),
            _count(run.errors, Verdict.ERROR),
        ]
        rows.append(
            "<tr>"
            f'<td><a href="{run_url(run.id)}"><code>{text(run.id)}</code></a></td>'
            f"<td>{text(run.name or '')}</td>"
            f'<td>{text(run.suite_id)} <span class="muted">{text(run.suite_kind.value)}</span>'
            "</td>"
            f"<td>{text(_when(run.started_at))}</td>"
            f"<td>{text(run.status)}</td>"
            f'<td class="num">{run.tasks}</td>'
            f'<td class="num">{run.trials}</td>'
            f"<td>{', '.join(counts)}</td>"
            f'<td class="num">{f.percent(run.pass_rate)}</td>'
            "</tr>"
        )
    header = [
        "Run",
        "Name",
        "Suite",
        "Started",
        "Status",
        "Tasks",
        "Trials",
        "Verdicts",
        "Pass rate",
    ]
    body = [
        f'<p class="muted">The latest {len(runs)} runs in <code>{text(store_url)}</code>, '
        "newest first.</p>",
        _form(
            "/compare",
            [("a", "Run A", "id, id prefix or name", ""), ("b", "Run B", "against A", "")],
            "Compare",
        ),
        '<div class="scroll"><table class="runs">',
        "<thead><tr>" + "".join(f'<th scope="col">{h}</th>' for h in header) + "</tr></thead>",
        "<tbody>",
        *rows,
        "</tbody></table></div>",
    ]
    going = any(run.status == "running" for run in runs)
    return page("trialkit · runs", body, [], refresh=REFRESH_S if going else None)


def run_page(store: Store, run_id: str) -> str:
    report = store.load_report(run_id)
    links = Links(
        trial=lambda task_id, index: trial_url(run_id, task_id, index),
        nav=[HOME, ("All trials", trials_url(run_id))],
        refresh=REFRESH_S if report.run.status == "running" else None,
    )
    return render_html(report, links=links)


def trials_page(store: Store, run_id: str, *, verdict: str | None, task: str | None) -> str:
    chosen = Verdict(verdict) if verdict else None
    tasks = [task] if task else None
    listing = queries.list_trials(store, run_id, tasks=tasks, verdict=chosen, limit=TRIALS_SHOWN)
    shown = len(listing.lines)
    rows = [
        f'<tr class="{verdict_class(line.verdict)}">'
        f'<td class="nowrap"><a href="{trial_url(run_id, line.task_id, line.index)}">'
        f'<span class="task-id">{text(line.task_id)}</span> #{line.index}</a></td>'
        f"<td>{verdict_badge(line.verdict)}</td>"
        f"<td>{text(line.status.value)}</td>"
        f'<td class="num">{f.seconds(line.duration_s)}</td>'
        f'<td class="num">{line.input_tokens + line.output_tokens:,}</td>'
        f'<td class="num">{f.cost(line.cost_usd)}</td>'
        f'<td class="reason">{text(_why(line))}</td>'
        "</tr>"
        for line in listing.lines
    ]
    header = ["Trial", "Verdict", "Status", "Duration", "Tokens", "Cost", "Why it did not pass"]
    more = (
        f" Showing the first {shown}; choose a verdict or a task to see others."
        if listing.total > shown
        else ""
    )
    body = [
        _filters(run_id, verdict, task),
        f'<p class="muted">{listing.total:,} trials match.{more}</p>',
        '<div class="scroll"><table class="trials">',
        "<thead><tr>" + "".join(f'<th scope="col">{h}</th>' for h in header) + "</tr></thead>",
        "<tbody>",
        *rows,
        "</tbody></table></div>",
    ]
    nav = [HOME, (f"Run {run_id}", run_url(run_id))]
    return page(f"trialkit · trials of run {run_id}", body, nav)


def trial_page(store: Store, run_id: str, task_id: str, index: int) -> str:
    from trialkit.reports.transcript import render_trial

    trial = store.load_trial(run_id, task_id, index)
    name = queries.run_name(store, run_id)
    others = queries.trial_indices(store, run_id, task_id)
    terminal = _terminal(lambda console: render_trial(trial, console, full=True, run_name=name))
    siblings = " ".join(
        f"<strong>#{i}</strong>"
        if i == index
        else f'<a href="{trial_url(run_id, task_id, i)}">#{i}</a>'
        for i in others
    )
    diff = _form(
        "/diff",
        [("b", "Diff against run", "id, id prefix or name", "")],
        "Diff",
        hidden=[("task", task_id), ("a", run_id), ("trial", str(index))],
    )
    body = [f'<p class="muted">Trials of this task: {siblings}</p>', diff, terminal]
    nav = [HOME, (f"Run {run_id}", run_url(run_id)), ("All trials", trials_url(run_id))]
    return page(f"trialkit · {task_id} #{index} · run {run_id}", body, nav)


def diff_page(store: Store, task_id: str, run_ids: tuple[str, str], index: int) -> str:
    from trialkit.reports.transcript_diff import diff_trials, render_diff

    a, b = (store.load_trial(run_id, task_id, index) for run_id in run_ids)
    names = queries.run_name(store, run_ids[0]), queries.run_name(store, run_ids[1])
    diff = diff_trials(a, b, run_names=names)
    nav = [HOME, *((f"Run {run_id}", run_url(run_id)) for run_id in run_ids)]
    title = f"trialkit · {task_id} #{index} · run {run_ids[0]} against run {run_ids[1]}"
    return page(title, [_terminal(lambda console: render_diff(diff, console))], nav)


def compare_page(store: Store, refs: list[str]) -> str:
    from trialkit.analysis.compare import compare_runs
    from trialkit.reports.compare import render_compare_terminal

    comparison = compare_runs(store, refs)
    nav = [HOME, *((f"Run {ref}", run_url(ref)) for ref in refs)]
    body = [_terminal(lambda console: render_compare_terminal(comparison, console))]
    return page(f"trialkit · compare {' · '.join(refs)}", body, nav)


def message_page(status: int, message: str) -> str:
    return page(f"trialkit · {status}", [f'<p class="reason">{text(message)}</p>'], [HOME])


# --- helpers --------------------------------------------------------------------------------


def _terminal(draw: Callable[[Console], None]) -> str:
    """What `draw` prints on a terminal, as HTML: rich records it and escapes the text."""
    console = Console(
        file=io.StringIO(),
        record=True,
        width=TERMINAL_WIDTH,
        force_terminal=True,
        color_system="truecolor",
    )
    draw(console)
    code = console.export_html(
        theme=DEFAULT_TERMINAL_THEME, inline_styles=True, code_format="{code}"
    )
    return f'<pre class="terminal">\n{code}</pre>'


def _count(n: int, verdict: Verdict) -> str:
    zero = "" if n else " zero"
    return f'<span class="count {verdict_class(verdict)}{zero}">{n} {f.COUNT_WORDS[verdict]}</span>'


def _when(moment: datetime) -> str:
    return moment.isoformat(sep=" ", timespec="seconds")


def _why(line: queries.TrialLine) -> str:
    if line.error is not None:
        return f.error_text(line.error)
    if line.check is None:
        return ""
    reason = f"{line.check}: {line.rationale}" if line.rationale else line.check
    return reason


def _form(
    action: str,
    fields: list[tuple[str, str, str, str]],
    button: str,
    *,
    hidden: Sequence[tuple[str, str]] = (),
) -> str:
    """A GET form: text `fields` as (name, label, placeholder, value), then `hidden` ones."""
    inputs = "".join(
        f'<label>{text(label)}<input name="{name}" value="{text(value)}" '
        f'placeholder="{text(placeholder)}"></label>'
        for name, label, placeholder, value in fields
    )
    kept = "".join(
        f'<input type="hidden" name="{name}" value="{text(value)}">' for name, value in hidden
    )
    return (
        f'<form class="filters" method="get" action="{action}">{inputs}{kept}'
        f'<button type="submit">{text(button)}</button></form>'
    )


def _filters(run_id: str, verdict: str | None, task: str | None) -> str:
    options = "".join(
        f'<option value="{v.value}"{" selected" if v.value == verdict else ""}>{v.value}</option>'
        for v in Verdict
    )
    return (
        f'<form class="filters" method="get" action="{trials_url(run_id)}">'
        f'<label>Verdict<select name="verdict"><option value="">any</option>{options}'
        "</select></label>"
        f'<label>Task<input name="task" value="{text(task or "")}" placeholder="task id">'
        "</label>"
        '<button type="submit">Show</button>'
        "</form>"
    )
