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
    Column,
    ColumnElement,
    Connection,
    Float,
    Integer,
    MetaData,
    Select,
    Table,
    Text,
    exists,
    func,
    inspect,
    literal_column,
    select,
)

from trialkit._record import Record
from trialkit.score import Verdict
from trialkit.store.errors import StoreError
from trialkit.store.schema import scores, search_docs, trials
from trialkit.store.search_index import TS_CONFIG, tag
from trialkit.store.store import Store

RANK_LIMIT = 10_000
"""Up to this many matches, hits are ranked; past it, they come newest first."""
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
    ranked: bool = True
    """Hits are best first; past `RANK_LIMIT` matches, newest first (ranking them all would
    take too long)."""


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
        tags = _tags(verdict, grader, tool, error_type, run, suite)
        match, rank, newest = (_sqlite_match if sqlite else _postgres_match)(words, tags)
        where = _score_range(grader, score_min, score_max)
        counted = _matching(_documents(with_trial=False), sqlite).where(match, *where)
        total = int(conn.scalar(select(func.count()).select_from(counted.subquery())) or 0)
        ranked = total <= RANK_LIMIT
        d = search_docs.c
        order = (rank.desc(), d.id) if ranked else (newest.desc(),)
        documents = _documents(with_trial=True)
        if sqlite:  # bm25 is known only where the MATCH is
            chosen = _matching(documents, sqlite).where(match, *where)
        else:  # the matches kept first (OFFSET 0 fences them), then ranked: ts_rank is costly
            kept = select(d.id).where(match, *where).offset(0).subquery("kept")
            chosen = documents.join(kept, kept.c.id == d.id)
        page = chosen.add_columns(rank.label("rank")).order_by(*order).offset(offset).limit(limit)
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
    return SearchPage(hits=hits, total=total, ranked=ranked)


def _documents(*, with_trial: bool) -> Select[Any]:
    """Documents, with their trial's verdict when `with_trial` (a lookup by the trial's key
    for each document kept, whatever plan the database picks for the match)."""
    d = search_docs.c
    if not with_trial:
        return select(d.id)
    verdict = (
        select(trials.c.verdict)
        .where(*_of_trial(trials.c))
        .correlate(search_docs)
        .scalar_subquery()
    )
    columns = (d.run_id, d.task_id, d.trial_idx, d.field, d.grader, d.text)
    return select(*columns, verdict.label("verdict"))


def _of_trial(c: Any, idx: str = "idx") -> tuple[ColumnElement[bool], ...]:
    """`c` (a table's columns) is of the trial of the current document."""
    d = search_docs.c
    return (c.run_id == d.run_id, c.task_id == d.task_id, c[idx] == d.trial_idx)


def _matching(query: Select[Any], sqlite: bool) -> Select[Any]:
    return query.join(_FTS, _FTS.c.rowid == search_docs.c.id) if sqlite else query


_FTS = Table(
    "search_fts",
    MetaData(),
    Column("rowid", Integer),
    Column("rank", Float),
    Column("search_fts", Text),
)
"""SQLite's FTS5 table (not in `schema.metadata`: only SQLite has it), with its hidden
columns: `rank` (bm25, lower is better) and the one named as the table, for MATCH."""


def _sqlite_match(
    words: list[list[str]], tags: list[str]
) -> tuple[ColumnElement[bool], ColumnElement[Any], ColumnElement[Any]]:
    """(the condition, the rank, the order of newest first) of FTS5."""
    # Each term a quoted FTS5 phrase of its words (which hold no quote): never syntax.
    phrases = [f'text : "{" ".join(w)}"' for w in words] + [f'tags : "{t}"' for t in tags]
    rank = -func.bm25(literal_column("search_fts"), 1.0, 0.0)
    return _FTS.c.search_fts.op("MATCH")(" AND ".join(phrases)), rank, _FTS.c.rowid


def _postgres_match(
    words: list[list[str]], tags: list[str]
) -> tuple[ColumnElement[bool], ColumnElement[Any], ColumnElement[Any]]:
    config: ColumnElement[Any] = literal_column(f"'{TS_CONFIG}'::regconfig")
    tsquery: ColumnElement[Any] = func.phraseto_tsquery(config, " ".join(words[0]))
    for w in words[1:]:
        tsquery = tsquery.op("&&")(func.phraseto_tsquery(config, " ".join(w)))
    if tags:
        tsquery = tsquery.op("&&")(func.to_tsquery(config, " & ".join(tags)))
    d = search_docs.c
    # The expression of the GIN index (search_index.py), for the planner to use it.
    vector = func.to_tsvector(config, d.text).op("||")(func.to_tsvector(config, d.tags))
    return vector.op("@@")(tsquery), func.ts_rank(vector, tsquery), d.id


def _tags(
    verdict: Verdict | str | None,
    grader: str | None,
    tool: str | None,
    error_type: str | None,
    run: str | None,
    suite: str | None,
) -> list[str]:
    """The words of the filters the index holds (see `search_index.tag`)."""
    found = [] if verdict is None else [tag("v", Verdict(verdict).value)]
    for kind, value in (("r", run), ("s", suite), ("g", grader), ("t", tool), ("e", error_type)):
        if value is not None:
            found.append(tag(kind, value))
    return found


def _score_range(
    grader: str | None, score_min: float | None, score_max: float | None
) -> list[ColumnElement[bool]]:
    """A score of the trial (of `grader`, if given) is within the bounds."""
    if score_min is None and score_max is None:
        return []
    scored: list[ColumnElement[bool]] = []
    if grader is not None:
        scored.append(scores.c.name == grader)
    # `value + 0`: not an index column, so the trial's scores are found by their key (SQLite
    # would otherwise range-scan a task's score values for each match).
    value = scores.c.value + 0
    if score_min is not None:
        scored.append(value >= score_min)
    if score_max is not None:
        scored.append(value <= score_max)
    return [exists().where(*_of_trial(scores.c, "trial_idx"), *scored)]


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
