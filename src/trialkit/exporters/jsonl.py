"""`JsonlExporter`: a run as JSON Lines, one line per trial with its events.

Every line is an object with a `type`:

- `{"type": "run", ...}` first: the run (id, name, start, config) and its suite;
- `{"type": "trial", ...}` for each trial as it finishes: ids, verdict, status, timing, usage
  and cost (the agent's and the graders'), error, scores, and `events`, what happened in order:
  per turn a `turn`, its `message`s, its `model_call`s each followed by the `tool_call`s it
  asked for, the turn's other `tool_call`s and its `reasoning`; then the judges' `model_call`s
  and a `score` per score;
- `{"type": "run_end", ...}` last, with the run's status; a file without it is from a run that
  was still going or crashed.

`jq 'select(.type == "trial") | {task_id, trial, verdict}' trace.jsonl` lists the verdicts.

Without `include_content`, text written by people or models (messages, turn inputs and outputs,
tool arguments and results, reasoning, model requests and responses, the final output, tracebacks,
the world's state, diffs, artifacts, score metadata) is left out; lengths and counts stay
(`"content_chars": 123`). Score rationales are trialkit's or the graders' words and stay.

Each line is written with one `write` call on a file opened for appending, so a crash keeps
every finished trial and never a half line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from trialkit.capture.views import request_view
from trialkit.exporters.base import Exporter
from trialkit.secrets import redact_json
from trialkit.transcript import Message, ModelCall, ToolCall, Transcript

if TYPE_CHECKING:
    from trialkit.report import RunInfo, SuiteInfo
    from trialkit.score import Score
    from trialkit.trial import Trial

JSONL_SCHEMA_VERSION = 1


class JsonlExporter(Exporter):
    """Writes a run to `path` (a file name, or an open binary stream that is left open).

    The file is replaced when the run starts, unless `append`. `trials` counts lines written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | IO[bytes],
        *,
        include_content: bool = False,
        append: bool = False,
    ) -> None:
        self.path = path
        self.include_content = include_content
        self.append = append
        self.trials = 0
        self._fd: int | None = None
        self._suite_id: str | None = None

    def __repr__(self) -> str:
        return f"JsonlExporter({self.path!r})"

    def on_run_start(self, run: RunInfo, suite: SuiteInfo) -> None:
        self._open()
        self._suite_id = suite.id
        self.trials = 0
        self._write(
            {
                "type": "run",
                "schema_version": JSONL_SCHEMA_VERSION,
                "run_id": run.id,
                "name": run.name,
                "started_at": run.started_at.isoformat(),
                "config": run.model_dump(mode="json")["config"],
                "suite": suite.model_dump(mode="json"),
            }
        )

    def on_trial(self, trial: Trial) -> None:
        self._open()
        self._write(trial_record(trial, suite_id=self._suite_id, content=self.include_content))
        self.trials += 1

    def on_run_end(self, run: RunInfo) -> None:
        try:
            self._write(
                {
                    "type": "run_end",
                    "run_id": run.id,
                    "status": run.status,
                    "finished_at": run.finished_at.isoformat() if run.finished_at else None,
                    "trials": self.trials,
                }
            )
        finally:
            self._close()

    def _open(self) -> None:
        if self._fd is not None or not isinstance(self.path, str | os.PathLike):
            return
        target = Path(self.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if self.append else os.O_TRUNC)
        self._fd = os.open(target, flags, 0o644)

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
        line = redact_json(line) + "\n"  # no secret in a trace, wherever it came from
        data = line.encode("utf-8", "replace")  # lone surrogates from broken agent output
        if self._fd is None:
            if isinstance(self.path, str | os.PathLike):
                self._open()
            else:
                self.path.write(data)
                self.path.flush()
                return
        assert self._fd is not None
        view = memoryview(data)
        while view:  # one call for any line a regular file takes whole (all of them, in practice)
            view = view[os.write(self._fd, view) :]


def trial_record(
    trial: Trial, *, suite_id: str | None = None, content: bool = False
) -> dict[str, Any]:
    """One trial as its JSON line (without the newline)."""
    outcome = trial.outcome
    record: dict[str, Any] = {
        "type": "trial",
        "schema_version": JSONL_SCHEMA_VERSION,
        "run_id": trial.run_id,
        "suite_id": suite_id,
        "task_id": trial.task_id,
        "trial": trial.index,
        "verdict": trial.verdict.value,
        "status": trial.status.value,
        "expect": trial.expect,
        "model": trial.model,
        "started_at": trial.started_at.isoformat(),
        "duration_s": trial.duration_s,
        "timing": trial.transcript.timing.model_dump(mode="json", exclude={"started_at"}),
        "usage": trial.usage.model_dump(),
        "grader_usage": trial.grader_usage.model_dump(),
        "cost_usd": trial.cost_usd,
        "grader_cost_usd": trial.grader_cost_usd,
        "error": _error(trial.error, content),
        "failed": outcome.failed,
        **_text("output", outcome.output, content),
        **_text("failure", outcome.failure, content),
        "changed_files": [
            _changed_file(f.model_dump(mode="json"), content)
            for f in (outcome.diff.files if outcome.diff else [])
        ],
        "artifacts": [
            {"path": a.path, "size": a.size, **_text("content", a.content, content)}
            for a in outcome.artifacts
        ],
        "scores": [_score(score, content) for score in trial.scores],
        "events": [*_transcript_events(trial.transcript, content)],
    }
    if content:
        record["state"] = outcome.state
    else:
        record["state_keys"] = sorted(outcome.state)
    record["events"].extend({"type": "score", **_score(s, content)} for s in trial.scores)
    return record


# --- pieces ---------------------------------------------------------------------------------


def _text(key: str, text: str | None, content: bool) -> dict[str, Any]:
    """`{key: text}` with content, else `{key_chars: len}`; nothing when there is no text."""
    if text is None:
        return {}
    return {key: text} if content else {f"{key}_chars": len(text)}


def _error(error: Any, content: bool) -> dict[str, Any] | None:
    if error is None:
        return None
    data: dict[str, Any] = error.model_dump(mode="json")
    if not content:
        data.pop("traceback", None)
    return data


def _changed_file(data: dict[str, Any], content: bool) -> dict[str, Any]:
    diff = data.pop("diff", None)
    return {**data, **_text("diff", diff, content)}


def _score(score: Score, content: bool) -> dict[str, Any]:
    data = score.model_dump(mode="json", exclude={"schema_version"})
    if not content:
        data.pop("metadata", None)
        if data.get("error"):
            data["error"].pop("traceback", None)
    return data


def _transcript_events(transcript: Transcript, content: bool) -> list[dict[str, Any]]:
    """The transcript in order: each turn with its messages, calls and reasoning, then the
    judges' model calls (scores are added by the caller)."""
    messages = _messages_by_turn(transcript)
    turns = {turn.index: turn for turn in transcript.turns}
    numbers = sorted(
        set(turns)
        | set(messages)
        | {c.turn for c in transcript.model_calls if c.role != "grader"}
        | {c.turn for c in transcript.tool_calls}
        | {r.turn for r in transcript.reasoning}
    )
    placed: set[int] = set()
    tool_index = {call.id: i for i, call in enumerate(transcript.tool_calls)}
    events: list[dict[str, Any]] = []
    for number in numbers:
        turn = turns.get(number)
        if turn is not None:
            event: dict[str, Any] = {
                "type": "turn",
                "turn": number,
                "started_at": turn.started_at,
                "duration_s": turn.duration_s,
                "is_error": turn.is_error,
            }
            if isinstance(turn.input, str):
                event.update(_text("input", turn.input, content))
            else:
                event["input_messages"] = len(turn.input)
            events.append(event | _text("output", turn.output, content))
        events.extend(_message(m, number, content) for m in messages.get(number, []))
        for call in transcript.model_calls:
            if call.role == "grader" or call.turn != number:
                continue
            events.append(_model_call(call, content))
            for call_id in _requested_ids(call):
                i = tool_index.get(call_id)
                if i is not None and i not in placed:
                    placed.add(i)
                    events.append(_tool_call(transcript.tool_calls[i], content))
        for i, tool in enumerate(transcript.tool_calls):
            if tool.turn == number and i not in placed:
                placed.add(i)
                events.append(_tool_call(tool, content))
        events.extend(
            {"type": "reasoning", "turn": r.turn, "redacted": r.redacted}
            | _text("content", r.content, content)
            for r in transcript.reasoning
            if r.turn == number
        )
    events.extend(_model_call(c, content) for c in transcript.model_calls if c.role == "grader")
    return events


def _messages_by_turn(transcript: Transcript) -> dict[int, list[Message]]:
    """The messages split by turn: a turn's messages start with its input, which the runner
    records before the agent's reply (messages carry no turn number themselves)."""
    messages = transcript.messages
    starts: list[tuple[int, int]] = []
    position = 0
    for turn in transcript.turns:
        first = Message(role="user", content=turn.input) if isinstance(turn.input, str) else None
        if isinstance(turn.input, list) and turn.input:
            first = turn.input[0]
        found = next(
            (
                i
                for i in range(position, len(messages))
                if first is not None
                and messages[i].role == first.role
                and messages[i].content == first.content
            ),
            None,
        )
        if found is not None:
            position = found
        starts.append((turn.index, position))
    if not starts:
        return {0: list(messages)} if messages else {}
    grouped: dict[int, list[Message]] = {}
    for k, (number, start) in enumerate(starts):
        end = starts[k + 1][1] if k + 1 < len(starts) else len(messages)
        begin = 0 if k == 0 else start
        if begin < end:
            grouped.setdefault(number, []).extend(messages[begin:end])
    return grouped


def _message(message: Message, turn: int, content: bool) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "message", "turn": turn, "role": message.role}
    if message.name is not None:
        event["name"] = message.name
    if message.tool_call_id is not None:
        event["tool_call_id"] = message.tool_call_id
    event.update(_text("content", message.content, content))
    if message.tool_calls:
        event["tool_calls"] = [
            {"id": c.id, "name": c.name} | ({"arguments": c.arguments} if content else {})
            for c in message.tool_calls
        ]
    return event


def _model_call(call: ModelCall, content: bool) -> dict[str, Any]:
    response = call.response or {}
    request_messages, _ = request_view(call)  # a captured call's body, in the same terms
    event: dict[str, Any] = {
        "type": "model_call",
        "turn": call.turn,
        "role": call.role,
        "model": call.model,
        "response_model": response.get("model"),
        "response_id": response.get("id"),
        "finish_reason": response.get("finish_reason"),
        "usage": call.usage.model_dump(),
        "cost_usd": call.cost_usd,
        "latency_s": call.latency_s,
        "retries": call.retries,
        "replayed": call.replayed,
        "error": call.error,
        "request_messages": len(request_messages),
    }
    if call.endpoint is not None:
        event["endpoint"] = call.endpoint
        event["status"] = call.status
    if content:
        event["request"] = call.request
        event["response"] = call.response
    else:
        message = response.get("message") or {}
        event["output_chars"] = len(str(message.get("content") or ""))
        event["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name")}
            for c in message.get("tool_calls") or []
            if isinstance(c, dict)
        ]
    return event


def _tool_call(call: ToolCall, content: bool) -> dict[str, Any]:
    status = "no_result" if call.result is None else ("error" if call.is_error else "ok")
    event: dict[str, Any] = {
        "type": "tool_call",
        "turn": call.turn,
        "id": call.id,
        "name": call.name,
        "status": status,
        "started_at": call.started_at,
        "duration_s": call.duration_s,
    }
    if content:
        event["arguments"] = call.arguments
    event.update(_text("result", call.result, content))
    return event


def _requested_ids(call: ModelCall) -> list[str]:
    message = (call.response or {}).get("message") or {}
    return [str(c.get("id")) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
