"""The identity-provider file (``SQLGATE_OIDC_FILE``): issuer, audience, and claims -> roles.

    issuer = "https://idp.example.com/realms/acme"   # exactly the tokens' iss
    audience = "sqlgate"                              # tokens must be minted for this API
    leeway_s = 60                                     # clock skew tolerated
    name_claims = ["preferred_username", "email"]     # what names a person on screens

    [web]                                             # sign-in on the pages (code flow + PKCE)
    client_id = "sqlgate-web"
    client_secret_env = "SQLGATE_OIDC_CLIENT_SECRET"  # a confidential client's secret, if any

    [[roles]]                                         # first match wins
    claim = "groups"
    value = "sqlgate-reviewers"
    role = "reviewer"

    [[roles]]
    email_domain = "example.com"
    role = "analyst"
    policy = "analyst"                                # [roles.analyst] of the policy file

Example:
    >>> s = OidcSettings.from_toml_text('issuer = "https://idp"\\naudience = "sqlgate"\\n'
    ...     '[[roles]]\\nclaim = "groups"\\nvalue = "dba"\\nrole = "admin"')
    >>> s.rules().assign({"groups": ["dba"]}), s.web is None
    (('admin', None), True)
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.core.errors import ConfigurationError
from orchestrator.interfaces.auth.claims import ClaimRules, RoleRule

__all__ = ["OIDC_FILE_ENV", "OidcSettings", "RoleRuleEntry", "WebSignIn", "load_oidc_settings"]

OIDC_FILE_ENV = "SQLGATE_OIDC_FILE"

_STRICT = ConfigDict(extra="forbid", frozen=True)


class RoleRuleEntry(BaseModel):
    """``[[roles]]``: one rule of the claims -> role mapping."""

    model_config = _STRICT

    role: str = Field(description="analyst, reviewer or admin")
    policy: str | None = Field(default=None, description="A [roles.<name>] section of the policy")
    claim: str | None = Field(default=None, description="A claim (dotted path for nested ones)")
    value: str | None = Field(default=None, description="A value the claim has or contains")
    email_domain: str | None = Field(default=None, description="A verified e-mail's domain")


class WebSignIn(BaseModel):
    """``[web]``: the pages' sign-in with the authorization-code flow and PKCE."""

    model_config = _STRICT

    client_id: str = Field(min_length=1, description="The client registered for the pages")
    client_secret_env: str | None = Field(
        default=None, description="The environment variable holding a confidential client's secret"
    )
    scopes: tuple[str, ...] = Field(
        default=("openid", "profile", "email"), description="Scopes asked for at sign-in"
    )
    session_hours: float = Field(default=8.0, gt=0, le=24 * 7, description="A session's life")

    @field_validator("scopes", mode="before")
    @classmethod
    def _as_tuple(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value


class OidcSettings(BaseModel):
    """The whole file."""

    model_config = _STRICT

    issuer: str = Field(min_length=1, description="The provider's issuer URL, as in its tokens")
    audience: str = Field(min_length=1, description="The audience tokens must be minted for")
    leeway_s: float = Field(default=60.0, ge=0, le=600, description="Clock skew tolerated")
    jwks_ttl_s: float = Field(default=3600.0, gt=0, description="How long keys are cached")
    name_claims: tuple[str, ...] = Field(
        default=("preferred_username", "email", "name"),
        description="Claims that name the caller, first present wins (else the subject)",
    )
    roles: tuple[RoleRuleEntry, ...] = Field(default=(), description="Claims -> roles, in order")
    web: WebSignIn | None = Field(default=None, description="Sign-in on the pages")

    @field_validator("name_claims", "roles", mode="before")
    @classmethod
    def _as_tuple(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @classmethod
    def from_toml_text(cls, text: str) -> OidcSettings:
        try:
            settings = cls.model_validate(tomllib.loads(text))
            settings.rules()  # every rule is checked when the file loads
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(
                f"the identity-provider file is not valid TOML: {exc}"
            ) from None
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise ConfigurationError(f"the identity-provider file: {key}: {first['msg']}") from None
        except ValueError as exc:
            raise ConfigurationError(f"the identity-provider file: roles: {exc}") from None
        if not settings.roles:
            raise ConfigurationError(
                "the identity-provider file maps no claims to roles: add [[roles]] entries, "
                "or nobody could sign in"
            )
        return settings

    def rules(self) -> ClaimRules:
        return ClaimRules(
            tuple(
                RoleRule(
                    role=r.role,
                    policy=r.policy,
                    claim=r.claim,
                    value=r.value,
                    email_domain=r.email_domain,
                )
                for r in self.roles
            ),
            name_claims=self.name_claims,
        )


def load_oidc_settings(path: str | Path) -> OidcSettings:
    """The settings of the file at ``path``; ``ConfigurationError`` in one sentence otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the identity-provider file {path}: {exc}") from None
    return OidcSettings.from_toml_text(text)
