"""Where trials run: in this process (the default), in worker processes (`processes`), or in
actors on a Ray cluster (`ray`, imported only when used)."""

from trialkit.executors.processes import ProcessPool, WorkerError, check_source

__all__ = ["ProcessPool", "WorkerError", "check_source"]
