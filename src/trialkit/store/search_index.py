"""The search index: what of a trial is searchable, and how each database indexes it.

Each trial gives a few documents (`search_docs` rows): its input, its final answer (the
outcome's output), its error, and each grader's rationale, redacted like every stored text and
cut at `DOC_CHARS` characters; and the names of the tools it called (`trial_tools`). Both are
written with the trial, in its transaction, and deleted with it (foreign keys cascade).

Each document also carries `tags`: one word per fact a search may filter on (the trial's
verdict, its run, its suite, the graders that scored it, the tools it called, its error's
type), so that the full-text index intersects them with the query's words instead of the
database looking up each match's trial. A label changes a trial's verdict: its documents are
indexed again (`reindex_trial`).

The full-text index itself is the database's own: on SQLite an FTS5 table `search_fts` over
`search_docs.text` and `tags` (external content: `save_documents` indexes a batch's documents
in one statement, a trigger takes deleted ones out); on PostgreSQL a GIN index on
`to_tsvector('simple', text) || to_tsvector('simple', tags)`. Neither stems words, so both
match the same words.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select

from trialkit.secrets import redact
from trialkit.store.encoding import unpack_json
from trialkit.store.schema import runs, search_docs, trial_tools, trials
from trialkit.trial import Trial

DOC_CHARS = 20_000
"""How much of each text is indexed (and shown in snippets)."""
FIELDS = ("input", "output", "error", "rationale")
"""What a search hit may have matched."""
TS_CONFIG = "simple"
"""PostgreSQL's text search configuration: words lowercased, never stemmed (as FTS5's
`unicode61` tokenizer does)."""

SQLITE_DDL = (  # as m008_search made it; m013_search_batch_index drops the insert trigger
    "CREATE VIRTUAL TABLE search_fts USING fts5(text, tags, content='search_docs', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags); END",
    "CREATE TRIGGER search_docs_ad AFTER DELETE ON search_docs BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, text, tags) "
    "VALUES ('delete', old.id, old.text, old.tags); END",
)
POSTGRES_INDEX = "ix_search_docs_tsv"
"""PostgreSQL's GIN index over `search_docs`: on an expression, so not in `schema.py`."""
POSTGRES_DDL = (
    f"CREATE INDEX {POSTGRES_INDEX} ON search_docs USING GIN "
    f"((to_tsvector('{TS_CONFIG}', text) || to_tsvector('{TS_CONFIG}', tags)))",
)


SQLITE_INSERT_TRIGGER = "search_docs_ai"
_SQLITE_INDEX_AFTER = (
    "INSERT INTO search_fts(rowid, text, tags) SELECT id, text, tags FROM search_docs WHERE id > ?"
)
"""Index the documents inserted after the one numbered `?`. One statement for a batch costs a
fifth of what the row trigger did (12 against 51 µs a trial of four documents)."""


def create_fulltext(conn: Connection) -> None:
    """The database's full-text index over `search_docs`, as `m008_search` made it (later
    migrations change it; see the module's docstring). Shipped: leave its SQL as it is."""
    for statement in SQLITE_DDL if conn.dialect.name == "sqlite" else POSTGRES_DDL:
        conn.exec_driver_sql(statement)


def _cut(text: str) -> str:
    return redact(text[:DOC_CHARS])


def tag(kind: str, value: str) -> str:
    """The word standing for a fact (`kind`: `v` verdict, `r` run, `s` suite, `g` grader, `t`
    tool, `e` error type): letters and digits only, one word to both databases' parsers."""
    if kind == "v":
        return "zv" + value
    digest = hashlib.blake2b(f"{kind}:{value}".encode(), digest_size=8).hexdigest()
    return f"z{kind}{digest}"


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


@dataclass(frozen=True)
class Indexed:
    """What of one trial is indexed, as JSON-like data (as stored, or dumped)."""

    run_id: str
    task_id: str
    index: int
    suite_id: str
    verdict: str
    transcript: dict[str, Any]
    output: str | None
    error: dict[str, Any] | None
    scores: list[dict[str, Any]]


def documents(trial: Indexed) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The `search_docs` and `trial_tools` rows of one trial."""
    key = {"run_id": trial.run_id, "task_id": trial.task_id, "trial_idx": trial.index}
    tools = sorted(_tools(trial.transcript))
    error_type = str(trial.error.get("type") or "") if trial.error else ""
    facts = [tag("v", trial.verdict), tag("r", trial.run_id), tag("s", trial.suite_id)]
    facts += sorted({tag("g", str(s.get("name") or "")) for s in trial.scores})
    facts += [tag("t", name) for name in tools]
    if error_type:
        facts.append(tag("e", error_type))
    tags = " ".join(facts)
    docs: list[dict[str, Any]] = []

    def add(field: str, text: str | None, position: int = 0, grader: str | None = None) -> None:
        if text:
            docs.append(
                {
                    **key,
                    "field": field,
                    "position": position,
                    "grader": grader,
                    "text": _cut(text),
                    "tags": tags,
                }
            )

    add("input", _input_text(trial.transcript))
    add("output", trial.output)
    if trial.error:
        add("error", f"{error_type}: {trial.error.get('message', '')}")
    for position, score in enumerate(trial.scores):
        add("rationale", score.get("rationale"), position, score.get("name") or None)
    return docs, [{**key, "name": name} for name in tools]


def trial_documents(
    trial: Trial, suite_id: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The index rows of a trial about to be saved."""
    return documents(
        Indexed(
            run_id=trial.run_id,
            task_id=trial.task_id,
            index=trial.index,
            suite_id=suite_id,
            verdict=trial.verdict.value,
            transcript=trial.transcript.model_dump(include={"turns", "messages", "tool_calls"}),
            output=trial.outcome.output,
            error=None if trial.error is None else trial.error.model_dump(),
            scores=[{"name": s.name, "rationale": s.rationale} for s in trial.scores],
        )
    )


def suites_of(conn: Connection, run_ids: Iterable[str]) -> dict[str, str]:
    """{run id: its suite id}."""
    query = select(runs.c.id, runs.c.suite_id).where(runs.c.id.in_(sorted(set(run_ids))))
    return {row.id: row.suite_id for row in conn.execute(query)}


def save_documents(
    conn: Connection, docs: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> None:
    """Insert the rows of `documents` and index them, in `conn`'s write transaction."""
    if docs:
        if conn.dialect.name == "sqlite":
            # The write lock is held (BEGIN IMMEDIATE): every document numbered after the
            # last one found now is one of these.
            last = conn.execute(select(func.max(search_docs.c.id))).scalar() or 0
            conn.execute(insert(search_docs), docs)
            conn.exec_driver_sql(_SQLITE_INDEX_AFTER, (last,))
        else:
            conn.execute(insert(search_docs), docs)
    if tools:
        conn.execute(insert(trial_tools), tools)


def reindex_trial(conn: Connection, run_id: str, task_id: str, index: int) -> None:
    """Index a stored trial again (after a label rewrote its scores and verdict)."""
    of_trial = (trials.c.run_id == run_id, trials.c.task_id == task_id, trials.c.idx == index)
    row = conn.execute(
        select(
            trials.c.verdict,
            trials.c.output,
            trials.c.error,
            trials.c.scores,
            trials.c.transcript,
            trials.c.transcript_packed,
        ).where(*of_trial)
    ).one()
    indexed = Indexed(
        run_id=run_id,
        task_id=task_id,
        index=index,
        suite_id=suites_of(conn, [run_id])[run_id],
        verdict=row.verdict,
        transcript=json.loads(unpack_json(row.transcript, row.transcript_packed)),
        output=row.output,
        error=None if row.error is None else json.loads(row.error),
        scores=json.loads(row.scores),
    )
    d = search_docs.c
    conn.execute(
        delete(search_docs).where(d.run_id == run_id, d.task_id == task_id, d.trial_idx == index)
    )
    t = trial_tools.c
    conn.execute(
        delete(trial_tools).where(t.run_id == run_id, t.task_id == task_id, t.trial_idx == index)
    )
    save_documents(conn, *documents(indexed))
