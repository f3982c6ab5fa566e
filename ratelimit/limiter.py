"""The sliding-window limiter: exact, fail-fast or bounded wait, sync and asyncio.

Example:
    >>> from ratelimit import ManualClock, RateLimitExceeded, SlidingWindowLimiter
    >>> clock = ManualClock()
    >>> lim = SlidingWindowLimiter(limit=2, window=60.0, clock=clock, sleep=clock.sleep)
    >>> lim.acquire().stamp, lim.acquire().stamp
    (0.0, 0.0)
    >>> try:
    ...     lim.acquire()
    ... except RateLimitExceeded as exc:
    ...     exc.retry_after
    60.0
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple, TypeVar

from ratelimit.backends.base import Backend, Clock
from ratelimit.backends.memory import MemoryBackend
from ratelimit.errors import LimiterConfigError, RateLimitExceeded
from ratelimit.feedback import retry_after_from_headers
from ratelimit.line import WaitingLine
from ratelimit.rules import Charge, Limit, Limits, Verdict, as_limits, check_charge_fits

Mode = Literal["fail_fast", "wait"]
_R = TypeVar("_R")


class Grant(NamedTuple):
    """One admitted acquisition, stamped with the backend clock at commit."""

    key: str
    grant_id: str
    stamp: float
    requests: int
    tokens: int
    #: Seconds the request was held back by the limit: it slept, or queued behind a request
    #: that did. 0 when it was admitted at once (the backend's round trip is no wait).
    waited: float = 0.0


@dataclass(frozen=True)
class Usage:
    """Usage of one limit now; ``retry_after`` is 0 when one more request is admitted now."""

    used: int
    limit: int
    window: float
    retry_after: float
    unit: str = "requests"


class SlidingWindowLimiter:
    """At most ``limit`` acquisitions in any ``window`` seconds, for everyone sharing ``backend``.

    Args:
        limit, window: the request limit (default 5 per 60 s), used when ``limits`` is not given.
        limits: one or several limits, e.g. ``RequestLimit(5, 60) & TokenLimit(30_000, 60)``.
        key: the name of the shared budget (e.g. one provider account) in the backend.
        backend: where grants are recorded; defaults to a private :class:`MemoryBackend`.
        clock: the limiter's clock. The memory backend stamps with it (unless given its own);
            shared backends never do, they stamp with their own clock. It also measures how
            long a waiter has waited. Default: ``time.monotonic``.
        sleep, asleep: how to wait (defaults ``time.sleep`` / ``asyncio.sleep``). When only
            ``sleep`` is given, the async API calls it too and then yields to the loop once,
            which suits virtual clocks such as :class:`ManualClock`.
        mode: ``"fail_fast"`` raises :class:`RateLimitExceeded` at once and never sleeps;
            ``"wait"`` sleeps until admitted, re-checking on waking, and raises only when
            admission would take longer than ``max_wait`` seconds in total.
        margin: the safety margin, in seconds, added to every window. Grants are exact on their
            commit stamps; a caller sees its grant a little later (a round trip, scheduling) and
            its request leaves later still. If every request leaves within ``margin`` of its
            grant's commit, the requests themselves never exceed a limit in any window of its
            length. Default 0: exact on commit stamps only.
        on_wait: told the seconds of each wait in wait mode before it starts (a live status
            line); it must not sleep or raise. Settable later as the ``on_wait`` attribute.

    Fairness in wait mode: the threads and tasks waiting on one limiter object form a line and
    are admitted in arrival order; only the front of the line waits for a slot, re-checking
    exactly when the slot it needs frees. Fail-fast callers do not queue. Across processes
    sharing a backend there is no common line: whoever re-checks first after a slot frees is
    admitted, and each waiter still gives up after ``max_wait``.
    """

    def __init__(
        self,
        limit: int = 5,
        window: float = 60.0,
        *,
        limits: Limit | Limits | None = None,
        key: str = "default",
        backend: Backend | None = None,
        clock: Clock | None = None,
        sleep: Callable[[float], object] | None = None,
        asleep: Callable[[float], Awaitable[object]] | None = None,
        mode: Mode = "fail_fast",
        max_wait: float = 120.0,
        margin: float = 0.0,
        on_wait: Callable[[float], object] | None = None,
    ) -> None:
        if mode not in ("fail_fast", "wait"):
            raise LimiterConfigError(f"mode must be 'fail_fast' or 'wait', got {mode!r}")
        if not (max_wait >= 0):
            raise LimiterConfigError(f"max_wait must be >= 0, got {max_wait!r}")
        if not (margin >= 0 and math.isfinite(margin)):
            raise LimiterConfigError(
                f"margin must be a finite number of seconds >= 0, got {margin!r}"
            )
        self.limits = (
            as_limits(limits) if limits is not None else Limits((Limit(limit, float(window)),))
        )
        self.margin = float(margin)
        # what the backend enforces: each window lengthened by the margin
        self._enforced = (
            Limits(tuple(Limit(r.limit, r.window + margin, r.unit) for r in self.limits))
            if margin
            else self.limits
        )
        self.key = key
        self.backend = backend if backend is not None else MemoryBackend()
        self.mode: Mode = mode
        self.max_wait = float(max_wait)
        self._line = WaitingLine()
        #: Refusals of waiting requests so far (each followed by a sleep): a request that saw
        #: none while it queued and asked was never held back by the limit.
        self._refusals = 0
        self._unit_charge = Charge(1, 0)
        check_charge_fits(self.limits, self._unit_charge)
        self._clock = clock
        self._timer: Clock = clock or time.monotonic
        self._sleep = sleep or time.sleep
        #: Told the seconds of each wait before it starts (a CLI's live line); never sleeps.
        self.on_wait = on_wait
        if asleep is not None:
            self._asleep = asleep
        elif sleep is None:
            self._asleep = asyncio.sleep
        else:
            self._asleep = self._yielding_sleep

    async def _yielding_sleep(self, seconds: float) -> None:
        self._sleep(seconds)
        await asyncio.sleep(0)

    @property
    def limit(self) -> int:
        """The first limit's size (the request limit unless configured otherwise)."""
        return self.limits[0].limit

    @property
    def window(self) -> float:
        """The first limit's window in seconds (as configured, without the margin)."""
        return self.limits[0].window

    # -- acquisition ------------------------------------------------------------------------

    def acquire(self, cost: int = 1, *, tokens: int = 0) -> Grant:
        """Admit one request costing ``cost`` requests and ``tokens`` tokens, or raise.

        Raises :class:`RateLimitExceeded` (fail-fast, or a wait longer than ``max_wait``),
        :class:`CostExceedsLimit` (can never fit) or :class:`BackendUnavailable` (fail closed).
        """
        charge = self._charge(cost, tokens)
        if self.mode == "fail_fast":
            verdict = self.backend.acquire(self.key, self._enforced, charge, self._clock)
            if verdict.granted:
                return self._grant(verdict, charge, 0.0)
            raise RateLimitExceeded(verdict.retry_after, self.limit, self.window)
        started, refusals = self._timer(), self._refusals
        if not self._line.join(timeout=self.max_wait):
            raise self._still_queued()
        try:
            slept = 0.0
            while True:
                verdict = self.backend.acquire(self.key, self._enforced, charge, self._clock)
                waited = max(slept, self._timer() - started)
                if verdict.granted:
                    return self._grant(verdict, charge, self._held(waited, refusals))
                self._refuse_unless_waiting(verdict, waited)
                self._refusals += 1
                if self.on_wait is not None:
                    self.on_wait(verdict.retry_after)
                self._sleep(verdict.retry_after)
                slept += verdict.retry_after
        finally:
            self._line.leave()

    def try_acquire(self, cost: int = 1, *, tokens: int = 0) -> Grant | None:
        """Fail-fast without an exception: the grant, or None when refused now. Never sleeps."""
        charge = self._charge(cost, tokens)
        verdict = self.backend.acquire(self.key, self._enforced, charge, self._clock)
        if verdict.granted:
            return self._grant(verdict, charge, 0.0)
        return None

    async def aacquire(self, cost: int = 1, *, tokens: int = 0) -> Grant:
        """Async twin of :meth:`acquire`; waiting never blocks the event loop.

        A task cancelled while waiting leaves no stamp: grants are recorded only at admission.
        (With a shared backend, a task cancelled during the round trip itself may still be
        granted; the grant then counts, which errs on the safe side.)
        """
        charge = self._charge(cost, tokens)
        if self.mode == "fail_fast":
            verdict = await self._run(
                self.backend.acquire, self.key, self._enforced, charge, self._clock
            )
            if verdict.granted:
                return self._grant(verdict, charge, 0.0)
            raise RateLimitExceeded(verdict.retry_after, self.limit, self.window)
        started, refusals = self._timer(), self._refusals
        if not await self._line.ajoin(timeout=self.max_wait):
            raise self._still_queued()
        try:
            slept = 0.0
            while True:
                verdict = await self._run(
                    self.backend.acquire, self.key, self._enforced, charge, self._clock
                )
                waited = max(slept, self._timer() - started)
                if verdict.granted:
                    return self._grant(verdict, charge, self._held(waited, refusals))
                self._refuse_unless_waiting(verdict, waited)
                self._refusals += 1
                if self.on_wait is not None:
                    self.on_wait(verdict.retry_after)
                await self._asleep(verdict.retry_after)
                slept += verdict.retry_after
        finally:
            self._line.leave()

    def _still_queued(self) -> RateLimitExceeded:
        return RateLimitExceeded(
            self.max_wait,
            self.limit,
            self.window,
            reason=f"still queued behind earlier waiters after max_wait={self.max_wait:g} s",
        )

    def _charge(self, cost: int, tokens: int) -> Charge:
        if cost == 1 and tokens == 0 and type(cost) is int and type(tokens) is int:
            return self._unit_charge
        charge = Charge(cost, tokens)
        check_charge_fits(self.limits, charge)
        return charge

    def _held(self, elapsed: float, refusals_before: int) -> float:
        """``elapsed`` when the limit held the request back (it, or one ahead of it in the
        line, was refused since it arrived), else 0."""
        return elapsed if self._refusals != refusals_before else 0.0

    def _grant(self, verdict: Verdict, charge: Charge, waited: float) -> Grant:
        if verdict.grant_id is None:  # pragma: no cover - a backend's contract
            raise RuntimeError(f"backend {self.backend.name} granted without a grant id")
        return Grant(
            self.key, verdict.grant_id, verdict.now, charge.requests, charge.tokens, waited
        )

    def _refuse_unless_waiting(self, verdict: Verdict, waited: float) -> None:
        if self.mode == "fail_fast":
            raise RateLimitExceeded(verdict.retry_after, self.limit, self.window)
        if waited + verdict.retry_after > self.max_wait:
            raise RateLimitExceeded(
                verdict.retry_after,
                self.limit,
                self.window,
                reason=f"admission would take longer than max_wait={self.max_wait:g} s",
            )

    async def _run(self, fn: Callable[..., _R], *args: object) -> _R:
        if self.backend.blocking:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    # -- visibility and admission control ---------------------------------------------------

    def usage(self) -> Usage:
        """Usage of the first limit now, and seconds until one more request is admitted."""
        return self.usages()[0]

    def usages(self) -> tuple[Usage, ...]:
        """Usage of every limit now; ``retry_after`` is the wait for one more request."""
        verdict = self.backend.peek(self.key, self._enforced, Charge(1, 0), self._clock)
        return tuple(
            Usage(used, rule.limit, rule.window, verdict.retry_after, rule.unit)
            for rule, used in zip(self.limits, verdict.used, strict=True)
        )

    def fits(self, n: int, *, tokens: int = 0) -> float:
        """Admission control: 0.0 if ``n`` more requests (and ``tokens``) fit now, else the wait.

        ``math.inf`` when they can never fit in one window. Nothing is reserved: others may
        take the slots meanwhile, so the answer is advice, and each request still acquires.
        """
        charge = Charge(n, tokens)
        return self.backend.peek(self.key, self._enforced, charge, self._clock).retry_after

    async def afits(self, n: int, *, tokens: int = 0) -> float:
        """Async twin of :meth:`fits`."""
        verdict = await self._run(
            self.backend.peek, self.key, self._enforced, Charge(n, tokens), self._clock
        )
        return verdict.retry_after

    def pause(self, seconds: float) -> None:
        """Admit nobody sharing this key for ``seconds`` (a provider's 429 ``Retry-After``)."""
        if not (seconds >= 0 and math.isfinite(seconds)):
            raise LimiterConfigError(
                f"pause must be a finite number of seconds >= 0, got {seconds!r}"
            )
        self.backend.pause(self.key, float(seconds), self._clock)

    def pause_from_headers(self, headers: Mapping[str, str]) -> float:
        """Pause for as long as a provider response's headers ask; returns the pause (0 if none)."""
        seconds = retry_after_from_headers(headers)
        if seconds:
            self.pause(seconds)
        return seconds or 0.0

    async def apause(self, seconds: float) -> None:
        """Async twin of :meth:`pause`."""
        if not (seconds >= 0 and math.isfinite(seconds)):
            raise LimiterConfigError(
                f"pause must be a finite number of seconds >= 0, got {seconds!r}"
            )
        await self._run(self.backend.pause, self.key, float(seconds), self._clock)

    def correct(self, grant: Grant, tokens: int) -> bool:
        """Replace ``grant``'s token estimate with the usage the reply reported."""
        if not isinstance(tokens, int) or tokens < 0:
            raise LimiterConfigError(f"tokens must be a non-negative integer, got {tokens!r}")
        return self.backend.correct(grant.key, grant.grant_id, tokens, self._enforced)

    async def acorrect(self, grant: Grant, tokens: int) -> bool:
        """Async twin of :meth:`correct`."""
        if not isinstance(tokens, int) or tokens < 0:
            raise LimiterConfigError(f"tokens must be a non-negative integer, got {tokens!r}")
        return await self._run(
            self.backend.correct, grant.key, grant.grant_id, tokens, self._enforced
        )

    def refund(self, grant: Grant) -> bool:
        """Give ``grant``'s slot back: the request it admitted never reached the endpoint (the
        connection was refused), so it spent nothing there. Returns False when the grant no
        longer counts anyway."""
        return self.backend.refund(grant.key, grant.grant_id, self._enforced)

    async def arefund(self, grant: Grant) -> bool:
        """Async twin of :meth:`refund`."""
        return await self._run(self.backend.refund, grant.key, grant.grant_id, self._enforced)

    def __repr__(self) -> str:
        return f"SlidingWindowLimiter({self.limits}, key={self.key!r}, backend={self.backend.name}, mode={self.mode})"
