"""Sign-in sessions of the pages, kept in the state database so every server process knows them.

A session is created when a person signed in at the identity provider (``routes_signin``): the
browser holds only a random id in an HttpOnly cookie; the store keeps its SHA-256 digest, the
principal it stands for and when it ends. A pending sign-in (the authorization request's
``state``, PKCE verifier, nonce and where to go back to) is kept the same way for ten minutes
and can be used once. Its schema is the ``web_sessions`` component of the one migration runner.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from approvals.migrations import migrate, write_transaction
from orchestrator.interfaces.server.auth import Principal, Role

__all__ = ["PendingSignIn", "WebSessions"]

_metadata = sa.MetaData()
sessions = sa.Table(
    "sqlgate_web_sessions",
    _metadata,
    sa.Column("digest", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
)


def _v1(conn: Connection) -> None:
    """Sessions and pending sign-ins, by the digest of their secret."""
    timestamp = "TIMESTAMPTZ" if conn.dialect.name == "postgresql" else "DATETIME"
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS sqlgate_web_sessions (digest VARCHAR(64) NOT NULL PRIMARY KEY, "
        f"kind VARCHAR(16) NOT NULL, body TEXT NOT NULL, expires_at {timestamp} NOT NULL)"
    )


MIGRATIONS = (_v1,)
#: How long a started sign-in may take at the provider.
PENDING_FOR = timedelta(minutes=10)


@dataclass(frozen=True)
class PendingSignIn:
    """What the callback needs of the sign-in it completes."""

    verifier: str
    nonce: str
    back_to: str


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class WebSessions:
    """Sessions and pending sign-ins on the state database's engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._ready = False

    def setup(self) -> None:
        if not self._ready:
            migrate(self.engine, "web_sessions", MIGRATIONS)
            self._ready = True

    def _put(self, secret: str, kind: str, body: dict[str, Any], until: datetime) -> None:
        self.setup()
        with write_transaction(self.engine) as conn:
            conn.execute(sessions.delete().where(sessions.c.expires_at < datetime.now(UTC)))
            conn.execute(
                sessions.insert().values(
                    digest=_digest(secret), kind=kind, body=json.dumps(body), expires_at=until
                )
            )

    def _take(self, secret: str, kind: str, *, once: bool) -> dict[str, Any] | None:
        self.setup()
        digest = _digest(secret)
        with write_transaction(self.engine) as conn:
            row = conn.execute(
                sa.select(sessions).where(sessions.c.digest == digest, sessions.c.kind == kind)
            ).first()
            if row is not None and once:
                conn.execute(sessions.delete().where(sessions.c.digest == digest))
        if row is None or _utc(row.expires_at) <= datetime.now(UTC):
            return None
        body: dict[str, Any] = json.loads(row.body)
        return body

    # -- pending sign-ins ------------------------------------------------------------------------
    def begin(self, pending: PendingSignIn) -> str:
        """Record a sign-in about to go to the provider; its ``state`` (one use, ten minutes)."""
        state = secrets.token_urlsafe(32)
        body = {"verifier": pending.verifier, "nonce": pending.nonce, "back_to": pending.back_to}
        self._put(state, "pending", body, datetime.now(UTC) + PENDING_FOR)
        return state

    def complete(self, state: str) -> PendingSignIn | None:
        """The pending sign-in of ``state``, which can be completed once; None otherwise."""
        body = self._take(state, "pending", once=True)
        return PendingSignIn(**body) if body is not None else None

    # -- sessions --------------------------------------------------------------------------------
    def create(self, principal: Principal, lifetime: timedelta) -> str:
        """A new session for ``principal``; returns the secret the browser's cookie holds."""
        secret = secrets.token_urlsafe(32)
        body = {
            "actor": principal.actor,
            "role": principal.role.value,
            "policy_role": principal.policy_role,
            "subject": principal.subject,
            "issuer": principal.issuer,
            "claims": dict(principal.claims),
            "attributes": dict(principal.attributes),
        }
        self._put(secret, "session", body, datetime.now(UTC) + lifetime)
        return secret

    def principal(self, secret: str) -> Principal | None:
        """Who the session ``secret`` stands for; None when unknown or ended."""
        body = self._take(secret, "session", once=False)
        if body is None:
            return None
        return Principal(
            actor=body["actor"],
            role=Role(body["role"]),
            policy_role=body.get("policy_role"),
            subject=body.get("subject"),
            issuer=body.get("issuer"),
            claims=body.get("claims") or {},
            attributes=body.get("attributes") or {},
        )

    def end(self, secret: str) -> None:
        """Sign out: the session is gone from every process."""
        self._take(secret, "session", once=True)
