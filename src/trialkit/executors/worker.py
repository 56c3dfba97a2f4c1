"""A worker process: `python -m trialkit.executors.worker --parent PID`.

Started by `trialkit.executors.processes`, never by hand. It reads its set-up (the first line
on stdin), loads the suite from its source, answers `ready`, then runs every trial it is sent,
concurrently, and writes each finished `Trial` back as one line. When its stdin ends it
finishes what is in flight, reports the model calls that belong to the run but to no trial (a
judge's negative controls, checked once per worker) and the cassette keys it used, and exits.

stdin and stdout are the channel to the parent, so before any user code runs they move to
private descriptors: descriptor 0 reads from /dev/null and descriptor 1 points at stderr, so
whatever an agent prints (even from C or a subprocess) goes to stderr, which the parent passes
on, and nothing an agent reads can take the parent's messages.

SIGTERM cancels the trials in flight (environments are still torn down) and exits, at the
latest `STOP_GRACE` seconds later; SIGINT is ignored (Ctrl-C reaches the whole process group,
and the parent decides); on Linux the worker gets SIGTERM when the parent dies.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import os
import signal
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from trialkit._record import ErrorInfo
from trialkit.executors._frames import Lines
from trialkit.score import Verdict
from trialkit.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from trialkit.models.cassette import Cassette

EXIT_SIGTERM = 128 + signal.SIGTERM
STOP_GRACE = 5.0
"""Seconds the trials in flight get to stop after SIGTERM before the worker exits anyway."""


class _Channel:
    """Non-blocking line I/O on raw file descriptors, on the event loop."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        self.lines = Lines()
        self.ready: list[bytes] = []
        self.lock = anyio.Lock()

    async def receive(self) -> bytes | None:
        """The next line, or None when the parent closed its end."""
        while not self.ready:
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self.read_fd)
                continue
            if not chunk:
                return None
            self.ready.extend(self.lines.feed(chunk))
        return self.ready.pop(0)

    async def send(self, line: bytes) -> None:
        async with self.lock:  # one message at a time, however the pipe splits the writes
            view = memoryview(line)
            while view:
                try:
                    view = view[os.write(self.write_fd, view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self.write_fd)


class _Worker:
    """The suite, loaded here, and what runs its trials. `cassette`: the run's cassette as
    this worker reaches it, when not at the folder the set-up names (a Ray actor's)."""

    def __init__(self, setup: dict[str, Any], cassette: Cassette | None = None) -> None:
        from trialkit.loaders.target import load_target
        from trialkit.models.cassette import Cassette
        from trialkit.models.retry import RetryPolicy
        from trialkit.run.planner import Planner
        from trialkit.run.sandboxes import sandbox_named

        sys.path[:] = [*setup["sys_path"], *(p for p in sys.path if p not in setup["sys_path"])]
        source = setup["source"]
        here = os.getcwd()
        os.chdir(source["cwd"] or here)  # the target is relative to where it was loaded
        try:
            suite = load_target(source["target"], model=source["model"])
        finally:
            os.chdir(here)
        if setup["suite_model"] is not None and suite.model != setup["suite_model"]:
            suite = dataclasses.replace(suite, model=setup["suite_model"])  # `--models` runs
        if setup.get("sandbox") is not None:  # `--sandbox`, or `Suite(sandbox="bwrap")`
            sandbox_named(suite, setup["sandbox"])
        if cassette is None and setup["cassette"] is not None:
            cassette = Cassette(setup["cassette"]["root"], setup["cassette"]["mode"])
        self.planner = Planner(
            model=setup["model"],
            judge_model=setup["judge_model"],
            cassette=cassette,
            retry=RetryPolicy(**setup["retry"]),
            capture=setup["capture"],
            offline=setup["offline"],
            trials=setup["trials"],
            timeout=setup["timeout"],
            concurrency=setup["concurrency"],
        )
        planned = self.planner.plan(suite)
        self.planned = {p.task.id: p for p in planned}
        self.harness = self.planner.harness_for(suite, planned)
        self.trials = self.planner.trial_runner(setup["run_id"], suite, self.harness)
        self.settings = self.planner.run_settings(suite)
        if self.settings.capture or self.settings.offline:
            from trialkit.capture.hook import install

            install(offline=self.settings.offline)
        self.run_id: str = setup["run_id"]

    async def run(self, request: dict[str, Any], channel: _Channel) -> None:
        payload = await self.run_one(request)
        await channel.send(f"trial {request['id']} ".encode() + payload.encode() + b"\n")

    async def run_one(self, request: dict[str, Any]) -> str:
        """Run the trial `request` names (task, index, timeout); the finished `Trial` as JSON."""
        item = self.planned.get(request["task"])
        if item is None:
            trial = _error_trial(self.run_id, request, "this worker's suite has no such task")
        else:
            if item.timeout != request["timeout"]:
                item = dataclasses.replace(item, timeout=request["timeout"])
            trial = await self.trials.run(item, request["index"])
        try:
            return trial.model_dump_json()
        except ValueError as exc:
            why = f"the trial could not be sent to the parent: {exc}"
            return _error_trial(self.run_id, request, why).model_dump_json()

    def run_calls(self) -> list[dict[str, Any]]:
        """Model calls of this worker that belong to the run but to no trial (judges'
        negative controls), as JSON."""
        return [call.model_dump(mode="json") for call in self.settings.run_calls]

    def used_keys(self) -> list[str]:
        cassette = self.planner.settings.cassette
        return sorted(cassette.used_keys()) if cassette is not None else []


def _error_trial(run_id: str, request: dict[str, Any], why: str) -> Trial:
    return Trial(
        run_id=run_id,
        task_id=request["task"],
        index=request["index"],
        status=TrialStatus.ERROR,
        verdict=Verdict.ERROR,
        error=ErrorInfo(type="WorkerError", message=why, phase="worker"),
        started_at=datetime.now(UTC),
        duration_s=0.0,
    )


async def serve(channel: _Channel) -> int:
    """Load the suite, then run trials until the parent closes stdin (or sends SIGTERM)."""
    from trialkit._gc import fewer_collections
    from trialkit.models.context import use_settings

    first = await channel.receive()
    if first is None:
        return 0
    setup = json.loads(first)
    try:
        worker = _Worker(setup)
    except Exception as exc:
        await channel.send(b"fatal " + json.dumps(f"{type(exc).__name__}: {exc}").encode() + b"\n")
        return 2
    threads = anyio.to_thread.current_default_thread_limiter()
    threads.total_tokens = max(threads.total_tokens, setup["concurrency"])
    await channel.send(b"ready\n")
    terminated = False
    try:
        with use_settings(worker.settings), fewer_collections():
            async with anyio.create_task_group() as outer:

                async def stop_on_sigterm() -> None:
                    nonlocal terminated
                    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                        async for _ in signals:
                            terminated = True
                            _exit_later(STOP_GRACE)
                            outer.cancel_scope.cancel()
                            return

                outer.start_soon(stop_on_sigterm)
                async with anyio.create_task_group() as trials:
                    while (line := await channel.receive()) is not None:
                        trials.start_soon(worker.run, json.loads(line), channel)
                outer.cancel_scope.cancel()
        if not terminated:
            await channel.send(b"calls " + json.dumps(worker.run_calls()).encode() + b"\n")
            keys = json.dumps(worker.used_keys()).encode()
            await channel.send(b"keys " + keys + b"\n")
    finally:
        with anyio.CancelScope(shield=True):
            await worker.trials.aclose()
            await worker.harness.aclose()
    return EXIT_SIGTERM if terminated else 0


def _exit_later(seconds: float) -> None:
    """Exit after `seconds` even if a blocking agent call never returns (its thread cannot be
    cancelled), so a worker whose parent died cannot linger."""
    timer = threading.Timer(seconds, os._exit, args=(EXIT_SIGTERM,))
    timer.daemon = True
    timer.start()


def _die_with_parent(parent: int) -> None:
    """Ask Linux for SIGTERM when the parent dies (even by SIGKILL); exit if it already has."""
    if sys.platform == "linux":
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request could take effect
        raise SystemExit(EXIT_SIGTERM)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trialkit.executors.worker")
    parser.add_argument("--parent", type=int, required=True, help="the parent's process id")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    read_fd, write_fd = os.dup(0), os.dup(1)  # not inherited by the agents' subprocesses
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # from here on, anything written to stdout goes to stderr
    sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    channel = _Channel(read_fd, write_fd)
    try:
        return anyio.run(serve, channel)
    except OSError as exc:
        if exc.errno == errno.EPIPE:  # the parent is gone
            return EXIT_SIGTERM
        raise


if __name__ == "__main__":
    sys.exit(main())
