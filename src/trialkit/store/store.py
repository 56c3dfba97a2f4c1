"""`Store`: where runs, trials, transcripts and scores live."""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import (
    Connection,
    Engine,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from trialkit._record import Record
from trialkit.report import MAX_RESULTS_PER_TASK, Report, RunInfo, SuiteInfo, TaskPlan
from trialkit.score import Verdict
from trialkit.secrets import held as held_secrets
from trialkit.store import aggregates, kept_reports, rows, run_figures, schema, search_index
from trialkit.store import labels as store_labels
from trialkit.store.encoding import SafeText
from trialkit.store.engine import WRITE_OPTION, create_store_engine
from trialkit.store.errors import AmbiguousRun, RunNotFound, StoreError, TrialNotFound
from trialkit.store.labels import PendingReview
from trialkit.store.migrations import migrate
from trialkit.store.schema import run_tasks, runs, scores, trials
from trialkit.store.urls import (
    is_sqlite_memory,
    mask_url,
    parse_url,
    resolve_store_url,
    sqlite_file,
)
from trialkit.task import SuiteKind
from trialkit.trial import Trial

if TYPE_CHECKING:
    from trialkit.labels import Label

_CANDIDATES_SHOWN = 10
_STREAM_BATCH = 200
_KEYS_PER_QUERY = 500


class RunSummary(Record):
    """One line of `trialkit runs`: a run and its counts, computed by the database."""

    id: str
    name: str | None
    suite_id: str
    suite_kind: SuiteKind
    status: Literal["running", "completed", "interrupted", "stopped"]
    started_at: datetime
    finished_at: datetime | None
    tasks: int
    """Tasks planned for the run."""
    trials: int
    """Trials stored so far."""
    passed: int
    failed: int
    errors: int
    pass_rate: float | None
    """Passed trials over decided (passed or failed) trials; `None` when none was decided."""


class Store:
    """A SQLAlchemy database (SQLite by default) holding runs and their trials.

    Safe to share between threads; several processes may write to one SQLite file. Use it as a
    context manager, or call `close()`.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        """Without `create` the store must exist: read-only commands make no file or folder."""
        self.url = mask_url(url)
        """The store's URL, with any password hidden."""
        self._closed = False
        self._engine: Engine = create_store_engine(url, create=create)
        self.open_url = _open_url(url)
        """The URL another process opens this store with (kept in memory only, and never
        shown: it may hold a password); `None` for an in-memory database, which only this
        process sees."""
        self._writer = self._engine.execution_options(**{WRITE_OPTION: True})
        try:
            migrate(self._engine, where=self.url, create=create)
        except StoreError:
            self._engine.dispose()
            raise
        except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
            self._engine.dispose()
            raise StoreError(f"cannot open the store {self.url}: {_reason(exc)}") from None

    @classmethod
    def open(cls, url: str | None = None) -> Store:
        """The store at `url`, else `$TRIALKIT_STORE`, else `.trialkit/trialkit.db`."""
        return cls(resolve_store_url(url))

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._engine.dispose()

    # -- writing -------------------------------------------------------------------------------

    def create_run(self, run: RunInfo, suite: SuiteInfo, plans: Sequence[TaskPlan]) -> None:
        """Record a new run with its suite and planned tasks (in order)."""
        run_row = rows.run_row(run, suite)
        task_rows = rows.task_rows(run.id, plans)
        with self._write(f"create run {run.id!r}") as conn:
            if conn.scalar(select(runs.c.id).where(runs.c.id == run.id)) is not None:
                raise StoreError(f"run {run.id!r} already exists in the store {self.url}")
            conn.execute(insert(runs), run_row)
            if task_rows:
                conn.execute(insert(run_tasks), task_rows)

    def save_trials(self, trials: Sequence[Trial]) -> None:
        """Save trials in one transaction; a trial already stored (same run, task, index) is
        replaced, so a resumed run can retry an errored trial."""
        latest = {(t.run_id, t.task_id, t.index): t for t in trials}
        if not latest:
            return
        by_run: dict[str, list[tuple[str, int]]] = {}
        for run_id, task_id, index in latest:
            by_run.setdefault(run_id, []).append((task_id, index))
        with self._read("find the suites of runs") as conn:
            suites = search_index.suites_of(conn, by_run)
        docs: list[dict[str, Any]] = []
        tools: list[dict[str, Any]] = []
        with held_secrets():  # looked up once for the thousands of strings redacted here
            trial_rows = [rows.trial_row(t) for t in latest.values()]
            score_rows = [row for t in latest.values() for row in rows.score_rows(t)]
            for t in latest.values():  # an unknown run is refused below, by its foreign key
                found = search_index.trial_documents(t, suites.get(t.run_id, ""))
                docs.extend(found[0])
                tools.extend(found[1])
        with self._write(f"save trials of run {', '.join(map(repr, by_run))}") as conn:
            if conn.dialect.name == "postgresql":
                # Writers of one run take turns (SQLite's BEGIN IMMEDIATE serializes them all):
                # two could otherwise both find a key missing, and both insert it.
                for run_id in sorted(by_run):
                    conn.execute(_PG_LOCK, {"key": _lock_key(run_id)})
            stored = _stored_keys(conn, by_run)
            if stored:
                conn.execute(_DELETE_SCORES, stored)
                conn.execute(_DELETE_TRIALS, stored)
            conn.execute(insert(schema.trials), trial_rows)
            if score_rows:
                conn.execute(insert(schema.scores), score_rows)
            search_index.save_documents(conn, docs, tools)

    def save_label(self, label: Label, *, run_id: str | None = None) -> None:
        """Store a reviewer's label and apply it to its trial (see `save_labels`)."""
        self.save_labels([label], run_id=run_id)

    def save_labels(self, labels: Sequence[Label], *, run_id: str | None = None) -> int:
        """Store labels and apply each to its trial: the score of its grader takes the label's
        verdict and value, and the trial's verdict is decided again, so reports count it.

        `run_id` is the run of labels that name none. All or nothing: a label for a trial or
        grader that does not exist raises (`TrialNotFound`, `GraderNotFound`) and nothing is
        saved. A later label for the same run, task, trial and grader replaces the earlier one.
        Returns how many labels were saved.
        """
        targets = [(label, store_labels.run_of(label, run_id)) for label in labels]
        if not targets:
            return 0
        chosen = sorted({target for _, target in targets})
        with self._write(f"save labels of run {', '.join(map(repr, chosen))}") as conn:
            if conn.dialect.name == "postgresql":  # take turns with writers of trials
                for target in chosen:
                    conn.execute(_PG_LOCK, {"key": _lock_key(target)})
            for label, target in targets:
                store_labels.apply_label(conn, label, run_id=target)
            for target in chosen:  # a kept report is kept up to date
                if kept_reports.is_kept(conn, target):
                    self._keep_report(conn, target)
        return len(targets)

    def labels(self, run_id: str) -> list[Label]:
        """The labels stored for a run, by task id, trial number and grader."""
        with self._read(f"read the labels of run {run_id!r}") as conn:
            self._run_row(conn, run_id)
            return store_labels.read_labels(conn, run_id)

    def pending_reviews(self, run_id: str, *, grader: str | None = None) -> list[PendingReview]:
        """The scores of a run waiting for a reviewer (of `grader` only, if given), in the
        suite's task order, found in SQL. A list, not a stream: a review takes its time, and a
        read transaction held open meanwhile would hold back other writers' checkpoints."""
        with self._read(f"find the pending reviews of run {run_id!r}") as conn:
            self._run_row(conn, run_id)
            return store_labels.read_pending(conn, run_id, grader)

    def finish_run(self, run: RunInfo, *, report: Report | None = None) -> None:
        """Record a run's end: its status, `finished_at` and config; a run that ended has its
        report kept (`kept_reports`). `report` is the run's report as the process that ran it
        made it (from the same trials, see `trialkit.run.tally`): kept instead of computed again
        when it covers every trial stored."""
        with self._write(f"finish run {run.id!r}") as conn:
            result = conn.execute(update(runs).where(runs.c.id == run.id), rows.run_update(run))
            if result.rowcount == 0:
                raise RunNotFound(f"no run with id {run.id!r} in the store {self.url}")
            self._keep_report(conn, run.id, report)

    # -- reading -------------------------------------------------------------------------------

    def list_runs(self, limit: int | None = 50) -> list[RunSummary]:
        """The latest runs, newest first, with counts aggregated by the database."""
        recent = select(runs).order_by(runs.c.started_at.desc(), runs.c.id.desc())
        if limit is not None:
            recent = recent.limit(limit)
        r = recent.cte("recent")
        # `run_id IN (recent)`: each run's rows are found by index, however big the store.
        task_counts = (
            select(run_tasks.c.run_id, func.count().label("tasks"))
            .where(run_tasks.c.run_id.in_(select(r.c.id)))
            .group_by(run_tasks.c.run_id)
            .subquery("task_counts")
        )
        trial_counts = (
            select(
                trials.c.run_id,
                func.count().label("trials"),
                *(_count_verdict(v).label(v.value) for v in (Verdict.PASS, Verdict.FAIL)),
                _count_errors().label("errors"),
            )
            .where(trials.c.run_id.in_(select(r.c.id)))
            .group_by(trials.c.run_id)
            .subquery("trial_counts")
        )
        query = (
            select(
                r,
                func.coalesce(task_counts.c.tasks, 0).label("tasks"),
                func.coalesce(trial_counts.c.trials, 0).label("trials"),
                func.coalesce(trial_counts.c["pass"], 0).label("passed"),
                func.coalesce(trial_counts.c["fail"], 0).label("failed"),
                func.coalesce(trial_counts.c.errors, 0).label("errors"),
            )
            .select_from(
                r.outerjoin(task_counts, task_counts.c.run_id == r.c.id).outerjoin(
                    trial_counts, trial_counts.c.run_id == r.c.id
                )
            )
            .order_by(r.c.started_at.desc(), r.c.id.desc())
        )
        with self._read("list runs") as conn:
            return [_summary(row) for row in conn.execute(query)]

    def resolve_run(self, ref: str) -> str:
        """The id of the run `ref` names: an id, a unique id prefix, or a run name (the latest
        run with that name). A prefix of several ids that is no run's name is ambiguous."""
        if not ref:
            raise RunNotFound("no run given: name a run by its id, an id prefix or its name")
        prefix = func.substr(runs.c.id, 1, len(ref), type_=SafeText) == ref
        latest = (runs.c.started_at.desc(), runs.c.id.desc())
        with self._read(f"find run {ref!r}") as conn:
            if conn.scalar(select(runs.c.id).where(runs.c.id == ref)) is not None:
                return ref
            matches = conn.execute(
                select(runs.c.id, runs.c.name)
                .where(prefix)
                .order_by(*latest)
                .limit(_CANDIDATES_SHOWN + 1)
            ).all()
            if len(matches) == 1:
                return str(matches[0].id)
            named = conn.scalar(
                select(runs.c.id).where(runs.c.name == ref).order_by(*latest).limit(1)
            )
        if named is not None:
            return str(named)
        if matches:
            shown = [m.id if m.name is None else f"{m.id} ({m.name})" for m in matches]
            if len(shown) > _CANDIDATES_SHOWN:
                shown[_CANDIDATES_SHOWN:] = ["…"]
            raise AmbiguousRun(
                f"run {ref!r} is ambiguous: it starts the ids of {', '.join(shown)}; "
                "give more of the id"
            )
        raise RunNotFound(
            f"no run matches {ref!r} (by id, id prefix or name) in the store {self.url}; "
            "`trialkit runs` lists the runs"
        )

    def load_report(
        self,
        run_id: str,
        *,
        max_results: int = MAX_RESULTS_PER_TASK,
        version: str | None = None,
    ) -> Report:
        """The report of a run, as `build_report` makes it from the run's results, but computed
        by the database: a task of more than `max_results` trials is counted and summed in
        SQL, and only the non-passing trials its report lists are read. Transcripts never are.
        A finished run's report kept in the store is read instead while the run is as it was
        (see `kept_reports`), and only the trials it lists are read to fill it in; `version`
        is the run's `kept_reports.run_version` when the caller has just read it.
        """
        with self._read(f"load the report of run {run_id!r}") as conn:
            version = version or kept_reports.run_version(conn, run_id)
            kept = None if version is None else kept_reports.read_kept(conn, run_id, version)
            if kept is not None:
                if max_results == 0:
                    return kept
                listed = aggregates.with_listed(conn, kept, max_results)
                if listed is not None:
                    return listed
            return self._computed_report(conn, run_id, max_results)

    def _computed_report(self, conn: Connection, run_id: str, max_results: int) -> Report:
        run_row = self._run_row(conn, run_id)
        plans = [
            rows.task_plan(row)
            for row in conn.execute(
                select(run_tasks).where(run_tasks.c.run_id == run_id).order_by(run_tasks.c.position)
            )
        ]
        run, suite = rows.run_info(run_row), rows.suite_info(run_row)
        return aggregates.load_report(conn, run, suite, plans, max_results=max_results)

    def _keep_report(self, conn: Connection, run_id: str, made: Report | None = None) -> None:
        """Keep the report of `run_id` as it is now, unless the run is still running: `made`
        (the report the run's own process made) when it counts every stored trial, else the
        one the store computes."""
        version = kept_reports.run_version(conn, run_id)
        if version is None:
            return
        stored = self._made_report(conn, run_id, made)
        if made is not None and stored is not None:
            report, (run, suite) = made, stored
        else:
            report = self._computed_report(conn, run_id, 0)
            run, suite = report.run, report.suite
        if run.status == "running":
            return
        figures = run_figures.computed_figures(conn, {run_id: run.config})[run_id]
        latencies = (report.summary.latency_p50_s, report.summary.latency_p95_s)
        figures = dataclasses.replace(figures, latencies=latencies)
        kept_reports.keep(conn, run_id, version, report, figures.to_kept(), run=run, suite=suite)

    def _made_report(
        self, conn: Connection, run_id: str, made: Report | None
    ) -> tuple[RunInfo, SuiteInfo] | None:
        """The run and suite to keep `made` with, read back from the store (the config as
        stored: secrets redacted); `None` when `made` is not the report of the run as stored:
        another process added trials, or the tasks differ. Kept, `made` lists no trials
        (`kept_reports.keep`), as one the store computes with `max_results=0`."""
        if made is None or made.run.id != run_id:
            return None
        stored = conn.execute(select(func.count()).where(trials.c.run_id == run_id)).scalar_one()
        if stored != made.summary.trials:
            return None
        run_row = self._run_row(conn, run_id)
        run, suite = rows.run_info(run_row), rows.suite_info(run_row)
        plans = conn.execute(
            select(run_tasks.c.task_id)
            .where(run_tasks.c.run_id == run_id)
            .order_by(run_tasks.c.position)
        ).scalars()
        if list(plans) != [t.id for t in made.tasks]:
            return None
        return run, suite

    def load_trial(self, run_id: str, task_id: str, index: int) -> Trial:
        """One trial in full, transcript and outcome included."""
        key = (trials.c.run_id == run_id, trials.c.task_id == task_id, trials.c.idx == index)
        with self._read(f"load trial {task_id}#{index} of run {run_id!r}") as conn:
            row = conn.execute(select(trials).where(*key)).one_or_none()
            if row is None:
                self._run_row(conn, run_id)
                raise TrialNotFound(f"run {run_id!r} has no trial {task_id}#{index}")
        return rows.trial(row)

    def iter_trials(self, run_id: str) -> Iterator[Trial]:
        """Every trial of a run in full, by task id then index, read in batches."""
        with self._read(f"read run {run_id!r}") as conn:
            self._run_row(conn, run_id)
        return self._stream_trials(run_id)

    def _stream_trials(self, run_id: str) -> Iterator[Trial]:
        query = (
            select(trials)
            .where(trials.c.run_id == run_id)
            .order_by(trials.c.task_id, trials.c.idx)
            .execution_options(yield_per=_STREAM_BATCH)
        )
        with self._read(f"read the trials of run {run_id!r}") as conn:
            for row in conn.execute(query):
                yield rows.trial(row)

    # -- plumbing ------------------------------------------------------------------------------

    def _run_row(self, conn: Connection, run_id: str) -> Any:
        row = conn.execute(select(runs).where(runs.c.id == run_id)).one_or_none()
        if row is None:
            raise RunNotFound(f"no run with id {run_id!r} in the store {self.url}")
        return row

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        """A connection in one read transaction (a consistent snapshot), rolled back after."""
        self._check_open()
        with (
            self._database_errors(action),
            rows.decoding(f"cannot {action}: a stored row"),
            self._engine.connect() as conn,
        ):
            if conn.dialect.name == "postgresql":  # its default snapshot is per statement
                conn.execution_options(isolation_level="REPEATABLE READ")
            yield conn

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        """A connection in one write transaction, committed when the block succeeds."""
        self._check_open()
        with self._database_errors(action), self._writer.begin() as conn:
            yield conn

    @contextmanager
    def _database_errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except IntegrityError as exc:
            raise StoreError(f"cannot {action}: {_reason(exc)}") from None
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot {action} in the store {self.url}: {_reason(exc)}") from None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")


def _open_url(url: str) -> str | None:
    parsed = parse_url(url)
    if is_sqlite_memory(parsed):
        return None
    path = sqlite_file(parsed)
    if path is None:
        return url
    # A relative file, as the folder this process started in saw it.
    return parsed.set(database=str(path.absolute())).render_as_string(hide_password=False)


_DELETE_SCORES = delete(scores).where(
    scores.c.run_id == bindparam("k_run"),
    scores.c.task_id == bindparam("k_task"),
    scores.c.trial_idx == bindparam("k_idx"),
)
_DELETE_TRIALS = delete(trials).where(
    trials.c.run_id == bindparam("k_run"),
    trials.c.task_id == bindparam("k_task"),
    trials.c.idx == bindparam("k_idx"),
)


_PG_LOCK = text("SELECT pg_advisory_xact_lock(:key)")


def _lock_key(run_id: str) -> int:
    """A run's advisory lock: a signed 64-bit integer from its id."""
    digest = hashlib.blake2b(f"trialkit run {run_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _stored_keys(
    conn: Connection, by_run: dict[str, list[tuple[str, int]]]
) -> list[dict[str, Any]]:
    """The keys among `by_run` already stored (usually none), found with few cheap queries."""
    found: list[dict[str, Any]] = []
    for run_id, keys in by_run.items():
        for start in range(0, len(keys), _KEYS_PER_QUERY):
            chunk = keys[start : start + _KEYS_PER_QUERY]
            wanted = set(chunk)
            # Two plain INs select a superset of the keys (cheaper than a tuple IN); keep the keys.
            query = select(trials.c.task_id, trials.c.idx).where(
                trials.c.run_id == run_id,
                trials.c.task_id.in_(sorted({task for task, _ in chunk})),
                trials.c.idx.in_(sorted({index for _, index in chunk})),
            )
            found.extend(
                {"k_run": run_id, "k_task": row.task_id, "k_idx": row.idx}
                for row in conn.execute(query)
                if (row.task_id, row.idx) in wanted
            )
    return found


def _count_verdict(verdict: Verdict) -> Any:
    return func.sum(case((trials.c.verdict == verdict.value, 1), else_=0))


def _count_errors() -> Any:
    """Trials that errored, with those whose verdict is none (changed behind trialkit's back),
    as reports count them."""
    decided = [Verdict.PASS.value, Verdict.FAIL.value, Verdict.UNKNOWN.value]
    return func.sum(case((trials.c.verdict.in_(decided), 0), else_=1))


def _summary(row: Any) -> RunSummary:
    with rows.decoding(f"run {row.id!r}"):
        return _decode_summary(row)


def _decode_summary(row: Any) -> RunSummary:
    decided = row.passed + row.failed
    return RunSummary.model_validate(
        {
            "id": row.id,
            "name": row.name,
            "suite_id": row.suite_id,
            "suite_kind": row.suite_kind,
            "status": row.status,
            **rows.run_times(row),
            "tasks": row.tasks,
            "trials": row.trials,
            "passed": row.passed,
            "failed": row.failed,
            "errors": row.errors,
            "pass_rate": row.passed / decided if decided else None,
        }
    )


def _reason(exc: BaseException) -> str:
    """The first line of the database's own message, without SQLAlchemy's SQL and parameters."""
    cause: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig else exc
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__
