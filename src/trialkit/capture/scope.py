"""Which trial an HTTP request belongs to, and whether it may leave the machine.

The hook on `httpx` / `httpx2` is process-wide, so every request asks here whose it is. The
trial's transcript recorder is a context variable: the event loop's tasks and trialkit's worker
threads carry it. Plain `threading.Thread`s and `ThreadPoolExecutor` workers do not, so, once
capture is installed, a thread started inside a trial and a function submitted to an executor
from one take that trial's scope with them (the scope only, not the caller's other context
variables). A thread started outside every trial, such as a trace exporter's, belongs to none:
its requests are never attributed to a trial.
"""

from __future__ import annotations

import functools
import ipaddress
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from trialkit.models.context import CallRole, ModelSettings, current_role, current_settings
from trialkit.transcript import TranscriptRecorder, context_recorder

_own: ContextVar[bool] = ContextVar("trialkit_own_model_call", default=False)
_inherited = threading.local()
_THREAD_ATTR = "_trialkit_scope"
_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class Scope:
    """The trial a request is made in, with the run's settings and the caller's role."""

    recorder: TranscriptRecorder
    settings: ModelSettings
    role: CallRole
    own: bool
    """Made by trialkit's own model layer, which records the call itself."""


class OfflineRefused(ConnectionError):
    """`--offline` refused a request to a host that is not this machine (a trial error)."""


def active() -> Scope | None:
    """The scope of the trial this request is made in, or `None` outside every trial."""
    recorder = context_recorder()
    if recorder is not False:  # the context says: a trial's, or none
        if recorder is None:
            return None
        return Scope(recorder, current_settings(), current_role(), _own.get())
    scope: Scope | None = getattr(_inherited, "scope", _UNSET)
    if scope is _UNSET:  # a thread of its own, not running an executor's job
        scope = getattr(threading.current_thread(), _THREAD_ATTR, None)
    if scope is None or scope.recorder.closed:
        return None
    return scope


@contextmanager
def own_calls() -> Iterator[None]:
    """Mark the requests made inside as trialkit's own model layer's, not to count twice."""
    token = _own.set(True)
    try:
        yield
    finally:
        _own.reset(token)


def check_offline(scope: Scope, method: str, url: str, host: str) -> OfflineRefused | None:
    """Under `--offline`, the refusal of a request off this machine (the trial fails with
    it); `None` when the request may go."""
    if not scope.settings.offline or is_loopback(host):
        return None
    recorder = scope.recorder
    error = OfflineRefused(
        f"--offline refused a request to {host} ({method} {url}) from task "
        f"{recorder.task_id!r}, trial {recorder.trial_index}: only this machine may be "
        "reached; record the calls first, or run without --offline"
    )
    recorder.fail(error)
    return error


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine: `localhost` or a loopback address (never resolved, so
    checking sends nothing)."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# -- --offline below HTTP: every socket a trial opens ----------------------------------------

_guarded = False


def guard_sockets() -> None:
    """Refuse, under `--offline`, a trial's connection or name lookup of another host made by
    any library (`requests`, `urllib`, `aiohttp`, raw sockets), not only by HTTP clients
    trialkit wraps: an audit hook on `socket.connect` and `socket.getaddrinfo` (idempotent;
    it costs a string comparison per audited event, and nothing outside `--offline` trials)."""
    global _guarded
    with _install_lock:
        if _guarded:
            return
        _guarded = True
        sys.addaudithook(_audit)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        address = args[1]
        if not (isinstance(address, tuple) and address and isinstance(address[0], str)):
            return  # a Unix socket, or another family: stays on this machine
        host = address[0]
    elif event == "socket.getaddrinfo":
        host = args[0]
        if not isinstance(host, str | bytes) or not host:
            return
        host = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    else:
        return
    scope = active()
    if scope is None or is_loopback(host):
        return
    refusal = check_offline(scope, "connect", host, host)
    if refusal is not None:
        raise refusal


# -- carrying the scope into threads ---------------------------------------------------------

_installed = False
_install_lock = threading.Lock()


def carry_into_threads() -> None:
    """Make threads and executor jobs started inside a trial belong to it (idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _installed = True
        start = threading.Thread.start
        submit: Any = ThreadPoolExecutor.submit

        @functools.wraps(start)
        def start_in_scope(self: threading.Thread) -> None:
            scope = active()
            if scope is not None:
                setattr(self, _THREAD_ATTR, scope)
            start(self)

        @functools.wraps(submit)
        def submit_in_scope(
            self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
        ) -> Future[Any]:
            # every job says whose it is: a pool's threads serve many trials, and none
            job: Future[Any] = submit(
                self, functools.partial(_run_in, active(), fn), *args, **kwargs
            )
            return job

        threading.Thread.start = start_in_scope  # type: ignore[method-assign]
        ThreadPoolExecutor.submit = submit_in_scope  # type: ignore[method-assign, assignment]


def _run_in(scope: Scope | None, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    previous = getattr(_inherited, "scope", _UNSET)
    _inherited.scope = scope
    try:
        return fn(*args, **kwargs)
    finally:
        _inherited.scope = previous
