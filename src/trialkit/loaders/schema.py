"""The JSON Schemas of suite and task files, generated from the file models.

The schemas ship in the package (`trialkit/schemas/*.schema.json`) so editors can complete and
check suite files; regenerate them after changing a file model:

    python -m trialkit.loaders.schema           # write them
    python -m trialkit.loaders.schema --check   # exit 1 if they are stale (the tests run this)
    python -m trialkit.loaders.schema --path    # print the folder they are installed in
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from trialkit.loaders.suite_file.models import SuiteFile, TaskFile

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
"""Where the published schemas live, in the source tree and in the installed package."""

BASE_URL = "https://raw.githubusercontent.com/trialkit/trialkit/main/src/trialkit/schemas/"

SCHEMAS: dict[str, type[BaseModel]] = {
    "suite.schema.json": SuiteFile,
    "task.schema.json": TaskFile,
}


def json_schema(model: type[BaseModel], file_name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a file model, as published."""
    schema = model.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE_URL + file_name,
        **schema,
    }


def render(model: type[BaseModel], file_name: str) -> str:
    return json.dumps(json_schema(model, file_name), indent=2, ensure_ascii=False) + "\n"


def stale(folder: Path = SCHEMA_DIR) -> list[Path]:
    """The schema files in `folder` that differ from what the models generate now."""
    return [
        folder / name
        for name, model in SCHEMAS.items()
        if not (folder / name).is_file()
        or (folder / name).read_text(encoding="utf-8") != render(model, name)
    ]


def write(folder: Path = SCHEMA_DIR) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in SCHEMAS.items():
        (folder / name).write_text(render(model, name), encoding="utf-8")
        written.append(folder / name)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--path" in args:
        print(SCHEMA_DIR)
        return 0
    if "--check" in args:
        old = stale()
        for path in old:
            print(f"{path} is stale: run python -m trialkit.loaders.schema", file=sys.stderr)
        return 1 if old else 0
    for path in write():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
