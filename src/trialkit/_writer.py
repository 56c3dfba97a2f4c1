"""Group commit: finished trials go to the store from a worker thread, in batches.

A large run against a store another process can open also has a writer process
(`trialkit.store.writer_process`), which saves batches on another core; the worker thread then
only encodes each batch and waits for its answer. When trials come faster than the writer
process saves them, the run's own process saves batches too, beside it: two lanes, each taking
what is pending whenever it is free (the run's own lane only once enough piles up, since its
work takes the interpreter from the run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import anyio.to_thread

if TYPE_CHECKING:
    from trialkit.store.store import Store
    from trialkit.store.writer_process import WriterProcess
    from trialkit.trial import Trial

MAX_PENDING = 256
SPILL = 128
"""With a writer process busy, the run's own process saves a batch once this many trials
wait (fewer, and the writer process will take them soon enough)."""


@dataclass
class _Lane:
    save: Callable[[Sequence[Trial]], None]
    spill: int
    """The fewest pending trials this lane takes while another lane is busy (0: any)."""
    busy: bool = False
    """A batch is being saved (cleared by the saving thread itself, as soon as it is)."""


class TrialWriter:
    """Commits finished trials from worker threads, in batches of what finished meanwhile.

    Trials wait in memory only until a lane is free again (group commit), and at most
    `max_pending` of them: past that, workers wait for the writer, so memory stays flat
    however fast trials finish.
    """

    def __init__(
        self, store: Store | None, max_pending: int = MAX_PENDING, *, trials: int = 0
    ) -> None:
        """`trials`: how many the run plans (a large run uses a writer process)."""
        self.store = store
        self.max_pending = max_pending
        self.process: WriterProcess | None = None
        self.lanes: list[_Lane] = []
        """The writer process's lane first (preferred), then the run's own."""
        if store is not None:
            from trialkit.store import writer_process

            if writer_process.wanted(store, trials):
                self.process = writer_process.WriterProcess(store)
                self.lanes.append(_Lane(self.process.save_trials, spill=0))
            spill = SPILL if self.lanes else 0
            self.lanes.append(_Lane(store.save_trials, spill=min(spill, max_pending)))
        self.pending: list[Trial] = []
        self.closed = False
        self.wake = anyio.Event()
        self.drained = anyio.Event()
        self.saved = 0
        """Trials committed so far."""
        self._count = threading.Lock()
        self.in_flight = 0
        """Trials handed to a lane and not yet saved."""
        self.failed = False
        """The store refused a batch: nothing more is written (the run stops)."""

    @property
    def busy(self) -> bool:
        return any(lane.busy for lane in self.lanes)

    async def put(self, trial: Trial) -> None:
        if self.store is None:
            return
        self.pending.append(trial)
        self.wake.set()
        # Held at most: `max_pending` waiting, and as many again being saved, however many
        # lanes there are (one batch in flight, or two smaller ones).
        while (
            len(self.pending) >= self.max_pending
            or len(self.pending) + self.in_flight >= 2 * self.max_pending
        ):
            await self.drained.wait()

    async def give_way(self) -> None:
        """Let the loop hand a free lane what is pending (its batch may just have ended, in
        its thread). Trials that never wait (an instant agent) would otherwise keep the loop
        until `max_pending` of them are waiting, and the lanes, idle meanwhile, would take
        turns with the run instead of working beside it. Called by a worker once its trial
        is all done with: a cancellation here loses nothing."""
        if self.pending and any(not lane.busy for lane in self.lanes):
            await anyio.lowlevel.checkpoint()

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    async def loop(self) -> None:
        if not self.lanes:
            return
        # Not abandoned on cancel: a batch in flight is committed before Ctrl-C lands.
        async with anyio.create_task_group() as saving:
            while True:
                await self.wake.wait()
                self.wake = anyio.Event()
                while self.pending and not self.failed and (lane := self._free_lane()):
                    batch, self.pending = self.pending, []
                    self.drained.set()
                    self.drained = anyio.Event()
                    lane.busy = True
                    self.in_flight += len(batch)
                    saving.start_soon(self._save_in, lane, batch)
                if self.failed or (self.closed and not self.pending and not self.busy):
                    return

    def _free_lane(self) -> _Lane | None:
        others_busy = self.busy
        for lane in self.lanes:
            if not lane.busy and (
                not others_busy or len(self.pending) >= lane.spill or self.closed
            ):
                return lane
        return None

    async def _save_in(self, lane: _Lane, batch: list[Trial]) -> None:
        try:
            await anyio.to_thread.run_sync(self._saving, lane, batch)
        except BaseException:
            self.failed = True
            self.drained.set()  # no worker may wait for a writer that has stopped
            self.wake.set()
            raise
        self.in_flight -= len(batch)
        self.drained.set()  # workers held back by the trials in flight may go on
        self.drained = anyio.Event()
        self.wake.set()  # the loop may hand this lane what piled up meanwhile

    def _saving(self, lane: _Lane, batch: list[Trial]) -> None:
        try:
            lane.save(batch)
            with self._count:  # counted as soon as committed, even if the run is stopping
                self.saved += len(batch)
        finally:
            lane.busy = False

    def flush_now(self) -> None:
        """Commit what is pending, unless the store already refused a batch."""
        if self.lanes and self.pending and not self.failed:
            batch, self.pending = self.pending, []
            try:
                self.lanes[0].save(batch)
            except BaseException:
                self.failed = True
                raise
            with self._count:
                self.saved += len(batch)

    def shut(self) -> None:
        """Stop the writer process, if there is one (every batch it took is saved)."""
        if self.process is not None:
            self.process.close()
