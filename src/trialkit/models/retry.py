"""Retries with exponential backoff and jitter, and rate limits, for model calls."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import anyio


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try a model call before giving up.

    Transient errors (429, 5xx, timeouts, dropped connections) are retried up to `attempts`
    times in all, waiting `base_delay * 2**n` seconds with jitter (at most `max_delay`), or as
    long as the server's `Retry-After` asks (at most `max_retry_after`). Each attempt is cut
    at `timeout` seconds, so a dead endpoint costs a bounded time, never a hang.
    """

    attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return backoff * (0.5 + random.random() / 2)


class RateLimit:
    """A budget per minute (requests or tokens), refilled continuously.

    `acquire` waits while the budget is spent. Token use is only known after a call, so it is
    charged afterwards with `charge`; the budget may go negative and later calls wait it off.
    """

    def __init__(self, per_minute: float) -> None:
        if not per_minute > 0:
            raise ValueError(f"a rate limit must be > 0 per minute, got {per_minute}")
        self.per_minute = per_minute
        self.available = per_minute
        self.updated = time.monotonic()

    def _refill(self) -> None:
        now = time.monotonic()
        self.available = min(
            self.per_minute, self.available + (now - self.updated) * self.per_minute / 60
        )
        self.updated = now

    async def acquire(self, amount: float = 1.0) -> None:
        amount = min(amount, self.per_minute)  # more than a minute's budget waits for a full one
        while True:
            self._refill()
            if self.available >= amount:
                self.available -= amount
                return
            await anyio.sleep((amount - self.available) * 60 / self.per_minute)

    async def wait_positive(self) -> None:
        while True:
            self._refill()
            if self.available > 0:
                return
            await anyio.sleep(-self.available * 60 / self.per_minute + 0.001)

    def charge(self, amount: float) -> None:
        self._refill()
        self.available -= amount
