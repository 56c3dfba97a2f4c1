"""Fixtures for the browser tests: Debian's Chromium driven by Playwright over a real viewer.

The browser is `$TRIALKIT_TEST_CHROMIUM` (default `/usr/bin/chromium`; Playwright's own
browser download is never used). Without it, or without the `playwright` package, these tests
are skipped, unless `TRIALKIT_REQUIRE_BROWSER=1` (CI), which fails them. Screenshots go to
`$TRIALKIT_SCREENSHOTS`, or to a folder under pytest's temp folder; the tests print it.

A browser test takes `open_page` (and `store` for run ids), opens a page and checks it, then
that nothing went wrong in the browser:

    def test_the_new_page(open_page: OpenPage, store: Store) -> None:
        watched = open_page(color_scheme="dark")  # any Playwright context option
        assert watched.goto(f"/runs/{store.resolve_run('before')}") == 200
        assert "Summary" in watched.page.locator("main").inner_text()
        assert watched.errors == []  # console errors, page errors, CSP violations

`stores.fill` makes the runs (`tools`, `before`, `after`, `many`); add what a new page needs
there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.view.browser.stores import fill
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view import ViewServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

CHROMIUM_VAR = "TRIALKIT_TEST_CHROMIUM"
REQUIRE_VAR = "TRIALKIT_REQUIRE_BROWSER"
SCREENSHOTS_VAR = "TRIALKIT_SCREENSHOTS"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WATCH_CSP = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
});
"""
"""Injected before each page's own scripts: a refused script, style or load becomes a console
error, which the tests fail on."""


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_VAR) == "1":
        pytest.fail(f"{reason}, and {REQUIRE_VAR}=1 requires it")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Module-scoped: Playwright's sync API keeps an event loop running in this thread while it
    is open, and tests elsewhere start their own loops (`anyio.run`)."""
    try:
        from playwright.sync_api import sync_playwright
    except ModuleNotFoundError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    executable = os.environ.get(CHROMIUM_VAR) or "/usr/bin/chromium"
    if not Path(executable).is_file():
        _unavailable(
            f"no Chromium at {executable} (apt-get install chromium, or set {CHROMIUM_VAR})"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    folder = tmp_path_factory.mktemp("browser-store")
    with Store(sqlite_url(folder / "view.db")) as opened:
        fill(opened, folder)
        yield opened


@pytest.fixture(scope="session")
def server(store: Store) -> Iterator[ViewServer]:
    with ViewServer(store) as running:
        yield running


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get(SCREENSHOTS_VAR)
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nviewer screenshots: {folder}")
    return folder


class Watched:
    """A page whose console errors, uncaught exceptions and dialogs are collected."""

    def __init__(self, context: BrowserContext, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.page: Page = context.new_page()
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        self.page.on("dialog", self._dialog)

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"console {message.type}: {message.text}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def goto(self, path: str) -> int:
        """Open `path` and wait for it to settle; the HTTP status."""
        response = self.page.goto(self.base_url + path, wait_until="load")
        assert response is not None, path
        return response.status


@pytest.fixture
def open_page(browser: Browser, server: ViewServer) -> Iterator[Any]:
    """`open_page(**context_options)`: a new watched page on the viewer."""
    contexts: list[BrowserContext] = []

    def make(**options: Any) -> Watched:
        context = browser.new_context(**options)
        context.add_init_script(WATCH_CSP)
        contexts.append(context)
        return Watched(context, server.url)

    yield make
    for context in contexts:
        context.close()
