"""Where notifications go: signed webhooks over HTTP, and e-mail over SMTP.

A channel's ``label`` is what the outbox and the screens show: a webhook's scheme and host with a
short hash of the whole URL (Slack-style URLs carry their secret in the path), or ``email``.
``send`` raises ``DeliveryFailed`` with ``retry`` saying whether another attempt may succeed;
its message never holds the URL, the secret or the body.
"""

from __future__ import annotations

import hashlib
import json
import smtplib
import time
from collections.abc import Callable, Sequence
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx2

from orchestrator.features.notify.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
)

__all__ = ["Channel", "DeliveryFailed", "EmailChannel", "WebhookChannel", "webhook_label"]


class DeliveryFailed(Exception):
    """One attempt failed; ``retry``: a later attempt may succeed (network, 429, 5xx)."""

    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


class Channel(Protocol):
    label: str

    def send(self, event: str, delivery_id: str, payload: dict[str, Any]) -> None: ...


def webhook_label(url: str) -> str:
    """``https://hooks.example/… #1a2b3c4d``: the host, never the path or query.

    Example:
        >>> webhook_label("https://hooks.slack.com/services/T0/B0/secretpart")
        'https://hooks.slack.com/… #c3838b34'
    """
    parts = urlsplit(url)
    digest = hashlib.sha256(url.encode()).hexdigest()[:8]
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/… #{digest}"


class WebhookChannel:
    """POST the JSON body to ``url``, signed with ``secret`` (see ``orchestrator.features.notify.signing``).

    ``client``: the HTTP client (tests pass one with their own transport); ``clock``: Unix time.
    """

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        client: httpx2.Client | None = None,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._url = url
        self._secret = secret
        self._client = client or httpx2.Client(timeout=timeout, follow_redirects=False)
        self._clock = clock
        self.label = webhook_label(url)

    def __repr__(self) -> str:
        return f"WebhookChannel({self.label!r})"

    def send(self, event: str, delivery_id: str, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        timestamp = int(self._clock())
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: sign(self._secret, timestamp, body),
            EVENT_HEADER: event,
            DELIVERY_HEADER: delivery_id,
            "User-Agent": "sqlgate-webhook",
        }
        try:
            response = self._client.post(self._url, content=body, headers=headers)
        except httpx2.HTTPError as exc:  # the message may name the URL: keep only the kind
            raise DeliveryFailed(f"no answer ({type(exc).__name__})", retry=True) from None
        if response.status_code >= 300:
            retry = response.status_code == 429 or response.status_code >= 500
            raise DeliveryFailed(f"the receiver answered {response.status_code}", retry=retry)

    def close(self) -> None:
        self._client.close()


class EmailChannel:
    """One message per notification to ``recipients`` through the SMTP server at host:port."""

    def __init__(
        self,
        host: str,
        port: int,
        sender: str,
        recipients: Sequence[str],
        *,
        username: str | None = None,
        password: str | None = None,
        starttls: bool = False,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.host, self.port = host, port
        self._clock = clock
        # Tells this sqlgate's deliveries from another's in a Message-ID (no address in it).
        self._origin = hashlib.sha256(f"{sender}>{','.join(recipients)}".encode()).hexdigest()[:8]
        self.sender = sender
        self.recipients = list(recipients)
        self._username, self._password = username, password
        self.starttls = starttls
        self.timeout = timeout
        self.label = "email"

    def __repr__(self) -> str:
        return f"EmailChannel({self.host}:{self.port})"

    def send(self, event: str, delivery_id: str, payload: dict[str, Any]) -> None:
        mail = EmailMessage()
        mail["From"] = self.sender
        mail["To"] = ", ".join(self.recipients)
        mail["Subject"] = f"[sqlgate] {event.replace('_', ' ')}"
        mail["X-Sqlgate-Delivery"] = delivery_id
        # The same on every attempt of one delivery: a mail system that saw it drops a repeat.
        domain = self.sender.rpartition("@")[2].strip(" <>") or "sqlgate.invalid"
        mail["Message-ID"] = f"<sqlgate.{delivery_id}.{self._origin}@{domain}>"
        mail["Date"] = formatdate(self._clock(), usegmt=True)
        mail.set_content(f"{payload['text']}\n\nrun: {payload['run_id']}\n")
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
                if self.starttls:
                    smtp.starttls()
                if self._username:
                    smtp.login(self._username, self._password or "")
                smtp.send_message(mail)
        except smtplib.SMTPResponseException as exc:
            raise DeliveryFailed(
                f"the SMTP server answered {exc.smtp_code}",
                retry=exc.smtp_code >= 400 and exc.smtp_code < 500,
            ) from None
        except (OSError, smtplib.SMTPException) as exc:
            raise DeliveryFailed(f"no SMTP answer ({type(exc).__name__})", retry=True) from None
