"""Who is calling: a static token of the registry, or a JWT of the organisation's identity
provider, as one ``authenticate(authorization)`` for the HTTP service and MCP over HTTP.

A static token (``TokenRegistry``) is looked up first; any other bearer token goes to the
identity provider (``orchestrator.interfaces.auth``) when one is configured: verified against
its keys, for this service's audience, and its claims mapped to a role. A 401 carries
``WWW-Authenticate: Bearer`` with ``resource_metadata`` pointing at the protected-resource
metadata (RFC 9728), so an OAuth client (an MCP client) can find the provider by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.core.errors import ConfigurationError
from orchestrator.interfaces.auth.claims import ClaimRules
from orchestrator.interfaces.auth.errors import InvalidToken, ProviderUnavailable
from orchestrator.interfaces.auth.oidc import OidcVerifier
from orchestrator.interfaces.auth.settings import OIDC_FILE_ENV, OidcSettings, load_oidc_settings
from orchestrator.interfaces.server.auth import Principal, Role, TokenRegistry
from orchestrator.interfaces.server.errors import Forbidden, ProviderDown, Unauthenticated

__all__ = [
    "Authenticator",
    "IdentityProvider",
    "PROTECTED_RESOURCE_PATH",
    "identity_from_env",
    "protected_resource_metadata",
    "www_authenticate",
]

#: Where the protected-resource metadata is served (RFC 9728).
PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource"


class IdentityProvider:
    """The configured provider: its verifier and its claims -> roles rules."""

    def __init__(self, settings: OidcSettings, verifier: OidcVerifier | None = None) -> None:
        self.settings = settings
        self.verifier = verifier or OidcVerifier(
            settings.issuer,
            settings.audience,
            leeway_s=settings.leeway_s,
            jwks_ttl_s=settings.jwks_ttl_s,
        )
        self.rules: ClaimRules = settings.rules()

    def check_policy_sections(self, sections: Mapping[str, Any]) -> None:
        """``ConfigurationError`` when a rule names a policy section the policy lacks (its
        callers would otherwise be judged under the base policy)."""
        for rule in self.rules.rules:
            if rule.policy is not None and rule.policy not in sections:
                raise ConfigurationError(
                    f"the identity-provider file maps callers to policy section {rule.policy!r}, "
                    "which the policy file has no [roles.*] section for"
                )

    def principal(self, token: str) -> Principal:
        """The principal of a provider's token; ``Unauthenticated`` (401) for a token that is
        not valid, ``Forbidden`` (403) for a valid one whose claims give no role."""
        try:
            claims = self.verifier.verify(token)
        except InvalidToken as exc:
            raise Unauthenticated(exc.message) from None
        except ProviderUnavailable as exc:
            raise ProviderDown(f"the identity provider cannot be reached: {exc.message}") from None
        return self.principal_of_claims(claims)

    def principal_of_claims(self, claims: Mapping[str, Any]) -> Principal:
        """The principal verified ``claims`` name; ``Forbidden`` when they give no role."""
        assigned = self.rules.assign(claims)
        identity = self.rules.identity(claims)
        if assigned is None:
            raise Forbidden(
                f"{identity.name}: no sqlgate role for your identity provider's claims "
                "(ask an administrator to map one of your groups)"
            )
        role, policy = assigned
        return Principal(
            actor=identity.actor,
            role=Role(role),
            policy_role=policy,
            subject=identity.subject,
            issuer=identity.issuer,
            claims=identity.claims,
        )


class Authenticator:
    """Static tokens first, then the identity provider's JWTs (when one is configured)."""

    def __init__(self, tokens: TokenRegistry, provider: IdentityProvider | None = None) -> None:
        self.tokens = tokens
        self.provider = provider

    @property
    def configured(self) -> bool:
        """True when someone can authenticate at all."""
        return len(self.tokens) > 0 or self.provider is not None

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization: Bearer <token>`` header; ``Unauthenticated``
        (or ``Forbidden``: a valid token without a role) otherwise."""
        try:
            return self.tokens.authenticate(authorization)
        except Unauthenticated as exc:
            if self.provider is None or exc.message != "unknown token":
                raise
        _, _, token = (authorization or "").partition(" ")
        return self.provider.principal(token.strip())


def protected_resource_metadata(resource: str, provider: IdentityProvider) -> dict[str, Any]:
    """The RFC 9728 document of ``resource``: which authorization server issues its tokens.

    Example:
        >>> from orchestrator.interfaces.auth.settings import OIDC_FILE_ENV, OidcSettings, load_oidc_settings
        >>> s = OidcSettings(issuer="https://idp", audience="sqlgate",
        ...                  roles=[{"role": "admin", "claim": "groups", "value": "a"}])
        >>> protected_resource_metadata("https://sq/mcp", IdentityProvider(s))["authorization_servers"]
        ['https://idp']
    """
    return {
        "resource": resource,
        "authorization_servers": [provider.settings.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["openid"],
        "resource_name": "sqlgate",
    }


def www_authenticate(metadata_url: str | None, error: str | None = None) -> str:
    """The ``WWW-Authenticate`` value of a 401 (RFC 6750, with RFC 9728's resource_metadata).

    Example:
        >>> www_authenticate("https://sq/.well-known/oauth-protected-resource/mcp", "invalid_token")
        'Bearer resource_metadata="https://sq/.well-known/oauth-protected-resource/mcp", error="invalid_token"'
    """
    parts = []
    if metadata_url:
        parts.append(f'resource_metadata="{metadata_url}"')
    if error:
        parts.append(f'error="{error}"')
    return "Bearer" + (" " + ", ".join(parts) if parts else "")


def identity_from_env(env: Mapping[str, str]) -> IdentityProvider | None:
    """The provider of the file ``SQLGATE_OIDC_FILE`` names; None when it is unset."""
    path = env.get(OIDC_FILE_ENV)
    return IdentityProvider(load_oidc_settings(path)) if path else None
