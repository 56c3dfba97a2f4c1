"""Looking after a cassette folder: `trialkit cache stats|verify|prune`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from pydantic import Field, ValidationError

from trialkit._record import Record
from trialkit.models.base import REQUEST_SCHEMA_VERSION, ModelRequest, ModelResponse
from trialkit.models.cassette import (
    MANIFEST,
    CassetteError,
    _File,
    _first_error,
    _hash,
    _load,
    _model_dir,
    find_secret,
    read_manifest,
)


def cassette_files(root: str | Path) -> list[Path]:
    """Every recording file under `root`, sorted; `CassetteError` if `root` is no folder."""
    if not Path(root).is_dir():
        raise CassetteError(f"{root}: no such cassette folder")
    return sorted(p for p in Path(root).glob("[!.]*/*/*.json") if not p.name.startswith("."))


class ModelStats(Record):
    files: int = 0
    recordings: int = 0
    bytes: int = 0


class CassetteStats(Record):
    """What `trialkit cache stats` shows: how much is recorded, for which models, and when."""

    files: int = 0
    recordings: int = 0  # responses: one per trial and occurrence, summed over the files
    total_bytes: int = 0
    invalid_files: int = 0  # unreadable (`verify` says why); counted in `files` too
    models: dict[str, ModelStats] = Field(default_factory=dict)
    oldest: datetime | None = None
    newest: datetime | None = None


def cassette_stats(root: str | Path) -> CassetteStats:
    stats, times = CassetteStats(), []
    for path in cassette_files(root):
        try:
            size = path.stat().st_size
        except FileNotFoundError:  # removed meanwhile
            continue
        stats.files, stats.total_bytes = stats.files + 1, stats.total_bytes + size
        try:
            if (file := _load(path)) is None:  # removed meanwhile
                continue
        except CassetteError:
            stats.invalid_files += 1
            continue
        per_model = stats.models.setdefault(file.model, ModelStats())
        per_model.files, per_model.bytes = per_model.files + 1, per_model.bytes + size
        per_model.recordings += len(file.responses)
        stats.recordings += len(file.responses)
        times += [e.recorded_at for e in file.responses]
    stats.oldest, stats.newest = min(times, default=None), max(times, default=None)
    return stats


def verify_cassette(root: str | Path) -> list[str]:
    """Every problem as `path: problem`: unreadable, other schema, edited, invalid, a secret."""
    problems: list[str] = []
    for path in cassette_files(root):
        try:
            file = _load(path)
        except CassetteError as exc:
            problems.append(str(exc))
            continue
        try:
            problems += [f"{path}: {problem}" for problem in _check(path, file)] if file else []
        except (ValueError, TypeError, RecursionError) as exc:  # a recording nothing foresaw
            problems.append(f"{path}: cannot be checked: {exc}")
    return problems


def _check(path: Path, file: _File) -> Iterator[str]:
    if (actual := _hash(file.request)) != file.key:
        yield (
            f"the request hashes to {actual}, not to its key {file.key}: edited by hand? "
            "Restore the file, or delete it and record again"
        )
    if (path.stem, path.parent.name) != (file.key, file.key[:2]):
        yield f"its name or folder does not match its key {file.key}"
    if (path.parent.parent.name, file.request.get("model")) != (_model_dir(file.model), file.model):
        yield f"its folder or its request names another model than {file.model}"
    if file.kind == "model":
        fields = {k: v for k, v in file.request.items() if k not in ("schema_version", "model")}
        if file.request.get("schema_version") != REQUEST_SCHEMA_VERSION:
            yield f"the request's schema_version is not {REQUEST_SCHEMA_VERSION}"
        try:
            ModelRequest.model_validate(fields)
        except ValidationError as exc:
            yield f"the request is not a valid ModelRequest: {_first_error(exc)}"
        for e in file.responses:
            try:
                ModelResponse.model_validate(e.response)
            except ValidationError as exc:
                yield f"trial {e.trial} occurrence {e.occurrence}: {_first_error(exc)}"
    if file.kind == "http":
        yield from _check_http(file)
    if (secret := find_secret(file.model_dump(mode="json"))) is not None:
        yield f"{secret} looks like a secret (an API key or Authorization header): remove it"


_BODIES = ("json", "events", "text")


def _check_http(file: _File) -> Iterator[str]:
    """A call captured at the HTTP client: `{"schema_version", "api", "model", "body"}`, and
    each answer a status with one body."""
    from trialkit.capture.calls import KEY_VERSION
    from trialkit.capture.wire import recognise

    request = file.request
    if request.get("schema_version") != KEY_VERSION:
        yield f"the request's schema_version is not {KEY_VERSION}"
    api = request.get("api")
    if not isinstance(api, str) or recognise("POST", f"/v1/{_PATHS.get(api, '-')}") != api:
        yield f"the request's api {api!r} is none of {', '.join(sorted(_PATHS))}"
    if not isinstance(request.get("body"), dict):
        yield "the request has no body object"
    for e in file.responses:
        where = f"trial {e.trial} occurrence {e.occurrence}"
        answer = e.response or {}
        status = answer.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            yield f"{where}: status {status!r} is not an HTTP status"
        bodies = [name for name in _BODIES if name in answer]
        if len(bodies) != 1:
            yield f"{where}: needs exactly one of {', '.join(_BODIES)}, has {bodies or 'none'}"
        elif bodies == ["events"] and not (
            isinstance(answer["events"], list) and all(isinstance(x, str) for x in answer["events"])
        ):
            yield f"{where}: events must be a list of strings (one SSE event each)"


_PATHS = {
    "chat": "chat/completions",
    "responses": "responses",
    "messages": "messages",
    "embeddings": "embeddings",
}


def prune_cassette(root: str | Path, *, dry_run: bool) -> list[Path]:
    """Remove the recordings that no suite's last run used (per ROOT/.last-run.json); return
    them."""
    files, manifest = cassette_files(root), Path(root) / MANIFEST
    suites = read_manifest(manifest)
    if not suites:
        raise CassetteError(
            f"{root}: no {MANIFEST}, so nothing says which recordings are in use; run once with "
            f"the cassette first (e.g. `trialkit run SUITE --cache {root} --cache-mode replay`)"
        )
    keys = {key for entry in suites.values() for key in entry["keys"]}
    stale = [path for path in files if path.stem not in keys]
    for path in [] if dry_run else stale:
        path.unlink(missing_ok=True)
        for folder in (path.parent, path.parent.parent):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty
    return stale
