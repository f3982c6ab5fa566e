"""Errors of the identity provider's tokens. Each has a stable ``code``.

    SqlgateError                     (orchestrator.core.errors)
     ├── InvalidToken                invalid_token                  (not a valid, current token of the issuer for us)
     └── ProviderUnavailable         identity_provider_unavailable  (discovery or keys cannot be read)

The HTTP service answers the first with 401 and the second with 503
(``orchestrator.interfaces.server.identity``).
"""

from __future__ import annotations

from orchestrator.core.errors import SqlgateError

__all__ = ["InvalidToken", "ProviderUnavailable"]


class InvalidToken(SqlgateError):
    """A bearer token that is not a valid, current token of the configured issuer for us."""

    code = "invalid_token"


class ProviderUnavailable(SqlgateError):
    """The identity provider's discovery document or keys could not be read."""

    code = "identity_provider_unavailable"
