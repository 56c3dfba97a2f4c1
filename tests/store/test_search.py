"""Full-text search (`trialkit.store.search`) on SQLite and PostgreSQL: what is indexed, the
filters, snippets, hostile queries, secrets, replaced and labelled trials, and the backfill of
a store written before m008_search."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import MetaData, Table, create_engine, insert, inspect
from sqlalchemy.pool import NullPool

from trialkit import Suite, Task, graders, run_sync
from trialkit.labels import Label
from trialkit.report import Report
from trialkit.score import Score, Verdict
from trialkit.store import Store, StoreError, rows, schema
from trialkit.store import migrations as store_migrations
from trialkit.store.engine import create_store_engine
from trialkit.store.migrations import MIGRATIONS, migrate
from trialkit.store.search import SearchPage, search, terms
from trialkit.store.search_index import POSTGRES_INDEX

from ._samples import Sample, make_sample, make_trial

HOSTILE = [
    '"',
    '"unbalanced',
    "paris*",
    "*",
    "capital:",
    "text:paris",
    "-paris",
    "NOT paris",
    "paris NEAR berlin",
    "NEAR(paris berlin)",
    "(((",
    "paris)",
    "a & b | !c",
    "'; DROP TABLE trials; --",
    "^paris",
    "{text}: paris",
    "\x00",
    "paris\ufffe",
    "AND OR NOT",
    "ünïcödé 東京",
    "",
    "   ",
]


def _agent() -> object:
    calls = itertools.count()

    def agent(prompt: str) -> str:
        n = next(calls)
        if n % 5 == 4:
            raise RuntimeError(f"agent crashed on {prompt}")
        return "Berlin is the city-state" if n % 3 == 0 else "Paris is the capital of France"

    return agent


@pytest.fixture
def filled(store: Store) -> tuple[Report, Sample]:
    suite = Suite(
        id="caps",
        kind="capability",
        trials=3,
        harness=_agent(),
        tasks=[
            Task(
                id=f"task-{i}",
                input=f"What is capital number {i}?",
                graders=[graders.contains("paris")],
            )
            for i in range(3)
        ],
    )
    report = run_sync(suite, store=store, concurrency=1, name="nightly")
    sample = make_sample("sample-run")
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    return report, sample


def _keys(page: SearchPage) -> set[tuple[str, str, int, str]]:
    return {(h.run_id, h.task_id, h.trial, h.field) for h in page.hits}


def test_outputs_inputs_errors_and_rationales_are_found(
    store: Store, filled: tuple[Report, Sample]
) -> None:
    report, _ = filled
    run = report.run.id
    outputs = search(store, "paris", run=run, limit=100)
    paris = {
        (r.trial, t.id) for t in report.tasks for r in t.results if r.output and "Paris" in r.output
    }
    assert {(h.trial, h.task_id) for h in outputs.hits if h.field == "output"} == paris
    rationale = [h for h in outputs.hits if h.field == "rationale"]
    assert rationale and all(h.grader == "contains('paris')" for h in rationale)
    assert all(h.verdict is Verdict.FAIL for h in rationale)
    assert outputs.total == len(outputs.hits)
    hit = next(h for h in outputs.hits if h.field == "output")
    assert (hit.snippet.before, hit.snippet.match, hit.snippet.after) == (
        "",
        "Paris",
        " is the capital of France",
    )
    errors = search(store, "crashed", run=run)
    assert errors.total > 0 and {h.field for h in errors.hits} == {"error"}
    assert all(h.verdict is Verdict.ERROR for h in errors.hits)
    assert errors.hits[0].snippet.before == "RuntimeError: agent "
    inputs = search(store, "number 2", run=run)
    assert {(h.task_id, h.field) for h in inputs.hits} == {("task-2", "input")}
    assert inputs.total == 3  # one per trial
    assert inputs.hits[0].snippet.match == "number"  # the first match of either word
    phrase = search(store, "city-state", run=run)
    assert phrase.total > 0 and phrase.hits[0].snippet.match == "city-state"
    assert search(store, "state-city", run=run).total == 0
    assert search(store, "PARIS France", run=run).total == len(paris)
    ranks = [h.rank for h in outputs.hits]
    assert ranks == sorted(ranks, reverse=True)


def test_filters_and_paging(store: Store, filled: tuple[Report, Sample]) -> None:
    report, sample = filled
    everything = search(store, "paris", limit=1000)
    assert {h.run_id for h in everything.hits} == {report.run.id, sample.run.id}
    assert (
        search(store, "paris", suite="caps").total
        == search(store, "paris", run=report.run.id).total
    )
    assert search(store, "paris", suite="capitals").hits[0].run_id == sample.run.id
    failed = search(store, "paris", verdict="fail", limit=1000)
    assert failed.hits and all(h.verdict is Verdict.FAIL for h in failed.hits)
    assert search(store, "paris", verdict=Verdict.FAIL).total == failed.total
    tools = search(store, "notes", tool="read_file")
    assert {(h.task_id, h.trial) for h in tools.hits} == {("tools", 0)}
    assert search(store, "notes", tool="write_file").total == 0
    judged = search(store, "notes", grader="judge", score_min=0.8, score_max=0.95)
    assert judged.total == tools.total
    assert search(store, "notes", grader="judge", score_min=0.95).total == 0
    assert search(store, "notes", score_max=0.1).total == 0
    timeouts = search(store, "timed", error_type="TimeoutError")
    assert {(h.task_id, h.trial, h.field) for h in timeouts.hits} == {("json", 1, "error")}
    assert (
        search(store, "crashed", error_type="RuntimeError").total == search(store, "crashed").total
    )
    assert search(store, "crashed", error_type="TimeoutError").total == 0
    pages = [search(store, "paris", offset=i, limit=4) for i in range(0, everything.total, 4)]
    assert all(p.total == everything.total for p in pages)
    assert [_keys(p) for p in pages] and set().union(*map(_keys, pages)) == _keys(everything)
    assert sum(len(p.hits) for p in pages) == everything.total


@pytest.mark.parametrize("query", HOSTILE)
def test_a_query_with_search_syntax_never_raises(
    store: Store, filled: tuple[Report, Sample], query: str
) -> None:
    page = search(store, query)
    words = [w.lower() for term in terms(query) for w in term]
    if not words:
        assert page.total == 0
    for hit in page.hits:
        assert hit.snippet.match.lower().split()[0] in words


def test_a_term_with_syntax_is_matched_as_its_words(
    store: Store, filled: tuple[Report, Sample]
) -> None:
    report, _ = filled
    plain = search(store, "paris", run=report.run.id).total
    assert plain > 0
    for query in ("paris*", '"paris"', "-paris", "paris:", "(paris)", "NEAR(paris"):
        found = search(store, query, run=report.run.id).total
        expected = 0 if query == "NEAR(paris" else plain  # NEAR is a word there
        assert found == expected, query


def test_a_long_text_s_snippet_is_cut_around_the_match(store: Store) -> None:
    sample = make_sample("long")
    text = "lorem " * 100 + "needle" + " ipsum" * 100
    sample.trials = [make_trial("long", "france", 0, output=text)]
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    (hit,) = search(store, "needle").hits
    assert hit.snippet.match == "needle"
    assert hit.snippet.before.startswith("…") and hit.snippet.after.endswith("…")
    assert text.index(hit.snippet.before[1:] + "needle") > 0


def test_secrets_are_redacted_in_the_index(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEARCHTEST_API_KEY", "sk-searchsecret-0123456789")
    sample = make_sample("secret")
    sample.trials = [
        make_trial("secret", "france", 0, output="the key is sk-searchsecret-0123456789 ok")
    ]
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    assert search(store, "searchsecret").total == 0
    assert search(store, "0123456789").total == 0
    (hit,) = search(store, "REDACTED").hits
    assert "sk-" not in hit.snippet.before + hit.snippet.after


def test_a_replaced_trial_replaces_its_documents(store: Store) -> None:
    sample = make_sample("again")
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials([make_trial("again", "france", 0, output="first answer")])
    store.save_trials([make_trial("again", "france", 0, output="second answer")])
    assert search(store, "first").total == 0
    assert search(store, "answer").total == 1


def test_a_label_replaces_the_rationale_it_rewrote(store: Store) -> None:
    sample = make_sample("labelled")
    trial = make_trial(
        "labelled",
        "france",
        0,
        scores=[Score.from_bool(False, name="judge", rationale="looks wrong")],
        verdict=Verdict.FAIL,
    )
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials([trial])
    assert search(store, "wrong").total == 1
    store.save_label(
        Label(
            run_id="labelled",
            task_id="france",
            trial=0,
            grader="judge",
            verdict="pass",
            comment="actually fine",
        )
    )
    assert search(store, "wrong").total == 0
    (hit,) = search(store, "actually").hits
    assert (hit.field, hit.grader, hit.verdict) == ("rationale", "judge", Verdict.PASS)
    assert search(store, "ok", verdict="pass").total == 1  # the verdict filter follows it
    assert search(store, "ok", verdict="fail").total == 0


def test_a_store_written_before_the_index_is_backfilled(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_store_engine(db_url)
    migrate(engine, where="test", migrations=MIGRATIONS[:7])
    sample = make_sample("old-run")
    with engine.begin() as conn:
        conn.execute(insert(schema.runs), rows.run_row(sample.run, sample.suite))
        old_tasks = Table("run_tasks", MetaData(), autoload_with=conn)  # as of MIGRATIONS[:7]
        conn.execute(insert(old_tasks), rows.task_rows("old-run", sample.plans))
        old_trials = Table("trials", MetaData(), autoload_with=conn)
        conn.execute(insert(old_trials), [rows.trial_row(t) for t in sample.trials])
        score_rows = [r for t in sample.trials for r in rows.score_rows(t)]
        conn.execute(insert(schema.scores), score_rows)
    engine.dispose()
    monkeypatch.setattr(store_migrations, "_SEARCH_BATCH", 2)  # several batches
    with Store(db_url) as store:
        assert {h.task_id for h in search(store, "paris").hits} == {"france"}
        assert search(store, "notes", tool="read_file").total > 0
        assert search(store, "crashed", error_type="RuntimeError").total == 1
        assert search(store, "paris'", grader="contains").hits[0].field == "rationale"
        new = make_trial("old-run", "tools", 1, output="fresh words")
        store.save_trials([new])
        assert search(store, "fresh").total == 1


def test_the_sqlite_index_stays_in_step_with_its_documents(sqlite_db_url: str) -> None:
    """Each batch indexes its own documents in one statement: batches saved by two stores at
    once, replaced trials and a label's new rationale all end up indexed exactly once (FTS5's
    integrity check compares the index with the documents it was made from)."""
    with Store(sqlite_db_url) as first, Store(sqlite_db_url) as second:
        sample = make_sample("busy")
        first.create_run(sample.run, sample.suite, sample.plans)

        def save(store: Store, parity: int) -> None:
            for batch in range(10):
                store.save_trials(
                    [
                        make_trial("busy", "france", i, output=f"answer {i} of {parity}")
                        for i in range(40 * batch + parity, 40 * batch + 40, 2)
                    ]
                )

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(save, (first, second), (0, 1)))
        second.save_trials([make_trial("busy", "france", 7, output="replaced words")])
        trial = make_trial(
            "busy",
            "json",
            0,
            scores=[Score.from_bool(False, name="judge", rationale="looks wrong")],
            verdict=Verdict.FAIL,
        )
        first.save_trials([trial])
        first.save_label(
            Label(run_id="busy", task_id="json", trial=0, grader="judge", verdict="pass")
        )
        assert search(first, "answer", limit=1).total == 399
        assert search(first, "replaced").total == 1
        assert search(first, "wrong").total == 0
    engine = create_engine(sqlite_db_url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            triggers = conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'trigger'"
            ).scalars()
            assert "search_docs_ai" not in set(triggers)  # dropped by m013
            documents = conn.exec_driver_sql("SELECT count(*) FROM search_docs").scalar()
            assert documents == 400 + 1 + 1  # outputs; the input and rationale of `json`
            conn.exec_driver_sql(  # raises when the index and the documents differ
                "INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 1)"
            )
    finally:
        engine.dispose()


def test_a_store_without_the_index_says_so(db_url: str) -> None:
    with Store(db_url) as store:
        engine = create_engine(db_url, poolclass=NullPool)
        with engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("DROP TABLE search_fts")
                conn.exec_driver_sql("DROP TABLE search_docs")
            else:
                conn.exec_driver_sql("DROP TABLE search_docs CASCADE")
        engine.dispose()
        with pytest.raises(StoreError, match="no search index"):
            search(store, "paris")


def test_each_database_has_its_full_text_index(db_url: str) -> None:
    Store(db_url).close()
    engine = create_engine(db_url, poolclass=NullPool)
    try:
        inspector = inspect(engine)
        if engine.dialect.name == "sqlite":
            assert "search_fts" in inspector.get_table_names()
        else:
            names = {i["name"] for i in inspector.get_indexes("search_docs")}
            assert POSTGRES_INDEX in names
    finally:
        engine.dispose()
