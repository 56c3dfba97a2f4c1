"""Import openai/evals samples: a JSONL file, one `{"input": ..., "ideal": ...}` per line.

```python
suite = load_openai_evals("samples.jsonl", match="includes", model="openai/gpt-4o-mini")
```

`input` is a string or a list of chat messages (a system message included); `ideal` is a
string or a list of strings, graded as evals' basic templates do (`match`: the output starts
with an ideal; `includes`: it contains one; `fuzzy_match`: either contains the other after
normalisation). Other keys of a sample are kept in the task's metadata.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialkit.loaders.importers._common import (
    MatchKind,
    Problems,
    answer_grader,
    check_match_kind,
    json_kind,
    parse_json,
    read_messages,
    read_text,
    suite_id_for,
    where,
)
from trialkit.task import Suite, SuiteError, Task
from trialkit.transcript import Message

if TYPE_CHECKING:
    from trialkit.models.base import Model


def load_openai_evals(
    path: str | Path,
    *,
    match: MatchKind = "match",
    model: str | Model | None = None,
    id_prefix: str | None = None,
    case_sensitive: bool = True,
) -> Suite:
    """A suite with one task per sample of an openai/evals JSONL file.

    Task ids are `<id_prefix>-<line number>` (the prefix defaults to the file's name), so a
    task points at its line. Every problem of the file (bad JSON, a missing or ill-typed
    `input` or `ideal`) is collected and raised at once as `ImportFailed`.
    """
    check_match_kind(match)
    path = Path(path)
    source = str(path)
    problems = Problems(source)
    text = read_text(path, problems)
    problems.raise_if_any()
    assert text is not None
    prefix = suite_id_for(path) if id_prefix is None else id_prefix
    tasks: list[Task] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        task = _task(line, number, source, prefix, match, case_sensitive, problems)
        if task is not None:
            tasks.append(task)
    if not tasks and not problems:
        problems.add(source, "no samples (the file has no JSON lines)")
    problems.raise_if_any()
    return Suite(
        id=suite_id_for(path),
        tasks=tasks,
        model=model,
        description=f"openai/evals samples from {path.name}, graded with {match}",
        metadata={"source": "openai/evals", "path": source, "match": match},
    )


def _task(
    line: str,
    number: int,
    source: str,
    prefix: str,
    match: MatchKind,
    case_sensitive: bool,
    problems: Problems,
) -> Task | None:
    at = where(source, number)
    try:
        sample = parse_json(line)
    except json.JSONDecodeError as exc:
        problems.add(at, f"invalid JSON: {exc.msg} (column {exc.colno})")
        return None
    if not isinstance(sample, dict):
        problems.add(at, f"expected a JSON object, got {json_kind(sample)}")
        return None
    prompt = _input(sample, at, problems)
    ideals = _ideals(sample, at, problems)
    if prompt is None or ideals is None:
        return None
    extra: dict[str, Any] = {k: v for k, v in sample.items() if k not in ("input", "ideal")}
    try:
        return Task(
            id=f"{prefix}-{number}" if prefix else str(number),
            input=prompt,
            graders=[answer_grader(match, ideals, case_sensitive=case_sensitive)],
            reference=ideals[0],
            metadata={**extra, "ideal": ideals, "line": number},
        )
    except (SuiteError, ValueError) as exc:
        problems.add(at, str(exc))
        return None


def _input(sample: dict[str, Any], at: str, problems: Problems) -> str | list[Message] | None:
    if "input" not in sample:
        problems.add(f"{at}: input", "missing")
        return None
    value = sample["input"]
    if isinstance(value, str):
        if not value.strip():
            problems.add(f"{at}: input", "empty")
            return None
        return value
    if isinstance(value, list):
        return read_messages(value, f"{at}: input", problems)
    problems.add(
        f"{at}: input", f"expected a string or a list of chat messages, got {json_kind(value)}"
    )
    return None


def _ideals(sample: dict[str, Any], at: str, problems: Problems) -> list[str] | None:
    if "ideal" not in sample:
        problems.add(f"{at}: ideal", "missing (the answer to grade against)")
        return None
    value = sample["ideal"]
    ideals = [value] if isinstance(value, str) else value
    if not isinstance(ideals, list):
        problems.add(
            f"{at}: ideal", f"expected a string or a list of strings, got {json_kind(value)}"
        )
        return None
    odd = [i for i in ideals if not isinstance(i, str)]
    if odd:
        problems.add(f"{at}: ideal", f"expected a list of strings, got {json_kind(odd[0])} in it")
        return None
    if not ideals or not all(i.strip() for i in ideals):
        problems.add(f"{at}: ideal", "empty (an empty answer would match any output)")
        return None
    return ideals
