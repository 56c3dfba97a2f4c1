"""The store's exceptions. Every message is one line that says what went wrong and where."""

from __future__ import annotations


class StoreError(Exception):
    """The store could not be opened, read or written."""


class RunNotFound(StoreError, LookupError):
    """No run matches the id, id prefix or name that was asked for."""


class AmbiguousRun(StoreError, LookupError):
    """An id prefix matches several runs; the message lists them."""


class TrialNotFound(StoreError, LookupError):
    """The run has no trial with that task id and index."""


class GraderNotFound(StoreError, LookupError):
    """A label names a grader the trial has no score of."""
