"""From a verified token's claims to a sqlgate role: the organisation's groups decide.

A ``RoleRule`` matches a claim value (``groups`` contains ``sqlgate-reviewers``; Keycloak's
nested ``realm_access.roles`` contains ``analyst``; Entra's ``roles``) or an e-mail domain, and
gives a sqlgate role (``analyst``, ``reviewer``, ``admin``) and, optionally, the policy section
(``[roles.<name>]``) whose narrower lists, limits and ``database_role`` the caller's questions
get. Rules are tried in order: the first match wins, and a token that matches none is refused.
The claims are read from each token anew, so a group change takes effect at the next token.

Example:
    >>> rules = ClaimRules((RoleRule(role="reviewer", claim="groups", value="dba"),
    ...                     RoleRule(role="analyst", email_domain="example.com", policy="north")))
    >>> rules.assign({"sub": "1", "groups": ["dba"], "email": "a@example.com"})
    ('reviewer', None)
    >>> rules.assign({"sub": "2", "groups": [], "email": "b@Example.com", "email_verified": True})
    ('analyst', 'north')
    >>> rules.assign({"sub": "3", "email": "c@elsewhere.org"}) is None
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ClaimRules", "Identity", "RoleRule", "claim_values", "flat_claims"]

#: The sqlgate roles a rule may give.
SQLGATE_ROLES = ("analyst", "reviewer", "admin")
#: The longest actor name the stores keep.
_ACTOR_CHARS = 200


def claim_values(claims: Mapping[str, Any], path: str) -> list[str]:
    """The values of the claim at ``path`` (dotted for nested objects), as strings.

    Example:
        >>> claim_values({"realm_access": {"roles": ["analyst", "x"]}}, "realm_access.roles")
        ['analyst', 'x']
        >>> claim_values({"groups": "one"}, "groups"), claim_values({}, "groups")
        (['one'], [])
    """
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return []
        value = value[part]
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, (str, int)) and not isinstance(v, bool)]


def flat_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """The token's top-level claims whose values are text, numbers or lists of them, as text
    (a list joined by commas): what row filters and displays may read of the caller.

    Example:
        >>> flat_claims({"sub": "1", "groups": ["a", "b"], "exp": 5, "address": {"x": 1}})
        {'sub': '1', 'groups': 'a,b', 'exp': '5'}
    """
    flat: dict[str, str] = {}
    for name, value in claims.items():
        if isinstance(value, list):
            if all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
                flat[name] = ",".join(str(v) for v in value)
        elif isinstance(value, (str, int, float, bool)):
            flat[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return flat


@dataclass(frozen=True)
class RoleRule:
    """One line of the mapping: when it matches, the caller gets ``role`` (and ``policy``).

    ``claim`` + ``value``: the claim (dotted path) has that value, or contains it.
    ``email_domain``: the ``email`` claim ends with ``@<domain>`` (case-insensitive), and the
    provider says it is verified when it says anything (``email_verified`` not false).
    Both given: both must hold.
    """

    role: str
    policy: str | None = None
    claim: str | None = None
    value: str | None = None
    email_domain: str | None = None

    def __post_init__(self) -> None:
        if self.role not in SQLGATE_ROLES:
            raise ValueError(f"role must be one of {', '.join(SQLGATE_ROLES)}, not {self.role!r}")
        if (self.claim is None) != (self.value is None):
            raise ValueError("a rule on a claim needs both claim and value")
        if self.claim is None and self.email_domain is None:
            raise ValueError("a rule needs claim + value, or email_domain")

    def matches(self, claims: Mapping[str, Any]) -> bool:
        if self.claim is not None and self.value not in claim_values(claims, self.claim):
            return False
        if self.email_domain is not None:
            email = claims.get("email")
            if not isinstance(email, str) or claims.get("email_verified") is False:
                return False
            if not email.lower().endswith("@" + self.email_domain.lower().lstrip("@")):
                return False
        return True


@dataclass(frozen=True)
class ClaimRules:
    """The ordered rules, and which claims name the caller on screens and in the audit log."""

    rules: tuple[RoleRule, ...]
    name_claims: tuple[str, ...] = ("preferred_username", "email", "name")

    def assign(self, claims: Mapping[str, Any]) -> tuple[str, str | None] | None:
        """(sqlgate role, policy section) of the first matching rule; None when none does."""
        for rule in self.rules:
            if rule.matches(claims):
                return rule.role, rule.policy
        return None

    def identity(self, claims: Mapping[str, Any]) -> Identity:
        """Who the verified ``claims`` name."""
        name = next(
            (
                str(claims[c])
                for c in self.name_claims
                if isinstance(claims.get(c), str) and claims[c]
            ),
            str(claims["sub"]),
        )
        return Identity(
            subject=str(claims["sub"]),
            issuer=str(claims["iss"]),
            name=name,
            claims=flat_claims(claims),
        )


@dataclass(frozen=True)
class Identity:
    """A person or agent as the identity provider names them."""

    subject: str
    issuer: str
    name: str
    claims: Mapping[str, str]

    @property
    def actor(self) -> str:
        """The name every store records for this caller: their display name, with the
        provider's subject and issuer (stable; the name alone may change or repeat), at most
        200 characters.

        Example:
            >>> Identity("248289", "https://idp.example.com", "ann@example.com", {}).actor
            'ann@example.com (sub 248289 at https://idp.example.com)'
        """
        whole = f"{self.name} (sub {self.subject} at {self.issuer})"
        if len(whole) <= _ACTOR_CHARS:
            return whole
        issuer = "issuer " + hashlib.sha256(self.issuer.encode()).hexdigest()[:12]
        subject = self.subject[:120]
        return f"{self.name[: _ACTOR_CHARS - len(subject) - len(issuer) - 12]} (sub {subject} at {issuer})"
