"""Import a Hugging Face dataset from local files (JSON, JSONL, CSV or Parquet), offline.

```python
suite = load_hf_dataset("data/", split="test", input_field="question", target_field="answer")
```

Needs the `datasets` package (`pip install 'trialkit[hf]'`). Nothing is downloaded: the
import sets `HF_HUB_OFFLINE=1` and `HF_DATASETS_OFFLINE=1` (unless they are set already) and
builds the dataset in a temporary cache that is deleted afterwards. Rows are read like
inspect_ai samples (see `load_inspect_samples`): the input, the target (any of them passes),
optional multiple-choice `choices`, an id and metadata; other columns go to the metadata.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialkit.loaders.importers._common import (
    MatchKind,
    Problems,
    check_match_kind,
    suite_id_for,
)
from trialkit.loaders.importers.inspect_samples import SampleFields, tasks_from_records
from trialkit.task import Suite

if TYPE_CHECKING:
    from trialkit.models.base import Model

INSTALL_HINT = "the Hugging Face `datasets` package is not installed; pip install 'trialkit[hf]'"

_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}


def load_hf_dataset(
    path: str | Path,
    *,
    split: str = "train",
    input_field: str = "input",
    target_field: str = "target",
    choices_field: str = "choices",
    id_field: str = "id",
    metadata_field: str = "metadata",
    match: MatchKind = "includes",
    case_sensitive: bool = False,
    model: str | Model | None = None,
) -> Suite:
    """A suite with one task per row of `split` of a local dataset: a data file, or a folder
    of them (splits inferred from file names, as `datasets.load_dataset(folder)` does)."""
    check_match_kind(match)
    path = Path(path)
    source = str(path)
    problems = Problems(source)
    rows = _rows(path, split, problems)
    problems.raise_if_any()
    fields = SampleFields(
        input=input_field,
        target=target_field,
        choices=choices_field,
        id=id_field,
        metadata=metadata_field,
    )
    tasks = tasks_from_records(
        ((f"{source}: {split} row {i}", row) for i, row in enumerate(rows, start=1)),
        fields=fields,
        match=match,
        case_sensitive=case_sensitive,
        problems=problems,
    )
    if not tasks and not problems:
        problems.add(source, f"split {split!r} has no rows")
    problems.raise_if_any()
    return Suite(
        id=suite_id_for(path),
        tasks=tasks,
        model=model,
        description=f"Hugging Face dataset {path.name} ({split})",
        metadata={"source": "huggingface", "path": source, "split": split, "match": match},
    )


def _rows(path: Path, split: str, problems: Problems) -> list[dict[str, Any]]:
    if not path.exists():
        problems.add(str(path), "no such file or folder")
        return []
    builder = _BUILDERS.get(path.suffix.lower())
    if path.is_file() and builder is None:
        problems.add(str(path), f"expected a {', '.join(sorted(_BUILDERS))} file or a folder")
        return []
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        datasets: Any = importlib.import_module("datasets")  # untyped, and an optional extra
    except ImportError:
        problems.add(str(path), INSTALL_HINT)
        return []
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="trialkit-hf-") as cache:
        try:
            if path.is_dir():
                dataset = datasets.load_dataset(
                    str(path), split=split, cache_dir=cache, keep_in_memory=True
                )
            else:
                dataset = datasets.load_dataset(
                    builder,
                    data_files={split: str(path)},
                    split=split,
                    cache_dir=cache,
                    keep_in_memory=True,
                )
            rows: list[dict[str, Any]] = dataset.to_list()
        except Exception as exc:  # datasets raises many types; each is a bad dataset here
            problems.add(str(path), f"cannot be read as a dataset: {type(exc).__name__}: {exc}")
            return []
        del dataset
    return rows
