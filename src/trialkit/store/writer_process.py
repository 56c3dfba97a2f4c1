"""Trials saved by a process of their own, so the store's work leaves the run's interpreter.

Saving a trial (its rows, its search documents, redacting every string, the SQL) costs about
0.15 ms of CPU. In a thread of the run's own process that time is taken from the event loop,
which shares the interpreter's lock with it: on a latency-bound run it was most of what trialkit
added to each model call. A large run against a store in a file or a database server therefore
hands its finished trials, as JSON, to a writer process that opens the same store and saves them
there, on another core. The run's process still creates and finishes the run; only the trials
go through the writer.

The wire: the parent writes a set-up line (the store's URL, and the secrets it knows), then for
each batch a header line and one line of `Trial.model_dump_json()` per trial (pydantic escapes
newlines inside strings, so a trial never spans lines); the writer answers each batch with one
line, `{"saved": N}` or `{"error": ..., "store": true|false}`. Secrets go through the pipe,
never on a command line, into the environment or onto disk.

Nothing is lost when the writer cannot do its part: a batch it could not read, or every batch
once it has died, is saved by the parent itself (a batch is one transaction, and saving a trial
again replaces it). An error of the store itself (locked, full, refused) is raised in the parent
as the `StoreError` it was, as saving there would have raised it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from trialkit.store.errors import StoreError

if TYPE_CHECKING:
    from trialkit.store.store import Store
    from trialkit.trial import Trial

MODE_ENV_VAR = "TRIALKIT_STORE_WRITER"
"""`process`, `thread` or `auto` (the default): where a run's trials are saved."""
MIN_TRIALS = 1_000
"""With `auto`, runs planning at least this many trials use a writer process: below it, the
process's start (about 0.4 s of CPU, on another core) is not worth it."""
STOP_TIMEOUT_S = 10.0
"""How long the writer may take to exit once its input is closed."""
ENCODE_SLICE_S = 0.005
"""Encoding a batch of big trials gives the event loop a turn this often."""
PIPE_BYTES = 1 << 20
"""The pipe to the writer is widened to this (a batch of 256 small trials is ~0.8 MB)."""

_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder `trialkit` is imported from: put first on the writer's path, so it runs this
code, whatever the run's process added to its own path."""
_ENTRY = (
    f"import sys; sys.path.insert(0, {_ROOT!r}); "
    "from trialkit.store.writer_process import serve; serve()"
)


def wanted(store: Store, trials: int) -> bool:
    """Whether a run of `trials` trials should save them through a writer process."""
    mode = os.environ.get(MODE_ENV_VAR, "auto").strip().lower()
    if mode == "thread" or store.open_url is None:  # an in-memory database: only one process
        return False
    if sys.platform == "win32":  # its pipes cannot be waited for by the event loop
        return False
    return mode == "process" or trials >= MIN_TRIALS


class WriterProcess:
    """A writer process for one run's trials: `save_trials` as `Store.save_trials` does it.

    Started at once, so its imports overlap the run's start; batches that come before it is
    ready are saved by the parent (in a thread). Saving a batch is a coroutine of the run's
    event loop, one batch at a time: it encodes the trials, writes them to the pipe without
    blocking and waits for the answer. No thread takes turns with the loop for the
    interpreter (each turn cost a busy loop up to its switch interval, and a batch took
    dozens of them, one per buffer written); instead, workers whose trials never wait let the
    loop run while the batch needs it (`needs_loop`).
    """

    def __init__(self, store: Store) -> None:
        assert store.open_url is not None
        self.store = store
        self._sent_secrets: frozenset[str] | None = None
        self._ready = False
        self._dead: str | None = None
        """Why the writer is gone (the parent saves from then on), or `None` while it works."""
        self._received = bytearray()
        """What the writer answered that is not yet a whole line."""
        self._waiting: tuple[int, bool] | None = None
        """What a batch waits on, if it does: (a pipe's fd, whether for room to write in it
        rather than for its answer)."""
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-c", _ENTRY],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            self._proc = None
            self._dead = f"it could not start ({exc})"
            return
        proc = self._running()
        assert proc.stdin is not None and proc.stdout is not None
        _widen(proc.stdin.fileno())
        try:
            os.write(proc.stdin.fileno(), json.dumps({"url": store.open_url}).encode() + b"\n")
        except OSError as exc:  # it died at once: the run's process saves every batch
            self._give_up(f"it stopped reading ({exc.__class__.__name__})")
            return
        os.set_blocking(proc.stdin.fileno(), False)
        os.set_blocking(proc.stdout.fileno(), False)

    @property
    def alive(self) -> bool:
        return self._dead is None

    @property
    def needs_loop(self) -> bool:
        """Whether the batch being saved can go on if the event loop runs: the pipe has room
        for the rest of it, or its answer has come."""
        if self._waiting is None:
            return False
        fd, writing = self._waiting
        readable, writable, _ = select.select(
            [] if writing else [fd], [fd] if writing else [], [], 0
        )
        return bool(readable or writable)

    async def save_trials(self, trials: Sequence[Trial]) -> None:
        """Save `trials` through the writer, or here when it cannot take them; a `StoreError`
        when the store refused them. Not cancelled halfway: a batch sent is answered."""
        with anyio.CancelScope(shield=True):
            if self._dead is None and await self._is_ready():
                lines = await _encoded(trials)
                if lines is not None and await self._save_there(lines):
                    return
            await anyio.to_thread.run_sync(self.store.save_trials, trials)

    async def _is_ready(self) -> bool:
        """Whether the writer has opened the store (until then, batches are saved here)."""
        if not self._ready:
            try:
                if not self._answered():
                    return False  # still starting: its imports take a while
                _check(await self._answer(), "ready")
            except _Gone as gone:
                self._give_up(str(gone))
                return False
            self._ready = True
        return True

    async def _save_there(self, lines: list[bytes]) -> bool:
        """Send a batch to the writer: `True` once it is saved, `False` when the parent must
        save it; a `StoreError` when the store refused it."""
        from trialkit.secrets import known_secrets

        header: dict[str, Any] = {"trials": len(lines)}
        known = known_secrets()
        if known != self._sent_secrets:
            header["secrets"] = sorted(known)
        try:
            await self._send(b"\n".join([json.dumps(header).encode(), *lines, b""]))
            self._sent_secrets = known
            answer = _check(await self._answer(), "saved")
        except _Gone as gone:
            self._give_up(str(gone))
            return False
        if answer.get("saved") == len(lines):
            return True
        if answer.get("store"):
            raise StoreError(str(answer.get("error")))
        return False  # the writer could not read the batch: saved by the parent instead

    def _running(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise _Gone("it is not running")
        return proc

    def _answered(self) -> bool:
        """Whether an answer (or the end of the pipe) is there to read."""
        proc = self._running()
        assert proc.stdout is not None
        return b"\n" in self._received or bool(select.select([proc.stdout], [], [], 0)[0])

    async def _send(self, data: bytes) -> None:
        proc = self._running()
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await self._wait(fd, writing=True)
            except OSError as exc:
                raise _Gone(f"it stopped reading ({exc.__class__.__name__})") from None

    async def _answer(self) -> bytes:
        proc = self._running()
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while (end := self._received.find(b"\n")) < 0:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                await self._wait(fd, writing=False)
                continue
            except OSError as exc:
                raise _Gone(f"its answer could not be read ({exc.__class__.__name__})") from None
            if not chunk:
                raise _Gone(f"it ended (exit code {await anyio.to_thread.run_sync(proc.wait)})")
            self._received += chunk
        line = bytes(self._received[: end + 1])
        del self._received[: end + 1]
        return line

    async def _wait(self, fd: int, *, writing: bool) -> None:
        self._waiting = (fd, writing)
        try:
            await (anyio.wait_writable(fd) if writing else anyio.wait_readable(fd))
        finally:
            self._waiting = None

    def _give_up(self, why: str) -> None:
        self._dead = why
        self._stop(kill=True)

    def close(self) -> None:
        """Let the writer finish and exit (it has answered every batch already)."""
        self._stop(kill=False)

    def _stop(self, *, kill: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        if kill:
            proc.kill()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def _encoded(trials: Sequence[Trial]) -> list[bytes] | None:
    """One JSON line per trial (`None`: one that JSON cannot carry, which pydantic refused).
    Big trials take a while: the event loop gets a turn every `ENCODE_SLICE_S` of it."""
    lines: list[bytes] = []
    began = time.perf_counter()
    for trial in trials:
        try:
            lines.append(trial.model_dump_json().encode())
        except ValueError:
            return None
        if time.perf_counter() - began > ENCODE_SLICE_S:
            await anyio.lowlevel.checkpoint()
            began = time.perf_counter()
    return lines


def _check(line: bytes, key: str) -> dict[str, Any]:
    """The writer's answer in `line`, which must be a JSON object."""
    try:
        answer = json.loads(line)
    except ValueError:
        raise _Gone(f"it answered {line[:80]!r}") from None
    if not isinstance(answer, dict):
        raise _Gone(f"it answered {line[:80]!r}")
    if key == "ready" and answer.get("ready") is not True:
        raise _Gone(f"it could not open the store: {answer.get('error')}")
    return answer


def _widen(fd: int) -> None:
    """Let the pipe to the writer hold a whole batch (Linux: up to 1 MiB without privileges;
    elsewhere, or refused, the default), so that a batch is mostly written at once."""
    with contextlib.suppress(OSError, AttributeError, ImportError):
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


class _Gone(Exception):
    """The writer process cannot take batches any more."""


# --- the writer process -------------------------------------------------------------------


def serve(stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> None:
    """The writer's side: open the store, then save each batch and answer it, until the
    parent closes the pipe."""
    import gc
    import warnings

    from trialkit._gc import RUN_THRESHOLDS

    warnings.simplefilter("ignore")  # nobody reads this process's stderr
    source = stdin or sys.stdin.buffer
    sink = stdout or sys.stdout.buffer

    def answer(value: dict[str, Any]) -> None:
        sink.write(json.dumps(value).encode() + b"\n")
        sink.flush()

    set_up = source.readline()
    if not set_up:
        return
    from trialkit.secrets import register_secret
    from trialkit.store.store import Store
    from trialkit.trial import Trial

    try:
        store = Store(json.loads(set_up)["url"])
    except Exception as exc:  # told to the parent, which saves by itself
        answer({"ready": False, "error": f"{exc.__class__.__name__}: {exc}"})
        return
    # What the imports and the store made lives as long as the process: out of the collector's
    # way. A batch's trials are freed by reference counting; collected every batch, with the
    # default thresholds, they cost the writer five times the CPU of reading them.
    gc.freeze()
    gc.set_threshold(*RUN_THRESHOLDS)
    answer({"ready": True})
    with store:
        while header_line := source.readline():
            header = json.loads(header_line)
            register_secret(*header.get("secrets", ()))
            lines = [source.readline() for _ in range(int(header["trials"]))]
            try:
                batch = [Trial.model_validate_json(line) for line in lines]
            except ValueError as exc:
                answer({"error": f"a trial could not be read: {exc}", "store": False})
                continue
            try:
                store.save_trials(batch)
            except StoreError as exc:
                answer({"error": str(exc), "store": True})
                continue
            except Exception as exc:  # the parent saves this batch itself
                answer({"error": f"{exc.__class__.__name__}: {exc}", "store": False})
                continue
            answer({"saved": len(batch)})
