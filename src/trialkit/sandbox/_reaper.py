"""Removes the trials' /tmp and HOME folders (and cgroups) in a thread of its own: removing even
a small tree takes ~10 ms on some file systems (gVisor's), which a trial need not wait for. A
folder is renamed at once (so it is out of the trial's way), then removed; what is still
queued when trialkit exits is removed then."""

from __future__ import annotations

import atexit
import queue
import shutil
import threading
from pathlib import Path

from trialkit.sandbox._cgroup import Group

__all__ = ["REAPER", "Reaper"]


class Reaper:
    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[Path, Group | None] | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def remove(self, folder: Path, group: Group | None = None) -> None:
        done = folder.with_name(folder.name + "-done")
        try:
            folder.rename(done)
        except OSError:
            done = folder
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="trialkit-sandbox-reaper")
                self.thread.daemon = True
                self.thread.start()
                atexit.register(self.drain)
        self.queue.put((done, group))

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            folder, group = item
            if group is not None:
                group.remove()
            shutil.rmtree(folder, ignore_errors=True)

    def drain(self) -> None:
        self.queue.put(None)
        if self.thread is not None:
            self.thread.join(timeout=30)


REAPER = Reaper()
