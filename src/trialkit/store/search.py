"""Full-text search over the store's trials: their inputs, outputs, errors and rationales.

A query is plain words: each whitespace-separated term must appear (as a phrase, when it holds
several words, like `foo-bar`), in any case. Characters that the databases' query languages
would read as syntax (quotes, `*`, `:`, `-`, `NEAR`, parentheses) are only separators, so no
query raises. Matching uses the index of `search_index.py`: FTS5 on SQLite, `tsvector` on
PostgreSQL; ranks come from each (`bm25`, `ts_rank`) and compare only within one store.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    ColumnElement,
    Connection,
    Float,
    Integer,
    MetaData,
    Select,
    Table,
    Text,
    and_,
    cast,
    exists,
    func,
    inspect,
    literal_column,
    select,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import JSONB

from trialkit._record import Record
from trialkit.score import Verdict
from trialkit.store.errors import StoreError
from trialkit.store.schema import runs, scores, search_docs, trial_tools, trials
from trialkit.store.search_index import TS_CONFIG
from trialkit.store.store import Store

SNIPPET_CONTEXT = 80
"""Characters of text shown on each side of a match."""
_WORD = re.compile(r"\w+")


class Snippet(Record):
    """A piece of the matched text around its first match, as plain text (not HTML): the
    viewer shows `match` marked. `before` starts with "…" and `after` ends with it where the
    text goes on; `match` is empty when no query word could be located in the text."""

    before: str
    match: str
    after: str


class SearchHit(Record):
    run_id: str
    task_id: str
    trial: int
    verdict: Verdict
    """The trial's verdict."""
    field: str
    """What matched: `input`, `output` (the final answer), `error` or `rationale`."""
    grader: str | None
    """For a rationale: the grader whose it is."""
    snippet: Snippet
    rank: float
    """Higher is better."""


class SearchPage(Record):
    hits: list[SearchHit]
    total: int
    """Hits matching, before `offset` and `limit`."""


def terms(query: str) -> list[list[str]]:
    """The query's terms, each its words (a term of several words is a phrase)."""
    found = [_WORD.findall(term) for term in query.split()]
    return [words for words in found if words]


@contextmanager
def _read(store: Store, action: str) -> Iterator[Connection]:
    # Store has no public connection API; `_read` gives one read transaction and turns
    # database errors into one-line `StoreError`s (as `store/queries.py` does).
    with store._read(action) as conn:
        yield conn


def search(
    store: Store,
    query: str,
    *,
    verdict: Verdict | str | None = None,
    grader: str | None = None,
    score_min: float | None = None,
    score_max: float | None = None,
    tool: str | None = None,
    error_type: str | None = None,
    run: str | None = None,
    suite: str | None = None,
    offset: int = 0,
    limit: int = 50,
) -> SearchPage:
    """The documents matching `query`, best first. `verdict` keeps trials with that verdict;
    `grader` those it scored; `score_min` and `score_max` bound a score's value (that
    grader's, if given; inclusive); `tool` those that called it; `error_type` those whose
    error has that type (`TimeoutError`); `run` and `suite` those of a run or a suite."""
    words = terms(query)
    with _read(store, "search the store") as conn:
        if not inspect(conn).has_table(search_docs.name):
            raise StoreError(
                f"the store {store.url} has no search index: it was written before "
                "m008_search; open it with this trialkit (any command) to build the index"
            )
        if not words:
            return SearchPage(hits=[], total=0)
        sqlite = conn.dialect.name == "sqlite"
        matched, rank = _sqlite_match(words) if sqlite else _postgres_match(words)
        where = _filters(conn, verdict, grader, score_min, score_max, tool, error_type, run, suite)
        base = matched.where(*where)
        total = int(conn.scalar(select(func.count()).select_from(base.subquery())) or 0)
        d = search_docs.c
        page = (
            base.add_columns(rank.label("rank"))
            .order_by(rank.desc(), d.run_id, d.task_id, d.trial_idx, d.field, d.position)
            .offset(offset)
            .limit(limit)
        )
        found = conn.execute(page).all()
    phrases = (r"\W+".join(map(re.escape, w)) for w in words)
    pattern = re.compile("|".join(rf"(?<!\w){p}(?!\w)" for p in phrases), re.IGNORECASE)
    hits = [
        SearchHit(
            run_id=row.run_id,
            task_id=row.task_id,
            trial=row.trial_idx,
            verdict=Verdict(row.verdict),
            field=row.field,
            grader=row.grader,
            snippet=snippet(row.text, pattern),
            rank=float(row.rank),
        )
        for row in found
    ]
    return SearchPage(hits=hits, total=total)


def _columns() -> Select[Any]:
    d = search_docs.c
    return select(
        d.run_id, d.task_id, d.trial_idx, d.field, d.grader, d.text, trials.c.verdict
    ).select_from(
        search_docs.join(
            trials,
            and_(
                trials.c.run_id == d.run_id,
                trials.c.task_id == d.task_id,
                trials.c.idx == d.trial_idx,
            ),
        )
    )


_FTS = Table(
    "search_fts",
    MetaData(),
    Column("rowid", Integer),
    Column("rank", Float),
    Column("search_fts", Text),
)
"""SQLite's FTS5 table (not in `schema.metadata`: only SQLite has it), with its hidden
columns: `rank` (bm25, lower is better) and the one named as the table, for MATCH."""


def _sqlite_match(words: list[list[str]]) -> tuple[Select[Any], ColumnElement[Any]]:
    # Each term a quoted FTS5 phrase of its words (which hold no quote): never syntax.
    expression = " ".join('"' + " ".join(w) + '"' for w in words)
    query = (
        _columns()
        .join(_FTS, _FTS.c.rowid == search_docs.c.id)
        .where(_FTS.c.search_fts.op("MATCH")(expression))
    )
    return query, -_FTS.c.rank


def _postgres_match(words: list[list[str]]) -> tuple[Select[Any], ColumnElement[Any]]:
    config: ColumnElement[Any] = literal_column(f"'{TS_CONFIG}'::regconfig")
    tsquery: ColumnElement[Any] | None = None
    for w in words:
        part = func.phraseto_tsquery(config, " ".join(w))
        tsquery = part if tsquery is None else tsquery.op("&&")(part)
    assert tsquery is not None
    vector = func.to_tsvector(config, search_docs.c.text)
    query = _columns().where(vector.op("@@")(tsquery))
    return query, func.ts_rank(vector, tsquery)


def _filters(
    conn: Connection,
    verdict: Verdict | str | None,
    grader: str | None,
    score_min: float | None,
    score_max: float | None,
    tool: str | None,
    error_type: str | None,
    run: str | None,
    suite: str | None,
) -> list[ColumnElement[bool]]:
    d = search_docs.c
    where: list[ColumnElement[bool]] = []
    if verdict is not None:
        where.append(trials.c.verdict == Verdict(verdict).value)
    if run is not None:
        where.append(d.run_id == run)
    if suite is not None:
        where.append(d.run_id.in_(select(runs.c.id).where(runs.c.suite_id == suite)))
    of_trial = (
        scores.c.run_id == d.run_id,
        scores.c.task_id == d.task_id,
        scores.c.trial_idx == d.trial_idx,
    )
    scored: list[ColumnElement[bool]] = []
    if grader is not None:
        scored.append(scores.c.name == grader)
    if score_min is not None:
        scored.append(scores.c.value >= score_min)
    if score_max is not None:
        scored.append(scores.c.value <= score_max)
    if scored:
        where.append(exists().where(*of_trial, *scored))
    if tool is not None:
        where.append(
            exists().where(
                trial_tools.c.run_id == d.run_id,
                trial_tools.c.task_id == d.task_id,
                trial_tools.c.trial_idx == d.trial_idx,
                trial_tools.c.name == tool,
            )
        )
    if error_type is not None:
        if conn.dialect.name == "postgresql":
            kind: ColumnElement[Any] = cast(trials.c.error, JSONB)["type"].astext
        else:
            kind = type_coerce(trials.c.error, JSON)["type"].as_string()
        where.append(kind == error_type)
    return where


def snippet(text: str, pattern: re.Pattern[str]) -> Snippet:
    """The text around the first match of `pattern` (the query's terms)."""
    found = pattern.search(text)
    if found is None:
        end = 2 * SNIPPET_CONTEXT
        return Snippet(before="", match="", after=text[:end] + ("…" if len(text) > end else ""))
    start, stop = found.span()
    left = max(0, start - SNIPPET_CONTEXT)
    right = min(len(text), stop + SNIPPET_CONTEXT)
    return Snippet(
        before=("…" if left else "") + text[left:start],
        match=text[start:stop],
        after=text[stop:right] + ("…" if right < len(text) else ""),
    )
