"""The base of every record trialkit writes to disk or to the store."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """A pydantic model that rejects unknown fields, so a typo in a file is an error."""

    model_config = ConfigDict(extra="forbid")


class ErrorInfo(Record):
    """An exception turned into data: what a trial or a score carries instead of raising."""

    type: str
    """The exception's class name, e.g. `TimeoutError`."""
    message: str
    traceback: str | None = None
    phase: str | None = None
    """Where it happened: `setup`, `agent`, `capture`, `grading`, `teardown`, `timeout`."""

    @classmethod
    def from_exception(cls, exc: BaseException, *, phase: str | None = None) -> ErrorInfo:
        import traceback

        return cls(
            type=type(exc).__name__,
            message=str(exc) or type(exc).__name__,
            traceback="".join(traceback.format_exception(exc)),
            phase=phase,
        )

    def summary(self) -> str:
        return f"{self.type}: {self.message}"
