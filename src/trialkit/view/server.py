"""`trialkit view`: a local, read-only web viewer of the store.

The standard library's threading HTTP server, on 127.0.0.1 by default. Pages:

| path | what |
|---|---|
| `/` | the latest runs |
| `/runs/RUN` | the run's HTML report, its trial numbers linked to their transcripts |
| `/runs/RUN/trials[?verdict=&task=]` | the run's trials, filtered |
| `/runs/RUN/trials/TASK/N` | one trial: turns, tool and model calls, outcome, scores, error |
| `/diff?task=TASK&a=RUN&b=RUN[&trial=N]` | a task's trial in two runs, turn by turn |
| `/compare?a=RUN&b=RUN[&c=RUN…]` | runs of a suite side by side, with significance |
| `/api/runs`, `/api/runs/RUN`, `/api/runs/RUN/trials/TASK/N` | the same as JSON |

RUN is an id, a unique id prefix or a run name, as on the command line; TASK is URL-encoded.
It only reads: GET and HEAD are served, every other method gets 405 (501 for one HTTP does
not define), with the same security headers as every page. On a loopback address it
answers only requests whose `Host` names that address (or `localhost`), so a web page in the
browser cannot reach it through a DNS name of its own (DNS rebinding). Pages carry a
Content-Security-Policy that allows no script and nothing from elsewhere.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from trialkit.reports.html import CSP
from trialkit.store import AmbiguousRun, RunNotFound, Store, TrialNotFound
from trialkit.view import pages

RUNS_LISTED = 200
MAX_TRIAL_INDEX = 2**31 - 1
"""The largest trial number a store holds (a 32-bit integer column); a larger one in an
address is refused before it reaches the database, whose driver would fail on it."""
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass
class Response:
    status: int
    body: str
    content_type: str = "text/html; charset=utf-8"


class _IPv6Server(ThreadingHTTPServer):
    """On an IPv6 address such as ::1 (the standard library's server listens on IPv4)."""

    address_family = socket.AF_INET6


class NotFound(LookupError):
    """Nothing at this address: 404, with a message."""


class BadRequest(ValueError):
    """The address is missing something or has something wrong: 400, with a message."""


class ViewServer:
    """The viewer of one store, listening on `host`:`port` (0: a free port).

    `serve_forever()` blocks (the CLI); `start()` serves from a background thread (tests,
    notebooks) until `close()`. Reads go through one lock: the store is shared.
    """

    def __init__(self, store: Store, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.store = store
        self.lock = threading.Lock()
        server = _IPv6Server if ":" in host else ThreadingHTTPServer
        self.httpd = server((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def host(self) -> str:
        return str(self.httpd.server_address[0])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def allowed_hosts(self) -> set[str] | None:
        """The `Host` headers answered; None (any) when it listens beyond loopback."""
        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            loopback = self.host == "localhost"
        if not loopback:
            return None
        names = {self.host, "localhost", "127.0.0.1", "[::1]"}
        if ":" in self.host:
            names.add(f"[{self.host}]")
        return {f"{name}:{self.port}" for name in names}

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def start(self) -> ViewServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self.httpd.server_close()

    def __enter__(self) -> ViewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- routing ---------------------------------------------------------------------------

    def respond(self, target: str) -> Response:
        """The response to GET `target` (a path with its query)."""
        parts = urlsplit(target)
        segments = [unquote(s) for s in parts.path.split("/") if s]
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            with self.lock:
                if segments[:1] == ["api"]:
                    body = json.dumps(self._api(segments[1:]), indent=2)
                    return Response(200, body + "\n", "application/json")
                return Response(200, self._page(segments, query))
        except (NotFound, RunNotFound, TrialNotFound) as exc:
            return self._error(HTTPStatus.NOT_FOUND, _message(exc), segments)
        except (BadRequest, AmbiguousRun) as exc:
            return self._error(HTTPStatus.BAD_REQUEST, _message(exc), segments)
        except Exception as exc:  # a page that cannot be made must not stop the viewer
            why = f"{type(exc).__name__}: {exc}"
            return self._error(HTTPStatus.INTERNAL_SERVER_ERROR, why, segments)

    def _page(self, segments: list[str], query: dict[str, str]) -> str:
        store = self.store
        match segments:
            case []:
                return pages.runs_page(store.list_runs(limit=RUNS_LISTED), store.url)
            case ["runs", ref]:
                return pages.run_page(store, store.resolve_run(ref))
            case ["runs", ref, "trials"]:
                verdict = query.get("verdict") or None
                if verdict is not None and verdict not in {"pass", "fail", "error", "unknown"}:
                    raise BadRequest(f"verdict {verdict!r}: use pass, fail, error or unknown")
                run_id = store.resolve_run(ref)
                return pages.trials_page(
                    store, run_id, verdict=verdict, task=query.get("task") or None
                )
            case ["runs", ref, "trials", task_id, index]:
                return pages.trial_page(store, store.resolve_run(ref), task_id, _index(index))
            case ["diff"]:
                task_id = _required(query, "task")
                a, b = _required(query, "a"), _required(query, "b")
                runs = store.resolve_run(a), store.resolve_run(b)
                return pages.diff_page(store, task_id, runs, _index(query.get("trial", "0")))
            case ["compare"]:
                refs = [query[k] for k in sorted(query) if len(k) == 1 and query[k]]
                if len(refs) < 2:
                    raise BadRequest("compare needs two runs: /compare?a=RUN&b=RUN")
                from trialkit.analysis.compare import CompareError

                try:
                    return pages.compare_page(store, refs)
                except CompareError as exc:
                    raise BadRequest(str(exc)) from exc
        raise NotFound(f"no page at /{'/'.join(segments)}")

    def _api(self, segments: list[str]) -> Any:
        store = self.store
        match segments:
            case ["runs"]:
                return [run.model_dump(mode="json") for run in store.list_runs(limit=RUNS_LISTED)]
            case ["runs", ref]:
                return json.loads(store.load_report(store.resolve_run(ref)).to_json())
            case ["runs", ref, "trials", task_id, index]:
                trial = store.load_trial(store.resolve_run(ref), task_id, _index(index))
                return trial.model_dump(mode="json")
        raise NotFound(f"no API at /api/{'/'.join(segments)}")

    def _error(self, status: HTTPStatus, message: str, segments: list[str]) -> Response:
        if segments[:1] == ["api"]:
            body = json.dumps({"error": message, "status": status.value}) + "\n"
            return Response(status.value, body, "application/json")
        return Response(status.value, pages.message_page(status.value, message))


def _message(exc: BaseException) -> str:
    return str(exc).strip("'\"")


def _index(value: str) -> int:
    if not value.isascii() or not value.isdigit():
        raise BadRequest(f"trial number {value!r}: expected 0, 1, 2…")
    # Compared as text first: int() refuses more than 4,300 digits.
    if len(value) > len(str(MAX_TRIAL_INDEX)) or int(value) > MAX_TRIAL_INDEX:
        shown = value if len(value) <= 20 else f"{value[:20]}…"
        raise BadRequest(f"trial number {shown}: too large (at most {MAX_TRIAL_INDEX})")
    return int(value)


def _required(query: dict[str, str], name: str) -> str:
    if not query.get(name):
        raise BadRequest(f"the address needs ?{name}=")
    return query[name]


def _handler(server: ViewServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "trialkit-view"
        sys_version = ""

        def do_GET(self) -> None:
            self._answer(with_body=True)

        def do_HEAD(self) -> None:
            self._answer(with_body=False)

        def _refuse(self) -> None:
            self._send(Response(405, pages.message_page(405, "the viewer only reads")), True)

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse

        def _answer(self, *, with_body: bool) -> None:
            allowed = server.allowed_hosts()
            if allowed is not None and self.headers.get("Host", "") not in allowed:
                why = "this viewer answers only on its own loopback address"
                self._send(Response(403, pages.message_page(403, why)), with_body)
                return
            self._send(server.respond(self.path), with_body)

        def _send(self, response: Response, with_body: bool) -> None:
            from trialkit.secrets import redact, redact_json

            # No secret is served, even from rows stored before trialkit redacted them.
            json_body = response.content_type == "application/json"
            body = (redact_json if json_body else redact)(response.body).encode("utf-8")
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(body)))
            if response.status == 405:
                self.send_header("Allow", "GET, HEAD")
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def end_headers(self) -> None:
            """Every response carries the security headers, the standard library's own errors
            too (an unknown method, a malformed request)."""
            for name, value in HEADERS.items():
                self.send_header(name, value)
            super().end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a viewer on your own machine needs no access log."""

    return Handler
