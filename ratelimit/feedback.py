"""Provider feedback: how long a provider asks us to hold off, read from its response headers.

A 429 (or any response) may say when to come back: ``retry-after-ms``, ``retry-after`` (seconds
or an HTTP date), or OpenAI-style ``x-ratelimit-remaining-*`` / ``x-ratelimit-reset-*`` pairs.
Pass the answer to :meth:`SlidingWindowLimiter.pause` so every worker sharing the limiter waits.

Example:
    >>> retry_after_from_headers({"Retry-After-Ms": "1500"})
    1.5
    >>> retry_after_from_headers({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0.5s"})
    360.5
    >>> retry_after_from_headers({"content-type": "application/json"}) is None
    True
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Callable, Mapping

_DURATION = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float | None:
    """``"1h2m3.5s"`` / ``"20ms"`` / ``"7"`` to seconds; None when unreadable.

    Example:
        >>> parse_duration("1m30s"), parse_duration("250ms"), parse_duration("2.5")
        (90.0, 0.25, 2.5)
    """
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) and value >= 0 else None
    position, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            return None
        total += float(match["value"]) * _UNITS[match["unit"]]
        position = match.end()
    return total if position == len(text) and position > 0 else None


def retry_after_from_headers(
    headers: Mapping[str, str], *, wall_clock: Callable[[], float] = time.time
) -> float | None:
    """Seconds the provider asks everyone to wait, or None when the headers do not say.

    The longest of what the headers say wins. ``wall_clock`` turns an HTTP-date
    ``Retry-After`` into seconds.
    """
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    waits: list[float] = []
    if "retry-after-ms" in lower:
        try:
            waits.append(float(lower["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    if "retry-after" in lower:
        seconds = parse_duration(lower["retry-after"])
        if seconds is None:
            try:
                when = email.utils.parsedate_to_datetime(lower["retry-after"])
            except (TypeError, ValueError):
                when = None
            if when is not None:
                seconds = max(0.0, when.timestamp() - wall_clock())
        if seconds is not None:
            waits.append(seconds)
    for unit in ("requests", "tokens"):
        if lower.get(f"x-ratelimit-remaining-{unit}", "").strip() == "0":
            seconds = parse_duration(lower.get(f"x-ratelimit-reset-{unit}", ""))
            if seconds is not None:
                waits.append(seconds)
    waits = [w for w in waits if math.isfinite(w) and w >= 0]
    return max(waits) if waits else None
