"""Which trial an HTTP request or a socket belongs to, and whether it may leave the machine.

The hook on `httpx` / `httpx2` is process-wide, so every request asks here whose it is. The
trial's transcript recorder is a context variable: the event loop's tasks and trialkit's worker
threads carry it. Plain `threading.Thread`s and `ThreadPoolExecutor` workers do not, so, once
capture is installed, a thread started inside a trial and a function submitted to an executor
from one take that trial's scope with them (the scope only, not the caller's other context
variables). A thread started by the run's own code (outside every trial) is the run's; a thread
started before the run or by such a thread is *foreign*: its requests are never attributed to a
trial, and under `--offline` its connections off this machine are refused all the same, while
any `--offline` trial is in flight (see `guard_sockets`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from trialkit.capture._loopback import is_address, is_loopback, listed
from trialkit.models.context import CallRole, ModelSettings, current_role, current_settings
from trialkit.transcript import TranscriptRecorder, context_recorder

__all__ = [
    "OfflineRefused",
    "Scope",
    "active",
    "carry_into_threads",
    "check_offline",
    "collect_children",
    "guard_sockets",
    "is_loopback",
    "offline_config",
    "offline_coverage",
    "offline_run",
    "own_calls",
    "trial_ended",
    "trial_started",
]

_own: ContextVar[bool] = ContextVar("trialkit_own_model_call", default=False)
_inherited = threading.local()
_THREAD_ATTR = "_trialkit_scope"
_UNSET: Any = object()


class _Foreign:
    """Whose a thread is when it is neither a trial's nor the run's own."""


_FOREIGN = _Foreign()


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
    scope = _whose()
    return None if isinstance(scope, _Foreign) else scope


def _whose() -> Scope | _Foreign | None:
    """The trial's scope; `None` for the run's own code; `_FOREIGN` for a thread that is
    neither (started before the run, by a foreign thread, or left over from a finished trial)."""
    recorder = context_recorder()
    if recorder is not False:  # the context says: a trial's, or the run's
        if recorder is None:
            return None
        return Scope(recorder, current_settings(), current_role(), _own.get())
    scope: Scope | _Foreign | None = getattr(_inherited, "scope", _UNSET)
    if scope is _UNSET:  # a thread of its own, not running an executor's job
        scope = getattr(threading.current_thread(), _THREAD_ATTR, _FOREIGN)
    if isinstance(scope, Scope) and scope.recorder.closed:
        return _FOREIGN
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
        f"{recorder.task_id!r}, trial {recorder.trial_index}: {_ONLY_HERE}"
    )
    _fail([recorder], error)
    return error


_ONLY_HERE = "only this machine may be reached; record the calls first, or run without --offline"


# -- the offline trials in flight, and what their forked children refused ----------------------

_flight_lock = threading.Lock()
_in_flight: dict[int, TranscriptRecorder] = {}
"""Serial number -> recorder of each `--offline` trial running in this process."""
_serials: dict[int, int] = {}
"""id(recorder) -> serial number (a forked child finds its trial's number here)."""
_numbers = itertools.count(1)
_channel: tuple[int, int, int] | None = None
"""(pid, read end, write end) of the pipe forked children report refusals on."""
_runs: list[list[str]] = []
"""Of each `offline_run` open in this process: refusals no trial was in flight for."""


def trial_started(recorder: TranscriptRecorder) -> None:
    """Count the trial of `recorder` among those in flight when it runs under `--offline`:
    a refusal in a foreign thread goes to every trial in flight, and a refusal in a child
    forked from the trial goes to the trial when it ends (`collect_children`)."""
    if not current_settings().offline:
        return
    global _channel
    with _flight_lock:
        number = next(_numbers)
        _in_flight[number] = recorder
        _serials[id(recorder)] = number
        if _channel is None or _channel[0] != os.getpid():
            read, write = os.pipe()  # not inherited by programs a child runs (close-on-exec)
            os.set_blocking(read, False)
            os.set_blocking(write, False)
            _channel = (os.getpid(), read, write)


def trial_ended(recorder: TranscriptRecorder) -> None:
    """The trial of `recorder` is over: collect its children's refusals, forget it."""
    collect_children()
    with _flight_lock:
        number = _serials.pop(id(recorder), None)
        if number is not None:
            _in_flight.pop(number, None)


def collect_children() -> None:
    """Make what children forked from trials refused (and reported before now) errors of their
    trials, which may have gone on as if nothing happened. A child reports as it refuses, so a
    trial that waited for its child learns of it here."""
    with _flight_lock:
        if _channel is None or _channel[0] != os.getpid():
            return
        data = bytearray()
        while True:
            try:
                chunk = os.read(_channel[1], 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        reports = [line.split(b"\t", 1) for line in bytes(data).splitlines()]
        found = [
            (_in_flight.get(int(number)), message)
            for number, message in (r for r in reports if len(r) == 2 and r[0].isdigit())
        ]
    for recorder, message in found:
        if recorder is not None:
            recorder.fail(OfflineRefused(message.decode("utf-8", "replace")))


def _fail(recorders: list[TranscriptRecorder], error: OfflineRefused) -> None:
    """Fail each trial of `recorders` with `error`; from a forked child, through the pipe its
    parent collects (the child's own recorders are copies nobody reads)."""
    for recorder in recorders:
        recorder.fail(error)
    channel = _channel
    if channel is None or channel[0] == os.getpid():
        return
    message = str(error).replace("\n", " ").encode("utf-8", "replace")[:3000]
    for recorder in recorders:
        number = _serials.get(id(recorder))
        if number is not None:  # one write under PIPE_BUF: never mixed with another child's
            with contextlib.suppress(OSError):  # full or closed: the child's error still stands
                os.write(channel[2], b"%d\t%s\n" % (number, message))


@contextmanager
def offline_run(settings: ModelSettings, refused: list[str]) -> Iterator[None]:
    """The window of a run: under `--offline` (`settings.offline`) a foreign thread's
    connection off this machine is refused even between trials, and added to `refused` when
    no trial was in flight to be told of it."""
    if not settings.offline:
        yield
        return
    with _flight_lock:
        _runs.append(refused)
    try:
        yield
    finally:
        with _flight_lock:
            _runs.remove(refused)


def offline_config(offline: bool) -> dict[str, Any]:
    """What a stored run's config says of `--offline`: whether it was on, and, when it was,
    whether this process is confined in a network namespace and what that covers."""
    if not offline:
        return {"offline": False}
    confined, note = offline_coverage()
    return {"offline": True, "offline_confined": confined, "offline_note": note}


def offline_coverage() -> tuple[bool, str]:
    """Whether `--offline` confines this process in a loopback-only network namespace, and
    what it covers, in one line (for the start of a run and the stored run)."""
    from trialkit.sandbox import netns

    namespace = netns.entered()
    if namespace is not None:
        user = " in a user namespace of its own" if namespace.user_namespace else ""
        return True, (
            "this process and every program it runs are in a loopback-only network namespace"
            f"{user} (this machine's loopback TCP services bridged in); Python sockets and "
            "name lookups are refused too"
        )
    why = netns.why_not() or "only `trialkit run` and `trialkit regrade` enter one"
    return False, (
        f"no network namespace ({why}): Python sockets and name lookups in this process are "
        "refused, but subprocesses, os.system, ctypes and C extensions are not confined and "
        "can reach the network"
    )


# -- --offline below HTTP: every socket a trial opens ----------------------------------------

_guarded = False
_RAW_FAMILIES = frozenset({socket.AF_INET, socket.AF_INET6})
_LOCAL_FAMILIES = frozenset(
    f for f in (getattr(socket, "AF_UNIX", None), getattr(socket, "AF_NETLINK", None)) if f
)
_PACKET = getattr(socket, "AF_PACKET", None)


def guard_sockets() -> None:
    """Refuse, under `--offline`, whatever would leave the machine from a socket of any
    library (`requests`, `urllib`, `aiohttp`, raw sockets), not only from the HTTP clients
    trialkit wraps: an audit hook on the socket events that carry an address (`connect`, and
    `sendto` / `sendmsg`, so UDP and TCP fast open too), on name and address lookups of names
    not answered from the hosts file, and on raw and packet sockets (idempotent; it costs a
    dictionary lookup per audited event, and nothing outside `--offline` runs)."""
    global _guarded
    with _install_lock:
        if _guarded:
            return
        _guarded = True
        sys.addaudithook(_audit)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    describe = _EVENTS.get(event)
    if describe is None:
        return
    what = describe(args)
    if what is None:
        return
    scope = _whose()
    if scope is None:  # the run's own code: not a trial's request
        return
    if isinstance(scope, Scope):
        if not scope.settings.offline:
            return
        recorder = scope.recorder
        error = OfflineRefused(
            f"--offline refused {what} from task {recorder.task_id!r}, trial "
            f"{recorder.trial_index}: {_ONLY_HERE}"
        )
        _fail([recorder], error)
        raise error
    with _flight_lock:
        trials = list(_in_flight.values())
        if not trials and not _runs:
            return  # no --offline run here
        name = threading.current_thread().name
        error = OfflineRefused(
            f"--offline refused {what} from thread {name!r}, which belongs to no trial (it was "
            "started before the run, or outside every trial): every trial in flight is an "
            f"error, since any of them may have asked for it; {_ONLY_HERE}"
        )
        if not trials:
            for refused in _runs:
                refused.append(str(error))
    _fail(trials, error)
    raise error


def _destination(sock: Any, address: Any) -> str | None:
    """What `address` (of a socket of `sock`'s family) reaches off this machine, or `None`."""
    family = getattr(sock, "family", None)
    if family in _RAW_FAMILIES:
        if not (isinstance(address, tuple) and address and isinstance(address[0], str | bytes)):
            return None  # not an address the call will take: it raises by itself
        host = address[0]
        if is_loopback(host):
            return None
        shown = host.decode("ascii", "replace") if isinstance(host, bytes) else host
        port = f":{address[1]}" if len(address) > 1 else ""
        return f"{shown}{port}"
    if family in _LOCAL_FAMILIES or address is None:
        return None
    return f"an {_family_name(family)} address {address!r}"


def _family_name(family: Any) -> str:
    try:
        return socket.AddressFamily(family).name
    except ValueError:
        return f"family {family}"


def _on_connect(args: tuple[Any, ...]) -> str | None:
    where = _destination(args[0], args[1])
    return None if where is None else f"a connection to {where}"


def _on_send(args: tuple[Any, ...]) -> str | None:
    where = _destination(args[0], args[1])
    if where is None:
        return None
    kind = getattr(args[0], "type", None)
    if kind == socket.SOCK_STREAM:  # sendto/sendmsg with MSG_FASTOPEN connects
        return f"a connection to {where} (TCP fast open)"
    return f"{'a datagram' if kind == socket.SOCK_DGRAM else 'a packet'} sent to {where}"


def _on_lookup(args: tuple[Any, ...]) -> str | None:
    host = args[0]
    if not isinstance(host, str | bytes) or not host or is_loopback(host):
        return None
    shown = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    if is_address(shown):  # looked up only to be connected to
        port = f":{args[1]}" if len(args) > 1 and args[1] not in (None, "", b"") else ""
        return f"a connection to {shown}{port}"
    return f"a lookup of {shown} (a name the hosts file does not map to loopback goes to DNS)"


def _on_reverse(args: tuple[Any, ...]) -> str | None:
    address = args[0][0] if isinstance(args[0], tuple) and args[0] else args[0]
    if not isinstance(address, str | bytes) or listed(address):
        return None
    shown = address.decode("ascii", "replace") if isinstance(address, bytes) else address
    return f"a reverse lookup of {shown} (not in the hosts file)"


def _on_new(args: tuple[Any, ...]) -> str | None:
    family, kind = args[1], args[2]
    if _PACKET is not None and family == _PACKET:
        return "a packet socket (AF_PACKET)"
    if family in _RAW_FAMILIES and isinstance(kind, int) and kind & 0xF == socket.SOCK_RAW:
        return "a raw socket (SOCK_RAW)"
    return None


_EVENTS: dict[str, Callable[[tuple[Any, ...]], str | None]] = {
    "socket.connect": _on_connect,
    "socket.sendto": _on_send,
    "socket.sendmsg": _on_send,
    "socket.getaddrinfo": _on_lookup,
    "socket.gethostbyname": _on_lookup,
    "socket.gethostbyaddr": _on_reverse,
    "socket.getnameinfo": _on_reverse,
    "socket.__new__": _on_new,
}


# -- carrying the scope into threads ---------------------------------------------------------

_installed = False
_install_lock = threading.Lock()


def carry_into_threads() -> None:
    """Make threads and executor jobs started inside a trial belong to it, and those started
    by the run's own code the run's (idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _installed = True
        start = threading.Thread.start
        submit: Any = ThreadPoolExecutor.submit

        @functools.wraps(start)
        def start_in_scope(self: threading.Thread) -> None:
            scope = _whose()
            if not isinstance(scope, _Foreign):  # a trial's scope, or None: the run's
                setattr(self, _THREAD_ATTR, scope)
            start(self)

        @functools.wraps(submit)
        def submit_in_scope(
            self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
        ) -> Future[Any]:
            # every job says whose it is: a pool's threads serve many trials, and none
            job: Future[Any] = submit(
                self, functools.partial(_run_in, _whose(), fn), *args, **kwargs
            )
            return job

        threading.Thread.start = start_in_scope  # type: ignore[method-assign]
        ThreadPoolExecutor.submit = submit_in_scope  # type: ignore[method-assign, assignment]


def _run_in(
    scope: Scope | _Foreign | None, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    previous = getattr(_inherited, "scope", _UNSET)
    _inherited.scope = scope
    try:
        return fn(*args, **kwargs)
    finally:
        _inherited.scope = previous


def _renew_lock() -> None:
    """In a forked child: the lock may have been held by a thread that does not exist there."""
    global _flight_lock
    _flight_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_renew_lock)
