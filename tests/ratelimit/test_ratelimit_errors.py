import math
import re

import pytest

from ratelimit import errors
from ratelimit.errors import (
    BackendUnavailable,
    CostExceedsLimit,
    LimiterConfigError,
    RateLimitError,
    RateLimitExceeded,
)

ALL = [RateLimitError, RateLimitExceeded, CostExceedsLimit, BackendUnavailable, LimiterConfigError]


@pytest.mark.parametrize("cls", ALL)
def test_every_error_has_a_snake_case_code_and_is_drawn_in_the_tree(cls):
    assert re.fullmatch(r"[a-z]+(_[a-z]+)*", cls.code)
    assert issubclass(cls, RateLimitError)
    assert cls.__name__ in errors.__doc__
    assert f'code="{cls.code}"' in errors.__doc__


def test_codes_are_distinct():
    assert len({cls.code for cls in ALL}) == len(ALL)


def test_rate_limit_exceeded_carries_retry_after_and_a_clear_message():
    exc = RateLimitExceeded(12.5, 5, 60.0)
    assert exc.retry_after == 12.5
    assert exc.code == "rate_limited"
    assert (exc.limit, exc.window) == (5, 60.0)
    assert str(exc) == "rate limit reached (at most 5 per 60 s); retry after 12.500 s"


def test_cost_exceeds_limit_never_fits():
    exc = CostExceedsLimit("tokens", 50_000, 30_000, 60.0)
    assert exc.retry_after == math.inf
    assert "50000 tokens" in str(exc) and "30000 tokens per 60 s" in str(exc)


def test_backend_unavailable_says_it_refuses():
    exc = BackendUnavailable("redis", "connection refused")
    assert "refusing to admit" in str(exc) and exc.code == "backend_unavailable"
