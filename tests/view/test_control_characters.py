"""Terminal control in stored text never reaches a viewer page: every page reached by links
from the home page (and the search and review pages), over runs whose outputs, errors,
rationales, metadata, transcripts and labels carry ANSI escape sequences, C0 and C1 control
characters, is HTML with none of them; the text around them stays."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from starlette.testclient import TestClient

from trialkit import GradeContext, Score, Suite, Task, Verdict, graders, run_sync
from trialkit.labels import Label
from trialkit.reports._format import strip_controls
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view.app import create_app

HOST = "testserver"
NASTY = (
    "say\x1b[31mred\x1b[0m \x1b]0;window title\x07titled \x1b[2J\x1b[Hcleared "
    "nul\x00 bell\x07 bs\x08 vt\x0b ff\x0c del\x7f c1\x85\x9b31m esc( \x1b(Bdone \r\n"
    "next tab\tend"
)
SHOWN = "sayred titled cleared nul bell bs vt ff del c131m esc( done \nnext tab\tend"
"""`NASTY` as a page shows it."""
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
ANSI_LEFTOVER = re.compile(
    r"(?<!\\x1b)(?<!\\u001b)\[(?:31|0|2J|H)m?(?![\w-])"
    r"|(?<!\\x1b\]0;)(?<!\\u001b\]0;)window title"
)
"""What an escape sequence stripped of its ESC alone would leave. Text that shows the escape
as text stays: JSON shown as JSON (`\\u001b[31m`), a grader's Python repr (`\\x1b[31m`)."""


def nasty_grader(ctx: GradeContext) -> Score:
    return Score(
        value=0.0,
        verdict=Verdict.FAIL,
        rationale=f"rationale {NASTY}",
        metadata={"note": NASTY},
    )


def nasty_suite(round_: int) -> Suite:
    def harness(prompt: str) -> str:
        if "crash" in prompt:
            raise RuntimeError(f"crashed {NASTY}")
        return f"answer {round_} {NASTY}"

    return Suite(
        id="nasty",
        kind="capability",
        trials=2,
        harness=harness,
        tasks=[
            Task(
                id="colours",
                input=f"print {NASTY}",
                metadata={"source": NASTY},
                graders=[graders.contains("paris"), graders.grader(nasty_grader)],
            ),
            Task(id="crash", input="crash please", graders=[graders.contains("x")]),
            Task(id="review", input="judge me", tags=["review"]),
        ],
    )


def echo_suite() -> Suite:
    return Suite(
        id="nasty-chat",
        model="scripted/echo",
        trials=1,
        tasks=[Task(id="echo", input=NASTY, graders=[graders.equals("x")])],
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    path: Path = tmp_path_factory.mktemp("controls") / "view.db"
    with Store(sqlite_url(path)) as store:
        run_sync(nasty_suite(1), store=store, name="first")
        report = run_sync(nasty_suite(2), store=store, name="second")
        run_sync(echo_suite(), store=store, name="chat")
        label = Label(
            task_id="review",
            trial=0,
            grader="human",
            verdict="pass",
            reviewer=f"rev {NASTY}",
            labeled_at=datetime.now(UTC),
            comment=f"comment {NASTY}",
        )
        store.save_label(label, run_id=report.run.id)
        yield store


class Links(HTMLParser):
    def __init__(self, body: str) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.text: list[str] = []
        self.feed(body)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links.append(href)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def crawl(client: TestClient, starts: list[str], most: int = 300) -> dict[str, str]:
    """Every HTML page reached from `starts` by links (at most `most`), by address."""
    pages: dict[str, str] = {}
    queue = list(starts)
    while queue and len(pages) < most:
        path = queue.pop(0)
        if path in pages or path.startswith(("/api/", "/static/")):
            continue
        answer = client.get(path)
        assert answer.status_code < 500, (path, answer.text[-800:])
        pages[path] = answer.text
        for link in Links(answer.text).links:
            target = urljoin(path, link).split("#", 1)[0]
            if target and urlsplit(target).netloc == "":
                queue.append(target)
    return pages


def test_strip_controls_keeps_the_text_and_drops_the_control() -> None:
    assert strip_controls(NASTY) == SHOWN
    assert strip_controls("plain, ümlaut, 日本\n\ttab") == "plain, ümlaut, 日本\n\ttab"
    assert strip_controls("lone \ud800 surrogate") == "lone \ufffd surrogate"
    hyperlink = "see \x1b]8;;http://x.test\x1b\\the link\x1b]8;;\x1b\\ here"
    assert strip_controls(hyperlink) == "see the link here"
    unterminated = "title \x1b]0;never ends\nnext line"
    assert strip_controls(unterminated) == "title \nnext line"


def test_no_page_carries_terminal_control(store: Store) -> None:
    client = TestClient(create_app(store, allowed_hosts={HOST}))
    runs = {run.name: run.id for run in store.list_runs()}
    starts = [
        "/",
        "/search?q=red",
        "/search?q=crashed",
        f"/runs/{runs['second']}/review",
        f"/diff?task=colours&a={runs['first']}&b={runs['second']}",
        f"/compare?a={runs['first']}&b={runs['second']}",
    ]
    pages = crawl(client, starts)

    assert len(pages) >= 20, sorted(pages)
    dirty = {path: CONTROL.findall(body) for path, body in pages.items() if CONTROL.search(body)}
    assert dirty == {}
    leftovers = {p: ANSI_LEFTOVER.findall(b) for p, b in pages.items() if ANSI_LEFTOVER.search(b)}
    assert leftovers == {}
    # The text around the control is all there, on the pages that show it.
    texts = {path: "".join(Links(body).text) for path, body in pages.items()}
    showing = [path for path, text in texts.items() if "sayred titled cleared" in text]
    assert len(showing) >= 8, sorted(pages)
    trial_pages = [p for p in pages if "/trials/colours/" in p]
    assert trial_pages and all("done \nnext tab\tend" in texts[p] for p in trial_pages)
    assert any("crashed sayred" in texts[p] for p in pages if "/trials/crash/" in p)
    assert any("comment sayred" in text for text in texts.values())
    assert any("rationale sayred" in text for text in texts.values())
