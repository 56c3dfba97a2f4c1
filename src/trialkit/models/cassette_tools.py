"""Looking after a cassette folder: `trialkit cache stats|verify|prune`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from pydantic import Field, ValidationError

from trialkit._record import Record
from trialkit.models.base import REQUEST_SCHEMA_VERSION, ModelRequest, ModelResponse
from trialkit.models.cassette import _hash, _model_dir, find_secret
from trialkit.models.cassette_files import (
    MANIFEST,
    CassetteError,
    _File,
    first_error,
    load_recording,
    parse_recording,
    read_file,
    read_manifest,
)
from trialkit.models.cassette_http import replay_problem


def cassette_files(root: str | Path) -> list[Path]:
    """Every recording file under `root`, sorted; `CassetteError` if `root` is no folder. What
    is named like one is listed, whatever it is (a folder, a FIFO, a link): its reader refuses
    what is not a recording."""
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
            raw = read_file(path, Path(root))
            if raw is None:  # removed meanwhile
                continue
        except CassetteError:  # not a regular file, too large, unreadable
            stats.files, stats.invalid_files = stats.files + 1, stats.invalid_files + 1
            continue
        size = len(raw)
        stats.files, stats.total_bytes = stats.files + 1, stats.total_bytes + size
        try:
            file = parse_recording(path, raw)
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
    """Every problem as `path: problem`, one line each: unreadable (or not a regular file, or
    too large), other schema, edited, invalid, a secret; for a captured call, each recording
    unfit to replay as `path: trial T occurrence O: problem`."""
    problems: list[str] = []
    for path in cassette_files(root):
        try:
            file = load_recording(path, Path(root))
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
            yield f"the request is not a valid ModelRequest: {first_error(exc)}"
        for e in file.responses:
            try:
                ModelResponse.model_validate(e.response)
            except ValidationError as exc:
                yield f"trial {e.trial} occurrence {e.occurrence}: {first_error(exc)}"
    if file.kind == "http":
        yield from _check_http(file)
    if (secret := find_secret(file.model_dump(mode="json"))) is not None:
        yield f"{secret} looks like a secret (an API key or Authorization header): remove it"


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
        if (problem := replay_problem(api, e.response)) is not None:
            yield f"trial {e.trial} occurrence {e.occurrence}: {problem}"


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
    stale = [path for path in files if path.stem not in keys and not _is_folder(path)]
    for path in [] if dry_run else stale:
        path.unlink(missing_ok=True)  # a link, a FIFO... is removed, never followed
        for folder in (path.parent, path.parent.parent):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty
    return stale


def _is_folder(path: Path) -> bool:
    """A real folder named like a recording (not a link to one): `verify` names it, `prune`
    leaves it, since what it holds is not known to be a recording."""
    return path.is_dir() and not path.is_symlink()
