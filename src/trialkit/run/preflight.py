"""Before any trial: can the run work at all? (DESIGN §6: if not, exit 2 and nothing stored.)

A run whose model has no SDK, no key or no weights would otherwise store a run in which every
trial errored, and exit 3 after minutes; an executor that cannot start would store an empty
"interrupted" run that becomes the latest. Both are refused here, in one line, instead.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from trialkit.graders.judge import judge
from trialkit.models.base import Model
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.models.registry import UnknownModel, preflight
from trialkit.task import SuiteError

if TYPE_CHECKING:
    from trialkit.graders.base import Grader

ModelRef = str | Model


def judge_models(graders: Iterable[Grader], fallback: ModelRef | None) -> Iterator[ModelRef]:
    """The models the judges among `graders` (and inside their composites) will call."""
    for grader in graders:
        if isinstance(grader, judge):
            chosen = grader.model if grader.model is not None else fallback
            if chosen is not None:
                yield chosen
        yield from judge_models(getattr(grader, "parts", ()), fallback)


def replaying(cassette: Cassette | None, model: ModelRef) -> bool:
    """Whether `model`'s calls can all come from the cassette: in `replay`, and in `auto` once
    the cassette holds recordings of it (only a miss would call it, and then say so)."""
    if cassette is None:
        return False
    if cassette.mode is CacheMode.REPLAY:
        return True
    model_id = model if isinstance(model, str) else model.id
    return cassette.mode is CacheMode.AUTO and cassette.has_recordings(model_id)


def check_models(where: str, models: Iterable[ModelRef], cassette: Cassette | None) -> None:
    """Raise `SuiteError` naming the first model of `models` that cannot be called here."""
    for model in sorted(set(models), key=lambda m: m if isinstance(m, str) else m.id):
        try:
            preflight(model, replaying=replaying(cassette, model))
        except UnknownModel as exc:
            raise SuiteError(f"{where}: {exc}; nothing was run") from None


def check_executor(executor: str) -> None:
    """Raise `SuiteError` when the executor's package is missing (a cluster that cannot be
    reached is found when the executor starts, still before the run is stored)."""
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        raise SuiteError(
            "--executor ray needs Ray, which is not installed: pip install 'trialkit[ray]'; "
            "nothing was run"
        )
