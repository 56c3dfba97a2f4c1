"""Group commit: finished trials go to the store in batches, one batch at a time.

A large run against a store another process can open has a writer process
(`trialkit.store.writer_process`), which saves each batch on another core while the run's
event loop only encodes it and waits for the answer. Otherwise a worker thread saves it. While
a batch is being saved, the trials that finish meanwhile wait (at most `max_pending` of them)
and make the next batch.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import anyio.to_thread

if TYPE_CHECKING:
    from trialkit.store.store import Store
    from trialkit.store.writer_process import WriterProcess
    from trialkit.trial import Trial

MAX_PENDING = 256


class TrialWriter:
    """Commits finished trials, in batches of what finished meanwhile.

    Trials wait in memory only until the batch before them is saved (group commit), and at
    most `max_pending` of them: past that, workers wait for the writer, so memory stays flat
    however fast trials finish.
    """

    def __init__(
        self, store: Store | None, max_pending: int = MAX_PENDING, *, trials: int = 0
    ) -> None:
        """`trials`: how many the run plans (a large run uses a writer process)."""
        self.store = store
        self.max_pending = max_pending
        self.process: WriterProcess | None = None
        self._save: Callable[[list[Trial]], Awaitable[None]] | None = None
        if store is not None:
            from trialkit.store import writer_process

            if writer_process.wanted(store, trials):
                self.process = writer_process.WriterProcess(store)
                self._save = self._save_through_process
            else:
                self._save = self._save_in_thread
        self.pending: list[Trial] = []
        self.closed = False
        self.wake = anyio.Event()
        self.drained = anyio.Event()
        self.saved = 0
        """Trials committed so far."""
        self._count = threading.Lock()
        self.busy = False
        """A batch is being saved (cleared as soon as it is, by whatever saved it)."""
        self.starting = False
        """A batch was handed over and its saving has not begun yet."""
        self.failed = False
        """The store refused a batch: nothing more is written (the run stops)."""

    async def put(self, trial: Trial) -> None:
        if self.store is None:
            return
        self.pending.append(trial)
        if not self.busy:  # a busy writer wakes itself when its batch is saved
            self.wake.set()
        while len(self.pending) >= self.max_pending:  # and as many again being saved, at most
            await self.drained.wait()

    async def give_way(self) -> None:
        """Let the event loop do the writer's part when it has one: hand the pending trials
        to a writer that is free, begin a batch just handed over, or go on with one being
        saved (the pipe has room, or the answer came). Trials that never wait (an instant
        agent) would otherwise keep the loop until `max_pending` of them are waiting, the
        writer idle meanwhile. Called by a worker once its trial is all done with: a
        cancellation here loses nothing."""
        if (
            (self.pending and not self.busy)
            or self.starting
            or (self.process is not None and self.process.needs_loop)
        ):
            await anyio.lowlevel.checkpoint()

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    async def loop(self) -> None:
        if self._save is None:
            return
        # Not abandoned on cancel: a batch in flight is committed before Ctrl-C lands.
        async with anyio.create_task_group() as saving:
            while True:
                await self.wake.wait()
                self.wake = anyio.Event()
                if self.pending and not self.failed and not self.busy:
                    batch, self.pending = self.pending, []
                    self.drained.set()
                    self.drained = anyio.Event()
                    self.busy = self.starting = True
                    saving.start_soon(self._save_batch, batch)
                if self.failed or (self.closed and not self.pending and not self.busy):
                    return

    async def _save_batch(self, batch: list[Trial]) -> None:
        self.starting = False
        assert self._save is not None
        try:
            await self._save(batch)
        except BaseException:
            self.failed = True
            self.busy = False
            self.drained.set()  # no worker may wait for a writer that has stopped
            self.wake.set()
            raise
        self.drained.set()  # workers held back meanwhile may go on
        self.drained = anyio.Event()
        self.wake.set()  # the loop may hand over what piled up meanwhile

    async def _save_through_process(self, batch: list[Trial]) -> None:
        assert self.process is not None
        try:
            await self.process.save_trials(batch)  # shielded: finishes on cancel
            self._counted(batch)
        finally:
            self.busy = False

    async def _save_in_thread(self, batch: list[Trial]) -> None:
        await anyio.to_thread.run_sync(self._saving, batch)

    def _saving(self, batch: Sequence[Trial]) -> None:
        assert self.store is not None
        try:
            self.store.save_trials(batch)
            self._counted(batch)  # counted as soon as committed, even if the run is stopping
        finally:
            self.busy = False

    def _counted(self, batch: Sequence[Trial]) -> None:
        with self._count:
            self.saved += len(batch)

    def flush_now(self) -> None:
        """Commit what is pending (in this process), unless the store already refused a
        batch."""
        if self.store is not None and self.pending and not self.failed:
            batch, self.pending = self.pending, []
            try:
                self.store.save_trials(batch)
            except BaseException:
                self.failed = True
                raise
            self._counted(batch)

    def shut(self) -> None:
        """Stop the writer process, if there is one (every batch it took is saved)."""
        if self.process is not None:
            self.process.close()
