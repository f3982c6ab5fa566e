"""Send notifications for the server's events without ever holding up a reviewer or a run.

``Notifier.on_event`` is an ``EventHub`` listener: it only puts the event on a bounded queue. A
few worker threads turn each event into a message (``orchestrator.features.notify.messages``), claim its
delivery per channel in the outbox (one process sends it), and send it with retries and
exponential backoff. A slow or dead receiver costs those threads time, never the gate's.

Configuration (``NotificationSettings.from_env``):

SQLGATE_WEBHOOK_URLS          webhook URLs, separated by spaces or commas
SQLGATE_WEBHOOK_SECRET        the shared signing secret (or SQLGATE_WEBHOOK_SECRET_FILE: a file
                              holding it); required with webhooks, never logged or stored
SQLGATE_PUBLIC_URL            the server's address as reviewers reach it, for links
                              (default http://127.0.0.1:8000)
SQLGATE_SMTP_URL              smtp://[user:password@]host[:port][?starttls=1] for e-mail
SQLGATE_NOTIFY_EMAIL_FROM, SQLGATE_NOTIFY_EMAIL_TO   sender and recipients (comma-separated)
SQLGATE_NOTIFY_RETRY          the retry schedule (``RetryPolicy.from_text``), default about 7 h:
                              attempts=10,first=10s,factor=3,cap=2h,jitter=0.2
"""

from __future__ import annotations

import logging
import math
import os
import queue
import random
import socket
import threading
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from orchestrator.core.errors import ConfigurationError
from orchestrator.features.notify.channels import (
    Channel,
    DeliveryFailed,
    EmailChannel,
    WebhookChannel,
)
from orchestrator.features.notify.messages import message
from orchestrator.features.notify.outbox import NotificationStore

__all__ = ["NotificationSettings", "Notifier", "RetryPolicy"]

log = logging.getLogger("sqlgate.notify")

#: Server event type -> notification event.
_EVENTS = {
    "approval_requested": "batch_created",
    "approval_decided": "batch_decided",
    "approval_expired": "batch_expired",
    "run_finished": "run_finished",
}


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` in all; the wait before attempt n+1 is ``first * factor**(n-1)``, at most
    ``cap`` seconds, spread by up to ``jitter`` of itself either way (so receivers coming back
    are not hit by every server at once). The default keeps trying for about 7 hours.

    Example:
        >>> policy = RetryPolicy(attempts=5, first=0.5, factor=2)
        >>> [policy.wait(n) for n in range(1, 5)]
        [0.5, 1.0, 2.0, 4.0]
        >>> policy.wait(1, spread=0.0), policy.wait(1, spread=1.0)
        (0.4, 0.6)
        >>> round(RetryPolicy().total_s() / 3600, 1)
        7.0
    """

    attempts: int = 10
    first: float = 10.0
    factor: float = 3.0
    cap: float = 7200.0
    jitter: float = 0.2

    def wait(self, attempt: int, spread: float = 0.5) -> float:
        """The wait after attempt ``attempt``; ``spread`` in [0, 1] places it in the jitter
        (0.5: the middle)."""
        base = min(self.cap, self.first * self.factor ** (attempt - 1))
        return round(base * (1 + self.jitter * (2 * spread - 1)), 6)

    def total_s(self) -> float:
        """How long a delivery is tried before it is a dead letter (without jitter)."""
        return sum(self.wait(n) for n in range(1, self.attempts))

    @classmethod
    def from_text(cls, text: str) -> RetryPolicy:
        """``attempts=12,first=30s,factor=2,cap=4h,jitter=0.1`` (any of them; durations in s,
        m or h); ``ConfigurationError`` naming ``SQLGATE_NOTIFY_RETRY`` when it cannot be read."""
        values: dict[str, float] = {}
        for part in text.replace(" ", ",").split(","):
            if not part:
                continue
            key, _, raw = part.partition("=")
            key = key.strip().lower()
            try:
                if key not in ("attempts", "first", "factor", "cap", "jitter"):
                    raise ValueError(key)
                number = _duration(raw) if key in ("first", "cap") else float(raw)
            except ValueError:
                raise ConfigurationError(
                    f"SQLGATE_NOTIFY_RETRY: cannot read {part[:40]!r} (expected e.g. "
                    "attempts=10,first=10s,factor=3,cap=2h,jitter=0.2)"
                ) from None
            values[key] = number
        policy = cls(
            attempts=int(values.get("attempts", cls.attempts)),
            first=values.get("first", cls.first),
            factor=values.get("factor", cls.factor),
            cap=values.get("cap", cls.cap),
            jitter=values.get("jitter", cls.jitter),
        )
        if not (
            policy.attempts >= 1
            and policy.first > 0
            and policy.factor >= 1
            and policy.cap >= policy.first
            and 0 <= policy.jitter < 1
        ):
            raise ConfigurationError(
                "SQLGATE_NOTIFY_RETRY: attempts must be 1 or more, first and cap positive (cap "
                "at least first), factor 1 or more, jitter from 0 to below 1"
            )
        return policy


def _duration(text: str) -> float:
    text = text.strip().lower()
    unit = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(text[-1:], None)
    seconds = float(text[:-1]) * unit if unit else float(text)
    if not math.isfinite(seconds):
        raise ValueError(text)
    return seconds


@dataclass(frozen=True)
class NotificationSettings:
    """Where notifications go. Empty: nothing is sent."""

    webhooks: tuple[str, ...] = field(default=(), repr=False)  # URLs may carry secrets
    secret: str | None = field(default=None, repr=False)
    base_url: str = "http://127.0.0.1:8000"
    smtp_url: str | None = field(default=None, repr=False)
    email_from: str | None = None
    email_to: tuple[str, ...] = ()
    retry: RetryPolicy = RetryPolicy()

    @property
    def enabled(self) -> bool:
        return bool(self.webhooks or (self.smtp_url and self.email_to))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NotificationSettings:
        """From the variables in the module's docstring; ``ConfigurationError`` when half-set."""
        env = os.environ if environ is None else environ
        webhooks = tuple(u for u in env.get("SQLGATE_WEBHOOK_URLS", "").replace(",", " ").split())
        secret = env.get("SQLGATE_WEBHOOK_SECRET") or None
        secret_file = env.get("SQLGATE_WEBHOOK_SECRET_FILE")
        if secret is None and secret_file:
            try:
                secret = Path(secret_file).read_text().strip() or None
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot read SQLGATE_WEBHOOK_SECRET_FILE ({exc.strerror})"
                ) from None
        for url in webhooks:
            if urlsplit(url).scheme not in ("http", "https"):
                raise ConfigurationError(
                    "SQLGATE_WEBHOOK_URLS holds an address that is not http(s)"
                )
        if webhooks and not secret:
            raise ConfigurationError(
                "webhooks are signed: set SQLGATE_WEBHOOK_SECRET (or SQLGATE_WEBHOOK_SECRET_FILE)"
            )
        smtp_url = env.get("SQLGATE_SMTP_URL") or None
        email_to = tuple(
            a.strip() for a in env.get("SQLGATE_NOTIFY_EMAIL_TO", "").split(",") if a.strip()
        )
        if smtp_url and not email_to:
            raise ConfigurationError("SQLGATE_SMTP_URL is set: set SQLGATE_NOTIFY_EMAIL_TO too")
        return cls(
            webhooks=webhooks,
            secret=secret,
            base_url=env.get("SQLGATE_PUBLIC_URL") or cls.base_url,
            smtp_url=smtp_url,
            email_from=env.get("SQLGATE_NOTIFY_EMAIL_FROM") or "sqlgate@localhost",
            email_to=email_to,
            retry=RetryPolicy.from_text(env.get("SQLGATE_NOTIFY_RETRY") or ""),
        )

    def channels(self) -> list[Channel]:
        found: list[Channel] = [WebhookChannel(url, self.secret or "") for url in self.webhooks]
        if self.smtp_url and self.email_to:
            parts = urlsplit(self.smtp_url)
            found.append(
                EmailChannel(
                    parts.hostname or "localhost",
                    parts.port or 25,
                    self.email_from or "sqlgate@localhost",
                    self.email_to,
                    username=unquote(parts.username) if parts.username else None,
                    password=unquote(parts.password) if parts.password else None,
                    starttls=parse_qs(parts.query).get("starttls", ["0"])[0] in ("1", "true"),
                )
            )
        return found


class Notifier:
    """Follows events (``on_event``) and delivers them to ``channels`` in the background.

    The first attempt is made as the event arrives; later ones, on the retry schedule, by a
    sweeper that every ``sweep_s`` seconds claims the due deliveries of the outbox (its own, and
    those whose claim expired: another server stopped mid-delivery), so no delivery depends on
    the process that started it. ``store``: the outbox; ``batch_risk(batch_id)``: the highest
    risk among a batch's pending statements (read in a worker thread); ``clock``: the time now
    (aware); ``spread()``: a number in [0, 1) placing each wait in the jitter; ``sweep_s=None``:
    no sweeper thread (``deliver_due()`` is called by the caller); ``asker(run_id)``: who asked
    the run (its owner), named in every message.
    """

    def __init__(
        self,
        store: NotificationStore,
        channels: Sequence[Channel],
        *,
        base_url: str,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 (frozen)
        batch_risk: Callable[[str], str | None] | None = None,
        asker: Callable[[str], str | None] | None = None,
        workers: int = 2,
        queue_size: int = 10_000,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        spread: Callable[[], float] = random.random,
        sweep_s: float | None = 2.0,
        claim_s: float = 60.0,
        owner: str | None = None,
    ) -> None:
        self.store = store
        self.channels = list(channels)
        self.base_url = base_url
        self.retry = retry
        self.batch_risk = batch_risk
        self.asker = asker
        self.clock = clock
        self.spread = spread
        self.claim_s = claim_s
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._by_label = {channel.label: channel for channel in self.channels}
        # One queue per worker, a run's events always on the same one: a receiver hears one
        # run's events in the order they happened (created, decided, finished), while
        # different runs are delivered side by side.
        self._queues: list[queue.Queue[Any]] = [
            queue.Queue(maxsize=queue_size) for _ in range(max(1, workers))
        ]
        self._closing = threading.Event()
        self.dropped = 0
        self._threads = [
            threading.Thread(target=self._work, args=(q,), name=f"sqlgate-notify-{n}", daemon=True)
            for n, q in enumerate(self._queues if self.channels else ())
        ]
        if self.channels and sweep_s is not None:
            self._threads.append(
                threading.Thread(
                    target=self._sweep, args=(sweep_s,), name="sqlgate-notify-due", daemon=True
                )
            )
        for thread in self._threads:
            thread.start()

    # -- the listener: never blocks -------------------------------------------------------
    def on_event(self, event: Any) -> None:
        """Queue a server event (``EventHub`` listener); drops it, counted, when the queue is full."""
        if not self.channels or event.type not in _EVENTS:
            return
        key = str(event.run_id or event.batch_id or "").encode()
        try:
            self._queues[zlib.crc32(key) % len(self._queues)].put_nowait(event)
        except queue.Full:
            self.dropped += 1
            log.warning("notification queue full: %s not notified", event.origin)

    def close(self, timeout: float = 2.0) -> None:
        self._closing.set()
        for waiting in self._queues if self.channels else ():
            waiting.put(None)
        for thread in self._threads:
            thread.join(timeout)
        for channel in self.channels:
            closer = getattr(channel, "close", None)
            if closer is not None:
                closer()

    # -- the workers -----------------------------------------------------------------------
    def _work(self, waiting: queue.Queue[Any]) -> None:
        while not self._closing.is_set():
            event = waiting.get()
            if event is None:
                return
            try:
                self._deliver_all(event)
            except Exception:  # a broken store must not end the worker
                log.exception("notifying %s failed", event.origin)

    def _sweep(self, every_s: float) -> None:
        while not self._closing.wait(every_s):
            try:
                self.deliver_due()
            except Exception:  # the state database is away: try again next time
                log.exception("sending due notifications failed")

    def deliver_due(self) -> int:
        """Claim every due delivery nobody holds and make its next attempt; how many."""
        if not self.channels:
            return 0
        taken = self.store.take_due(
            self.owner, channels=list(self._by_label), now=self.clock(), claim_s=self.claim_s
        )
        for record in taken:
            if self._closing.is_set():
                break
            self._attempt(
                self._by_label[record.channel],
                record.id,
                record.event,
                record.attempts,
                record.payload,
            )
        return len(taken)

    def _deliver_all(self, event: Any) -> None:
        kind = _EVENTS[event.type]
        data = event.data
        items = data.get("items") or []
        statements = sum(
            1 for i in items if i.get("category", "needs_approval") == "needs_approval"
        )
        risk = None
        if kind == "batch_created" and event.batch_id and self.batch_risk is not None:
            risk = self.batch_risk(event.batch_id)
        payload = message(
            kind,
            run_id=event.run_id,
            batch_id=event.batch_id if kind != "run_finished" else None,
            at=str(data.get("at", "")),
            base_url=self.base_url,
            statements=statements if kind == "batch_created" else len(items),
            risk=risk,
            decided_by=data.get("decided_by"),
            statuses=data.get("statuses") if kind == "run_finished" else None,
            action=data.get("action"),
            asked_by=self.asker(event.run_id) if self.asker is not None else None,
        )
        for channel in self.channels:
            delivery = self.store.claim(
                event.origin,
                channel.label,
                kind,
                event.run_id,
                event.batch_id,
                payload,
                owner=self.owner,
                claim_s=self.claim_s,
                now=self.clock(),
            )
            if delivery is not None:
                self._attempt(channel, delivery, kind, 0, payload)

    def _attempt(
        self, channel: Channel, delivery: int, kind: str, made: int, payload: dict[str, Any]
    ) -> None:
        """One attempt of a delivery this process holds (``made`` attempts before it)."""
        attempt = made + 1
        try:
            channel.send(kind, f"n{delivery}", payload)
        except DeliveryFailed as failure:
            now = self.clock()
            if failure.retry and attempt < self.retry.attempts:
                wait = self.retry.wait(attempt, self.spread())
                self.store.attempted(
                    delivery,
                    "sending",
                    str(failure),
                    owner=self.owner,
                    next_attempt_at=now + timedelta(seconds=wait),
                    now=now,
                )
                return
            self.store.attempted(delivery, "failed", str(failure), owner=self.owner, now=now)
            log.warning(
                "notification %s to %s is a dead letter after %d attempt(s): %s "
                "(sqlgate runs notifications --resend)",
                delivery,
                channel.label,
                attempt,
                failure,
            )
        else:
            self.store.attempted(delivery, "delivered", owner=self.owner, now=self.clock())
