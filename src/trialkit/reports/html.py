"""The HTML report: one self-contained page to open from disk or attach to a CI job.

The page holds the Markdown report's figures (summary, task table, the trials that did not
pass), with inline CSS, no script and no external reference, so it works offline and a
Content-Security-Policy forbids anything else. Fail, error and unknown each have their own word,
symbol and `verdict-*` class, so a reader never mistakes a crash for a wrong answer.

User content (task ids, outputs, rationales, errors, run names, settings) is untrusted: control
characters are shown as `\\xNN` and everything is HTML-escaped, quotes included. The output
depends only on the report, so it can be committed and diffed.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from trialkit._record import ErrorInfo
from trialkit.consistency import consistency_notes
from trialkit.reports import _format as f
from trialkit.reports._gate import calls_text, gate_headline
from trialkit.run.retries import retry_note
from trialkit.score import Assertion, Verdict

if TYPE_CHECKING:
    from trialkit.report import Report, TaskReport, TrialResult

OUTPUT_EXCERPT_CHARS = 2000
"""Twice the Markdown report's excerpt: a page scrolls, a CI job summary has a size limit."""
SETTING_CHARS = 500

SYMBOLS = {
    Verdict.PASS: "✓",
    Verdict.FAIL: "✗",
    Verdict.ERROR: "!",
    Verdict.UNKNOWN: "?",
}

CSS = """\
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;
--panel:#f6f8fa;--code:#eff2f5;--link:#0969da;--pass:#1a7f37;--fail:#cf222e;--error:#9a6700;--unknown:#8250df}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;
--line:#3d444d;--panel:#151b23;--code:#1f242c;--link:#4493f8;--pass:#3fb950;--fail:#ff7b72;--error:#e3b341;
--unknown:#bc8cff}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header,main,footer{max-width:76rem;margin:0 auto;padding:0 1.25rem}
header{padding-top:1.25rem}
h1{font-size:1.35rem;margin:0 0 .25rem;overflow-wrap:anywhere}
h2{font-size:1.1rem;margin:2rem 0 .6rem;padding-bottom:.25rem;border-bottom:1px solid var(--line)}
.subtitle,.muted,.note,footer{color:var(--muted)}
.subtitle.warn{color:var(--error);font-weight:600}
.note{font-style:italic}
code,pre{font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
code{background:var(--code);padding:.05rem .3rem;border-radius:.3rem}
pre{background:var(--panel);border:1px solid var(--line);border-radius:.4rem;padding:.6rem .8rem;
margin:.4rem 0;max-height:24rem;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:.4rem 0}
th,td{padding:.3rem .75rem;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{border-bottom-width:2px;white-space:nowrap}
th[scope=row]{font-weight:600;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.task-id,.reason{white-space:pre-wrap;overflow-wrap:anywhere}
.verdict-pass{--v:var(--pass)}.verdict-fail{--v:var(--fail)}
.verdict-error{--v:var(--error)}.verdict-unknown{--v:var(--unknown)}
.verdict,.count{color:var(--v);font-weight:600;white-space:nowrap}
.count.zero{color:inherit;font-weight:400}
.flaky{color:var(--error)}
.bar{display:flex;height:.55rem;max-width:36rem;border-radius:.3rem;overflow:hidden;
background:var(--line);margin:.2rem 0 .8rem}
.seg-pass{background:var(--pass)}.seg-fail{background:var(--fail)}
.seg-error{background:var(--error)}.seg-unknown{background:var(--unknown)}
details.task{border:1px solid var(--line);border-left:4px solid var(--v);border-radius:.4rem;
margin:.6rem 0;padding:.2rem .9rem}
details.task>summary{cursor:pointer;padding:.35rem 0;font-weight:600}
.trial{border-top:1px solid var(--line);padding:.4rem 0}
.trial-head{margin:.2rem 0}
ul.checks{margin:.2rem 0;padding-left:1.2rem}
ul.checks li{margin:.15rem 0}
details.traceback>summary{cursor:pointer;color:var(--muted)}
nav{margin:0 0 .5rem;font-size:.9rem}
a{color:var(--link)}
footer{font-size:.85rem;margin-top:2.5rem;padding-bottom:1.5rem}
.gate{border:1px solid var(--line);border-left:4px solid var(--g);border-radius:.4rem;
margin:1rem 0;padding:.3rem .9rem}.gate p{margin:.3rem 0}.gate strong{color:var(--g)}
.gate-pass{--g:var(--pass)}.gate-fail{--g:var(--fail)}
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'"


def render_html(report: Report) -> str:
    """The report as one HTML page."""
    title = f"trialkit · {f.run_title(report)}"
    body = [
        *_header(report, title),
        "<main>",
        *_gate(report),
        *_summary(report),
        *_task_table(report),
        *_details(report),
        *_settings(report),
        "</main>",
        f"<footer>Written by trialkit from run <code>{text(report.run.id)}</code>: one file, "
        "no scripts, no network.</footer>",
    ]
    return document(title, body)


def document(title: str, body: list[str], *, css: str = "") -> str:
    """A whole page around `body` (markup): the charset, the Content-Security-Policy, the
    stylesheet (plus `css`) and the title (text)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="generator" content="trialkit">',
        f"<title>{text(title)}</title>",
        f"<style>\n{CSS}{css}</style>",
        "</head>",
        "<body>",
        *body,
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


def text(value: str) -> str:
    """User text for element content or a quoted attribute: control characters shown as
    `\\xNN`, then `&`, `<`, `>`, `"` and `'` escaped."""
    return html.escape(f.escape_controls(value), quote=True)


def verdict_class(verdict: Verdict) -> str:
    return f"verdict-{f.WORDS[verdict]}"


def verdict_badge(verdict: Verdict) -> str:
    """The verdict as its symbol and word, in its colour."""
    word = f.WORDS[verdict]
    return f'<span class="verdict {verdict_class(verdict)}">{SYMBOLS[verdict]} {word}</span>'


def _header(report: Report, title: str) -> list[str]:
    warn = " warn" if f.run_ending(report) else ""
    lines = [
        "<header>",
        f"<h1>{text(title)}</h1>",
        f'<p class="subtitle{warn}">{text(f.run_subtitle(report))}</p>',
    ]
    if report.suite.description:
        lines.append(f'<p class="description">{text(report.suite.description)}</p>')
    return [*lines, "</header>"]


def _gate(report: Report) -> list[str]:
    """The CI gate's verdict, why, and how the model calls were made: first on the page."""
    gate = report.gate()
    state = "pass" if gate.passed else "fail"
    mark = "✓" if gate.passed else "✗"
    lines = [
        f'<section id="gate" class="gate gate-{state}">',
        f"<p><strong>{mark} {text(gate_headline(gate).capitalize())}</strong></p>",
    ]
    if gate.reasons:
        lines += ["<ul>", *(f"<li>{text(reason)}</li>" for reason in gate.reasons), "</ul>"]
    lines.append(f'<p class="muted">Model calls: {text(calls_text(report))}.</p>')
    return [*lines, "</section>"]


def _counts(total: int, counts: f.Counts) -> str:
    words = [
        f'<span class="count {verdict_class(v)}{"" if n else " zero"}">'
        f"{n} {f.COUNT_WORDS[v]}</span>"
        for v, n in counts.items()
    ]
    return f"{total}: " + ", ".join(words)


def _bar(total: int, counts: f.Counts) -> list[str]:
    """The trials by verdict as one proportional bar (the summary table says it in words)."""
    if not total:
        return []
    segments = "".join(
        f'<span class="seg seg-{f.WORDS[v]}" style="width:{100 * n / total:.3f}%"></span>'
        for v, n in counts.items()
        if n
    )
    label = ", ".join(f"{n} {f.COUNT_WORDS[v]}" for v, n in counts.items())
    return [f'<div class="bar" role="img" aria-label="Trials: {label}">{segments}</div>']


def _summary(report: Report) -> list[str]:
    s = report.summary
    rows = [
        ("Tasks", _counts(s.tasks, f.task_counts(s))),
        ("Trials", _counts(s.trials, f.trial_counts(s))),
        *((text(label), text(value)) for label, value in f.summary_rows(report)),
    ]
    if s.pending:
        command = f"<code>trialkit review {text(report.run.id)}</code>"
        rows.insert(2, ("Pending review", f"{s.pending} of {s.trials} trials ({command})"))
    lines = [
        '<section id="summary">',
        "<h2>Summary</h2>",
        *_bar(s.trials, f.trial_counts(s)),
        '<table class="summary">',
        *(f'<tr><th scope="row">{label}</th><td>{value}</td></tr>' for label, value in rows),
        "</table>",
    ]
    note = f.pass_k_note(report)
    if note:
        lines.append(f'<p class="note">{text(note)}</p>')
    retried = retry_note(report.run.config)
    if retried:
        lines.append(f'<p class="note"><strong>Retried trials:</strong> {text(retried)}</p>')
    lines += [f'<p class="note">{text(line)}</p>' for line in consistency_notes(report.run.config)]
    return [*lines, "</section>"]


def _anchors(report: Report) -> dict[str, str]:
    """The id of each detailed task's section, by task id: its position, so no user text goes
    into an attribute that links."""
    detailed = {t.id for t in report.failing_tasks}
    return {t.id: f"task-{i}" for i, t in enumerate(report.tasks) if t.id in detailed}


def _task_notes(task: TaskReport) -> list[str]:
    notes = []
    if task.pending:
        notes.append(f"{task.pending} pending review")
    if task.stopped:
        notes.append(f"stopped: {task.stopped}")
    return notes


def _task_table(report: Report) -> list[str]:
    lines = ['<section id="tasks">', "<h2>Tasks</h2>"]
    if not report.tasks:
        return [*lines, '<p class="muted">No tasks.</p>', "</section>"]
    k = f.max_k(report)
    with_notes = any(_task_notes(t) for t in report.tasks)
    header = ["Task", "Kind", "Verdict", "Passed"]
    header += [f"pass@{k}", f"pass^{k}"] if k is not None else []
    header += ["Flaky", *(["Notes"] if with_notes else [])]
    lines += [
        '<div class="scroll"><table class="tasks">',
        "<thead><tr>" + "".join(f'<th scope="col">{h}</th>' for h in header) + "</tr></thead>",
        "<tbody>",
    ]
    anchors = _anchors(report)
    for task in report.tasks:
        name = f'<span class="task-id">{text(task.id)}</span>'
        if task.id in anchors:
            name = f'<a href="#{anchors[task.id]}">{name}</a>'
        cells = [name, text(f.kind_label(task)), verdict_badge(task.verdict)]
        numbers = [f.trials_passed(task)]
        if k is not None:
            numbers += [f.percent(task.pass_at_k.get(k)), f.percent(task.pass_hat_k.get(k))]
        row = [f"<td>{c}</td>" for c in cells] + [f'<td class="num">{n}</td>' for n in numbers]
        row.append('<td class="flaky">flaky</td>' if task.flaky else "<td></td>")
        if with_notes:
            row.append(f"<td>{text('; '.join(_task_notes(task)))}</td>")
        lines.append(f'<tr class="task-row {verdict_class(task.verdict)}">{"".join(row)}</tr>')
    return [*lines, "</tbody>", "</table></div>", "</section>"]


def _details(report: Report) -> list[str]:
    failing = report.failing_tasks
    if not failing:
        return []
    anchors = _anchors(report)
    lines = ['<section id="details">', "<h2>Tasks that did not pass every trial</h2>"]
    for task in failing:
        lines += _task_details(task, anchors[task.id], report.run.id)
    return [*lines, "</section>"]


def _task_details(task: TaskReport, anchor: str, run_id: str) -> list[str]:
    """A task that did not pass is shown open; a passing task with failed trials, closed."""
    is_open = " open" if task.verdict is not Verdict.PASS else ""
    lines = [
        f'<details class="task {verdict_class(task.verdict)}" id="{anchor}"{is_open}>',
        f'<summary>{verdict_badge(task.verdict)} <span class="task-id">{text(task.id)}</span> '
        f'<span class="muted">— {f.trials_passed(task)} trials passed</span></summary>',
    ]
    groups = f.group_trials(f.non_passing_trials(task))
    for group in groups:
        lines += _trial_group(group, text(f.trial_label(group)))
    if task.results_omitted:
        lines.append(
            f'<p class="note">{task.results_omitted} of its {task.trials} trials are not kept '
            f"in the report; <code>trialkit transcripts list --run {text(run_id)}</code> "
            "lists them all.</p>"
        )
    elif not groups:
        lines.append('<p class="muted">No trial of this task finished.</p>')
    return [*lines, "</details>"]


def _trial_group(group: list[TrialResult], label: str) -> list[str]:
    """`label` is markup: "Trials #0, #1"."""
    result = group[0]
    head = [
        f'<strong class="trial-label">{label}</strong>',
        verdict_badge(result.verdict),
        text(f.group_seconds(group)),
    ]
    notes = f.trial_notes(result)
    if notes:
        head.append(f'<span class="muted">{text(", ".join(notes))}</span>')
    lines = [
        f'<div class="trial {verdict_class(result.verdict)}">',
        f'<p class="trial-head">{" · ".join(head)}</p>',
    ]
    items = [] if result.error is None else [_error_item(result.error)]
    for score in f.non_passing_checks(result):
        reason = f.score_reason(score)
        items.append(
            _check_item(score.name or "(unnamed)", score.verdict, reason, score.assertions)
        )
    if items:
        lines.append(f'<ul class="checks">{"".join(items)}</ul>')
    if result.output is None:
        lines.append('<p class="muted">No output.</p>')
    else:
        # A newline right after <pre> is dropped by HTML parsers: this one, not the output's.
        excerpt = f.truncate(result.output, OUTPUT_EXCERPT_CHARS)
        lines.append(f'<pre class="output">\n{text(excerpt)}</pre>')
    return [*lines, "</div>"]


def _error_item(error: ErrorInfo) -> str:
    item = (
        f'<li class="check {verdict_class(Verdict.ERROR)}">{verdict_badge(Verdict.ERROR)}: '
        f'<span class="reason">{text(f.error_text(error))}</span>'
    )
    if error.traceback:
        item += (
            '<details class="traceback"><summary>Traceback</summary>'
            f"<pre>\n{text(error.traceback.rstrip())}</pre></details>"
        )
    return item + "</li>"


def _check_item(
    name: str, verdict: Verdict, reason: str | None, assertions: list[Assertion]
) -> str:
    item = f'<li class="check {verdict_class(verdict)}">{verdict_badge(verdict)} '
    item += f"<code>{text(name)}</code>"
    if reason:
        item += f': <span class="reason">{text(reason)}</span>'
    nested = [
        _check_item(a.name, a.verdict, a.rationale, a.assertions)
        for a in f.non_passing_assertions(assertions)
    ]
    if nested:
        item += f'<ul class="checks">{"".join(nested)}</ul>'
    return item + "</li>"


def _settings(report: Report) -> list[str]:
    """The run's facts and the settings it recorded, folded away: for the curious."""
    run = report.run
    rows: list[tuple[str, Any]] = [
        ("run", run.id),
        ("name", run.name),
        ("status", run.status),
        ("started", run.started_at.isoformat()),
        ("finished", run.finished_at.isoformat() if run.finished_at else None),
        ("suite", f"{report.suite.id} ({report.suite.kind.value})"),
        *sorted(run.config.items()),
    ]
    shown = [(key, _setting(value)) for key, value in rows if value not in (None, "", [], {})]
    return [
        '<section id="settings">',
        "<details><summary>Run settings</summary>",
        '<table class="settings">',
        *(
            f'<tr><th scope="row">{text(key)}</th><td><code>{text(value)}</code></td></tr>'
            for key, value in shown
        ),
        "</table>",
        "</details>",
        "</section>",
    ]


def _setting(value: Any) -> str:
    raw = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return f.truncate(raw, SETTING_CHARS)
