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
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
    ``cap`` seconds.

    Example:
        >>> [RetryPolicy(attempts=5, first=0.5).wait(n) for n in range(1, 5)]
        [0.5, 1.0, 2.0, 4.0]
    """

    attempts: int = 5
    first: float = 0.5
    factor: float = 2.0
    cap: float = 30.0

    def wait(self, attempt: int) -> float:
        return float(min(self.cap, self.first * self.factor ** (attempt - 1)))


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

    ``store``: the outbox; ``batch_risk(batch_id)``: the highest risk among a batch's pending
    statements (read in a worker thread); ``asker(run_id)``: who asked the run (its owner), named
    in every message; ``sleep(seconds)`` waits between attempts and returns
    True when the notifier is closing (default: an event's ``wait``).
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
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        self.store = store
        self.channels = list(channels)
        self.base_url = base_url
        self.retry = retry
        self.batch_risk = batch_risk
        self.asker = asker
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._closing = threading.Event()
        self._sleep = sleep or self._closing.wait
        self.dropped = 0
        self._threads = [
            threading.Thread(target=self._work, name=f"sqlgate-notify-{n}", daemon=True)
            for n in range(workers if self.channels else 0)
        ]
        for thread in self._threads:
            thread.start()

    # -- the listener: never blocks -------------------------------------------------------
    def on_event(self, event: Any) -> None:
        """Queue a server event (``EventHub`` listener); drops it, counted, when the queue is full."""
        if not self.channels or event.type not in _EVENTS:
            return
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1
            log.warning("notification queue full: %s not notified", event.origin)

    def close(self, timeout: float = 2.0) -> None:
        self._closing.set()
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout)
        for channel in self.channels:
            closer = getattr(channel, "close", None)
            if closer is not None:
                closer()

    # -- the workers -----------------------------------------------------------------------
    def _work(self) -> None:
        while not self._closing.is_set():
            event = self._queue.get()
            if event is None:
                return
            try:
                self._deliver_all(event)
            except Exception:  # a broken store must not end the worker
                log.exception("notifying %s failed", event.origin)

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
                event.origin, channel.label, kind, event.run_id, event.batch_id, payload
            )
            if delivery is not None:
                self._deliver(channel, delivery, kind, payload)

    def _deliver(self, channel: Channel, delivery: int, kind: str, payload: dict[str, Any]) -> None:
        for attempt in range(1, self.retry.attempts + 1):
            try:
                channel.send(kind, f"n{delivery}", payload)
            except DeliveryFailed as failure:
                last = attempt == self.retry.attempts or not failure.retry
                self.store.attempted(delivery, "failed" if last else "sending", str(failure))
                if last:
                    log.warning(
                        "notification %s to %s failed: %s", delivery, channel.label, failure
                    )
                    return
                if self._sleep(self.retry.wait(attempt)):
                    return  # closing: the row says how far it got
            else:
                self.store.attempted(delivery, "delivered")
                return
