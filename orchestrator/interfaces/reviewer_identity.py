"""Who is deciding at the command line: the login name, or the actor a reviewer token proves.

A reviewer's name is evidence (earned auto-approval counts distinct reviewers), so it must be
proven, never claimed: ``cli_reviewer()`` is the operating system's login name, unless
``SQLGATE_REVIEWER_TOKEN`` holds a token of the server's token registry (``SQLGATE_TOKENS_FILE``
or ``SQLGATE_TOKENS``) whose role may decide; then it is that token's actor. ``SQLGATE_REVIEWER``
alone names nobody: set, it must agree with the proven name, else the command stops.

Who ASKS at a terminal has the attributes of that same proven identity, ``cli_asker_identity()``:
the token entry's ``attributes`` when ``SQLGATE_REVIEWER_TOKEN`` proves one, else none (a
policy's row filters then refuse the tables they filter). Never a command-line argument or a
free environment variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from approvals import reviewer_identity
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.identity import IdentityValue

__all__ = ["REVIEWER_NAME_ENV", "REVIEWER_TOKEN_ENV", "cli_asker_identity", "cli_reviewer"]

REVIEWER_TOKEN_ENV = "SQLGATE_REVIEWER_TOKEN"
REVIEWER_NAME_ENV = "SQLGATE_REVIEWER"


def cli_asker_identity(environ: Mapping[str, str] | None = None) -> dict[str, IdentityValue] | None:
    """The attributes of the identity ``SQLGATE_REVIEWER_TOKEN`` proves (its token entry's), or
    None without that token; ``ConfigurationError`` for a token the registry does not accept."""
    env = os.environ if environ is None else environ
    token = env.get(REVIEWER_TOKEN_ENV, "").strip()
    if not token:
        return None
    from orchestrator.interfaces.server.auth import TokenRegistry
    from orchestrator.interfaces.server.errors import ServerError

    try:
        principal = TokenRegistry.from_env(env).authenticate(f"Bearer {token}")
    except ServerError as exc:
        raise ConfigurationError(f"{REVIEWER_TOKEN_ENV} is not a usable token: {exc}") from None
    return principal.identity or None


def cli_reviewer(environ: Mapping[str, str] | None = None) -> str:
    """The proven reviewer name (see the module docstring); ``ConfigurationError`` for a token
    that is unknown, expired or may not decide, or a ``SQLGATE_REVIEWER`` that claims another
    name than the proven one."""
    env = os.environ if environ is None else environ
    claimed = env.get(REVIEWER_NAME_ENV, "").strip()
    token = env.get(REVIEWER_TOKEN_ENV, "").strip()
    if token:
        from orchestrator.interfaces.server.auth import TokenRegistry
        from orchestrator.interfaces.server.errors import ServerError

        try:
            principal = TokenRegistry.from_env(env).authenticate(f"Bearer {token}")
        except ServerError as exc:
            raise ConfigurationError(
                f"{REVIEWER_TOKEN_ENV} is not a usable reviewer token: {exc}"
            ) from None
        if not principal.may("decide"):
            raise ConfigurationError(
                f"{REVIEWER_TOKEN_ENV} is the token of {principal.actor} ({principal.role}), "
                "which may not decide: use a reviewer or admin token"
            )
        proven, how = principal.actor, f"the actor of {REVIEWER_TOKEN_ENV}"
    else:
        proven, how = reviewer_identity(env), "your login name"
    if claimed and claimed != proven:
        raise ConfigurationError(
            f"{REVIEWER_NAME_ENV}={claimed!r} is not {how} ({proven!r}): a reviewer's name must "
            f"be proven, so decide as yourself or set {REVIEWER_TOKEN_ENV} to that reviewer's token"
        )
    return proven
