"""A cassette's files on disk: a recording and the manifest, read within bounds and written
atomically.

Every reader of a cassette file goes through `read_file`: replay and `auto` lookups, recording
(which reads the file it adds to), the closest-recording search of a miss, `trialkit cache
stats|verify|prune`, and the keeper of a Ray run. It opens the file without following it into
anything that is not a regular file, and reads at most `MAX_FILE_BYTES`: a FIFO, a device
(a recording that is a symbolic link to `/dev/zero`), a folder or a socket named `*.json` is
refused without a byte read, as is a file over the cap, and a symbolic link is followed only to
a regular file inside the cassette's folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import AwareDatetime, Field, PrivateAttr, ValidationError, model_validator

from trialkit._record import Record, nested_deeper_than

SCHEMA_VERSION = 1
MANIFEST = ".last-run.json"  # at the root: the keys each suite's last run used: `prune` keeps them
MANIFEST_VERSION = 2
MAX_DEPTH = 100
"""A recording nested deeper than this is refused: no model request or response is, and the
hashing, validation and checks of a recording recurse."""
MAX_FILE_BYTES = 256 * 1024 * 1024
"""The largest cassette file (a recording or the manifest) that is read or written: 256 MiB. A
recording holds every trial's answers to one request; one over this is refused unread (a
recording that would grow past it is refused when it is recorded)."""
Kind = Literal["model", "text", "http"]
Slot = tuple[int, int]  # (trial, occurrence)


class CassetteError(Exception):
    """A cassette file cannot be used or written; the message names it, to fix or delete."""


class _Entry(Record):
    trial: int = Field(ge=0)
    occurrence: int = Field(ge=0)
    recorded_at: AwareDatetime
    response: dict[str, Any] | None = None
    output: str | None = None
    _checked: bool = PrivateAttr(default=False)
    """A captured call's answer was found fit to replay (`cassette_http.answer_problem`)."""


class _File(Record):
    """One recording file, its entries indexed by (trial, occurrence) for fast lookups."""

    schema_version: int
    key: str
    kind: Kind
    model: str
    request: dict[str, Any]
    responses: list[_Entry] = Field(default_factory=list)
    _slots: dict[Slot, _Entry] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _index(self) -> _File:
        for e in self.responses:
            where = f"trial {e.trial} occurrence {e.occurrence}"
            if (e.response is None, e.output is None) != (self.kind == "text", self.kind != "text"):
                raise ValueError(f"{where}: a {self.kind} recording needs only its own field")
            if self._slots.setdefault((e.trial, e.occurrence), e) is not e:
                raise ValueError(f"{where} appears twice")
        return self

    def at(self, slot: Slot) -> _Entry | None:
        return self._slots.get(slot)

    def put(self, entry: _Entry) -> None:
        self._slots[entry.trial, entry.occurrence] = entry
        self.responses = [self._slots[slot] for slot in sorted(self._slots)]


def pretty(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"


# -- reading ----------------------------------------------------------------------------------

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
"""Non-blocking: opening a FIFO for reading would otherwise wait for a writer, forever."""
_CHUNK = 1 << 20


def read_file(path: Path, root: Path | None = None) -> bytes | None:
    """The bytes of the cassette file at `path`, None when there is none.

    `CassetteError`, naming the file, for anything else than a regular file of at most
    `MAX_FILE_BYTES` (checked on the open file, before reading it), for a symbolic link to
    nothing or (when `root`, the cassette's folder, is given) to a file outside `root`, and for
    a file that cannot be read.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        if os.path.islink(path):
            raise CassetteError(
                f"{path}: a symbolic link to {os.readlink(path)}, which does not exist; delete it"
            ) from None
        return None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CassetteError(
                f"{path}: {_what(path, info.st_mode)}, not a regular file: a cassette file is "
                "JSON that trialkit wrote; delete it"
            )
        if root is not None:
            _check_inside(path, root)
        if info.st_size > MAX_FILE_BYTES:
            raise CassetteError(_too_large(path, info.st_size))
        data = _read_at_most(fd, MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:  # it grew after it was opened
        raise CassetteError(_too_large(path, len(data)))
    return data


def _unreadable(path: Path, exc: OSError) -> CassetteError:
    return CassetteError(f"{path}: cannot be read ({exc.strerror or exc}); fix or delete it")


def _read_at_most(fd: int, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while size < limit:
        piece = os.read(fd, min(_CHUNK, limit - size))
        if not piece:
            break
        parts.append(piece)
        size += len(piece)
    return b"".join(parts)


def _what(path: Path, mode: int) -> str:
    kind = (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a FIFO (named pipe)"
        if stat.S_ISFIFO(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a special file"
    )
    if os.path.islink(path):
        return f"a symbolic link to {os.readlink(path)}, {kind}"
    return kind


def _check_inside(path: Path, root: Path) -> None:
    real, folder = os.path.realpath(path), os.path.realpath(root)
    try:
        inside = os.path.commonpath([real, folder]) == folder
    except ValueError:  # on another drive (Windows)
        inside = False
    if not inside:
        raise CassetteError(
            f"{path}: a symbolic link to {real}, outside the cassette folder {root}: a link in a "
            "cassette may only lead to a recording in the same cassette; delete it"
        )


def _too_large(path: Path, size: int) -> str:
    return (
        f"{path}: {size:,} bytes, over the {MAX_FILE_BYTES:,} a cassette file may hold: not a "
        "file trialkit wrote; delete it"
    )


def load_recording(path: Path, root: Path | None = None) -> _File | None:
    """The recording at `path`, None when there is none; `CassetteError` when it is unusable."""
    raw = read_file(path, root)
    return None if raw is None else parse_recording(path, raw)


def parse_recording(path: Path, raw: bytes) -> _File:
    """The recording in `raw`, the bytes of the file at `path` (which names it in errors);
    `CassetteError` when it is unusable."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise CassetteError(f"{path}: nested too deeply to read; fix or delete it") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise CassetteError(f"{path}: not readable JSON ({exc}); fix or delete it") from exc
    if nested_deeper_than(data, MAX_DEPTH):
        raise CassetteError(
            f"{path}: nested more than {MAX_DEPTH} levels deep: not a recording; fix or delete it"
        )
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise CassetteError(f"{path}: schema_version {version!r}, this trialkit reads 1")
    try:
        return _File.model_validate(data)
    except ValidationError as exc:
        raise CassetteError(f"{path}: not a cassette recording: {first_error(exc)}") from exc
    except (ValueError, TypeError, RecursionError) as exc:  # raised by a validator of ours
        raise CassetteError(f"{path}: not a cassette recording: {exc}") from exc


def read_manifest(path: Path) -> dict[str, dict[str, Any]]:
    """The manifest's suites: id -> {"written_at", "keys"}; {} when there is none yet.

    A version 1 manifest (one run's keys, no suite) reads as the keys of suite "". Raises
    `CassetteError` for a file that is not a manifest.
    """
    raw = read_file(path, path.parent)
    if raw is None:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise CassetteError(f"{path}: not a valid manifest ({exc})") from None
    try:
        if data["schema_version"] == 1:
            return {"": {"written_at": data.get("written_at"), "keys": _keys(data["keys"])}}
        suites = data["suites"]
        return {
            str(suite): {"written_at": entry.get("written_at"), "keys": _keys(entry["keys"])}
            for suite, entry in suites.items()
        }
    except (KeyError, TypeError, AttributeError) as exc:
        raise CassetteError(f"{path}: not a valid manifest (no {exc})") from None
    except ValueError as exc:
        raise CassetteError(f"{path}: not a valid manifest ({exc})") from None


def _keys(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(key, str) for key in value):
        raise ValueError("its keys are not a list of request keys")
    return value


# -- writing ----------------------------------------------------------------------------------


def write_file(path: Path, data: object) -> None:
    """Write atomically: a temp file in the same folder, fsynced, then `os.replace`d over (a
    symbolic link at `path` is replaced, never written through). `CassetteError` when the file
    would be over `MAX_FILE_BYTES`."""
    payload = pretty(data).encode("utf-8")
    if len(payload) > MAX_FILE_BYTES:
        raise CassetteError(
            f"{path}: refusing to record: the file would be {len(payload):,} bytes, over the "
            f"{MAX_FILE_BYTES:,} a cassette file may hold"
        )
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def stamp(path: Path) -> tuple[int, ...] | None:
    """What changes whenever anyone replaces the file: a new inode (`os.replace`), or else
    its size or times."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
