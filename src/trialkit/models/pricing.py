"""Cost of a model call from `genai-prices` (its bundled snapshot; never fetched online)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from trialkit.transcript import Usage

if TYPE_CHECKING:
    from trialkit.transcript import ModelCall
    from trialkit.trial import Trial

FREE_PROVIDERS = frozenset({"scripted", "local"})
"""Providers whose calls cost nothing for certain: test doubles and models on this machine."""


def cost_of(model_id: str, usage: Usage) -> float | None:
    """US dollars for one call, or `None` when the price is unknown (never guessed as 0)."""
    provider, _, name = model_id.partition("/")
    if provider in FREE_PROVIDERS:
        return 0.0
    if not name or not _known(provider, name):
        return None
    return _price(
        provider,
        name,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )


@lru_cache(maxsize=4096)
def _price(
    provider: str,
    name: str,
    input_tokens: int,
    output_tokens: int,
    cache_read: int,
    cache_write: int,
) -> float | None:
    """Memoised: a run repeats the same token counts often, and pricing costs ~0.1 ms a call."""
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    priced = PriceUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read or None,
        cache_write_tokens=cache_write or None,
    )
    try:
        return float(calc_price(priced, model_ref=name, provider_id=provider).total_price)
    except LookupError:
        return None


@lru_cache(maxsize=256)
def _known(provider: str, name: str) -> bool:
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    try:
        calc_price(
            PriceUsage(input_tokens=0, output_tokens=0), model_ref=name, provider_id=provider
        )
    except LookupError:
        return False
    return True


def add_costs(*costs: float | None) -> float | None:
    """The sum (correctly rounded, so any order gives the same total), or `None` when any part
    is unknown: an unknown cost is never counted as zero."""
    if None in costs:
        return None
    return math.fsum(c for c in costs if c is not None)


def run_calls_summary(calls: Sequence[ModelCall]) -> dict[str, Any]:
    """Calls, tokens and cost of model calls that belong to a run but to no trial (a judge's
    negative controls), as kept in `run.config["judge_controls"]`."""
    usage = sum((call.usage for call in calls), Usage())
    return {
        "calls": len(calls),
        "usage": usage.model_dump(),
        "cost_usd": add_costs(*(call.cost_usd for call in calls)),
    }


class Budget:
    """Dollars spent by finished trials, against `--max-cost`."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.spent = 0.0

    def add(self, trial: Trial) -> None:
        """Count what the trial's live calls cost (replayed calls spent nothing), and what an
        agent reported its own calls cost (a command-line agent's, say)."""
        for call in trial.transcript.model_calls:
            if call.cost_usd is not None and not call.replayed:
                self.spent += call.cost_usd
        for turn in trial.transcript.turns:
            if turn.cost_usd is not None:
                self.spent += turn.cost_usd

    def spent_out(self) -> bool:
        return self.limit is not None and self.spent >= self.limit
