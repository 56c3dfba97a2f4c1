"""Where trials run: in this process (the default), or in worker processes (`processes`)."""

from trialkit.executors.processes import ProcessPool, WorkerError, check_source

__all__ = ["ProcessPool", "WorkerError", "check_source"]
