"""Trials in worker processes: the parent schedules, stores and reports; children run trials.

One Python process runs out of CPU long before a latency-bound run reaches C / L (the official
SDKs alone cost 1.5-2 ms of CPU per call). `Runner(workers=N)` starts N children
(`python -m trialkit.executors.worker`), each with its own event loop, model clients and share
of the concurrency. The parent keeps everything else: planning, the fixed or adaptive queue,
the budget, the store, exporters, progress, resume and the report. It hands each trial
(task id, trial index) to the child with the fewest trials in flight and gets the finished
`Trial` back.

Children load the suite themselves from `Suite.source` (suites hold functions, which are never
pickled), with the run's model settings. A child that dies turns its trials in flight into
errors and is replaced (at most `MAX_DEATHS` times in a run); cancelling the run stops every
child (SIGTERM, then SIGKILL after a grace period), and on Linux a child stops by itself when
the parent dies. Per-model limits (`max_concurrency`, `rpm`, `tpm`) hold per process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from anyio.streams.text import TextReceiveStream

from trialkit._record import ErrorInfo
from trialkit.executors._frames import Lines
from trialkit.models.context import current_settings
from trialkit.score import Verdict
from trialkit.task import Suite, SuiteError
from trialkit.transcript import ModelCall
from trialkit.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from trialkit.run.planner import Planner
    from trialkit.run.trial import PlannedTask

MAX_DEATHS = 5
"""Worker deaths a run survives (each is replaced); one more fails the run."""
START_TIMEOUT = 120.0
"""Seconds a worker may take to import trialkit and load the suite."""
STOP_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL, and for a worker to exit after its last trial."""
STDERR_TAIL = 2000
"""Characters of a dead worker's stderr quoted in its trials' errors."""


class WorkerError(SuiteError):
    """The worker processes cannot run the suite: it does not load there, or they keep dying."""


def check_source(suite: Suite) -> None:
    """Raise `SuiteError` unless worker processes can load `suite` again."""
    if suite.source is None:
        raise SuiteError(
            f"suite {suite.id!r}: running trials in worker processes needs a suite they can "
            "load themselves: load the suite with `trialkit run TARGET` or "
            "`trialkit.loaders.load_target(...)`, or run with workers=1"
        )


def worker_setup(suite: Suite, runner: Planner, run_id: str, concurrency: int) -> dict[str, Any]:
    """The first message to a worker: how to load the suite and run its trials."""
    check_source(suite)
    assert suite.source is not None
    cassette = runner.settings.cassette
    return {
        "source": dataclasses.asdict(suite.source),
        "sys_path": [str(entry) for entry in sys.path],
        "run_id": run_id,
        "suite_model": suite.model if isinstance(suite.model, str) else None,
        "sandbox": suite.sandbox if isinstance(suite.sandbox, str) else None,
        "model": runner.model,
        "judge_model": runner.settings.judge_model,
        "cassette": None
        if cassette is None
        else {"root": str(cassette.root.absolute()), "mode": cassette.mode.value},
        "retry": dataclasses.asdict(runner.settings.retry),
        "capture": runner.settings.capture,
        "offline": runner.settings.offline,
        "trials": runner.trials,
        "timeout": runner.timeout,
        "concurrency": concurrency,
    }


class _Pending:
    __slots__ = ("done", "index", "item", "started", "started_at", "trial")

    def __init__(self, item: PlannedTask, index: int) -> None:
        self.item, self.index = item, index
        self.started_at = datetime.now(UTC)
        self.started = time.perf_counter()
        self.trial: Trial | None = None
        self.done = anyio.Event()


class _Child:
    """One worker process and what the parent knows of it."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.pid = process.pid
        self.ready = False
        self.fatal: str | None = None
        self.in_flight: dict[int, _Pending] = {}
        self.stderr = ""
        self.stderr_closed = anyio.Event()

    def stderr_tail(self) -> str:
        return self.stderr[-STDERR_TAIL:].strip()

    async def send(self, line: bytes) -> None:
        """Send one message; if the worker is dying, its reader reports what was lost."""
        assert self.process.stdin is not None
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self.process.stdin.send(line)


class ProcessPool:
    """Worker processes that run trials; `run` has the signature of `TrialRunner.run`.

    Use it through `open_pool`, which starts the workers and always stops them.
    """

    def __init__(
        self, setup: dict[str, Any], *, workers: int, run_id: str, tasks: anyio.abc.TaskGroup
    ) -> None:
        self.setup_line = json.dumps(setup).encode() + b"\n"
        self.size = workers
        self.run_id = run_id
        self.tasks = tasks
        self.children: list[_Child] = []
        self.deaths = 0
        self.closing = False
        self.failure: WorkerError | None = None
        self.scope = anyio.CancelScope()
        """Cancelled when the pool gives up, so the run's trials stop waiting."""
        self.changed = anyio.Event()
        self.keys: set[str] = set()
        """Cassette keys the workers used, for the run's manifest."""
        self.run_calls: list[ModelCall] = []
        """Model calls of the workers that belong to no trial (judges' negative controls)."""
        self._next_id = 0

    async def run(self, item: PlannedTask, index: int) -> Trial:
        """Run one trial in the worker with the fewest trials in flight."""
        child = await self._pick()
        self._next_id += 1
        request_id = self._next_id
        pending = _Pending(item, index)
        child.in_flight[request_id] = pending
        message = {"id": request_id, "task": item.task.id, "index": index, "timeout": item.timeout}
        await child.send(json.dumps(message).encode() + b"\n")
        try:
            await pending.done.wait()
        finally:
            child.in_flight.pop(request_id, None)
        assert pending.trial is not None
        return pending.trial

    async def _pick(self) -> _Child:
        while True:
            ready = [c for c in self.children if c.ready]
            if ready:
                return min(ready, key=lambda c: len(c.in_flight))
            await self.changed.wait()  # a worker started, or the pool gave up (cancels us)

    def _ready(self) -> int:
        return sum(c.ready for c in self.children)

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def start(self) -> None:
        """Start the workers; return when all have loaded the suite."""
        for _ in range(self.size):
            await self._spawn()
        with anyio.move_on_after(START_TIMEOUT):
            while self.failure is None and self._ready() < self.size:
                await self.changed.wait()
        if self.failure is not None:
            raise self.failure
        if self._ready() < self.size:
            raise WorkerError(f"the worker processes did not start within {START_TIMEOUT:g} s")

    async def _spawn(self) -> None:
        # Spawned from the event loop's thread (anyio forks there), not a worker thread: a
        # worker's PR_SET_PDEATHSIG fires when the *thread* that forked it exits. The worker
        # asks for it itself: a `preexec_fn` is unsafe in a parent that has threads.
        command = [sys.executable, "-m", "trialkit.executors.worker", "--parent", str(os.getpid())]
        process = await anyio.open_process(command)
        child = _Child(process)
        self.children.append(child)
        self.tasks.start_soon(self._drain_stderr, child)
        self.tasks.start_soon(self._read, child)
        await child.send(self.setup_line)

    async def _drain_stderr(self, child: _Child) -> None:
        """Pass the worker's stderr (and the stdout of its user code) on, keeping a tail."""
        assert child.process.stderr is not None
        try:
            async for text in TextReceiveStream(child.process.stderr, errors="replace"):
                child.stderr = (child.stderr + text)[-2 * STDERR_TAIL :]
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    sys.stderr.write(text)  # None, closed or broken: the tail is still kept
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            child.stderr_closed.set()

    async def _read(self, child: _Child) -> None:
        assert child.process.stdout is not None
        lines = Lines()
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
            while True:
                for line in lines.feed(await child.process.stdout.receive()):
                    self._handle(child, line)
        child.ready = False  # its output ended: nothing more goes to it
        with anyio.move_on_after(STOP_GRACE):
            await child.stderr_closed.wait()
        code = await child.process.wait()
        self._ended(child, code)

    def _handle(self, child: _Child, line: bytes) -> None:
        kind, _, rest = line.partition(b" ")
        if kind == b"trial":
            number, _, payload = rest.partition(b" ")
            pending = child.in_flight.pop(int(number), None)
            if pending is not None:
                try:
                    pending.trial = Trial.model_validate_json(payload)
                except ValueError as exc:  # never expected: the worker validated it
                    pending.trial = _lost_trial(
                        pending, self.run_id, f"sent back a trial that does not validate: {exc}"
                    )
                pending.done.set()
        elif kind == b"ready":
            child.ready = True
            self._notify()
        elif kind == b"keys":
            self.keys.update(json.loads(rest))
        elif kind == b"calls":
            self.run_calls.extend(ModelCall.model_validate(call) for call in json.loads(rest))
        elif kind == b"fatal":
            child.fatal = json.loads(rest)

    def _ended(self, child: _Child, code: int) -> None:
        """A worker exited: its trials in flight become errors, and it is replaced."""
        self.children.remove(child)
        self._notify()
        lost = list(child.in_flight.values())
        child.in_flight.clear()
        tail = child.stderr_tail() or "(nothing)"
        for pending in lost:
            why = (
                f"(pid {child.pid}) {_exit(code)} before the trial finished. "
                f"Its stderr ended with: {tail}"
            )
            pending.trial = _lost_trial(pending, self.run_id, why)
            pending.done.set()
        if self.closing:
            return
        if child.fatal is not None:
            self._give_up(WorkerError(f"a worker process could not load the suite: {child.fatal}"))
            return
        self.deaths += 1
        if self.deaths > MAX_DEATHS:
            self._give_up(
                WorkerError(
                    f"{self.deaths} worker processes died (the last {_exit(code)}); giving up. "
                    f"Its stderr ended with: {child.stderr_tail() or '(nothing)'}"
                )
            )
            return
        self.tasks.start_soon(self._respawn)

    async def _respawn(self) -> None:
        try:
            await self._spawn()
        except Exception as exc:
            self._give_up(WorkerError(f"cannot start a worker process: {exc}"))

    def _give_up(self, error: WorkerError) -> None:
        if self.failure is None:
            self.failure = error
        self.scope.cancel()
        self._notify()

    async def stop(self) -> None:
        """Let the workers finish and exit (their input ends), then collect what they used."""
        self.closing = True
        for child in list(self.children):
            assert child.process.stdin is not None
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await child.process.stdin.aclose()
        with anyio.move_on_after(STOP_GRACE * 2):
            while self.children:
                await self.changed.wait()

    async def kill(self) -> None:
        """Stop every worker still running: SIGTERM, a grace period, then SIGKILL."""
        self.closing = True
        alive = [c for c in self.children if c.process.returncode is None]
        for child in alive:
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(STOP_GRACE):
            for child in alive:
                await child.process.wait()
        for child in alive:
            if child.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()
                await child.process.wait()
        for child in list(self.children):
            await child.process.aclose()


@contextlib.asynccontextmanager
async def open_pool(
    suite: Suite, runner: Planner, run_id: str, *, workers: int, concurrency: int
) -> AsyncIterator[ProcessPool]:
    """Worker processes for one run; when the block ends (or fails) none is left running.

    If the pool gives up (the suite does not load in a worker, or workers keep dying), the
    block is cancelled and `WorkerError` is raised.
    """
    setup = worker_setup(suite, runner, run_id, concurrency)
    error: BaseException | None = None
    async with anyio.create_task_group() as tasks:
        pool = ProcessPool(setup, workers=workers, run_id=run_id, tasks=tasks)
        try:
            await pool.start()
            with pool.scope:
                yield pool
            if pool.failure is None:
                await pool.stop()
        except BaseException as exc:  # raised again below, outside the task group
            error = exc
        finally:
            with anyio.CancelScope(shield=True):
                await pool.kill()
            tasks.cancel_scope.cancel()
    hand_back(runner, pool.keys, pool.run_calls, error or pool.failure)


def hand_back(
    runner: Planner, keys: set[str], run_calls: list[ModelCall], error: BaseException | None
) -> None:
    """After the workers (or actors) are gone: what they used goes to the run (cassette keys
    for its manifest, model calls of no trial to its figures), then `error` is raised."""
    cassette = runner.settings.cassette
    if cassette is not None and keys:
        cassette.note_used(keys)
    current_settings().run_calls.extend(run_calls)
    if error is not None:
        raise error


def _exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name} (exit code {code})"
        except ValueError:
            return f"was killed by signal {-code} (exit code {code})"
    return f"exited with code {code}"


def _lost_trial(pending: _Pending, run_id: str, why: str) -> Trial:
    message = f"the worker process running this trial {why}"
    return lost_trial(
        pending.item, pending.index, run_id, message, pending.started_at, pending.started
    )


def lost_trial(
    item: PlannedTask, index: int, run_id: str, message: str, started_at: datetime, started: float
) -> Trial:
    """An error trial for a trial whose worker (or Ray actor) could not give its result back."""
    return Trial(
        run_id=run_id,
        task_id=item.task.id,
        index=index,
        status=TrialStatus.ERROR,
        verdict=Verdict.ERROR,
        expect=item.task.expect,
        error=ErrorInfo(type="WorkerDied", message=message, phase="worker"),
        started_at=started_at,
        duration_s=time.perf_counter() - started,
    )
