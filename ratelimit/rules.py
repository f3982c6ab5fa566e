"""Limits and the sliding-window-log decision shared by every backend.

A limit is ``limit`` units per ``window`` seconds of one unit: ``requests`` or ``tokens``.
Limits combine with ``&``; a charge is admitted only when every limit admits it, and then it is
recorded for all of them at once (a refusal charges none).

Example:
    >>> both = RequestLimit(5, 60.0) & TokenLimit(30_000, 60.0)
    >>> [str(rule) for rule in both]
    ['5 requests per 60 s', '30000 tokens per 60 s']

The decision is exact: a grant is stamped ``now`` and counts in every window ``(t - W, t]`` that
contains ``now``, i.e. it stops counting at ``stamp + window``. A charge is admitted only if,
counting it, the entries still counting at ``now`` fit under the limit. Because stamps are taken
at commit from one clock, this bounds every window of length ``W``, not only the current one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from ratelimit.errors import CostExceedsLimit, LimiterConfigError

Unit = Literal["requests", "tokens"]


@dataclass(frozen=True)
class Limit:
    """At most ``limit`` units of ``unit`` in any window of ``window`` seconds."""

    limit: int
    window: float
    unit: Unit = "requests"

    def __post_init__(self) -> None:
        if self.unit not in ("requests", "tokens"):
            raise LimiterConfigError(f"unknown unit {self.unit!r}; use 'requests' or 'tokens'")
        if not isinstance(self.limit, int) or self.limit < 1:
            raise LimiterConfigError(f"limit must be a positive integer, got {self.limit!r}")
        if not (self.window > 0 and math.isfinite(self.window)):
            raise LimiterConfigError(
                f"window must be a positive number of seconds, got {self.window!r}"
            )

    def __and__(self, other: Limit | Limits) -> Limits:
        return Limits((self,)) & other

    def __iter__(self) -> Iterator[Limit]:
        yield self

    def __str__(self) -> str:
        return f"{self.limit} {self.unit} per {self.window:g} s"


def RequestLimit(limit: int, window: float) -> Limit:  # noqa: N802 - reads as a type
    """At most ``limit`` requests (HTTP attempts) in any ``window`` seconds."""
    return Limit(limit, float(window), "requests")


def TokenLimit(limit: int, window: float) -> Limit:  # noqa: N802 - reads as a type
    """At most ``limit`` tokens in any ``window`` seconds."""
    return Limit(limit, float(window), "tokens")


@dataclass(frozen=True)
class Limits:
    """Several limits charged together: ``RequestLimit(5, 60) & TokenLimit(30_000, 60)``."""

    rules: tuple[Limit, ...]

    def __post_init__(self) -> None:
        if not self.rules:
            raise LimiterConfigError("at least one limit is needed")

    def __and__(self, other: Limit | Limits) -> Limits:
        return Limits(self.rules + tuple(other))

    def __iter__(self) -> Iterator[Limit]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __getitem__(self, index: int) -> Limit:
        return self.rules[index]

    @property
    def longest_window(self) -> float:
        """Entries older than this no longer count anywhere and may be pruned."""
        return max(rule.window for rule in self.rules)

    def __str__(self) -> str:
        return " & ".join(str(rule) for rule in self.rules)


def as_limits(rules: Limit | Limits | Iterable[Limit]) -> Limits:
    """Normalise one limit, several, or an iterable of limits to :class:`Limits`."""
    if isinstance(rules, Limits):
        return rules
    return Limits(tuple(rules))


class Charge:
    """What one acquisition costs: ``requests`` (usually 1) and ``tokens`` (an estimate).

    Example:
        >>> Charge(1, tokens=1200)
        Charge(requests=1, tokens=1200)
    """

    __slots__ = ("requests", "tokens")

    def __init__(self, requests: int = 1, tokens: int = 0) -> None:
        if type(requests) is not int or requests < 0:
            raise LimiterConfigError(f"requests must be a non-negative integer, got {requests!r}")
        if type(tokens) is not int or tokens < 0:
            raise LimiterConfigError(f"tokens must be a non-negative integer, got {tokens!r}")
        self.requests = requests
        self.tokens = tokens

    def amount(self, unit: Unit) -> int:
        return self.requests if unit == "requests" else self.tokens

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Charge) and (self.requests, self.tokens) == (
            other.requests,
            other.tokens,
        )

    def __hash__(self) -> int:
        return hash((self.requests, self.tokens))

    def __repr__(self) -> str:
        return f"Charge(requests={self.requests}, tokens={self.tokens})"


class Verdict(NamedTuple):
    """A backend's answer: granted (with its commit stamp) or refused (with ``retry_after``)."""

    granted: bool
    now: float
    retry_after: float = 0.0
    grant_id: str | None = None
    used: tuple[int, ...] = ()


def check_charge_fits(rules: Limits, charge: Charge) -> None:
    """Raise :class:`CostExceedsLimit` when ``charge`` is larger than a whole window of a limit."""
    for rule in rules:
        amount = charge.amount(rule.unit)
        if amount > rule.limit:
            raise CostExceedsLimit(rule.unit, amount, rule.limit, rule.window)


def wait_until(now: float, when: float) -> float:
    """Seconds from ``now`` to ``when``, rounded up so that ``now + result >= when`` in floats.

    This keeps ``retry_after`` exact: sleeping exactly that long on the same clock lands at or
    after the moment the slot frees.
    """
    delay = when - now
    if delay <= 0:
        return 0.0
    step = math.ulp(max(abs(now), abs(when)))
    while now + delay < when:
        delay += step
    return delay


def decide(
    entries: Sequence[tuple[float, int, int]],
    rules: Limits,
    charge: Charge,
    now: float,
    paused_until: float | None = None,
) -> tuple[bool, float, tuple[int, ...]]:
    """Decide one charge against a sliding-window log.

    ``entries`` are ``(stamp, requests, tokens)`` in ascending stamp order; entries that stopped
    counting may be included and are ignored. Returns ``(granted, retry_after, used)`` where
    ``used`` is each limit's usage at ``now`` before this charge and ``retry_after`` is the
    exact wait until the charge would fit if nothing else were granted meanwhile
    (``math.inf`` when it can never fit).
    """
    retry_at = now
    never = False
    used_all: list[int] = []
    for rule in rules:
        tokens = rule.unit != "requests"
        live = [entry for entry in entries if entry[0] + rule.window > now]
        used = sum(entry[2] if tokens else entry[1] for entry in live)
        used_all.append(used)
        amount = charge.amount(rule.unit)
        if amount > rule.limit:
            never = True
            continue
        excess = used + amount - rule.limit
        if excess <= 0:
            continue
        freed = 0
        for entry in live:
            freed += entry[2] if tokens else entry[1]
            if freed >= excess:
                retry_at = max(retry_at, entry[0] + rule.window)
                break
    if paused_until is not None and paused_until > retry_at:
        retry_at = paused_until
    if never:
        return False, math.inf, tuple(used_all)
    if retry_at > now:
        return False, wait_until(now, retry_at), tuple(used_all)
    return True, 0.0, tuple(used_all)


def usage_query(rules: Limits, placeholder: str) -> tuple[str, int]:
    """SQL select-list summing each limit's usage at ``now``, for the SQL backends' fast path.

    Each limit contributes ``SUM(CASE WHEN stamp + <window> > <now> THEN <unit> ELSE 0 END)``;
    parameters are ``(window, now)`` per limit, in order. Returns the SQL and how many limits.
    """
    parts = [
        f"COALESCE(SUM(CASE WHEN stamp + {placeholder} > {placeholder} THEN {rule.unit} ELSE 0 END), 0)"
        for rule in rules
    ]
    return ", ".join(parts), len(parts)


def fits_now(
    rules: Limits, used: Sequence[int], charge: Charge, now: float, paused_until: float | None
) -> bool:
    """True when ``charge`` fits every limit given each limit's usage at ``now``."""
    if paused_until is not None and paused_until > now:
        return False
    return all(
        u + charge.amount(rule.unit) <= rule.limit for rule, u in zip(rules, used, strict=True)
    )
