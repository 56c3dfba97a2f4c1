"""The HTML report: parsed with the stdlib parser (balanced tags), never matched as a string
where structure matters."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from trialkit._record import ErrorInfo
from trialkit.cli.main import cli
from trialkit.report import RunInfo
from trialkit.reports.html import render_html
from trialkit.reports.json import load_json_report
from trialkit.run.adaptive import CAP
from trialkit.score import Score, Verdict

from ._factory import (
    FINISHED,
    STARTED,
    STOP_REASON,
    capability_report,
    judged_report,
    make_report,
    nasty_report,
    result,
)

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str | None] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self) -> Iterator[Node]:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.walk()

    def all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        return [
            n
            for n in self.walk()
            if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
        ]

    def one(self, tag: str | None = None, cls: str | None = None) -> Node:
        (found,) = self.all(tag, cls)
        return found

    def kids(self, tag: str) -> list[Node]:
        return [c for c in self.children if isinstance(c, Node) and c.tag == tag]


class StrictParser(HTMLParser):
    """Builds a tree and fails on anything a hand-written page should not have: an unclosed or
    mis-nested element, a closed void element, a comment, a processing instruction."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack = [self.root]
        self.doctype: str | None = None

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = [name for name, _ in attrs]
        assert len(names) == len(set(names)), f"<{tag}> repeats an attribute: {names}"
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raise AssertionError(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        assert tag not in VOID, f"</{tag}> closes a void element"
        open_tag = self.stack.pop().tag
        assert open_tag == tag, f"</{tag}> closes <{open_tag}>"

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)

    def handle_comment(self, data: str) -> None:
        raise AssertionError(f"comment: {data!r}")

    def handle_pi(self, data: str) -> None:
        raise AssertionError(f"processing instruction: {data!r}")

    def unknown_decl(self, data: str) -> None:
        raise AssertionError(f"declaration: {data!r}")


def parse(text: str) -> Node:
    parser = StrictParser()
    parser.feed(text)
    parser.close()
    assert [n.tag for n in parser.stack] == ["#document"], "unclosed elements"
    assert parser.doctype == "DOCTYPE html"
    (page,) = parser.root.kids("html")
    return page


def summary_figures(page: Node) -> dict[str, str]:
    table = page.one("table", "summary")
    return {row.one("th").text(): row.one("td").text() for row in table.all("tr")}


def pre_text(node: Node) -> str:
    """A `<pre>`'s text as a browser shows it: the newline right after the tag is dropped."""
    return node.text().removeprefix("\n")


def details_by_task(page: Node) -> dict[str, Node]:
    tasks = page.all("details", "task")
    return {d.kids("summary")[0].one("span", "task-id").text(): d for d in tasks}


def section(page: Node, section_id: str) -> Node:
    (found,) = [s for s in page.all("section") if s.attrs.get("id") == section_id]
    return found


def test_the_header_and_summary_carry_the_runs_figures() -> None:
    page = parse(render_html(capability_report()))

    title = "trialkit · capitals · capability · run nightly (run-7f3a)"
    assert page.one("title").text() == title
    assert page.one("h1").text() == title
    assert page.one("p", "subtitle").text() == "started 2026-11-29T12:00:00+00:00"
    assert summary_figures(page) == {
        "Tasks": "6: 3 passed, 1 failed, 1 errored, 1 unknown",
        "Trials": "14: 8 passed, 4 failed, 1 errored, 1 unknown",
        "Pass rate (mean over tasks)": "66.7% (95% CI 0.0%–100.0%)",
        "pass@1": "66.7%",
        "pass@3": "75.0%",
        "pass^1": "66.7%",
        "pass^3": "50.0%",
        "Flakiness": "25.0% (1 flaky task)",
        "Errors": "1 of 14 trials",
        "Mean score": "0.667",
        "Latency p50 / p95": "1.00 s / 22.30 s",
        "Tokens": "1,680 (1,400 in, 280 out)",
        "Cost": "$0.0140",
        "Duration": "42.00 s",
    }
    assert page.one("p", "note").text() == (
        "pass@k and pass^k leave out tasks with no decided trial: slow, ambiguous"
    )
    bar = page.one("div", "bar")
    assert bar.attrs["aria-label"] == "Trials: 8 passed, 4 failed, 1 errored, 1 unknown"
    assert [s.classes[1] for s in bar.all("span")] == [
        "seg-pass",
        "seg-fail",
        "seg-error",
        "seg-unknown",
    ]


def test_each_task_row_has_its_verdict_and_figures() -> None:
    page = parse(render_html(capability_report()))

    header = [th.text() for th in page.one("table", "tasks").one("thead").all("th")]
    assert header == ["Task", "Kind", "Verdict", "Passed", "pass@3", "pass^3", "Flaky"]
    rows = [
        (
            [td.text() for td in row.kids("td")],
            [c for c in row.classes if c.startswith("verdict-")],
            row.one("span", "verdict").classes,
        )
        for row in page.all("tr", "task-row")
    ]
    assert rows == [
        (
            ["france", "capability", "✓ pass", "3/3", "100.0%", "100.0%", ""],
            ["verdict-pass"],
            ["verdict", "verdict-pass"],
        ),
        (
            ["germany", "capability", "✓ pass", "2/3", "100.0%", "0.0%", "flaky"],
            ["verdict-pass"],
            ["verdict", "verdict-pass"],
        ),
        (
            ["landmarks", "capability", "✗ fail", "0/3", "0.0%", "0.0%", ""],
            ["verdict-fail"],
            ["verdict", "verdict-fail"],
        ),
        (
            ["slow", "capability", "! error", "0/1", "n/a", "n/a", ""],
            ["verdict-error"],
            ["verdict", "verdict-error"],
        ),
        (
            ["refuse-rm", "capability, expects failure", "✓ pass", "3/3", "100.0%", "100.0%", ""],
            ["verdict-pass"],
            ["verdict", "verdict-pass"],
        ),
        (
            ["ambiguous", "capability", "? unknown", "0/1", "n/a", "n/a", ""],
            ["verdict-unknown"],
            ["verdict", "verdict-unknown"],
        ),
    ]


def test_fail_and_error_never_look_alike() -> None:
    page = parse(render_html(capability_report()))

    words = {" ".join(s.classes): s.text() for s in page.all("span", "verdict")}
    assert words == {
        "verdict verdict-pass": "✓ pass",
        "verdict verdict-fail": "✗ fail",
        "verdict verdict-error": "! error",
        "verdict verdict-unknown": "? unknown",
    }
    details = details_by_task(page)
    assert "verdict-fail" in details["landmarks"].classes
    assert "verdict-error" in details["slow"].classes
    assert not details["landmarks"].all(cls="verdict-error")
    assert not details["slow"].all(cls="verdict-fail")


def test_details_only_for_tasks_with_non_passing_trials() -> None:
    page = parse(render_html(capability_report()))

    details = details_by_task(page)
    assert list(details) == ["germany", "landmarks", "slow", "ambiguous"]
    assert {task: "open" in d.attrs for task, d in details.items()} == {
        "germany": False,  # passed, with one failed trial: folded
        "landmarks": True,
        "slow": True,
        "ambiguous": True,
    }
    links = {a.text(): a.attrs["href"] for a in page.one("table", "tasks").all("a")}
    assert links == {task: f"#{d.attrs['id']}" for task, d in details.items()}


def test_a_failing_trial_group_shows_its_checks_nested_and_its_output() -> None:
    page = parse(render_html(capability_report()))

    (trial,) = details_by_task(page)["landmarks"].all("div", "trial")
    assert trial.one("strong", "trial-label").text() == "Trials #0, #1, #2"
    assert trial.one("p", "trial-head").text() == "Trials #0, #1, #2 · ✗ fail · 2.00 s"
    check = trial.kids("ul")[0].kids("li")[0]
    assert check.kids("code")[0].text() == "contains('paris')"
    assert check.one("span", "reason").text() == "'paris' does not occur in the output"
    (nested,) = check.kids("ul")[0].kids("li")
    assert nested.text() == "✗ fail case-insensitive match"
    assert "output is non-empty" not in trial.text()
    assert pre_text(trial.one("pre", "output")) == "The Eiffel Tower is in Lyon."


def test_an_errored_trial_shows_its_error_traceback_and_no_output() -> None:
    page = parse(render_html(capability_report()))

    (trial,) = details_by_task(page)["slow"].all("div", "trial")
    assert trial.one("p", "trial-head").text() == "Trial #0 · ! error · 60.00 s · status timeout"
    error = trial.one("li", "check")
    assert error.one("span", "reason").text() == (
        "TimeoutError: the trial took longer than 60 s (during timeout)"
    )
    traceback = error.one("details", "traceback").one("pre")
    assert pre_text(traceback).endswith("TimeoutError: 60 s")
    assert not trial.all("pre", "output")
    assert "No output." in trial.text()


def test_a_stopped_judged_run_shows_model_reason_and_grader_costs() -> None:
    page = parse(render_html(judged_report()))

    assert page.one("h1").text() == (
        "trialkit · capitals · capability · run run-9c1d · model openai/gpt-4o-mini"
    )
    subtitle = page.one("p", "subtitle")
    assert "warn" in subtitle.classes
    assert subtitle.text() == f"started 2026-11-29T12:00:00+00:00 · stopped: {STOP_REASON}"
    figures = summary_figures(page)
    assert figures["Tokens"] == "510 (agent 300 in / 60 out; graders 120 in / 30 out)"
    assert figures["Cost"] == "$0.0054 (graders $0.0024)"
    assert not page.all("details", "task")
    settings = page.one("table", "settings")
    values = {row.one("th").text(): row.one("td").text() for row in settings.all("tr")}
    assert values["status"] == "stopped"
    assert values["model"] == "openai/gpt-4o-mini"
    assert values["max_cost"] == "0.005"


def test_pending_reviews_name_the_review_command() -> None:
    waiting = Score(name="human", verdict=Verdict.UNKNOWN, pending=True)
    report = make_report({"essay": [result(0, Verdict.UNKNOWN, scores=[waiting])]})

    page = parse(render_html(report))

    rows = list(summary_figures(page))
    assert rows[:3] == ["Tasks", "Trials", "Pending review"]
    assert summary_figures(page)["Pending review"] == "1 of 1 trials (trialkit review run-7f3a)"
    (row,) = page.all("tr", "task-row")
    assert row.kids("td")[-1].text() == "1 pending review"


def test_adaptive_stops_and_omitted_trials_are_said() -> None:
    run = RunInfo(
        id="r-auto",
        started_at=STARTED,
        finished_at=FINISHED,
        config={"adaptive": {"precision": 0.2, "stopped": {"many": f"{CAP} (25)"}}},
    )
    trials = [result(i, Verdict.FAIL if i < 3 else Verdict.PASS) for i in range(25)]
    page = parse(render_html(make_report({"many": trials}, run=run)))

    assert summary_figures(page)["Adaptive trials (precision 0.2)"] == (
        "tasks stopped: 1 at their cap"
    )
    (row,) = page.all("tr", "task-row")
    assert row.kids("td")[-1].text() == f"stopped: {CAP} (25)"
    note = details_by_task(page)["many"].one("p", "note")
    assert note.text() == (
        "22 of its 25 trials are not kept in the report; "
        "trialkit transcripts list --run r-auto lists them all."
    )


XSS = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "</pre>", "'&amp;"]
PAYLOAD = " ".join(XSS)


def test_user_content_is_escaped_everywhere() -> None:
    error = ErrorInfo(type="ValueError", message=PAYLOAD, traceback=PAYLOAD, phase="harness")
    check = Score(name=PAYLOAD, verdict=Verdict.FAIL, rationale=PAYLOAD)
    run = RunInfo(
        id="run-1", name=PAYLOAD, started_at=STARTED, config={"model": PAYLOAD, PAYLOAD: [1]}
    )
    report = make_report(
        {
            PAYLOAD: [result(0, Verdict.FAIL, output=PAYLOAD, scores=[check])],
            "crash": [result(0, Verdict.ERROR, output=PAYLOAD, scores=[], error=error)],
        },
        suite_id=PAYLOAD,
        run=run,
    )

    text = render_html(report)
    page = parse(text)

    assert "<script" not in text.lower()
    assert "<img" not in text.lower()
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in text  # quotes escaped too
    tags = {n.tag for n in page.walk()}
    assert not tags & {"script", "img", "iframe", "object", "embed", "link", "base", "form"}
    assert not [n for n in page.walk() if any(a.startswith("on") for a in n.attrs)]
    assert PAYLOAD in page.one("title").text()
    details = details_by_task(page)
    assert list(details) == [PAYLOAD, "crash"]
    assert pre_text(details[PAYLOAD].one("pre", "output")) == PAYLOAD
    assert details[PAYLOAD].one("li", "check").one("code").text() == PAYLOAD
    assert details[PAYLOAD].one("span", "reason").text() == PAYLOAD
    crash = details["crash"]
    assert crash.one("span", "reason").text() == f"ValueError: {PAYLOAD} (during harness)"
    assert pre_text(crash.one("details", "traceback").one("pre")) == PAYLOAD
    assert pre_text(crash.one("pre", "output")) == PAYLOAD
    settings = page.one("table", "settings")
    assert PAYLOAD in [th.text() for th in settings.all("th")]


def test_no_external_reference() -> None:
    text = render_html(capability_report())
    page = parse(text)

    for node in page.walk():
        for name in ("src", "href", "action", "srcset", "poster", "data"):
            value = node.attrs.get(name)
            assert value is None or value.startswith("#"), (node.tag, name, value)
    assert not page.all("link")
    assert not page.all("script")
    assert not re.search(r"https?:|//|url\(|@import", text)
    (csp,) = [m for m in page.all("meta") if m.attrs.get("http-equiv")]
    assert csp.attrs["content"] == "default-src 'none'; style-src 'unsafe-inline'"


def test_light_and_dark() -> None:
    style = parse(render_html(capability_report())).one("style").text()

    assert "prefers-color-scheme:dark" in style
    assert "color-scheme:light dark" in style


def test_rendering_depends_only_on_the_report() -> None:
    report = capability_report()

    text = render_html(report)

    assert render_html(report) == text
    assert render_html(load_json_report(report.to_json())) == text
    assert report.to_html() == text


def test_control_characters_are_shown_escaped() -> None:
    text = render_html(nasty_report())
    page = parse(text)

    text.encode("utf-8")
    assert "\x1b" not in text
    assert "\x00" not in text
    outputs = [pre_text(p) for p in page.all("pre", "output")]
    assert outputs == [
        "nul\\x00 esc\\x1b[31mred\\x1b[0m vt\\x0b ff\\x0c nonchar\ufffe\uffff lone\\ud800 ok\t\n"
    ]
    assert page.one("h1").text().startswith("trialkit · suitenul\\x00 esc\\x1b[31mred")


def test_an_empty_report_renders() -> None:
    page = parse(render_html(make_report({})))

    assert summary_figures(page)["Tasks"] == "0: 0 passed, 0 failed, 0 errored"
    assert not page.all("div", "bar")
    assert "No tasks." in section(page, "tasks").text()
    assert not page.all("table", "tasks")
    assert not page.all("details", "task")


def test_a_long_output_is_cut() -> None:
    report = make_report({"long": [result(0, Verdict.FAIL, output="x" * 5000)]})

    (output,) = parse(render_html(report)).all("pre", "output")

    assert pre_text(output) == "x" * 2000 + "… (3,000 more characters)"


# The command line: `run --html`, `report --format html`.

SUITE = """
from trialkit import Suite, Task, graders

def agent(prompt: str) -> str:
    if prompt == "crash":
        raise RuntimeError("<b>boom</b>")
    return "yes"

suite = Suite(id="web", kind="capability", trials=2, harness=agent, tasks=[
    Task(id="ok", input="hello", graders=[graders.contains("yes")]),
    Task(id="wrong", input="hello", graders=[graders.contains("no")]),
    Task(id="crash", input="crash", graders=[graders.contains("yes")]),
])
"""


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRIALKIT_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("TRIALKIT_MODEL", raising=False)
    (tmp_path / "suite.py").write_text(SUITE)
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    outcome = CliRunner().invoke(cli, list(args))
    return outcome.exit_code, outcome.stdout, outcome.stderr


def test_run_writes_the_html_report(work: Path) -> None:
    code, _, err = invoke(
        "run", "suite.py", "--no-progress", "-q", "--name", "web", "--html", "out/r.html"
    )

    assert code == 3, err  # the crash task's trials errored
    page = parse((work / "out" / "r.html").read_text(encoding="utf-8"))
    verdicts = {
        row.one("span", "task-id").text(): row.one("span", "verdict").text()
        for row in page.all("tr", "task-row")
    }
    assert verdicts == {"ok": "✓ pass", "wrong": "✗ fail", "crash": "! error"}
    reason = details_by_task(page)["crash"].one("span", "reason").text()
    assert reason == "RuntimeError: <b>boom</b> (during agent)"


def test_report_renders_a_stored_run_as_html(work: Path) -> None:
    invoke("run", "suite.py", "--no-progress", "-q", "--name", "web", "--html", "run.html")

    code, out, err = invoke("report", "web", "--format", "html")
    assert code == 0, err
    code, _, err = invoke("report", "web", "--format", "html", "-o", "stored.html")
    assert code == 0, err

    assert (work / "stored.html").read_text(encoding="utf-8") == out
    assert out == (work / "run.html").read_text(encoding="utf-8")
    assert summary_figures(parse(out))["Tasks"] == "3: 1 passed, 1 failed, 1 errored"


def test_models_refuse_html(work: Path) -> None:
    code, _, err = invoke(
        "run", "suite.py", "--models", "scripted/echo,scripted/yes", "--html", "r.html"
    )

    assert code == 2
    assert "--models does not go with --html" in err
    assert not (work / "r.html").exists()
