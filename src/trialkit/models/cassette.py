"""Cassettes: model calls recorded to disk and replayed, for deterministic, offline, free runs.

DESIGN §7. A recording is filed under the SHA-256 of the request's canonical JSON (never headers,
keys, request ids or timestamps), one pretty JSON file per key so recordings review well in git:

    ROOT/<model id, '/' -> '__'>/<key[:2]>/<key>.json
    {"schema_version": 1, "key": "...", "kind": "model" | "text", "model": "openai/gpt-4o",
     "request": <canonical request>,
     "responses": [{"trial": 0, "occurrence": 0, "recorded_at": "...Z", "response": {...}}, ...]}

`responses` is a flat list sorted by (trial, occurrence): one answer per trial and per repeat of
the same request within that trial, so a replay reproduces every trial, variance included.
`kind: "text"` files come from plain-function harnesses: the request is
`{"model": id, "input": key_input}` and each entry holds `output` (a string) instead.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_core import to_jsonable_python

from trialkit._record import Record
from trialkit.models.base import REQUEST_SCHEMA_VERSION, ModelRequest, ModelResponse

SCHEMA_VERSION = 1
MANIFEST = ".last-run.json"
"""Keys the last run used, at the cassette's root: what `prune` keeps."""
DIFF_LINES = 40
Kind = Literal["model", "text"]

_SECRET_NAMES = {"authorization", "proxyauthorization", "accesstoken", "refreshtoken"}
_SECRET_NAMES |= {"clientsecret", "secretkey", "secretaccesskey", "apisecret", "xapikey"}
_SECRET_VALUE = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35})"
    r"|\bBearer\s+[A-Za-z0-9._~+/\-]{16,}"
)


class CacheMode(StrEnum):
    LIVE = "live"
    """No cassette: every call goes to the model, nothing is read or written."""
    RECORD = "record"
    """Call the model and store every answer, replacing what was recorded for that slot."""
    REPLAY = "replay"
    """Never call: a request with no recording is an error (`CassetteMiss`)."""
    AUTO = "auto"
    """Replay what exists, call and record only what is missing."""


class CassetteError(Exception):
    """A cassette file cannot be used (corrupt, another schema, a secret about to be written).

    Its message names the file, so the user knows what to fix or delete.
    """


class CassetteMiss(Exception):
    """Replay found no recording for a call: an error for the trial, never a fail.

    The message names the task, trial, model and occurrence, and shows how the request differs
    from the closest recording, because "the prompt changed" is the usual cause.
    """

    def __init__(
        self, message: str, *, task_id: str, trial: int, model: str, occurrence: int, key: str
    ) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.trial = trial
        self.model = model
        self.occurrence = occurrence
        self.key = key


class _Entry(Record):
    trial: int = Field(ge=0)
    occurrence: int = Field(ge=0)
    recorded_at: datetime
    response: dict[str, Any] | None = None
    output: str | None = None


class _File(Record):
    schema_version: int
    key: str
    kind: Kind
    model: str
    request: dict[str, Any]
    responses: list[_Entry]


@dataclass
class _Doc:
    """One recording file in memory, its entries indexed by (trial, occurrence) for lookups."""

    path: Path
    key: str
    kind: Kind
    model: str
    request: dict[str, Any]
    entries: dict[tuple[int, int], _Entry] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "key": self.key,
            "kind": self.kind,
            "model": self.model,
            "request": self.request,
            "responses": [
                self.entries[slot].model_dump(mode="json", exclude_none=True)
                for slot in sorted(self.entries)
            ],
        }


def _hash(canonical: object) -> str:
    """The key of canonical data: the same encoding as `ModelRequest.key`."""
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _pretty(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _model_dir(model_id: str) -> str:
    """A folder name for a model id: readable, and never a path outside the cassette."""
    name = re.sub(r"[^A-Za-z0-9._@+=-]", "_", model_id.replace("/", "__"))
    return name if name and not name.startswith(".") else f"_{name}"


def _text_request(model_id: str, key_input: object) -> dict[str, Any]:
    return {"model": model_id, "input": to_jsonable_python(key_input)}


def find_secret(value: object, where: str = "$") -> str | None:
    """Where in `value` something looks like a credential (a JSON path), or None.

    Cassettes are committed to git, so an API key that leaked into a request or a response
    (a header dict passed as `extra`, a key echoed by a tool) must never be written.
    """
    if isinstance(value, dict):
        for name, item in value.items():
            path = f"{where}.{name}"
            norm = re.sub(r"[^a-z0-9]", "", str(name).lower())
            if isinstance(item, str) and item and (norm in _SECRET_NAMES or norm.endswith("apikey")):
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


def _load(path: Path) -> _Doc | None:
    """The recording at `path`, None when there is none; `CassetteError` when it is unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"{path}: cannot read: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CassetteError(f"{path}: not valid JSON ({exc}); fix or delete it") from exc
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise CassetteError(
            f"{path}: schema_version {version!r} is not {SCHEMA_VERSION}, the one this "
            "trialkit reads; re-record it with this version"
        )
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise CassetteError(f"{path}: not a cassette recording: {loc}: {err['msg']}") from exc
    doc = _Doc(path, parsed.key, parsed.kind, parsed.model, parsed.request)
    for entry in parsed.responses:
        slot = (entry.trial, entry.occurrence)
        if (entry.response is None) == (parsed.kind == "model") or entry.output is not None == (
            parsed.kind == "model"
        ):
            what = "response" if parsed.kind == "model" else "output"
            raise CassetteError(f"{path}: trial {slot[0]} occurrence {slot[1]}: needs `{what}`")
        if slot in doc.entries:
            raise CassetteError(f"{path}: trial {slot[0]} occurrence {slot[1]} appears twice")
        doc.entries[slot] = entry
    return doc


def _write(path: Path, data: object) -> None:
    """Write atomically: a temp file in the same folder, fsynced, then `os.replace`d over."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(_pretty(data))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _process_lock(folder: Path) -> Iterator[None]:
    """Exclusive across processes: `flock` on the shard folder itself, so no lock files litter
    a cassette that lives in git. Threads are serialised before this by a per-key lock."""
    if sys.platform == "win32":  # pragma: no cover - no flock; one process per cassette
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
    once (a lock per key), and in several processes (a `flock`, then the file is re-read so
    every process's trials survive). Parsed files stay in memory, so replays are fast.
    """

    def __init__(self, root: str | Path, mode: CacheMode | str) -> None:
        self.root = Path(root)
        self.mode = CacheMode(mode)
        self._docs: dict[str, _Doc | None] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._used: set[str] = set()
        self._candidates: dict[tuple[str, Kind], list[tuple[_Doc, list[str]]]] = {}

    def __repr__(self) -> str:
        return f"<Cassette {self.root} mode={self.mode.value}>"

    def path_for(self, model_id: str, key: str) -> Path:
        return self.root / _model_dir(model_id) / key[:2] / f"{key}.json"

    def lookup(
        self, model_id: str, request: ModelRequest, *, trial: int, occurrence: int
    ) -> ModelResponse | None:
        """The recorded response for this trial and occurrence (REPLAY and AUTO only)."""
        if self.mode not in (CacheMode.REPLAY, CacheMode.AUTO):
            return None
        key = request.key(model_id)
        entry = self._entry(model_id, key, trial, occurrence)
        if entry is None or entry.response is None:
            return None
        try:
            return ModelResponse.model_validate(entry.response)
        except ValidationError as exc:
            raise CassetteError(
                f"{self.path_for(model_id, key)}: trial {trial} occurrence {occurrence}: "
                f"not a valid response: {exc.errors()[0]['msg']}"
            ) from exc

    def lookup_text(
        self, model_id: str, key_input: object, *, trial: int, occurrence: int
    ) -> str | None:
        """The recorded output of a plain-function harness for this input, trial, occurrence."""
        if self.mode not in (CacheMode.REPLAY, CacheMode.AUTO):
            return None
        key = _hash(_text_request(model_id, key_input))
        entry = self._entry(model_id, key, trial, occurrence)
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
        """Store a response (RECORD replaces, AUTO only fills a missing slot; else no-op)."""
        if self.mode not in (CacheMode.RECORD, CacheMode.AUTO):
            return
        dumped = response.model_dump(mode="json", exclude_defaults=True)
        entry = _Entry(trial=trial, occurrence=occurrence, recorded_at=_now(), response=dumped)
        self._store(model_id, request.key(model_id), "model", request.canonical(model_id), entry)

    def record_text(
        self, model_id: str, key_input: object, output: str, *, trial: int, occurrence: int
    ) -> None:
        """Store a plain-function harness's output, keyed by model id and input."""
        if self.mode not in (CacheMode.RECORD, CacheMode.AUTO):
            return
        request = _text_request(model_id, key_input)
        entry = _Entry(trial=trial, occurrence=occurrence, recorded_at=_now(), output=output)
        self._store(model_id, _hash(request), "text", request, entry)

    def miss(
        self, model_id: str, request: ModelRequest, *, task_id: str, trial: int, occurrence: int
    ) -> CassetteMiss:
        """The error for a replay that found nothing (built here, raised by the caller)."""
        canonical = request.canonical(model_id)
        return self._miss(model_id, "model", _hash(canonical), canonical, task_id, trial, occurrence)

    def miss_text(
        self, model_id: str, key_input: object, *, task_id: str, trial: int, occurrence: int
    ) -> CassetteMiss:
        """`miss` for a plain-function harness's input."""
        request = _text_request(model_id, key_input)
        return self._miss(model_id, "text", _hash(request), request, task_id, trial, occurrence)

    def used_keys(self) -> set[str]:
        """Keys looked up or recorded by this run."""
        with self._guard:
            return set(self._used)

    def write_manifest(self) -> None:
        """Write ROOT/.last-run.json, the keys this run used, which `prune` keeps."""
        if self.mode is CacheMode.LIVE:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        keys = sorted(self.used_keys())
        _write(self.root / MANIFEST, {"schema_version": 1, "written_at": _now(), "keys": keys})

    # -- internals ---------------------------------------------------------------------------

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def _entry(self, model_id: str, key: str, trial: int, occurrence: int) -> _Entry | None:
        with self._guard:
            self._used.add(key)
        if key in self._docs:
            doc = self._docs[key]
        else:
            with self._lock(key):  # a concurrent `record` must not be hidden by a stale miss
                if key not in self._docs:
                    self._docs[key] = _load(self.path_for(model_id, key))
                doc = self._docs[key]
        return None if doc is None else doc.entries.get((trial, occurrence))

    def _store(
        self, model_id: str, key: str, kind: Kind, request: dict[str, Any], entry: _Entry
    ) -> None:
        path = self.path_for(model_id, key)
        where = find_secret(request, "request") or find_secret(entry.response, "response")
        if where is not None or find_secret(entry.output, "output") is not None:
            raise CassetteError(
                f"{path}: refusing to write a recording: {where or 'output'} looks like a secret "
                "(an API key or an Authorization header); cassettes must never hold one"
            )
        with self._guard:
            self._used.add(key)
        with self._lock(key):
            path.parent.mkdir(parents=True, exist_ok=True)
            with _process_lock(path.parent):
                doc = _load(path) or _Doc(path, key, kind, model_id, request)
                slot = (entry.trial, entry.occurrence)
                old = doc.entries.get(slot)
                unchanged = old is not None and (old.response, old.output) == (
                    entry.response,
                    entry.output,
                )
                if old is None or (self.mode is CacheMode.RECORD and not unchanged):
                    doc.entries[slot] = entry
                    _write(path, doc.to_json())
            self._docs[key] = doc
            self._candidates.pop((model_id, kind), None)

    def _miss(
        self,
        model_id: str,
        kind: Kind,
        key: str,
        request: dict[str, Any],
        task_id: str,
        trial: int,
        occurrence: int,
    ) -> CassetteMiss:
        head = (
            f"replay found no recording for task {task_id!r}, trial {trial}, model {model_id} "
            f"(occurrence {occurrence} of this request in the trial; key {key})"
        )
        path = self.path_for(model_id, key)
        with contextlib.suppress(CassetteError):
            doc = self._docs.get(key) or _load(path)
            if doc is not None:
                body = (
                    f"{path} records this request, but not for trial {trial} occurrence "
                    f"{occurrence}; it has {_slots(sorted(doc.entries))}. Run fewer trials, or "
                    "record the rest with --cache-mode auto"
                )
                return CassetteMiss(
                    f"{head}\n{body}",
                    task_id=task_id,
                    trial=trial,
                    model=model_id,
                    occurrence=occurrence,
                    key=key,
                )
        body = self._closest(model_id, kind, request)
        return CassetteMiss(
            f"{head}\n{body}\n(record it with --cache-mode auto or --cache-mode record)",
            task_id=task_id,
            trial=trial,
            model=model_id,
            occurrence=occurrence,
            key=key,
        )

    def _closest(self, model_id: str, kind: Kind, request: dict[str, Any]) -> str:
        """How `request` differs from the most similar recording of the same model."""
        candidates = self._candidates_for(model_id, kind)
        if not candidates:
            message = f"no recordings of {model_id} in {self.root}"
            if self.root.is_dir():
                others = sorted(
                    d.name.replace("__", "/")
                    for d in self.root.iterdir()
                    if d.is_dir() and not d.name.startswith(".")
                )
                if others:
                    message += f" (it has recordings of: {', '.join(others)})"
            return message
        lines = _pretty(request).splitlines()
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(lines)  # the cached side: compared against every candidate cheaply

        def quick(item: tuple[_Doc, list[str]]) -> float:
            matcher.set_seq1(item[1])
            return matcher.quick_ratio()

        def exact(item: tuple[_Doc, list[str]]) -> float:
            matcher.set_seq1(item[1])
            return matcher.ratio()

        best = max(sorted(candidates, key=quick, reverse=True)[:20], key=exact)
        diff = list(
            difflib.unified_diff(
                best[1], lines, f"recorded ({best[0].path})", "this request", n=2, lineterm=""
            )
        )
        if len(diff) > DIFF_LINES:
            diff = [*diff[:DIFF_LINES], f"... ({len(diff) - DIFF_LINES} more diff lines)"]
        shown = "\n".join("  " + _clip(line) for line in diff)
        return f"how it differs from the closest recording of {model_id}:\n{shown}"

    def _candidates_for(self, model_id: str, kind: Kind) -> list[tuple[_Doc, list[str]]]:
        cached = self._candidates.get((model_id, kind))
        if cached is not None:
            return cached
        found: list[tuple[_Doc, list[str]]] = []
        for path in sorted((self.root / _model_dir(model_id)).glob("*/*.json")):
            try:
                doc = _load(path)
            except CassetteError:
                continue  # a corrupt neighbour must not hide the real error, the miss
            if doc is not None and doc.model == model_id and doc.kind == kind:
                found.append((doc, _pretty(doc.request).splitlines()))
        self._candidates[(model_id, kind)] = found
        return found


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _slots(slots: list[tuple[int, int]]) -> str:
    """`trial 0 (occurrences 0, 1), trial 1 (occurrence 0)`, capped for a one-screen error."""
    by_trial: dict[int, list[int]] = {}
    for trial, occurrence in slots:
        by_trial.setdefault(trial, []).append(occurrence)
    parts = [
        f"trial {t} (occurrence{'s' if len(o) > 1 else ''} {', '.join(map(str, o))})"
        for t, o in list(by_trial.items())[:10]
    ]
    more = f" and {len(by_trial) - 10} more trials" if len(by_trial) > 10 else ""
    return ", ".join(parts) + more if parts else "no responses"


def _clip(line: str, width: int = 200) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def cassette_files(root: str | Path) -> list[Path]:
    """Every recording file under `root`, sorted; `CassetteError` if `root` is no folder."""
    base = Path(root)
    if not base.is_dir():
        raise CassetteError(f"{base}: no such cassette folder")
    return sorted(p for p in base.glob("*/*/*.json") if not p.name.startswith("."))


class ModelCassetteStats(Record):
    files: int = 0
    recordings: int = 0
    bytes: int = 0


class CassetteStats(Record):
    """What `trialkit cache stats` shows: how much is recorded, for which models, and when."""

    files: int = 0
    recordings: int = 0
    """Responses (one per trial and occurrence), summed over files."""
    total_bytes: int = 0
    invalid_files: int = 0
    """Files that could not be read (see `verify`); counted in `files` and `total_bytes`."""
    models: dict[str, ModelCassetteStats] = Field(default_factory=dict)
    oldest: datetime | None = None
    newest: datetime | None = None


def cassette_stats(root: str | Path) -> CassetteStats:
    stats = CassetteStats()
    for path in cassette_files(root):
        size = path.stat().st_size
        stats.files += 1
        stats.total_bytes += size
        try:
            doc = _load(path)
        except CassetteError:
            stats.invalid_files += 1
            continue
        if doc is None:  # removed while we looked
            continue
        per_model = stats.models.setdefault(doc.model, ModelCassetteStats())
        per_model.files += 1
        per_model.bytes += size
        per_model.recordings += len(doc.entries)
        stats.recordings += len(doc.entries)
        for entry in doc.entries.values():
            if stats.oldest is None or entry.recorded_at < stats.oldest:
                stats.oldest = entry.recorded_at
            if stats.newest is None or entry.recorded_at > stats.newest:
                stats.newest = entry.recorded_at
    return stats


def verify_cassette(root: str | Path) -> list[str]:
    """Every problem as `path: problem`: unreadable, other schema, edited, invalid, secrets."""
    problems: list[str] = []
    for path in cassette_files(root):
        try:
            doc = _load(path)
        except CassetteError as exc:
            problems.append(str(exc))
            continue
        if doc is not None:
            problems.extend(f"{path}: {problem}" for problem in _check(doc))
    return problems


def _check(doc: _Doc) -> Iterator[str]:
    actual = _hash(doc.request)
    if actual != doc.key:
        yield (
            f"key {doc.key} does not match the request, which hashes to {actual} (edited by "
            "hand?); restore the file or delete it and re-record"
        )
    if doc.path.stem != doc.key or doc.path.parent.name != doc.key[:2]:
        yield f"the file's name or folder does not match its key {doc.key}"
    if doc.path.parent.parent.name != _model_dir(doc.model):
        yield f"in the folder of another model (it records {doc.model})"
    if doc.request.get("model") != doc.model:
        yield f"the request's model {doc.request.get('model')!r} is not {doc.model!r}"
    if doc.kind == "model":
        fields = {k: v for k, v in doc.request.items() if k not in ("schema_version", "model")}
        if doc.request.get("schema_version") != REQUEST_SCHEMA_VERSION:
            yield f"request schema_version is not {REQUEST_SCHEMA_VERSION}"
        try:
            ModelRequest.model_validate(fields)
        except ValidationError as exc:
            yield f"the request is not a valid ModelRequest: {exc.errors()[0]['msg']}"
        for (trial, occurrence), entry in sorted(doc.entries.items()):
            try:
                ModelResponse.model_validate(entry.response)
            except ValidationError as exc:
                error = exc.errors()[0]
                where = ".".join(str(p) for p in error["loc"])
                yield f"trial {trial} occurrence {occurrence}: invalid response: {where}: {error['msg']}"
    if (where := find_secret(doc.to_json())) is not None:
        yield f"{where} looks like a secret (an API key or Authorization header); remove it"


def prune_cassette(root: str | Path, *, dry_run: bool) -> list[Path]:
    """Remove recordings the last run did not use (per ROOT/.last-run.json); what was removed."""
    base = Path(root)
    files = cassette_files(base)
    manifest = base / MANIFEST
    try:
        keys = set(json.loads(manifest.read_text(encoding="utf-8"))["keys"])
    except FileNotFoundError:
        raise CassetteError(
            f"{base}: no {MANIFEST}, so nothing says which recordings are in use; run once with "
            f"the cassette first (e.g. `trialkit run SUITE --cache {base} --cache-mode replay`)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CassetteError(f"{manifest}: not a valid manifest ({exc}); run again") from exc
    stale = [path for path in files if path.stem not in keys]
    if not dry_run:
        for path in stale:
            path.unlink(missing_ok=True)
            for folder in (path.parent, path.parent.parent):
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty
    return stale
