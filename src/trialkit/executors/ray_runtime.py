"""What Ray actors get besides their set-up: the suite's folder, trialkit, chosen variables.

A Ray worker node need not have the suite's files, or this trialkit, at the paths they have
here. So every actor is created with a Ray runtime environment (`.options(runtime_env=...)`,
per actor, so it works the same on a Ray that trialkit started and on one your code
initialised; a job-level runtime environment of yours still applies, and these fields override
its own). Ray takes local folders only in `ray.init`, so `upload` zips and uploads them first,
once per run, and the actors name them by URI:

- `working_dir`: the suite's folder (`shipped_folder`) without `EXCLUDES` (and what its
  `.gitignore` and `.rayignore` files leave out). Ray unpacks it on each node (once per
  content); the actor runs in that copy, and `localise` points the paths of the set-up (the
  target, its working directory, `sys.path`) into it.
- `py_modules`: the `trialkit` package this process imports, so actors run the same code as
  the run that sends them trials. Its dependencies must be installed on the nodes.

The variables `--ray-env` names (`actor_env_vars`) are not in the runtime environment: Ray's
runtime-env agent logs each environment it creates, `env_vars` values included, on every
node, and its dashboard and state API show them. They go in the actor's set-up instead, and
the actor sets them before it loads the suite.

The cassette folder is not shipped (`runtime_env` leaves it out of the suite's folder): it stays
here, and the actors reach it through the run's keeper (`trialkit.executors.ray_cassette`), so
it need not be on their nodes. The store is never written by actors.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialkit.executors.processes import WorkerError
from trialkit.run.settings import SettingsError

if TYPE_CHECKING:
    from trialkit.loaders.target import SuiteSource

EXCLUDES = (
    *(".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__"),
    *(".mypy_cache", ".pytest_cache", ".ruff_cache", "*.pyc", "*.egg-info"),
    *(".trialkit", "*.db", "*.db-wal", "*.db-shm", "*.sqlite", "*.sqlite3"),
    *(".env", ".env.*"),
)
"""Never shipped (gitignore patterns): version control, virtual environments, caches, stores
(actors never write one) and `.env` files (secrets go by `--ray-env`, by name)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PREFIXES = ("evals:", "inspect:", "promptfoo:")


def shipped_folder(source: SuiteSource) -> tuple[Path, dict[str, Any]]:
    """The folder shipped to the actors, and `source` as the actors load it (as a dict).

    The folder is the working directory the suite was loaded in (so the suite's imports and
    relative paths work as here), or the suite file's (or suite folder's) own folder when it
    lies outside that directory; the target then names it by its absolute path, from there.
    """
    loaded = dataclasses.asdict(source)
    cwd = Path(source.cwd or os.getcwd()).resolve()
    path, prefix, rest = _target_path(source.target, cwd)
    if path is not None and not path.is_relative_to(cwd):
        folder = path if path.is_dir() else path.parent
        return folder, {**loaded, "target": f"{prefix}{path}{rest}", "cwd": str(folder)}
    if cwd == Path(cwd.anchor) or cwd == Path.home().resolve():
        raise SettingsError(
            f"--executor ray ships the folder the suite is loaded from to the Ray actors, and "
            f"that is {cwd}: run trialkit from the suite's project folder"
        )
    return cwd, {**loaded, "cwd": str(cwd)}


def _target_path(target: str, cwd: Path) -> tuple[Path | None, str, str]:
    """The file or folder `target` names, if it names one (`path.py:name`, `evals:file`), with
    what comes before it (`evals:`) and after it (`:name`)."""
    prefix = next((p for p in _PREFIXES if target.startswith(p)), "")
    text = target.removeprefix(prefix)
    head, colon, name = text.rpartition(":")
    for candidate, rest in ((text, ""), (head, colon + name)):
        if candidate and (cwd / candidate).exists():
            return (cwd / candidate).resolve(), prefix, rest
    return None, "", ""


def runtime_env(folder: Path, cassette: str | None) -> dict[str, Any]:
    """The runtime environment of every actor of a run (see the module's docstring)."""
    import trialkit

    excludes = list(EXCLUDES)
    if cassette is not None and Path(cassette).resolve().is_relative_to(folder):
        excludes.append("/" + Path(cassette).resolve().relative_to(folder).as_posix())
    return {
        "working_dir": str(folder),
        "py_modules": [str(Path(trialkit.__file__).parent)],
        "excludes": excludes,
    }


def upload(runtime_env: dict[str, Any]) -> dict[str, Any]:
    """`runtime_env` with its folders zipped and uploaded to the cluster, named by their URIs:
    Ray takes local folders only in `ray.init`, and an actor's own runtime environment only by
    URI. Each folder is uploaded once per content. `WorkerError` when Ray refuses one."""
    try:
        from ray._private.runtime_env.packaging import GCS_STORAGE_MAX_SIZE
        from ray._private.runtime_env.py_modules import upload_py_modules_if_needed
        from ray._private.runtime_env.working_dir import upload_working_dir_if_needed
    except ImportError as exc:
        raise WorkerError(
            f"this Ray ({_ray_version()}) cannot ship the suite's folder the way trialkit "
            f"knows: {exc}"
        ) from None
    quiet = logging.getLogger("trialkit.executors.ray.upload")
    quiet.setLevel(logging.ERROR)  # not Ray's progress lines and notes on default excludes
    uploaded = dict(runtime_env)
    with tempfile.TemporaryDirectory(prefix="trialkit-ray-") as scratch:  # the zips, briefly
        for step, what in (
            (upload_py_modules_if_needed, f"trialkit ({uploaded['py_modules'][0]})"),
            (upload_working_dir_if_needed, f"the suite's folder {uploaded['working_dir']}"),
        ):
            try:
                uploaded = step(uploaded, include_gitignore=True, scratch_dir=scratch, logger=quiet)
            except Exception as exc:
                limit = f"{GCS_STORAGE_MAX_SIZE / (1 << 20):g} MiB"
                raise WorkerError(
                    f"cannot ship {what} to the Ray actors (Ray takes at most {limit} zipped; "
                    f"leave files out with a .gitignore or .rayignore there): {_cause(exc)}"
                ) from None
    uploaded.pop("excludes", None)  # used by the upload only
    return uploaded


def _ray_version() -> str:
    import ray

    return f"Ray {getattr(ray, '__version__', '?')}"


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(line.strip() for line in text[:6])[:1000] or type(exc).__name__


def actor_env_vars(names: Sequence[str]) -> dict[str, str]:
    """The variables `names` with their values in this process; `SettingsError` naming those
    that are not set (or are not variable names)."""
    wrong = [name for name in names if not _NAME.fullmatch(name)]
    if wrong:
        raise SettingsError(f"--ray-env: not an environment variable name: {', '.join(wrong)}")
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise SettingsError(
            f"--ray-env: {', '.join(missing)} not set in this environment, so it cannot be "
            "passed to the Ray actors"
        )
    return {name: os.environ[name] for name in names}


def parse_names(values: Sequence[str]) -> tuple[str, ...]:
    """`--ray-env A --ray-env B,C` as (A, B, C), each name once."""
    names = (part.strip() for value in values for part in value.split(","))
    return tuple(dict.fromkeys(name for name in names if name))


def localise(setup: dict[str, Any], copy: Path) -> dict[str, Any]:
    """`setup` with the paths under the shipped folder moved into its copy on this node."""
    root = setup.get("shipped")
    if root is None:
        return setup

    def moved(path: str) -> str:
        given = Path(path)
        if given.is_absolute() and given.is_relative_to(root):
            return str(copy / given.relative_to(root))
        return path

    source = dict(setup["source"])
    source["cwd"] = moved(source["cwd"]) if source["cwd"] else str(copy)
    pattern = re.compile(re.escape(root) + r"(?=/|:|$)")
    source["target"] = pattern.sub(lambda _: str(copy), source["target"], count=1)
    sys_path = [moved(entry) for entry in setup["sys_path"]]
    return {**setup, "source": source, "sys_path": sys_path}
