"""The JUnit XML report, valid against Jenkins' junit-10.xsd (what CI test reporters read).

One `<testcase>` per task, classname = suite id, name = task id, time = the task's wall time
(from the start of its first trial to the end of its last; for a report that does not know
when trials started, its share of the run's wall-clock time in proportion to its trials'
durations). The suite's time is the run's wall time. The task's verdict decides the element,
keeping fail and error apart:

- fail → `<failure>`, error → `<error>` (type = the exception's class). A capability task that
  failed does not fail the gate, so it is not a `<failure>` unless asked
  (`capability_failures`): by default it is `<skipped>` with the reason, so a green gate is
  never a red check.
- unknown → `<skipped>`: a judge could not tell, so the task is neither passed nor failed, and
  counting it as either would be a claim the run did not make.
- pass → no result element; when some of its trials did not pass (a capability task passes on
  one good trial) each of those becomes a `<flakyFailure>` / `<flakyError>`, Surefire's way of
  saying "passed, but not every time", which Jenkins shows and other readers ignore.

A flaky task (its decided trials disagree) says so: its messages say "flaky", a
`<system-out>` line notes it, and the suite's properties list it (`trialkit.flaky_task`).

Where the task is defined (`TaskReport.file` and `line`): junit-10.xsd has no attribute for it
on `<testcase>`, so by default (`locations="text"`) it is a line of the testcase's
`<system-out>` ("defined at FILE:LINE") and the file stays valid; `locations="attributes"`
writes `file` and `line` attributes instead, as pytest's xunit1 family does, which GitLab and
GitHub test-report actions (read with junitparser) use to point at the line, but which the
strict schema refuses.

Every message starts with "k/n trials passed". Every string is sanitised first: ElementTree
writes the characters XML 1.0 forbids (most C0 controls, lone surrogates, U+FFFE, U+FFFF) and
produces a file no parser reads.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Literal

from trialkit.reports import _format as f
from trialkit.score import Assertion, Verdict
from trialkit.task import SuiteKind

if TYPE_CHECKING:
    from trialkit.report import Report, TaskReport, TrialResult

OUTPUT_EXCERPT_CHARS = 1000
MESSAGE_CHARS = 300

_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

_RESULT_TAG = {Verdict.FAIL: "failure", Verdict.ERROR: "error", Verdict.UNKNOWN: "skipped"}

CapabilityFailures = Literal["failure", "skipped", "passed"]
"""How a failed capability task appears: `skipped` (the default: it did not fail the gate,
so it must not make the check red, but it is not hidden either), `failure`, or `passed`."""
CAPABILITY_FAILURES: tuple[CapabilityFailures, ...] = ("skipped", "failure", "passed")
Locations = Literal["text", "attributes"]
LOCATIONS: tuple[Locations, ...] = ("text", "attributes")


def xml_safe(text: str) -> str:
    """Text XML 1.0 can carry: control characters shown as `\\xNN` (as in the other reports),
    U+FFFE and U+FFFF as `\\uXXXX`."""
    return _XML_FORBIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", f.escape_controls(text))


def render_junit(
    report: Report,
    *,
    capability_failures: CapabilityFailures = "skipped",
    locations: Locations = "text",
) -> str:
    """The report as JUnit XML; see the module's docstring for `capability_failures` and
    `locations`."""
    if capability_failures not in CAPABILITY_FAILURES:
        raise ValueError(f"capability_failures: expected one of {CAPABILITY_FAILURES}")
    if locations not in LOCATIONS:
        raise ValueError(f"locations: expected one of {LOCATIONS}")
    s = report.summary
    time = _seconds(s.duration_s if s.duration_s is not None else _total_time(report))
    tags = {t.id: _result_tag(t, capability_failures) for t in report.tasks}
    shown = list(tags.values())
    counts = {
        "tests": str(s.tasks),
        "failures": str(shown.count("failure")),
        "errors": str(shown.count("error")),
    }
    root = ET.Element("testsuites", {"name": "trialkit", **counts, "time": time})
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": xml_safe(report.suite.id),
            **counts,
            "skipped": str(shown.count("skipped")),
            "time": time,
            "timestamp": report.run.started_at.isoformat(),
        },
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in _properties(report):
        ET.SubElement(properties, "property", {"name": name, "value": xml_safe(value)})
    times = _task_times(report)
    for task in report.tasks:
        case = _testcase(report.suite.id, task, times[task.id], tags[task.id], locations)
        suite.append(case)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _properties(report: Report) -> list[tuple[str, str]]:
    gate = report.gate()
    props = [
        ("trialkit.run_id", report.run.id),
        ("trialkit.gate", gate.verdict),
        ("trialkit.exit_code", str(gate.exit_code)),
        *(("trialkit.gate_reason", reason) for reason in gate.reasons),
        ("trialkit.model_calls", report.cache_mode),
    ]
    if report.cache_folder is not None:
        props.append(("trialkit.cassette", report.cache_folder))
    if report.run.name:
        props.append(("trialkit.run_name", report.run.name))
    props.append(("trialkit.suite_kind", report.suite.kind.value))
    model = report.run.config.get("model")
    if model:
        props.append(("trialkit.model", str(model)))
    summary = report.summary
    if summary.pass_rate is not None:
        props.append(("trialkit.pass_rate", f"{summary.pass_rate:.4f}"))
    if summary.cost_usd is not None:
        props.append(("trialkit.cost_usd", f"{summary.cost_usd:.6f}"))
    if summary.grader_cost_usd is not None:
        props.append(("trialkit.grader_cost_usd", f"{summary.grader_cost_usd:.6f}"))
    tokens = summary.usage.total_tokens + summary.grader_usage.total_tokens
    if tokens:
        props.append(("trialkit.tokens", str(tokens)))
    props += [("trialkit.flaky_task", task.id) for task in report.tasks if task.flaky]
    return props


def _result_tag(task: TaskReport, capability_failures: CapabilityFailures) -> str | None:
    """The element that carries the task's result, `None` for a pass."""
    if task.verdict is Verdict.PASS:
        return None
    if task.verdict is Verdict.FAIL and task.kind is SuiteKind.CAPABILITY:
        return None if capability_failures == "passed" else capability_failures
    return _RESULT_TAG[task.verdict]


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _work(task: TaskReport) -> float:
    """The seconds its trials took, added up (estimated from those listed, when the report
    lists only some)."""
    if not task.results:
        return 0.0
    listed = math.fsum(r.duration_s for r in task.results)
    return listed * task.trials / len(task.results)


def _total_time(report: Report) -> float:
    return math.fsum(_work(t) for t in report.tasks)


def _task_times(report: Report) -> dict[str, float]:
    """Each task's wall time: from its first trial's start to its last trial's end.

    Trials run side by side, so their durations add up to more than the task took. A report
    that does not know when trials started (written before that was recorded) gives each task
    its share of the run's wall-clock time in proportion to its trials' time instead, so the
    testcases still add up to the suite's time.
    """
    if all(t.wall_s is not None for t in report.tasks):
        return {t.id: t.wall_s or 0.0 for t in report.tasks}
    work = {t.id: _work(t) for t in report.tasks}
    total = math.fsum(work.values())
    wall = report.summary.duration_s
    if wall is None or total <= 0:
        return work
    return {task_id: wall * seconds / total for task_id, seconds in work.items()}


def _testcase(
    suite_id: str, task: TaskReport, seconds: float, tag: str | None, locations: Locations
) -> ET.Element:
    attributes = {
        "classname": xml_safe(suite_id),
        "name": xml_safe(task.id),
        "time": _seconds(seconds),
    }
    if locations == "attributes" and task.file:
        attributes["file"] = xml_safe(task.file)
        if task.line is not None:
            attributes["line"] = str(task.line)
    case = ET.Element("testcase", attributes)
    groups = f.group_trials(f.non_passing_trials(task))
    if tag is None:
        for group in groups:
            flaky_tag = "flakyError" if group[0].verdict is Verdict.ERROR else "flakyFailure"
            element = ET.SubElement(case, flaky_tag, _attributes(task, group[0]))
            element.text = xml_safe(_trial_text(group))
    else:
        first = groups[0][0] if groups else None
        element = ET.SubElement(case, tag, _attributes(task, first))
        text = "\n\n".join(_trial_text(g) for g in groups)
        if tag != _RESULT_TAG[task.verdict]:  # a capability failure shown as skipped
            text = "a capability task: failing it does not fail the gate\n\n" + text
        element.text = xml_safe(text)
    notes = []
    if locations == "text" and task.file:
        where = task.file if task.line is None else f"{task.file}:{task.line}"
        notes.append(f"defined at {where}")
    if task.flaky:
        notes.append(f"flaky: {f.trials_passed(task)} trials passed")
    if notes:
        ET.SubElement(case, "system-out").text = xml_safe("\n".join(notes))
    return case


def _attributes(task: TaskReport, first: TrialResult | None) -> dict[str, str]:
    message = f"{f.trials_passed(task)} trials passed"
    breakdown = [
        f"{n} {f.COUNT_WORDS[v]}"
        for v, n in f.Counts(task.passed, task.failed, task.errors, task.unknown).items()
        if v is not Verdict.PASS and n
    ]
    if breakdown:
        message += f" ({', '.join(breakdown)})"
    if task.flaky:
        message += ", flaky"
    if first is not None:
        message += f"; trial #{first.trial}: {_reason(first)}"
    message = f.truncate(" ".join(message.split()), MESSAGE_CHARS)
    return {"message": xml_safe(message), "type": xml_safe(_type(first))}


def _type(first: TrialResult | None) -> str:
    """The exception's class for an error, like a test framework's; otherwise the verdict."""
    if first is None:
        return "error"
    if first.verdict is Verdict.ERROR:
        if first.error is not None:
            return first.error.type
        for score in first.scores:
            if score.error is not None:
                return score.error.type
    return f.WORDS[first.verdict]


def _reason(result: TrialResult) -> str:
    if result.error is not None:
        return f.error_text(result.error)
    for score in f.non_passing_checks(result):
        reason = f.score_reason(score)
        return f"{score.name}: {reason}" if reason else f"{score.name} {f.WORDS[score.verdict]}"
    return f.WORDS[result.verdict]


def _trial_text(group: list[TrialResult]) -> str:
    result = group[0]
    label = f.trial_label(group).lower()
    head = f"{label}: {f.WORDS[result.verdict]} ({f.group_seconds(group)})"
    notes = f.trial_notes(result)
    if notes:
        head += f"; {', '.join(notes)}"
    lines = [head]
    if result.error is not None:
        lines.append(f"  error: {f.error_text(result.error)}")
        if result.error.traceback:
            lines += _indent(result.error.traceback.rstrip("\n"), 4)
    for score in f.non_passing_checks(result):
        lines.append(_check_line(score.name, score.verdict, f.score_reason(score), 2))
        lines += _assertion_lines(score.assertions, 4)
    if result.output is None:
        lines.append("  no output")
    else:
        lines.append("  output:")
        lines += _indent(f.truncate(result.output, OUTPUT_EXCERPT_CHARS), 4)
    return "\n".join(lines)


def _check_line(name: str, verdict: Verdict, reason: str | None, depth: int) -> str:
    line = f"{' ' * depth}{f.WORDS[verdict]} {name or '(unnamed)'}"
    if reason:
        line += f": {reason}"
    return line.replace("\n", "\n" + " " * (depth + 2))


def _assertion_lines(assertions: list[Assertion], depth: int) -> list[str]:
    lines = []
    for a in f.non_passing_assertions(assertions):
        lines.append(_check_line(a.name, a.verdict, a.rationale, depth))
        lines += _assertion_lines(a.assertions, depth + 2)
    return lines


def _indent(text: str, depth: int) -> list[str]:
    return [" " * depth + line for line in text.split("\n")]
