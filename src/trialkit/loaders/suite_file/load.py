"""Suite folders and files: find them, read them, check them, build them, write them back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from trialkit.loaders.errors import FieldPath, Problem, SuiteFileError
from trialkit.loaders.paths import SUITE_FILE_SUFFIXES as FILE_SUFFIXES
from trialkit.loaders.paths import is_suite_target as is_suite_target
from trialkit.loaders.suite_file.build import build_into
from trialkit.loaders.suite_file.context import BuildContext, References
from trialkit.loaders.suite_file.documents import Document, read_document, user_path
from trialkit.loaders.suite_file.fields import describe
from trialkit.loaders.suite_file.models import DatasetSpec, SuiteFile, TaskFile
from trialkit.task import Suite

SUITE_FILE_NAMES = ("suite.yaml", "suite.yml", "suite.json")
"""What a suite folder's suite file may be called."""


def load_suite_file(path: str | Path) -> Suite:
    """The `Suite` of a suite folder or file; raises `SuiteFileError` listing every problem.

    A folder holds `suite.yaml` (or `suite.yml`, `suite.json`) and optionally `tasks/` with one
    task per `.yaml` / `.yml` / `.json` file. A file named `suite.yaml` (etc.) stands for its
    folder, `tasks/` included; any other file is a suite on its own.
    """
    suite, problems = _load(Path(path))
    if suite is None:
        raise SuiteFileError(problems)
    return suite


def validate_suite_file(path: str | Path) -> list[Problem]:
    """Every problem of a suite folder or file (empty when it loads); never raises for them.

    Checking imports the Python the suite references and reads its data files, as loading does.
    """
    return _load(Path(path))[1]


def load_suite_model(path: str | Path) -> SuiteFile:
    """The file model of a suite folder or file, its `tasks/` files merged into `tasks`.

    Only the files themselves are checked (syntax and fields): nothing is imported and data
    files are not read. Raises `SuiteFileError` listing every problem.
    """
    loaded = _read(Path(path))
    if loaded.model is None or loaded.problems:
        raise SuiteFileError(loaded.problems)
    return loaded.model


def dump_suite_model(model: SuiteFile, format: Literal["yaml", "json"] = "yaml") -> str:
    """`model` as the text of a suite file; loading it gives an equal model."""
    data = model.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    if format == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return str(yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100))


def save_suite(model: SuiteFile, path: str | Path) -> Path:
    """Write `model` to `path` (`.json` for JSON, else YAML; a folder gets a `suite.yaml`)."""
    target = Path(path)
    if target.is_dir() or not target.suffix:
        target = target / "suite.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    text = dump_suite_model(model, "json" if target.suffix.lower() == ".json" else "yaml")
    target.write_text(text, encoding="utf-8")
    return target


_LINE_BREAKS = ("\x85", "\u2028", "\u2029")


class _Dumper(yaml.SafeDumper):
    """Writes strings holding the line breaks YAML reads back as newlines double-quoted,
    where they are escaped (PyYAML writes them raw otherwise, and the round trip breaks)."""

    def represent_str(self, data: str) -> yaml.ScalarNode:
        if any(c in data for c in _LINE_BREAKS):
            return self.represent_scalar("tag:yaml.org,2002:str", data, style='"')
        return super().represent_str(data)


_Dumper.add_representer(str, _Dumper.represent_str)


@dataclass
class _Read:
    """A suite's files, read and checked, and where each part of the model came from."""

    base_dir: Path
    model: SuiteFile | None = None
    problems: list[Problem] = field(default_factory=list)
    complete: bool = True
    """Every task the files declare made it into the model."""
    suite_doc: Document | None = None
    task_origins: list[tuple[Document, FieldPath]] = field(default_factory=list)
    dataset_origins: list[int] = field(default_factory=list)
    refused_ids: dict[str, str] = field(default_factory=dict)
    """Ids of tasks refused for other problems, and where they are: still taken."""

    def locate(self, path: FieldPath) -> tuple[str, int | None, FieldPath]:
        doc, inner = self.suite_doc, path
        if len(path) >= 2 and isinstance(path[1], int):
            if path[0] == "tasks" and path[1] < len(self.task_origins):
                doc, prefix = self.task_origins[path[1]]
                inner = (*prefix, *path[2:])
            elif path[0] == "dataset" and path[1] < len(self.dataset_origins):
                inner = ("dataset", self.dataset_origins[path[1]], *path[2:])
        assert doc is not None
        shown = user_path(inner, doc.data)
        return doc.file, doc.line_of(shown), shown


def _load(path: Path) -> tuple[Suite | None, list[Problem]]:
    loaded = _read(path)
    suite = None
    if loaded.model is not None:
        ctx = BuildContext(References(loaded.base_dir), loaded.locate, loaded.problems)
        suite = build_into(
            ctx, loaded.model, loaded.base_dir, complete=loaded.complete, taken=loaded.refused_ids
        )
    problems = sorted(loaded.problems, key=lambda p: (p.file, p.line or 0))
    return (None if problems else suite), problems


def _read(path: Path) -> _Read:
    suite_path, tasks_dir, problems = _find(path)
    read = _Read(path if suite_path is None else suite_path.parent, problems=problems)
    if suite_path is None:
        return read
    doc, found = read_document(suite_path, str(suite_path))
    read.problems.extend(found)
    task_files = _task_files(tasks_dir, read.problems) if tasks_dir is not None else []
    if doc is not None:
        read.suite_doc = doc
        _read_suite(read, doc)
    file_tasks = []
    for task_path in task_files:
        task_doc, found = read_document(task_path, str(task_path))
        read.problems.extend(found)
        if task_doc is None:
            read.complete = False
            continue
        task, found = _validate(task_doc, TaskFile, task_doc.data, (), "task")
        read.problems.extend(found)
        if task is None:
            read.complete = False
            _refused(read, task_doc, task_doc.data, ())
        else:
            file_tasks.append(task)
            read.task_origins.append((task_doc, ()))
    if read.model is not None:
        read.model = read.model.model_copy(update={"tasks": [*read.model.tasks, *file_tasks]})
    return read


def _find(path: Path) -> tuple[Path | None, Path | None, list[Problem]]:
    """The suite file and the tasks folder of a target."""
    if path.is_dir():
        found = [path / name for name in SUITE_FILE_NAMES if (path / name).is_file()]
        if len(found) == 1:
            return found[0], path / "tasks", []
        names = ", ".join(SUITE_FILE_NAMES)
        if not found:
            return None, None, [Problem(str(path), None, "", f"no suite file here ({names})")]
        both = " and ".join(p.name for p in found)
        return None, None, [Problem(str(path), None, "", f"{both}: keep one suite file")]
    if path.is_file():
        tasks = path.parent / "tasks" if path.name.lower() in SUITE_FILE_NAMES else None
        return path, tasks, []
    return None, None, [Problem(str(path), None, "", "no such file or folder")]


def _task_files(folder: Path, problems: list[Problem]) -> list[Path]:
    if not folder.is_dir():
        return []
    files = []
    for path in sorted(folder.rglob("*")):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue
        if path.is_dir():
            continue
        if path.suffix.lower() in FILE_SUFFIXES:
            files.append(path)
        else:
            problems.append(
                Problem(str(path), None, "", "not a task file (tasks/ holds .yaml, .yml or .json)")
            )
    return files


def _read_suite(read: _Read, doc: Document) -> None:
    raw = doc.data
    if not isinstance(raw, dict):
        read.problems.extend(_validate(doc, SuiteFile, raw, (), "suite")[1])
        return
    rest = dict(raw)
    tasks_raw = rest.pop("tasks") if isinstance(raw.get("tasks"), list) else []
    datasets_raw = raw.get("dataset")
    if isinstance(datasets_raw, dict | list):
        del rest["dataset"]
    blocks: list[tuple[FieldPath, Any]]
    if isinstance(datasets_raw, list):
        blocks = [(("dataset", k), block) for k, block in enumerate(datasets_raw)]
    elif isinstance(datasets_raw, dict):
        blocks = [(("dataset", 0), datasets_raw)]
    else:
        blocks = []
    model, found = _validate(doc, SuiteFile, rest, (), "suite")
    read.problems.extend(found)
    if model is None:
        model = _salvage(rest)
    tasks: list[TaskFile] = []
    for i, item in enumerate(tasks_raw):
        task, found = _validate(doc, TaskFile, item, ("tasks", i), "task")
        read.problems.extend(found)
        if task is not None:
            tasks.append(task)
            read.task_origins.append((doc, ("tasks", i)))
        else:
            _refused(read, doc, item, ("tasks", i))
    datasets: list[DatasetSpec] = []
    for block_path, item in blocks:
        block, found = _validate(doc, DatasetSpec, item, block_path, "dataset block")
        read.problems.extend(found)
        if block is not None:
            datasets.append(block)
            read.dataset_origins.append(int(block_path[1]))
    read.complete = len(tasks) == len(tasks_raw) and len(datasets) == len(blocks)
    if model is not None:
        read.model = model.model_copy(update={"tasks": tasks, "dataset": datasets})


def _refused(read: _Read, doc: Document, raw: Any, path: FieldPath) -> None:
    task_id = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(task_id, str):
        line = doc.line_of((*path, "id"))
        read.refused_ids.setdefault(task_id, doc.file if line is None else f"{doc.file}:{line}")


def _salvage(raw: dict[str, Any]) -> SuiteFile | None:
    """The suite without its bad fields (and a stand-in id), so that the tasks, datasets and
    references can still be checked and every problem reported at once."""
    try:
        return SuiteFile.model_validate(raw)
    except ValidationError as exc:
        bad = {error["loc"][0] for error in exc.errors() if error["loc"]}
    kept = {key: value for key, value in raw.items() if key not in bad}
    kept.setdefault("id", "suite")
    try:
        return SuiteFile.model_validate(kept)
    except ValidationError:
        return None


def _validate(
    doc: Document, model: type[Any], data: Any, prefix: FieldPath, what: str
) -> tuple[Any, list[Problem]]:
    if not isinstance(data, dict):
        if data is None and not prefix:
            message = f"the file is empty: a {what} file is a mapping of {what} fields"
        else:
            message = f"expected a mapping of {what} fields, got {describe(data)}"
        return None, [doc.problem(prefix, message)]
    return doc.validate(model, data, prefix)
