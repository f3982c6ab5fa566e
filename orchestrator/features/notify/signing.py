"""Webhook signatures: HMAC-SHA256 over the timestamp and the body, checked like Slack's.

A delivery carries ``X-Sqlgate-Timestamp`` (Unix seconds) and ``X-Sqlgate-Signature``
(``sha256=`` + hex HMAC-SHA256 with the shared secret over ``"{timestamp}.{body}"``). A receiver
recomputes it over the raw body, compares in constant time, and refuses a timestamp more than a
few minutes away from its clock (a replayed delivery).

Example:
    >>> body = b'{"text": "hello"}'
    >>> signature = sign("s3cret", 1700000000, body)
    >>> signature.startswith("sha256="), verify("s3cret", "1700000000", body, signature, now=1700000060)
    (True, True)
    >>> verify("s3cret", "1700000000", body, signature, now=1700001000)  # too old
    False
    >>> verify("other", "1700000000", body, signature, now=1700000000)
    False
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = [
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "sign",
    "verify",
]

TIMESTAMP_HEADER = "X-Sqlgate-Timestamp"
SIGNATURE_HEADER = "X-Sqlgate-Signature"
EVENT_HEADER = "X-Sqlgate-Event"
DELIVERY_HEADER = "X-Sqlgate-Delivery"

#: How far a delivery's timestamp may be from the receiver's clock, in seconds.
TOLERANCE_S = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 with ``secret`` over ``b"{timestamp}." + body``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(
    secret: str,
    timestamp: str,
    body: bytes,
    signature: str,
    *,
    now: float,
    tolerance_s: float = TOLERANCE_S,
) -> bool:
    """True when ``signature`` is ``sign(secret, timestamp, body)`` and the timestamp is recent."""
    try:
        moment = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(now - moment) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, moment, body), signature or "")
