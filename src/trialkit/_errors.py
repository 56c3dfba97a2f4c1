"""Seeing through exception groups: what went wrong, whichever task group it came out of.

Code that runs in an anyio task group (the MCP tool server, an agent's own concurrency)
raises an `ExceptionGroup` where a plain exception was meant. Everything that decides what
an exception means (an error or the agent's failure, the type and message a trial records)
asks these functions, never `isinstance` on the exception as raised.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["RunFailed", "cause", "describe", "find", "leaves", "only"]

E = TypeVar("E", bound=BaseException)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in `exc`, nested groups flattened; `[exc]` when it is not a group."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    return [leaf for inner in exc.exceptions for leaf in leaves(inner)]


def find(exc: BaseException, kinds: type[E] | tuple[type[E], ...]) -> E | None:
    """The first exception in `exc` (itself or a leaf of its groups) that is one of `kinds`."""
    return next((leaf for leaf in leaves(exc) if isinstance(leaf, kinds)), None)


def only(exc: BaseException, kinds: type[E] | tuple[type[E], ...]) -> E | None:
    """`exc` as one of `kinds` when it, or every leaf of its groups, is one; else `None`.

    A group whose leaves are all one kind is that kind: `only(group, GiveUp)` is its first
    `GiveUp`."""
    found = leaves(exc)
    if all(isinstance(leaf, kinds) for leaf in found):
        return found[0]  # type: ignore[return-value]  # checked just above
    return None


def cause(exc: BaseException, *, first: tuple[type[BaseException], ...] = ()) -> BaseException:
    """The exception that says what happened: `exc` itself unless it is a group; for a group,
    its first leaf that is one of `first`, else its first leaf that is not a cancellation."""
    found = leaves(exc)
    picked = find(exc, first) if first else None
    if picked is not None:
        return picked
    import anyio

    cancelled = anyio.get_cancelled_exc_class()
    return next((leaf for leaf in found if not isinstance(leaf, cancelled)), found[0])


def describe(exc: BaseException, *, first: tuple[type[BaseException], ...] = ()) -> tuple[str, str]:
    """(type name, message) of what happened: the `cause`'s, never "unhandled errors in a
    TaskGroup"; a group's other distinct errors are named after the message."""
    main = cause(exc, first=first)
    message = str(main) or type(main).__name__
    others = [
        f"{type(leaf).__name__}: {leaf}"
        for leaf in leaves(exc)
        if leaf is not main and (type(leaf), str(leaf)) != (type(main), str(main))
    ]
    if others:
        unique = list(dict.fromkeys(others))
        also = "; ".join(unique[:3]) + ("; ..." if len(unique) > 3 else "")
        noun = "error" if len(unique) == 1 else "errors"
        message = f"{message} (and {len(unique)} other {noun}: {also})"
    return type(main).__name__, message


class RunFailed(Exception):
    """The run could not finish: trialkit's own machinery (the store, the executor's workers)
    failed mid-run. What finished is stored, so far as the store allowed, and the run can be
    resumed (`Runner.run(resume=run_id)`, `trialkit run --resume RUN`). Exit 4 of `run`."""

    def __init__(self, reason: str, *, run_id: str, stored: int) -> None:
        super().__init__(
            f"{reason}; {stored} finished {'trial is' if stored == 1 else 'trials are'} "
            f"stored, resuming run {run_id} continues"
        )
        self.reason = reason
        """What failed and why, in one line (the store's URL or the executor, and the cause)."""
        self.run_id = run_id
        self.stored = stored
        """How many finished trials of this run are stored (a resumed run's earlier ones too)."""
