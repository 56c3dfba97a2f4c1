"""The store: runs, trials, transcripts and scores in a SQL database (SQLite by default)."""

from trialkit.store.errors import (
    AmbiguousRun,
    GraderNotFound,
    RunNotFound,
    StoreError,
    TrialNotFound,
)
from trialkit.store.labels import PendingReview
from trialkit.store.store import RunSummary, Store
from trialkit.store.urls import DEFAULT_STORE_PATH, STORE_ENV_VAR, resolve_store_url

__all__ = [
    "DEFAULT_STORE_PATH",
    "STORE_ENV_VAR",
    "AmbiguousRun",
    "GraderNotFound",
    "PendingReview",
    "RunNotFound",
    "RunSummary",
    "Store",
    "StoreError",
    "TrialNotFound",
    "resolve_store_url",
]
