"""The `stats` extra (scipy, with numpy): imported only when an analysis runs."""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "pip install 'trialkit[stats]'"


def require_stats(what: str) -> None:
    """Raise `ImportError` naming the install command when scipy or numpy is missing."""
    try:
        import numpy  # noqa: F401
        import scipy.stats  # type: ignore[import-untyped]  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{what} needs scipy and numpy: {INSTALL_HINT} ({exc})") from None


def missing_numpy(what: str) -> str | None:
    """The line that says `what` needs numpy (which the `stats` extra installs) when numpy
    cannot be imported; `None` when it can."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return f"{what} needs numpy: {INSTALL_HINT}"
    return None


def scipy_stats() -> Any:
    """`scipy.stats`, which ships without type hints (check `require_stats` first)."""
    import scipy.stats

    return scipy.stats
