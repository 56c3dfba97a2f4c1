"""The search index: what of a trial is searchable, and how each database indexes it.

Each trial gives a few documents (`search_docs` rows): its input, its final answer (the
outcome's output), its error, and each grader's rationale, redacted like every stored text and
cut at `DOC_CHARS` characters; and the names of the tools it called (`trial_tools`). Both are
written with the trial, in its transaction, and deleted with it (foreign keys cascade).

The full-text index itself is the database's own: on SQLite an FTS5 table `search_fts` over
`search_docs.text` (external content, kept in step by triggers); on PostgreSQL a GIN index on
`to_tsvector('simple', text)`. Neither stems words, so both match the same words.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, delete, insert

from trialkit.secrets import redact
from trialkit.store.schema import search_docs, trial_tools
from trialkit.trial import Trial

DOC_CHARS = 20_000
"""How much of each text is indexed (and shown in snippets)."""
FIELDS = ("input", "output", "error", "rationale")
"""What a search hit may have matched."""
TS_CONFIG = "simple"
"""PostgreSQL's text search configuration: words lowercased, never stemmed (as FTS5's
`unicode61` tokenizer does)."""

SQLITE_DDL = (
    "CREATE VIRTUAL TABLE search_fts USING fts5(text, content='search_docs', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER search_docs_ad AFTER DELETE ON search_docs BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER search_docs_au AFTER UPDATE ON search_docs BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO search_fts(rowid, text) VALUES (new.id, new.text); END",
)
POSTGRES_INDEX = "ix_search_docs_tsv"
"""PostgreSQL's GIN index over `search_docs`: on an expression, so not in `schema.py`."""
POSTGRES_DDL = (
    f"CREATE INDEX {POSTGRES_INDEX} ON search_docs USING GIN (to_tsvector('{TS_CONFIG}', text))",
)


def create_fulltext(conn: Connection) -> None:
    """The database's full-text index over `search_docs` (see the module's docstring)."""
    for statement in SQLITE_DDL if conn.dialect.name == "sqlite" else POSTGRES_DDL:
        conn.exec_driver_sql(statement)


def _cut(text: str) -> str:
    return redact(text[:DOC_CHARS])


def _input_text(transcript: dict[str, Any]) -> str | None:
    """The user's side of the conversation: each turn's input, else the user messages."""
    parts: list[str] = []
    for turn in transcript.get("turns") or []:
        given = turn.get("input")
        if isinstance(given, str):
            parts.append(given)
        elif isinstance(given, list):
            parts.extend(str(m.get("content") or "") for m in given if isinstance(m, dict))
    if not parts:
        for message in transcript.get("messages") or []:
            if message.get("role") == "user" and message.get("content"):
                parts.append(str(message["content"]))
    text = "\n".join(p for p in parts if p)
    return text or None


def _tools(transcript: dict[str, Any]) -> set[str]:
    names = {str(c["name"]) for c in transcript.get("tool_calls") or [] if c.get("name")}
    for message in transcript.get("messages") or []:
        names |= {str(c["name"]) for c in message.get("tool_calls") or [] if c.get("name")}
    return names


def documents(
    key: dict[str, Any],
    *,
    transcript: dict[str, Any],
    output: str | None,
    error: dict[str, Any] | None,
    scores: Iterable[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The `search_docs` and `trial_tools` rows of one trial, `key` being its run_id, task_id
    and trial_idx; from its records as JSON data (as stored, or dumped)."""
    docs: list[dict[str, Any]] = []

    def add(field: str, text: str | None, position: int = 0, grader: str | None = None) -> None:
        if text:
            docs.append(
                {**key, "field": field, "position": position, "grader": grader, "text": _cut(text)}
            )

    add("input", _input_text(transcript))
    add("output", output)
    if error:
        add("error", f"{error.get('type', '')}: {error.get('message', '')}")
    for position, score in enumerate(scores):
        add("rationale", score.get("rationale"), position, score.get("name") or None)
    tools = [{**key, "name": name} for name in sorted(_tools(transcript))]
    return docs, tools


def trial_documents(trial: Trial) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The index rows of a trial about to be saved."""
    key = {"run_id": trial.run_id, "task_id": trial.task_id, "trial_idx": trial.index}
    return documents(
        key,
        transcript=trial.transcript.model_dump(include={"turns", "messages", "tool_calls"}),
        output=trial.outcome.output,
        error=None if trial.error is None else trial.error.model_dump(),
        scores=[{"name": s.name, "rationale": s.rationale} for s in trial.scores],
    )


def save_documents(
    conn: Connection, docs: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> None:
    if docs:
        conn.execute(insert(search_docs), docs)
    if tools:
        conn.execute(insert(trial_tools), tools)


def replace_rationales(
    conn: Connection, run_id: str, task_id: str, index: int, scores: Iterable[dict[str, Any]]
) -> None:
    """After a label rewrote a trial's scores: its rationale documents, again."""
    conn.execute(
        delete(search_docs).where(
            search_docs.c.run_id == run_id,
            search_docs.c.task_id == task_id,
            search_docs.c.trial_idx == index,
            search_docs.c.field == "rationale",
        )
    )
    key = {"run_id": run_id, "task_id": task_id, "trial_idx": index}
    docs, _ = documents(key, transcript={}, output=None, error=None, scores=scores)
    save_documents(conn, docs, [])
