"""`m006_labels` on a store written before it: pending scores found, labels then apply."""

from __future__ import annotations

from typing import cast

import pytest
from sqlalchemy import Connection, inspect, select
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteDialect
from sqlalchemy.engine import Dialect

from trialkit.graders.human import pending_score
from trialkit.labels import Label
from trialkit.score import Score, Verdict
from trialkit.store import Store
from trialkit.store.migrations import MIGRATIONS, applied_migrations, m006_labels
from trialkit.store.schema import scores as scores_table

from ._samples import make_sample, make_trial
from .test_store_upgrade import _write_old_store


def test_a_store_of_the_previous_schema_gets_labels_and_its_pending_scores(db_url: str) -> None:
    old = make_sample("old-run")
    decoy = Score(name="judge", verdict=Verdict.PASS, value=1.0, metadata={"pending": True})
    old.trials += [
        make_trial("old-run", "tools", 1, verdict=Verdict.UNKNOWN, scores=[decoy, pending_score()]),
        make_trial("old-run", "tools", 2, scores=[decoy]),
    ]
    previous = list(MIGRATIONS[: MIGRATIONS.index(m006_labels)])
    _write_old_store(db_url, old, previous)

    with Store(db_url) as store:
        with store._engine.connect() as conn:
            assert applied_migrations(conn) == [m.__name__ for m in MIGRATIONS]
            assert inspect(conn).has_table("labels")
            marked = conn.execute(
                select(scores_table.c.task_id, scores_table.c.trial_idx, scores_table.c.name)
                .where(scores_table.c.pending.is_(True))
                .order_by(scores_table.c.task_id, scores_table.c.trial_idx)
            ).all()
        assert [tuple(row) for row in marked] == [("tools", 1, "human")]
        assert [(p.task_id, p.trial) for p in store.pending_reviews("old-run")] == [("tools", 1)]
        assert store.load_report("old-run").summary.pending == 1
        for trial in old.trials:
            assert store.load_trial(trial.run_id, trial.task_id, trial.index) == trial

        store.save_label(
            Label(run_id="old-run", task_id="tools", trial=1, verdict="pass", reviewer="ana")
        )

        assert store.load_trial("old-run", "tools", 1).verdict is Verdict.PASS
        assert store.pending_reviews("old-run") == []
        assert store.load_report("old-run").summary.pending == 0


class _RecordingConnection:
    """Keeps the SQL `m006` sends through `exec_driver_sql` (the ALTER TABLE)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.statements: list[str] = []

    def exec_driver_sql(self, statement: str) -> None:
        self.statements.append(statement)

    def execute(self, *_: object) -> None:
        raise _Stop


class _Stop(Exception):
    pass


@pytest.mark.parametrize(
    ("dialect", "default"),
    [(SQLiteDialect, "0"), (PGDialect, "false")],
    ids=["sqlite", "postgresql"],
)
def test_m006_adds_the_pending_column_in_place(dialect: type[Dialect], default: str) -> None:
    conn = _RecordingConnection(dialect())

    with pytest.raises(_Stop):
        m006_labels(cast(Connection, conn))

    assert conn.statements == [
        f"ALTER TABLE scores ADD COLUMN pending BOOLEAN DEFAULT {default} NOT NULL"
    ]
