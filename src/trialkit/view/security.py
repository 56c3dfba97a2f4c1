"""What keeps the viewer safe to run on your own machine.

`SecurityMiddleware` wraps the whole application:

- it answers only requests whose `Host` is one of the allowed ones (on a loopback address:
  that address or `localhost`, with the port), so a web page cannot reach the viewer through
  a DNS name of its own that points at 127.0.0.1 (DNS rebinding);
- every response carries `HEADERS`: a strict Content-Security-Policy (scripts and styles only
  from the viewer's own static files, nothing from elsewhere), no sniffing, no referrer, no
  framing, no caching;
- HTML and JSON bodies pass through `trialkit.secrets` so no secret is served, even from rows
  stored before trialkit redacted them (other content types pass as they are: a streamed
  body must be redacted by the route that makes it);
- it gives each browser a session cookie, the base of the CSRF token of `csrf_token`;
- a route that raised is answered with a 500 page rather than a dropped connection.

Requests that change something (a later POST route) must carry the session's CSRF token:
wrap the endpoint in `csrf_protected`, and put `csrf_token(request)` in the form as the
`csrf_token` field (or send it as the `X-CSRF-Token` header).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, Iterable
from http.cookies import SimpleCookie
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
SAFE_METHODS = frozenset({"GET", "HEAD"})
SESSION_COOKIE = "trialkit_view_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
REDACTED_TYPES = ("text/html", "application/json")

ErrorPage = Callable[[Scope, int, str], Response]
"""How the application answers an error: (scope, status, message) → the response."""


def csrf_token(request: Request) -> str:
    """The CSRF token of this browser's session, for a form that changes something."""
    secret: bytes = request.app.state.csrf_secret
    session: str = request.scope.get("state", {}).get("session", "")
    return hmac.new(secret, session.encode(), hashlib.sha256).hexdigest()


async def check_csrf(request: Request) -> None:
    """Refuse (403) a request that changes something without its session's CSRF token, or
    that a page of another site sent."""
    if request.method in SAFE_METHODS:
        return
    # A browser sends `Origin: null` for the viewer's own forms (its Referrer-Policy is
    # no-referrer): that proves nothing either way, and the token below decides.
    origin = request.headers.get("origin")
    elsewhere = origin not in (None, "null") and (
        origin.split("://", 1)[-1] != request.headers.get("host")
    )
    if elsewhere or request.headers.get("sec-fetch-site") in ("cross-site", "same-site"):
        raise HTTPException(403, "this request came from another site")
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        value = (await request.form()).get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not request.cookies.get(SESSION_COOKIE) or not sent:
        raise HTTPException(403, "this request needs the page's CSRF token: reload the page")
    if not hmac.compare_digest(sent, csrf_token(request)):
        raise HTTPException(403, "this request's CSRF token is not this session's: reload")


Endpoint = Callable[[Request], Awaitable[Response]]


def csrf_protected(endpoint: Endpoint) -> Endpoint:
    """`endpoint` (async), answering only requests that pass `check_csrf`."""

    @functools.wraps(endpoint)
    async def guarded(request: Request) -> Response:
        await check_csrf(request)
        return await endpoint(request)

    return guarded


def host_allowed(scope: Scope, allowed: frozenset[str] | None) -> bool:
    if allowed is None:
        return True
    return _header(scope, b"host") in allowed


class SecurityMiddleware:
    """The host check, the security headers, redaction, the session cookie and 500 pages."""

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: Iterable[str] | None, error_page: ErrorPage
    ) -> None:
        self.app = app
        self.allowed = None if allowed_hosts is None else frozenset(allowed_hosts)
        self.error_page = error_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not host_allowed(scope, self.allowed):
            why = "this viewer answers only on its own loopback address"
            await _Answer(send, scope, None).respond(self.error_page(scope, 403, why))
            return
        session = _session(scope)
        new_session = None if session else secrets.token_urlsafe(32)
        scope.setdefault("state", {})["session"] = session or new_session
        answer = _Answer(send, scope, new_session)
        try:
            await self.app(scope, receive, answer.send)
        except Exception as exc:  # a page that cannot be made must not stop the viewer
            if answer.started:
                raise
            why = f"{type(exc).__name__}: {exc}"
            await answer.respond(self.error_page(scope, 500, why))


class _Answer:
    """Sends a response with the security headers, its HTML or JSON body redacted."""

    def __init__(self, send: Send, scope: Scope, new_session: str | None) -> None:
        self._send = send
        self._head = scope.get("method") == "HEAD"
        self._new_session = new_session
        self._start: Message | None = None
        self._chunks: list[bytes] = []
        self._buffered = False
        self.started = False

    async def respond(self, response: Response) -> None:
        async def nothing() -> Message:
            return {"type": "http.disconnect"}

        await response({"type": "http", "method": "GET"}, nothing, self.send)

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            headers = [
                (k, v)
                for k, v in message.get("headers", [])
                if k.decode("latin-1").title() not in HEADERS
            ]
            headers += [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
            if self._new_session is not None:
                cookie = f"{SESSION_COOKIE}={self._new_session}; Path=/; HttpOnly; SameSite=Strict"
                headers.append((b"set-cookie", cookie.encode()))
            self._start = {**message, "headers": headers}
            content_type = _value(headers, b"content-type")
            self._buffered = content_type.startswith(REDACTED_TYPES)
            if not self._buffered:
                await self._send(self._start)
            return
        if message["type"] != "http.response.body" or not self._buffered:
            await self._send(message)
            return
        self._chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        await self._flush()

    async def _flush(self) -> None:
        from trialkit.secrets import redact, redact_json

        assert self._start is not None
        headers = self._start["headers"]
        body = b"".join(self._chunks)
        if body:
            charset = "utf-8"
            text = body.decode(charset, errors="replace")
            is_json = _value(headers, b"content-type").startswith("application/json")
            body = (redact_json if is_json else redact)(text).encode(charset)
        headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
        if body or not self._head:
            headers.append((b"content-length", str(len(body)).encode()))
        else:  # HEAD: the length the GET would have, which the route already said
            headers.append((b"content-length", _value(self._start["headers"], b"content-length")))
        await self._send({**self._start, "headers": headers})
        await self._send({"type": "http.response.body", "body": b"" if self._head else body})


def _value(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    return next((v.decode("latin-1") for k, v in headers if k.lower() == name), "")


def _header(scope: Scope, name: bytes) -> str:
    raw: list[tuple[bytes, bytes]] = scope.get("headers", [])
    return _value(raw, name)


def _session(scope: Scope) -> str | None:
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(_header(scope, b"cookie"))
    except Exception:  # a malformed cookie header is no session
        return None
    morsel = cookies.get(SESSION_COOKIE)
    value: Any = None if morsel is None else morsel.value
    return value if isinstance(value, str) and 20 <= len(value) <= 100 else None
