"""The run's cassette on a Ray cluster: kept where the run was started, served to the actors.

An actor may run on a node that cannot see the cassette folder (`--cache DIR`), so actors never
open it. One `CassetteKeeper` per run, a Ray actor pinned to the node of the process that runs
the run (the driver) and started before the trial actors, holds the cassette there. Each trial
actor's cassette is a `RemoteCassette`: a `Cassette` whose folder is the keeper's.

- **Lookups** (`replay`, `auto`): the first time an actor needs a request's key it asks the
  keeper for that key's file (as it is on disk), then keeps it in memory as a local cassette
  does. Nothing else of the cassette travels, however large it is.
- **Recordings** (`record`, `auto`): an actor's `record` sends the entry to the keeper, which
  writes it as a local run would (the same files, keys and format, atomically, under the same
  locks, secrets refused) and returns once it is on disk, so a recording survives its actor.
- **Misses**: the actor finds them, as a local cassette does (a strict replay never calls the
  model); their message, naming the folder here and the closest recording, comes from the
  keeper. A keeper that fails or does not answer is a `CassetteError` for the trial.

The keys the actors used still come back with each actor's `finish`, for the run's manifest,
which this process writes. The store is never written by actors or by the keeper.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trialkit.models.cassette import Cassette, CassetteMiss
from trialkit.models.cassette_files import (
    SCHEMA_VERSION,
    CassetteError,
    Kind,
    _Entry,
    _File,
    parse_recording,
    read_file,
)

ANSWER_TIMEOUT = 60.0
"""Seconds an actor waits for the keeper before its cassette call fails."""
KEEPER_RESTARTS = 3
"""Times Ray restarts a keeper that died (its calls are retried: they are idempotent)."""
KEEPER_THREADS = 16
"""Calls the keeper serves at once: reads and writes of different keys overlap."""


class CassetteKeeper(Cassette):
    """The run's cassette as a Ray actor on the driver's node (see the module's docstring).

    `folder` is the folder's (device, inode) as the driver sees it: a keeper whose node does
    not see that folder at `root` (another container, a mount of its own) refuses to start.
    """

    def __init__(self, root: str, mode: str, folder: tuple[int, int]) -> None:
        super().__init__(root, mode)
        try:
            found = os.stat(root)
        except OSError:
            seen = None
        else:
            seen = (found.st_dev, found.st_ino)
        if seen != tuple(folder):
            raise CassetteError(
                f"{root}: the Ray workers of the node this run is on do not see the run's "
                "cassette folder there, so it cannot be served to the actors"
            )

    def ready(self) -> None:
        """Answers once the keeper has started."""

    def recording(self, model_id: str, key: str) -> bytes | None:
        """The file of `key` as it is on disk; None when there is none. Read within the bounds
        of every cassette reader (`cassette_files.read_file`): nothing but a regular file of the
        cassette, of at most `MAX_FILE_BYTES`, is read or sent."""
        return read_file(self.path_for(model_id, key), self.root)

    def add(
        self, model_id: str, kind: Kind, request: dict[str, Any], entries: list[dict[str, Any]]
    ) -> None:
        """Store entries an actor recorded, as its own `record` calls would have here."""
        for entry in entries:
            self._store(model_id, kind, request, _Entry.model_validate(entry))

    def miss_of(
        self,
        model_id: str,
        kind: Kind,
        request: dict[str, Any],
        task_id: str,
        trial: int,
        occurrence: int,
        endpoint: str,
    ) -> CassetteMiss:
        """The error for an actor's replay that found nothing, said from this folder."""
        return self._miss(model_id, kind, request, task_id, trial, occurrence, endpoint)


class RemoteCassette(Cassette):
    """A trial actor's cassette: `root` and `mode` are the run's, the folder is the keeper's."""

    def __init__(self, root: str, mode: str, keeper: Any) -> None:
        super().__init__(root, mode)
        self.keeper = keeper

    def has_recordings(self, model_id: str) -> bool:
        return bool(self._ask("has_recordings", model_id))

    def _read(self, model_id: str, key: str) -> _File | None:
        raw = self._ask("recording", model_id, key)
        return None if raw is None else parse_recording(self.path_for(model_id, key), raw)

    def _write_batch(
        self, model_id: str, kind: Kind, request: dict[str, Any], key: str, batch: list[_Entry]
    ) -> None:
        self._ask("add", model_id, kind, request, [e.model_dump(mode="json") for e in batch])
        file = self._files.get(key) or _File(
            schema_version=SCHEMA_VERSION, key=key, kind=kind, model=model_id, request=request
        )
        self._merge(file, batch)  # this actor's copy, as the keeper's file now has them
        self._files[key] = file

    def _miss(
        self,
        model_id: str,
        kind: Kind,
        request: dict[str, Any],
        task_id: str,
        trial: int,
        occurrence: int,
        endpoint: str = "",
    ) -> CassetteMiss:
        miss = self._ask("miss_of", model_id, kind, request, task_id, trial, occurrence, endpoint)
        assert isinstance(miss, CassetteMiss)
        return miss

    def _ask(self, method: str, *args: Any) -> Any:
        """The keeper's answer. Blocking, as reading a local cassette is: callers are sync,
        some on the actor's event loop, and each key is asked for once per actor."""
        import ray

        try:
            return ray.get(getattr(self.keeper, method).remote(*args), timeout=ANSWER_TIMEOUT)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, CassetteError):
                raise CassetteError(str(exc.cause)) from None
            why = f"{type(exc.cause).__name__}: {exc.cause}"
            raise CassetteError(f"{self.root}: the run's cassette failed: {why}") from None
        except ray.exceptions.RayError as exc:  # the keeper died, or did not answer in time
            raise CassetteError(
                f"{self.root}: the run's cassette, kept on the Ray node this run is on, did not "
                f"answer: {_cause(exc)}"
            ) from None


def start_keeper(ray: Any, root: str, mode: str, *, name: str, py_modules: list[str]) -> Any:
    """Create the run's keeper on this process's node; its handle (call `ready` to wait for
    it). `py_modules`: this trialkit, uploaded (as the trial actors get it)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    found = Path(root).stat()
    node = ray.get_runtime_context().get_node_id()
    options = ray.remote(CassetteKeeper).options(
        name=name,
        num_cpus=0,
        max_concurrency=KEEPER_THREADS,
        max_restarts=KEEPER_RESTARTS,
        max_task_retries=KEEPER_RESTARTS,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
        runtime_env={"py_modules": py_modules} if py_modules else None,
    )
    return options.remote(root, mode, (found.st_dev, found.st_ino))


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(line.strip() for line in text[:6])[:1000] or type(exc).__name__
