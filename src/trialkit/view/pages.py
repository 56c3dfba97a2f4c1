"""What every page of the viewer uses: the templates, `render`, addresses and the errors a
route raises to answer 400 or 404.

Templates are Jinja2 with autoescape on: every value put in a page is escaped, so stored
text (outputs, tool results, task ids) is shown as text. Never mark stored text `|safe`.
Every value is also stripped of terminal control (`readable`): an agent's ANSI colours,
cursor moves and other control characters never reach a page.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from trialkit.reports import _format as f
from trialkit.reports.transcript import TurnView
from trialkit.score import Verdict
from trialkit.store import Store
from trialkit.view.security import csrf_token

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
REFRESH_S = 5
"""Pages of a run still going reload themselves this often (seconds)."""
MAX_TRIAL_INDEX = 2**31 - 1
"""The largest trial number a store holds (a 32-bit integer column); a larger one in an
address is refused before it reaches the database, whose driver would fail on it."""
VERDICT_SYMBOLS = {
    Verdict.PASS: "✓",
    Verdict.FAIL: "✗",
    Verdict.ERROR: "!",
    Verdict.UNKNOWN: "?",
}

T = TypeVar("T")


class NotFound(LookupError):
    """Nothing at this address: 404, with a message."""


class BadRequest(ValueError):
    """The address is missing something or has something wrong: 400, with a message."""


# --- addresses ------------------------------------------------------------------------------


def run_url(run_id: str) -> str:
    return f"/runs/{quote(run_id, safe='')}"


def trials_url(run_id: str, **query: str | int | None) -> str:
    return f"{run_url(run_id)}/trials" + query_string(**query)


def trial_url(run_id: str, task_id: str, index: int) -> str:
    return f"{run_url(run_id)}/trials/{quote(task_id, safe='')}/{index}"


def diff_url(task_id: str, a: str, b: str, **query: str | int | None) -> str:
    return "/diff" + query_string(task=task_id, a=a, b=b, **query)


def matrix_url(run_ids: Sequence[str], **query: str | int | None) -> str:
    return "/matrix" + query_string(run=list(run_ids), **query)


def trends_url(suite_id: str) -> str:
    return f"/trends/{quote(suite_id, safe='')}"


QueryValue = str | int | float | Sequence[str] | None


def query_string(**query: QueryValue) -> str:
    """`?k=v&…` of the values that are not empty (or `""` when none is); a list value
    repeats its key (`run=A&run=B`)."""
    kept = {k: v for k, v in query.items() if v is not None and v != "" and v != []}
    return f"?{urlencode(kept, doseq=True)}" if kept else ""


# --- reading the address --------------------------------------------------------------------


def trial_index(value: str) -> int:
    """A trial number from an address; 400 for anything but a number a store can hold."""
    if not value.isascii() or not value.isdigit():
        raise BadRequest(f"trial number {value!r}: expected 0, 1, 2…")
    # Compared as text first: int() refuses more than 4,300 digits.
    if len(value) > len(str(MAX_TRIAL_INDEX)) or int(value) > MAX_TRIAL_INDEX:
        shown = value if len(value) <= 20 else f"{value[:20]}…"
        raise BadRequest(f"trial number {shown}: too large (at most {MAX_TRIAL_INDEX})")
    return int(value)


def page_number(request: Request) -> int:
    value = request.query_params.get("page") or "1"
    if not value.isascii() or not value.isdigit() or not 1 <= len(value) <= 9 or int(value) < 1:
        raise BadRequest(f"page {value[:20]!r}: expected 1, 2, 3…")
    return int(value)


def choice(request: Request, name: str, allowed: Sequence[str], default: str = "") -> str:
    """`?name=`, one of `allowed` (or `default` when absent); 400 for anything else."""
    value = request.query_params.get(name) or default
    if value and value not in allowed:
        raise BadRequest(f"{name} {value[:40]!r}: use {', '.join(allowed)}")
    return value


def whole_number(request: Request, name: str, default: int, *, most: int) -> int:
    """`?name=N`, from 1 to `most`; 400 for anything else."""
    value = request.query_params.get(name) or str(default)
    if not value.isascii() or not value.isdigit() or len(value) > 9 or int(value) < 1:
        raise BadRequest(f"{name} {value[:20]!r}: expected a number from 1 to {most}")
    if int(value) > most:
        raise BadRequest(f"{name} {value}: at most {most}")
    return int(value)


def real_number(request: Request, name: str) -> float | None:
    """`?name=X` as a finite number, or None when absent; 400 for anything else."""
    value = (request.query_params.get(name) or "").strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise BadRequest(f"{name} {value[:20]!r}: expected a number such as 0.5")
    return number


def required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise BadRequest(f"the address needs ?{name}=")
    return value


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def read(request: Request, action: Callable[[Store], T]) -> T:
    """`action(store)` under the viewer's store lock (the store is shared between requests)."""
    lock: threading.Lock = request.app.state.lock
    with lock:
        return action(store_of(request))


class Paging:
    """Where one page of a listing is: rows `first`–`last` of `total`, and its neighbours."""

    def __init__(self, number: int, size: int, total: int, shown: int) -> None:
        self.number = number
        self.size = size
        self.total = total
        self.first = (number - 1) * size + 1 if shown else 0
        self.last = (number - 1) * size + shown if shown else 0
        self.pages = max(1, -(-total // size))
        self.previous = number - 1 if number > 1 else None
        self.next = number + 1 if shown and self.last < total else None


# --- rendering ------------------------------------------------------------------------------


def diff_lines(diff: str) -> Iterator[tuple[str, str]]:
    """Each line of a unified diff with its class: `add`, `del`, `hunk`, `file` or `ctx`."""
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            yield "file", line
        elif line.startswith("+"):
            yield "add", line
        elif line.startswith("-"):
            yield "del", line
        elif line.startswith("@@"):
            yield "hunk", line
        else:
            yield "ctx", line


def timeline(view: TurnView) -> list[tuple[str, Any]]:
    """What the agent did in one turn, in order: `("message", Message)` and `("tool",
    ToolCall)` items, each tool call (with its result) right after the message that made it;
    a tool message whose call is shown is left out (its result is in the call)."""
    calls = {call.id: call for call in view.tool_calls}
    made = {c.id for m in view.replies for c in m.tool_calls if c.id in calls}
    items: list[tuple[str, Any]] = []
    for message in view.replies:
        if message.role == "tool" and message.tool_call_id in made:
            continue
        items.append(("message", message))
        items += [("tool", calls.get(c.id, c)) for c in message.tool_calls]
    items += [("tool", call) for call in view.tool_calls if call.id not in made]
    return items


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def when(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat(sep=" ", timespec="seconds")


def readable(value: Any) -> Any:
    """What a template shows of `value` (Jinja's `finalize`, run on every `{{ … }}` before
    escaping): text without terminal escape sequences or control characters, except tabs and
    newlines (`strip_controls`); numbers and `None` as they are."""
    if value is None or isinstance(value, int | float):
        return value
    if hasattr(value, "__html__"):  # markup a macro or a filter made: already escaped
        return Markup(f.strip_controls(str(value.__html__())))
    return f.strip_controls(str(value))


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        finalize=readable,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        run_url=run_url,
        trials_url=trials_url,
        trial_url=trial_url,
        diff_url=diff_url,
        matrix_url=matrix_url,
        trends_url=trends_url,
        query_string=query_string,
        diff_lines=diff_lines,
        timeline=timeline,
        symbols=VERDICT_SYMBOLS,
        Verdict=Verdict,
    )
    env.filters.update(
        percent=f.percent,
        interval=f.interval,
        seconds=f.seconds,
        cost=f.cost,
        number=f.number,
        when=when,
        pretty_json=pretty_json,
        error_text=f.error_text,
    )
    return env


TEMPLATE_ENV = _environment()


def warm_up() -> None:
    """Do now what a page's first view would otherwise wait for: compile every template and
    import numpy (the compare and health pages' statistics). Run in the background while the
    server is starting; a failure here is only a slower first view."""
    for name in TEMPLATE_ENV.list_templates(extensions=["html"]):
        TEMPLATE_ENV.get_template(name)
    with contextlib.suppress(ImportError):
        import numpy  # noqa: F401


def render(
    request: Request, template: str, *, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """The page `template` (a file in templates/) filled with `context`.

    Every template also gets `request`, `store_url`, `csrf_token()` and `refresh` (seconds
    between reloads, or None)."""
    context.setdefault("refresh", None)
    page = TEMPLATE_ENV.get_template(template).render(
        request=request,
        store_url=store_of(request).url,
        csrf_token=lambda: csrf_token(request),
        **context,
    )
    return HTMLResponse(page, status_code=status_code)


def message_page(request: Request, status: int, message: str) -> HTMLResponse:
    return render(request, "message.html", status_code=status, code=status, message=message)
