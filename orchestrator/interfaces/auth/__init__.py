"""Identity from the organisation: OpenID Connect / JWT bearer tokens and claims -> roles.

``OidcVerifier`` checks a token against the issuer's published keys; ``ClaimRules`` maps its
claims to a sqlgate role and policy section; ``OidcSettings`` reads both from the
identity-provider file (``SQLGATE_OIDC_FILE``). Imports PyJWT and httpx (the ``server`` extra).
"""

from orchestrator.interfaces.auth.claims import (
    ClaimRules,
    Identity,
    RoleRule,
    claim_values,
    flat_claims,
)
from orchestrator.interfaces.auth.errors import InvalidToken, ProviderUnavailable
from orchestrator.interfaces.auth.oidc import ACCEPTED_ALGORITHMS, OidcVerifier
from orchestrator.interfaces.auth.settings import (
    OIDC_FILE_ENV,
    OidcSettings,
    RoleRuleEntry,
    WebSignIn,
    load_oidc_settings,
)

__all__ = [
    "ACCEPTED_ALGORITHMS",
    "ClaimRules",
    "Identity",
    "InvalidToken",
    "OIDC_FILE_ENV",
    "OidcSettings",
    "OidcVerifier",
    "ProviderUnavailable",
    "RoleRule",
    "RoleRuleEntry",
    "WebSignIn",
    "claim_values",
    "flat_claims",
    "load_oidc_settings",
]
