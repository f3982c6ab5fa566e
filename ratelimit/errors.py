"""Errors raised by the rate limiter.

Every error carries a stable, machine-readable ``code``::

    RateLimitError                  code="ratelimit_error"
     ├── RateLimitExceeded          code="rate_limited"         (retry_after, limit, window)
     ├── CostExceedsLimit           code="cost_exceeds_limit"   (a single charge larger than a whole window)
     ├── BackendUnavailable         code="backend_unavailable"  (fail closed: nothing is granted)
     └── LimiterConfigError         code="invalid_limiter_config"
"""

from __future__ import annotations

import math


class RateLimitError(Exception):
    """Base class of every error raised by ``ratelimit``."""

    code = "ratelimit_error"


class RateLimitExceeded(RateLimitError):
    """An acquisition was refused; ``retry_after`` seconds from now it would be admitted.

    Raised at once in fail-fast mode, and in wait mode when admission would take longer than
    ``max_wait``.
    """

    code = "rate_limited"

    def __init__(
        self,
        retry_after: float,
        limit: int | None = None,
        window: float | None = None,
        *,
        reason: str | None = None,
    ) -> None:
        self.retry_after = float(retry_after)
        self.limit = limit
        self.window = window
        self.reason = reason
        super().__init__(self._message())

    def _message(self) -> str:
        budget = ""
        if self.limit is not None and self.window is not None:
            budget = f" (at most {self.limit} per {self.window:g} s)"
        text = f"rate limit reached{budget}; retry after {self.retry_after:.3f} s"
        if self.reason:
            text += f": {self.reason}"
        return text


class CostExceedsLimit(RateLimitError):
    """A single charge can never be admitted: it is larger than a whole window's limit.

    Refused at once in every mode rather than queued forever.
    """

    code = "cost_exceeds_limit"

    def __init__(self, unit: str, cost: int, limit: int, window: float) -> None:
        self.unit = unit
        self.cost = cost
        self.limit = limit
        self.window = window
        self.retry_after = math.inf
        super().__init__(
            f"a charge of {cost} {unit} can never be admitted: the limit is {limit} {unit} "
            f"per {window:g} s"
        )


class BackendUnavailable(RateLimitError):
    """The shared backend could not be reached or did not answer; nothing was granted."""

    code = "backend_unavailable"

    def __init__(self, backend: str, detail: str) -> None:
        self.backend = backend
        self.detail = detail
        super().__init__(
            f"rate-limit backend {backend} is unavailable, refusing to admit: {detail}"
        )


class LimiterConfigError(RateLimitError, ValueError):
    """The limiter was built or called with impossible parameters."""

    code = "invalid_limiter_config"
