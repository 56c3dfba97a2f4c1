"""Group commit: finished trials go to the store from a worker thread, in batches."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from trialkit.store.store import Store
    from trialkit.trial import Trial

MAX_PENDING = 256


class TrialWriter:
    """Commits finished trials from a worker thread, in batches of what finished meanwhile.

    Trials wait in memory only until the thread is free again (group commit), and at most
    `max_pending` of them: past that, workers wait for the writer, so memory stays flat
    however fast trials finish.
    """

    def __init__(self, store: Store | None, max_pending: int = MAX_PENDING) -> None:
        self.store = store
        self.max_pending = max_pending
        self.pending: list[Trial] = []
        self.closed = False
        self.wake = anyio.Event()
        self.drained = anyio.Event()
        self.saved = 0
        """Trials committed so far."""
        self.failed = False
        """The store refused a batch: nothing more is written (the run stops)."""

    async def put(self, trial: Trial) -> None:
        if self.store is None:
            return
        self.pending.append(trial)
        self.wake.set()
        while len(self.pending) >= self.max_pending:
            await self.drained.wait()

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    async def loop(self) -> None:
        if self.store is None:
            return
        store = self.store
        while True:
            await self.wake.wait()
            self.wake = anyio.Event()
            batch, self.pending = self.pending, []
            self.drained.set()
            self.drained = anyio.Event()
            if batch:
                # Not abandoned on cancel: a batch in flight is committed before Ctrl-C lands.
                try:
                    await anyio.to_thread.run_sync(store.save_trials, batch)
                except BaseException:
                    self.failed = True
                    self.drained.set()  # no worker may wait for a writer that has stopped
                    raise
                self.saved += len(batch)
            if self.closed and not self.pending:
                return

    def flush_now(self) -> None:
        """Commit what is pending, unless the store already refused a batch."""
        if self.store is not None and self.pending and not self.failed:
            batch, self.pending = self.pending, []
            try:
                self.store.save_trials(batch)
            except BaseException:
                self.failed = True
                raise
            self.saved += len(batch)
