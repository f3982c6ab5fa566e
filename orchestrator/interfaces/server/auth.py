"""Bearer tokens with roles: who is calling, and what they may do.

Tokens come from a JSON file (``SQLGATE_TOKENS_FILE``) or from ``SQLGATE_TOKENS`` itself::

    [{"token": "s3cret-a", "actor": "alice", "role": "reviewer"},
     {"sha256": "<hex digest of a token>", "actor": "bob", "role": "analyst",
      "expires": "2026-12-31T23:59:59Z", "attributes": {"region": "EU"}}]

(or the same list under a ``"tokens"`` key). Only digests are kept in memory; a token's SHA-256
digest is compared with every known digest by ``hmac.compare_digest`` (the time taken does not
depend on which entry matches, or how much of it). ``expires`` (optional, ISO 8601 with a time
zone) ends a token: from then on it is refused as ``token_expired``. The actor recorded in the
audit log is the token's ``actor``, never anything from a request body. ``attributes``
(optional, an object of text, numbers or booleans) are the asker's attributes the policy's row
filters (``[rows]``) are bound to; a provider's token gives its text claims instead.

Roles: ``analyst`` asks questions and reads their own runs; ``reviewer`` lists, shows and decides
approval batches; ``admin`` does both, reads every run and curates reviewed-SQL memory. Anyone with a token may follow
``/events`` (analysts see only their own runs' events).

Example:
    >>> registry = TokenRegistry.from_json('[{"token": "t1", "actor": "alice", "role": "reviewer"}]')
    >>> registry.authenticate("Bearer t1")
    Principal(actor='alice', role=<Role.REVIEWER: 'reviewer'>)
    >>> registry.authenticate("Bearer t1").may("decide")
    True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator.core.identity import IdentityValue, checked_identity
from orchestrator.interfaces.server.errors import (
    Forbidden,
    TokenConfigError,
    TokenExpired,
    Unauthenticated,
)

TOKENS_ENV = "SQLGATE_TOKENS"
TOKENS_FILE_ENV = "SQLGATE_TOKENS_FILE"


class Role(StrEnum):
    ANALYST = "analyst"
    REVIEWER = "reviewer"
    ADMIN = "admin"


#: permission -> the roles that have it
PERMISSIONS: dict[str, frozenset[Role]] = {
    "identify": frozenset({Role.ANALYST, Role.REVIEWER, Role.ADMIN}),
    "ask": frozenset({Role.ANALYST, Role.ADMIN}),
    "read_runs": frozenset({Role.ANALYST, Role.ADMIN}),
    "read_any_run": frozenset({Role.ADMIN}),
    "review": frozenset({Role.REVIEWER, Role.ADMIN}),
    "decide": frozenset({Role.REVIEWER, Role.ADMIN}),
    "events": frozenset({Role.ANALYST, Role.REVIEWER, Role.ADMIN}),
    "all_events": frozenset({Role.REVIEWER, Role.ADMIN}),
    "curate_memory": frozenset({Role.ADMIN}),
    "read_metrics": frozenset({Role.ADMIN}),
}


@dataclass(frozen=True)
class Principal:
    """The caller a token stands for.

    From the identity provider (``orchestrator.interfaces.server.identity``): ``subject`` and
    ``issuer`` of the token (the ``actor`` names both), its text ``claims``, and the policy
    section (``policy_role``) the claims mapping gave. A static token has none of these, but may
    have its entry's ``attributes``.
    """

    actor: str
    role: Role
    policy_role: str | None = field(default=None, repr=False)
    subject: str | None = field(default=None, repr=False)
    issuer: str | None = field(default=None, repr=False)
    #: The token's top-level text claims (``orchestrator.interfaces.auth.flat_claims``).
    claims: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False, hash=False)
    #: A static token's ``attributes`` (its entry's): what the row filters are bound to.
    attributes: Mapping[str, IdentityValue] = field(
        default_factory=dict, repr=False, compare=False, hash=False
    )

    @property
    def identity(self) -> dict[str, IdentityValue]:
        """The asker's attributes the policy's row filters are bound to: the provider token's
        text claims, or the static token's ``attributes`` (nothing a request can set)."""
        return {**self.claims, **self.attributes}

    @property
    def policy_section(self) -> str:
        """The ``[roles.<name>]`` section the caller's questions are asked under, when the
        policy has it: the mapped one, else the one named like the role."""
        return self.policy_role or self.role.value

    def may(self, permission: str) -> bool:
        return self.role in PERMISSIONS[permission]

    def require(self, permission: str) -> None:
        if not self.may(permission):
            raise Forbidden(f"{self.actor} ({self.role}) may not {permission.replace('_', ' ')}")


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class TokenRegistry:
    """Known tokens (by digest) and the principal each stands for."""

    def __init__(
        self,
        principals: Mapping[str, Principal],
        *,
        expires: Mapping[str, datetime] | None = None,
        clock: Clock = utc_now,
    ) -> None:
        """``principals``: SHA-256 hex digest of a token -> its principal; ``expires``: digest ->
        the moment the token stops being accepted; ``clock``: now, as an aware datetime."""
        self._by_digest = dict(principals)
        self._expires = dict(expires or {})
        self.clock = clock

    def __len__(self) -> int:
        return len(self._by_digest)

    @classmethod
    def from_entries(
        cls, entries: Iterable[Mapping[str, Any]], *, clock: Clock = utc_now
    ) -> TokenRegistry:
        principals: dict[str, Principal] = {}
        expires: dict[str, datetime] = {}
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise TokenConfigError(f"token entry #{index + 1} is not an object")
            actor = str(entry.get("actor") or "").strip()
            if not actor:
                raise TokenConfigError(f"token entry #{index + 1} has no actor")
            try:
                role = Role(str(entry.get("role")))
            except ValueError:
                raise TokenConfigError(
                    f"token entry #{index + 1} ({actor}): role must be analyst, reviewer or admin"
                ) from None
            if entry.get("token"):
                digest = token_digest(str(entry["token"]))
            elif entry.get("sha256"):
                digest = str(entry["sha256"]).lower()
            else:
                raise TokenConfigError(
                    f"token entry #{index + 1} ({actor}) has neither token nor sha256"
                )
            if digest in principals:
                raise TokenConfigError(
                    f"token entry #{index + 1} ({actor}) repeats another entry's token"
                )
            try:
                attributes = checked_identity(entry.get("attributes")) or {}
            except ValueError as exc:
                raise TokenConfigError(f"token entry #{index + 1} ({actor}): {exc}") from None
            principals[digest] = Principal(actor=actor, role=role, attributes=attributes)
            if entry.get("expires") is not None:
                expires[digest] = _expiry(entry["expires"], f"token entry #{index + 1} ({actor})")
        return cls(principals, expires=expires, clock=clock)

    @classmethod
    def from_json(cls, text: str, *, clock: Clock = utc_now) -> TokenRegistry:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TokenConfigError(f"tokens are not valid JSON: {exc}") from exc
        if isinstance(data, Mapping):
            data = data.get("tokens")
        if not isinstance(data, list):
            raise TokenConfigError('tokens must be a JSON list, or an object with a "tokens" list')
        return cls.from_entries(data, clock=clock)

    @classmethod
    def from_file(cls, path: str | Path) -> TokenRegistry:
        try:
            return cls.from_json(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise TokenConfigError(f"cannot read the token file {path}: {exc}") from exc

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TokenRegistry:
        """``SQLGATE_TOKENS_FILE`` (a path), else ``SQLGATE_TOKENS`` (JSON); empty when neither."""
        env = os.environ if environ is None else environ
        if env.get(TOKENS_FILE_ENV):
            return cls.from_file(env[TOKENS_FILE_ENV])
        if env.get(TOKENS_ENV):
            return cls.from_json(env[TOKENS_ENV])
        return cls({})

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization: Bearer <token>`` header; ``Unauthenticated`` otherwise."""
        if not authorization:
            raise Unauthenticated("an Authorization: Bearer <token> header is required")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("the Authorization header must be: Bearer <token>")
        digest = token_digest(token)
        found: str | None = None
        for known in self._by_digest:  # every entry is compared: no early exit
            if hmac.compare_digest(known, digest):
                found = known
        if found is None:
            raise Unauthenticated("unknown token")
        expiry = self._expires.get(found)
        if expiry is not None and self.clock() >= expiry:
            raise TokenExpired(f"the token expired at {expiry.isoformat()}")
        return self._by_digest[found]


def _expiry(value: Any, where: str) -> datetime:
    """An aware datetime from an ISO 8601 text (``Z`` allowed); ``TokenConfigError`` otherwise."""
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise TokenConfigError(f"{where}: expires is not an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        raise TokenConfigError(f"{where}: expires needs a time zone, e.g. 2026-12-31T23:59:59Z")
    return moment
