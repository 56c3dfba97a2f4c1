"""Import inspect_ai samples from a JSON, JSONL or CSV file.

```python
suite = load_inspect_samples("samples.jsonl", model="openai/gpt-4o-mini")
```

Fields, as inspect_ai reads them:

- `input`: a string or a list of chat messages.
- `target`: a string or a list of strings; the output passes when it contains one (inspect's
  `includes()`, case-insensitive); `match=` picks `match` (starts with) or `fuzzy_match`.
- `choices`: a multiple-choice question. The choices are appended to the input as `A) ...`
  lines with an instruction to reply `ANSWER: <letter>`, and the target, one or more letters
  (or the text of a choice), is graded with `choice_answer`: the answer must pick exactly the
  target letters. In CSV, choices are separated by commas (or spaces when there is no comma).
- `id`: the task id (the record's number when absent); `metadata`: an object (in CSV, JSON
  text) that becomes the task's metadata, with any other fields of the record.
- `files`, `setup` and `sandbox` need a sandbox, which this importer does not build: a sample
  using them is reported as a problem, never run without them.
"""

from __future__ import annotations

import csv
import json
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialkit.graders.base import Grader
from trialkit.graders.match import choice_answer
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
)
from trialkit.task import Suite, SuiteError, Task
from trialkit.transcript import Message

if TYPE_CHECKING:
    from trialkit.models.base import Model

Record = tuple[str, dict[str, Any]]
"""Where a record is (`file:line`, or `file: sample 3`) and its fields."""

_SANDBOX_FIELDS = ("files", "setup", "sandbox")


@dataclass(frozen=True)
class SampleFields:
    """Which field of a record holds each part of a sample (inspect_ai's `FieldSpec`)."""

    input: str = "input"
    target: str = "target"
    choices: str = "choices"
    id: str = "id"
    metadata: str = "metadata"


def load_inspect_samples(
    path: str | Path,
    *,
    match: MatchKind = "includes",
    case_sensitive: bool = False,
    model: str | Model | None = None,
    fields: SampleFields = SampleFields(),
) -> Suite:
    """A suite with one task per sample of an inspect_ai dataset file (.json, .jsonl, .csv).

    Every problem of the file is collected and raised at once as `ImportFailed`.
    """
    check_match_kind(match)
    path = Path(path)
    source = str(path)
    problems = Problems(source)
    text = read_text(path, problems)
    problems.raise_if_any()
    assert text is not None
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        records = list(_jsonl_records(text, source, problems))
    elif suffix == ".json":
        records = list(_json_records(text, source, problems))
    elif suffix == ".csv":
        records = list(_csv_records(text, source))
    else:
        problems.add(source, "expected a .json, .jsonl or .csv file")
        problems.raise_if_any()
        records = []
    tasks = tasks_from_records(
        records,
        fields=fields,
        match=match,
        case_sensitive=case_sensitive,
        problems=problems,
        blank_is_absent=suffix == ".csv",
    )
    if not tasks and not problems:
        problems.add(source, "no samples")
    problems.raise_if_any()
    return Suite(
        id=suite_id_for(path),
        tasks=tasks,
        model=model,
        description=f"inspect_ai samples from {path.name}",
        metadata={"source": "inspect_ai", "path": source, "match": match},
    )


def _jsonl_records(text: str, source: str, problems: Problems) -> Iterator[Record]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        at = f"{source}:{number}"
        try:
            value = parse_json(line)
        except json.JSONDecodeError as exc:
            problems.add(at, f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(value, dict):
            problems.add(at, f"expected a JSON object, got {json_kind(value)}")
            continue
        yield at, value


def _json_records(text: str, source: str, problems: Problems) -> Iterator[Record]:
    try:
        value = parse_json(text)
    except json.JSONDecodeError as exc:
        problems.add(f"{source}:{exc.lineno}", f"invalid JSON: {exc.msg} (column {exc.colno})")
        return
    if not isinstance(value, list):
        problems.add(source, f"expected a JSON list of samples, got {json_kind(value)}")
        return
    for number, item in enumerate(value, start=1):
        at = f"{source}: sample {number}"
        if not isinstance(item, dict):
            problems.add(at, f"expected a JSON object, got {json_kind(item)}")
            continue
        yield at, item


def _csv_records(text: str, source: str) -> Iterator[Record]:
    reader = csv.DictReader(text.splitlines(keepends=True))
    start = 2
    for row in reader:
        yield f"{source}:{start}", {k: v for k, v in row.items() if k is not None}
        start = reader.line_num + 1


def tasks_from_records(
    records: Iterable[Record],
    *,
    fields: SampleFields,
    match: MatchKind,
    case_sensitive: bool,
    problems: Problems,
    blank_is_absent: bool = False,
) -> list[Task]:
    """Tasks from inspect_ai-shaped records; problems are noted, not raised.

    `blank_is_absent` treats empty strings as missing fields (a CSV cell cannot be null).
    """
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for number, (at, raw) in enumerate(records, start=1):
        record = {k: v for k, v in raw.items() if not (blank_is_absent and v == "")}
        task = _task(record, number, at, fields, match, case_sensitive, problems)
        if task is None:
            continue
        if task.id in seen:
            problems.add(f"{at}: {fields.id}", f"{task.id!r} is also the id of {seen[task.id]}")
            continue
        seen[task.id] = at
        tasks.append(task)
    return tasks


def _task(
    record: dict[str, Any],
    number: int,
    at: str,
    fields: SampleFields,
    match: MatchKind,
    case_sensitive: bool,
    problems: Problems,
) -> Task | None:
    ok = True
    for name in _SANDBOX_FIELDS:
        if record.get(name) not in (None, {}, []):
            problems.add(
                f"{at}: {name}",
                "needs an inspect_ai sandbox, which trialkit does not import; remove the field "
                "or write the task in Python with an Environment",
            )
            ok = False
    prompt = _input(record.get(fields.input), f"{at}: {fields.input}", problems)
    targets = _targets(record.get(fields.target), f"{at}: {fields.target}", problems)
    choices = _choices(record.get(fields.choices), f"{at}: {fields.choices}", problems)
    metadata = _metadata(record.get(fields.metadata), f"{at}: {fields.metadata}", problems)
    if prompt is None or targets is None or metadata is None or choices is None or not ok:
        return None
    grader: Grader
    if choices:
        letters = _target_letters(targets, choices, f"{at}: {fields.target}", problems)
        if letters is None:
            return None
        prompt = _with_choices(prompt, choices, multiple=len(letters) > 1)
        grader = choice_answer(letters)
        metadata = {**metadata, "choices": choices}
    else:
        grader = answer_grader(match, targets, case_sensitive=case_sensitive)
    used = {fields.input, fields.target, fields.choices, fields.id, fields.metadata}
    others = {k: v for k, v in record.items() if k not in used and k not in _SANDBOX_FIELDS}
    raw_id = record.get(fields.id)
    task_id = str(number) if raw_id is None else str(raw_id)
    try:
        return Task(
            id=task_id,
            input=prompt,
            graders=[grader],
            reference=targets[0],
            metadata={**others, **metadata, "target": targets},
        )
    except (SuiteError, ValueError) as exc:
        problems.add(at, str(exc))
        return None


def _input(value: object, at: str, problems: Problems) -> str | list[Message] | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list):
        return read_messages(value, at, problems)
    if value is None or value == "":
        problems.add(at, "missing")
    else:
        problems.add(at, f"expected a string or a list of chat messages, got {json_kind(value)}")
    return None


def _targets(value: object, at: str, problems: Problems) -> list[str] | None:
    if value is None:
        problems.add(at, "missing (the answer to grade against)")
        return None
    if isinstance(value, list):
        targets = [_text(item) for item in value]
    elif isinstance(value, str | int | float) and not isinstance(value, bool):
        targets = [_text(value)]
    else:
        problems.add(at, f"expected a string or a list of strings, got {json_kind(value)}")
        return None
    if not targets or not all(t.strip() for t in targets):
        problems.add(at, "empty (an empty answer would match any output)")
        return None
    return targets


def _text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _choices(value: object, at: str, problems: Problems) -> list[str] | None:
    """The choices (an empty list when there are none), or `None` after noting a problem."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = value.split(",") if "," in value else value.split()
        choices = [p.strip() for p in parts]
    elif isinstance(value, list):
        choices = [_text(c) for c in value]
    else:
        problems.add(at, f"expected a list of strings, got {json_kind(value)}")
        return None
    if not 2 <= len(choices) <= len(string.ascii_uppercase):
        problems.add(at, f"expected 2 to 26 choices, got {len(choices)}")
        return None
    return choices


def _target_letters(
    targets: list[str], choices: list[str], at: str, problems: Problems
) -> list[str] | None:
    letters = string.ascii_uppercase[: len(choices)]
    picked: list[str] = []
    for target in targets:
        letter = target.strip().upper()
        if len(letter) == 1 and letter in letters:
            picked.append(letter)
        elif target in choices:
            picked.append(letters[choices.index(target)])
        else:
            problems.add(
                at,
                f"{target!r} is neither a choice letter ({letters[0]}-{letters[-1]}) nor the "
                "text of a choice",
            )
            return None
    return picked


def _with_choices(
    prompt: str | list[Message], choices: list[str], *, multiple: bool
) -> str | list[Message]:
    letters = string.ascii_uppercase[: len(choices)]
    if multiple:
        ask = (
            "Reply with a line 'ANSWER: <letters>' giving the letters of every correct choice, "
            f"separated by commas (from {', '.join(letters)})."
        )
    else:
        ask = (
            "Reply with a line 'ANSWER: <letter>' giving the letter of the correct choice "
            f"(one of {', '.join(letters)})."
        )
    listed = "\n".join(
        f"{letter}) {choice}" for letter, choice in zip(letters, choices, strict=False)
    )

    def render(question: str) -> str:
        return f"Answer the following multiple-choice question. {ask}\n\n{question}\n\n{listed}"

    if isinstance(prompt, str):
        return render(prompt)
    users = [i for i, m in enumerate(prompt) if m.role == "user"]
    if not users:
        return [*prompt, Message(role="user", content=render(""))]
    updated = list(prompt)
    updated[users[-1]] = Message(role="user", content=render(prompt[users[-1]].content))
    return updated


def _metadata(value: object, at: str, problems: Problems) -> dict[str, Any] | None:
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except json.JSONDecodeError as exc:
            problems.add(at, f"invalid JSON: {exc.msg}")
            return None
    if not isinstance(value, dict):
        problems.add(at, f"expected an object, got {json_kind(value)}")
        return None
    return value
