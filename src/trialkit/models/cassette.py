"""Cassettes: model calls recorded to disk and replayed, for deterministic, offline, free runs.

DESIGN §7. A recording is filed under the SHA-256 of the request's canonical JSON (never headers,
keys, request ids or timestamps): one pretty JSON file per key, so recordings review well in git,
at `ROOT/<model id, '/' -> '__'>/<key[:2]>/<key>.json`, holding `{"schema_version": 1, "key",
"kind": "model", "model", "request": <canonical request>, "responses": [{"trial", "occurrence",
"recorded_at", "response": <ModelResponse>}]}`. `responses` is a list sorted by (trial,
occurrence) — numeric order, unlike JSON object keys: one answer per trial and per repeat of the
request in that trial, so a replay reproduces every trial, variance included. `kind: "text"`
files serve plain-function harnesses: the request is `{"model", "input"}`, entries hold `output`.
`kind: "http"` files hold calls the agent made with its own SDK client, captured at the HTTP
client (`trialkit.capture`): the request is `{"schema_version", "api", "model", "body"}` (the
body without its volatile fields), and each response is the answer as it came over the wire:
`{"status", "content_type", "json" | "events" | "text"}` (`cassette_http` says which answers
are fit to replay). The files themselves are read and written by `cassette_files`, within
bounds.

A recording that cannot be used (unreadable, not a regular file, too large, or an answer unfit
to replay) is a `CassetteError` for the lookup that found it, and an error for the trial that
asked: it is noted on the trial's transcript recorder first, so an agent that catches the
exception still has its trial end in error.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from trialkit.models.base import ModelRequest, ModelResponse, key_of
from trialkit.models.cassette_files import (
    MANIFEST,
    MANIFEST_VERSION,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    SCHEMA_VERSION,
    CassetteError,
    Kind,
    Slot,
    _Entry,
    _File,
    first_error,
    load_recording,
    pretty,
    read_manifest,
    stamp,
    write_file,
)
from trialkit.models.cassette_http import FINAL_EVENTS, replay_problem, stream_ended

__all__ = [
    "MANIFEST",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "SCHEMA_VERSION",
    "CacheMode",
    "Cassette",
    "CassetteError",
    "CassetteMiss",
    "Kind",
    "find_secret",
    "read_manifest",
]

DIFF_LINES = 40
Near = list[tuple[Path, list[str]]]

_SECRET_NAMES = {"authorization", "proxyauthorization", "accesstoken", "refreshtoken", "xapikey"}
_SECRET_NAMES |= {"clientsecret", "secretkey", "secretaccesskey", "apisecret"}
_SECRET_VALUE = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35})"
    r"|\bBearer\s+[A-Za-z0-9._~+/\-]{16,}"
)


class CacheMode(StrEnum):
    LIVE = "live"  # no cassette: every call goes to the model, nothing is read or written
    RECORD = "record"  # call the model, store every answer (replacing that trial's slot)
    REPLAY = "replay"  # never call: a request with no recording is an error (`CassetteMiss`)
    AUTO = "auto"  # replay what exists, call and record only what is missing


class CassetteMiss(Exception):
    """Replay found no recording: an error for the trial, never a fail. The message names the
    task, trial, model and occurrence and shows how the request differs from the closest
    recording, because "the prompt changed" is the usual cause."""

    def __init__(
        self, message: str, *, task_id: str = "", trial: int = 0, model: str = "", key: str = ""
    ) -> None:  # defaults: pickling rebuilds from the message, then restores the attributes
        super().__init__(message)
        self.task_id, self.trial, self.model, self.key = task_id, trial, model, key


_hash = key_of


def _model_dir(model_id: str) -> str:
    """A folder name for a model id: readable, and never a path outside the cassette."""
    name = re.sub(r"[^A-Za-z0-9._@+=-]", "_", model_id.replace("/", "__"))
    return name if name and not name.startswith(".") else f"_{name}"


def _text_request(model_id: str, key_input: object) -> dict[str, Any]:
    return {"model": model_id, "input": to_jsonable_python(key_input)}


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _clip(text: str, width: int = 200) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def find_secret(value: object, where: str = "$") -> str | None:
    """Where in `value` something looks like a credential (a JSON path), or None. Cassettes go
    to git, so a key that leaked into a request or response must never be written."""
    if isinstance(value, dict):
        for name, item in value.items():
            path, norm = f"{where}.{name}", re.sub(r"[^a-z0-9]", "", str(name).lower())
            if item and isinstance(item, str) and (norm in _SECRET_NAMES or "apikey" in norm):
                return path
            if (found := find_secret(item, path)) is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if (found := find_secret(item, f"{where}[{i}]")) is not None:
                return found
    elif isinstance(value, str) and _SECRET_VALUE.search(value):
        return where
    return None


class _Pending:
    """One entry waiting to be recorded, and how its write went."""

    def __init__(self, entry: _Entry) -> None:
        self.entry = entry
        self.done = False
        self.error: BaseException | None = None


@contextlib.contextmanager
def _process_lock(folder: Path) -> Iterator[None]:
    """Exclusive across processes: `flock` on the shard folder itself, so no lock files litter
    a cassette kept in git. (Threads of one process are serialised before, by a key lock.)"""
    if sys.platform == "win32":  # pragma: no cover - no flock: one process per cassette
        yield
        return
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class Cassette:
    """Recorded model calls under `root`, used according to `mode`.

    Safe for concurrent trials: `record` may run in worker threads and on the event loop at
    once (a lock per key), and in several processes (a `flock`, then the file is re-read if
    anyone else replaced it, so every process's trials survive). Answers for one key that
    arrive while its file is being written go to disk together in the next write, and `record`
    returns once its answer is on disk. Parsed files stay in memory, so replays are fast.
    """

    def __init__(self, root: str | Path, mode: CacheMode | str) -> None:
        self.root, self.mode = Path(root), CacheMode(mode)
        self._files: dict[str, _File | None] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._used: set[str] = set()
        self._near: dict[tuple[str, Kind], Near] = {}
        self._pending: dict[str, list[_Pending]] = {}
        """Entries waiting for their key's lock, written together by whoever gets it first."""
        self._stamps: dict[str, tuple[int, ...] | None] = {}
        """Per key, the file's identity right after this cassette last wrote it."""

    def path_for(self, model_id: str, key: str) -> Path:
        return self.root / _model_dir(model_id) / key[:2] / f"{key}.json"

    def has_recordings(self, model_id: str) -> bool:
        """Whether any call of `model_id` is recorded here (a replay may then need no model)."""
        folder = self.root / _model_dir(model_id)
        return folder.is_dir() and next(folder.glob("*/*.json"), None) is not None

    def lookup(
        self,
        model_id: str,
        request: ModelRequest,
        *,
        trial: int,
        occurrence: int,
        key: str | None = None,
    ) -> ModelResponse | None:
        """The recorded response for this trial and occurrence (in REPLAY and AUTO only).

        `key` is `request.key(model_id)` when the caller already has it.
        """
        key = key or request.key(model_id)
        entry = self._entry(model_id, key, (trial, occurrence))
        if entry is None or entry.response is None:
            return None
        try:  # validated per call: every caller gets its own object to keep or change
            return ModelResponse.model_validate(entry.response)
        except ValidationError as exc:
            where = f"{self.path_for(model_id, key)}: trial {trial} occurrence {occurrence}"
            error = CassetteError(f"{where}: invalid response: {first_error(exc)}")
            raise _refused(error) from exc

    def lookup_text(
        self, model_id: str, key_input: object, *, trial: int, occurrence: int
    ) -> str | None:
        """A plain-function harness's recorded output for this input, trial and occurrence."""
        entry = self._entry(
            model_id, _hash(_text_request(model_id, key_input)), (trial, occurrence)
        )
        return None if entry is None else entry.output

    def record(
        self,
        model_id: str,
        request: ModelRequest,
        response: ModelResponse,
        *,
        trial: int,
        occurrence: int,
    ) -> None:
        """Store a response: RECORD replaces the slot, AUTO only fills it; otherwise no-op."""
        dumped = response.model_dump(mode="json", exclude_defaults=True)
        entry = _Entry(trial=trial, occurrence=occurrence, recorded_at=_now(), response=dumped)
        self._store(model_id, "model", request.canonical(model_id), entry)

    def lookup_http(
        self, model_id: str, key: str, *, trial: int, occurrence: int
    ) -> dict[str, Any] | None:
        """A captured call's recorded answer (as it came over the wire) for this slot.

        An answer unfit to replay (`cassette_http.replay_problem`: a stream without its final
        event, a field of the wrong type) is a `CassetteError` that names the file and the
        recording, and the trial's error.
        """
        found = self._found(model_id, key, (trial, occurrence))
        if found is None:
            return None
        file, entry = found
        if not entry._checked:
            if file.kind != "http":
                problem: str | None = f"a {file.kind} recording, not a captured call's"
            else:
                problem = replay_problem(file.request.get("api"), entry.response)
            if problem is not None:
                where = f"{self.path_for(model_id, key)}: trial {trial} occurrence {occurrence}"
                raise _refused(CassetteError(f"{where}: cannot be replayed: {problem}"))
            entry._checked = True
        return entry.response

    def record_http(
        self,
        model_id: str,
        request: dict[str, Any],
        answer: dict[str, Any],
        *,
        trial: int,
        occurrence: int,
    ) -> None:
        """Store a captured call's answer under its canonical request (see `lookup_http`). A
        stream without its final event is one the agent closed before its end (the capture hook
        records no stream the server cut short): it is marked `closed_early`."""
        events, api = answer.get("events"), request.get("api")
        if (
            isinstance(events, list)
            and all(isinstance(event, str) for event in events)
            and api in FINAL_EVENTS
            and not answer.get("closed_early")
            and not stream_ended(api, events)
        ):
            answer = {**answer, "closed_early": True}
        entry = _Entry(trial=trial, occurrence=occurrence, recorded_at=_now(), response=answer)
        self._store(model_id, "http", request, entry)

    def miss_http(
        self,
        model_id: str,
        request: dict[str, Any],
        *,
        endpoint: str,
        task_id: str,
        trial: int,
        occurrence: int,
    ) -> CassetteMiss:
        """`miss` for a call captured at the HTTP client; the message names its endpoint."""
        return self._miss(model_id, "http", request, task_id, trial, occurrence, endpoint)

    def record_text(
        self, model_id: str, key_input: object, output: str, *, trial: int, occurrence: int
    ) -> None:
        """Store a plain-function harness's output, keyed by the model id and the input."""
        entry = _Entry(trial=trial, occurrence=occurrence, recorded_at=_now(), output=output)
        self._store(model_id, "text", _text_request(model_id, key_input), entry)

    def miss(
        self, model_id: str, request: ModelRequest, *, task_id: str, trial: int, occurrence: int
    ) -> CassetteMiss:
        """The error for a replay that found nothing (the caller raises it)."""
        return self._miss(
            model_id, "model", request.canonical(model_id), task_id, trial, occurrence
        )

    def miss_text(
        self, model_id: str, key_input: object, *, task_id: str, trial: int, occurrence: int
    ) -> CassetteMiss:
        """`miss` for a plain-function harness's input."""
        request = _text_request(model_id, key_input)
        return self._miss(model_id, "text", request, task_id, trial, occurrence)

    def used_keys(self) -> set[str]:
        """Keys looked up or recorded by this run."""
        with self._guard:
            return set(self._used)

    def note_used(self, keys: Iterable[str]) -> None:
        """Count keys another process of this run used (`--workers`), for the manifest."""
        with self._guard:
            self._used.update(keys)

    def write_manifest(self, suite_id: str = "", *, complete: bool = True) -> None:
        """Note in ROOT/.last-run.json the keys this run of suite `suite_id` used: what
        `prune` keeps is every suite's last run, so suites that share a cassette keep each
        other's recordings.

        A `complete` run (every task, every trial) replaces its suite's keys; a partial one (a
        selection of tasks, a resumed or interrupted run) adds to them, since the recordings of
        what it did not run are still in use.
        """
        if self.mode is CacheMode.LIVE:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with _process_lock(self.root):
            suites = read_manifest(self.root / MANIFEST)
            keys = self.used_keys()
            if not complete:
                keys |= set(suites.get(suite_id, {}).get("keys", ()))
            suites[suite_id] = {"written_at": _now().isoformat(), "keys": sorted(keys)}
            every = sorted({key for entry in suites.values() for key in entry["keys"]})
            manifest = {"schema_version": MANIFEST_VERSION, "keys": every, "suites": suites}
            write_file(self.root / MANIFEST, manifest)

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            self._used.add(key)
            return self._locks.setdefault(key, threading.Lock())

    def _entry(self, model_id: str, key: str, slot: Slot) -> _Entry | None:
        found = self._found(model_id, key, slot)
        return None if found is None else found[1]

    def _found(self, model_id: str, key: str, slot: Slot) -> tuple[_File, _Entry] | None:
        """The file of `key` and its entry for `slot` (in REPLAY and AUTO only); a file that
        cannot be used is a `CassetteError` and the trial's error."""
        if self.mode not in (CacheMode.REPLAY, CacheMode.AUTO):
            return None
        if key not in self._files:
            with self._lock(key):  # so a stale miss cannot hide a concurrent `record`
                if key not in self._files:
                    try:
                        self._files[key] = self._read(model_id, key)
                    except CassetteError as exc:
                        raise _refused(exc) from None
        file = self._files[key]
        entry = None if file is None else file.at(slot)
        return None if file is None or entry is None else (file, entry)

    def _read(self, model_id: str, key: str) -> _File | None:
        """The recording of `key` as it is now, None when there is none (`CassetteError` when
        it is unusable). Reading, `_write_batch`, `_miss` and `has_recordings` are where a
        cassette touches its folder: `trialkit.executors.ray_cassette` serves them from
        another node."""
        return load_recording(self.path_for(model_id, key), self.root)

    def _store(self, model_id: str, kind: Kind, request: dict[str, Any], entry: _Entry) -> None:
        if self.mode not in (CacheMode.RECORD, CacheMode.AUTO):
            return
        key = _hash(request)
        path = self.path_for(model_id, key)
        if secret := find_secret(request, "request") or find_secret(entry.model_dump(), "entry"):
            raise CassetteError(
                f"{path}: refusing to record: {secret} looks like a secret (an API key or an "
                "Authorization header), and cassettes must never hold one"
            )
        mine = _Pending(entry)
        with self._guard:
            self._pending.setdefault(key, []).append(mine)
        with self._lock(key):
            if not mine.done:  # else the thread before us wrote it, with its own entries
                with self._guard:
                    batch = self._pending.pop(key)
                try:
                    self._write_batch(model_id, kind, request, key, [p.entry for p in batch])
                except BaseException as exc:
                    for pending in batch:
                        pending.error = exc if pending is not mine else None
                    raise
                finally:
                    for pending in batch:
                        pending.done = True
        if mine.error is not None:  # the write that carried this entry failed in another thread
            raise CassetteError(f"{path}: recording failed: {mine.error}") from mine.error

    def _write_batch(
        self, model_id: str, kind: Kind, request: dict[str, Any], key: str, batch: list[_Entry]
    ) -> None:
        """Add `batch` to the key's file in one write (group commit: trials that finish while
        a write is under way share the next one). Holds the key's lock."""
        path = self.path_for(model_id, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _process_lock(path.parent):
            file = self._current(path, key) or _File(
                schema_version=SCHEMA_VERSION, key=key, kind=kind, model=model_id, request=request
            )
            if self._merge(file, batch):
                write_file(path, file.model_dump(mode="json", exclude_none=True))
                self._stamps[key] = stamp(path)
        self._files[key] = file
        self._near.pop((model_id, kind), None)

    def _merge(self, file: _File, batch: list[_Entry]) -> bool:
        """Put `batch` into `file` (RECORD replaces a slot, AUTO only fills an empty one);
        whether that changed it."""
        changed = False
        for entry in batch:
            old = file.at((entry.trial, entry.occurrence))
            same = old is not None and (old.response, old.output) == (entry.response, entry.output)
            if old is None or (self.mode is CacheMode.RECORD and not same):
                file.put(entry)
                changed = True
        return changed

    def _current(self, path: Path, key: str) -> _File | None:
        """The file as it is on disk: the copy in memory if this cassette wrote it last (the
        file's inode, size and times are still those of that write), else read again, since
        another process may have added trials."""
        known = self._files.get(key)
        if known is not None and key in self._stamps and stamp(path) == self._stamps[key]:
            return known
        return load_recording(path, self.root)

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
        key = _hash(request)
        path = self.path_for(model_id, key)
        body = ""
        try:
            file = self._files.get(key) or load_recording(path, self.root)
        except CassetteError as exc:
            file, body = None, str(exc)
        if file is not None:
            has = ", ".join(f"trial {e.trial} occurrence {e.occurrence}" for e in file.responses)
            body = (
                f"{path} records this request, but not for trial {trial} occurrence "
                f"{occurrence} (it has: {_clip(has) or 'nothing'}); run fewer trials, or "
                "record the rest with --cache-mode auto"
            )
        elif not body:
            body = self._closest(model_id, kind, request)
            body += "\n(record it with --cache-mode auto or --cache-mode record)"
        at = f" at {endpoint}" if endpoint else ""
        head = (
            f"replay found no recording for task {task_id!r}, trial {trial}, model {model_id}"
            f"{at} (occurrence {occurrence} of this request in the trial; key {key})"
        )
        return CassetteMiss(
            f"{head}\n{body}", task_id=task_id, trial=trial, model=model_id, key=key
        )

    def _closest(self, model_id: str, kind: Kind, request: dict[str, Any]) -> str:
        """How `request` differs from the most similar recording of the same model."""
        if (model_id, kind) not in self._near:  # read once per run, however many misses
            found: Near = []
            for path in sorted((self.root / _model_dir(model_id)).glob("*/*.json")):
                with contextlib.suppress(CassetteError):  # a corrupt neighbour is not the error
                    file = load_recording(path, self.root)
                    if file is not None and (file.model, file.kind) == (model_id, kind):
                        found.append((path, pretty(file.request).splitlines()))
            self._near[model_id, kind] = found
        if not (near := self._near[model_id, kind]):
            others = [p.name.replace("__", "/") for p in sorted(self.root.glob("[!.]*/"))]
            also = f" (it has recordings of: {', '.join(others)})" if others else ""
            return f"no recordings of {model_id} in {self.root}{also}"
        lines = pretty(request).splitlines()
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(lines)  # the side difflib caches: one request against many recordings

        def quick(item: tuple[Path, list[str]]) -> float:
            matcher.set_seq1(item[1])
            return matcher.quick_ratio()

        def exact(item: tuple[Path, list[str]]) -> tuple[float, float]:
            """Share of equal lines, then (to break ties) how alike the changed text is."""
            matcher.set_seq1(item[1])
            ops = [op for op in matcher.get_opcodes() if op[0] != "equal"]
            old = "\n".join(line for op in ops for line in item[1][op[1] : op[2]])[:2000]
            new = "\n".join(line for op in ops for line in lines[op[3] : op[4]])[:2000]
            return matcher.ratio(), difflib.SequenceMatcher(None, old, new).ratio()

        likely = sorted(near, key=quick, reverse=True)[:20]
        path, recorded = max(likely, key=exact)
        diff = list(difflib.unified_diff(recorded, lines, str(path), "this request", lineterm=""))
        if len(diff) > DIFF_LINES:
            diff = [*diff[:DIFF_LINES], f"... ({len(diff) - DIFF_LINES} more lines)"]
        shown = "\n".join(f"  {_clip(line)}" for line in diff)
        return f"how it differs from the closest recording of {model_id}:\n{shown}"


def _refused(exc: CassetteError) -> CassetteError:
    """`exc`, noted first as the error of the trial that asked for the recording (when one
    did): an agent that catches the exception, or an SDK that retries it, cannot make the
    trial pass on a recording that could not be used."""
    from trialkit.capture.scope import active

    scope = active()
    if scope is not None:
        scope.recorder.fail(exc)
    return exc
