"""The README's identity-provider examples: each parses, and maps tokens shaped like its
provider's (issued by the local provider, over HTTP) to the role the README says."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from orchestrator.interfaces.auth import OidcSettings
from orchestrator.interfaces.server.identity import IdentityProvider
from tests.auth.oidc_provider import LocalOidcProvider
from tests.conftest import ROOT

SECTION = "## Identity from your organisation (OpenID Connect)"


def _blocks() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION) : text.index("\n## ", text.index(SECTION) + 1)]
    blocks = re.findall(r"```toml\n(.*?)```", section, flags=re.S)
    named = {"main": blocks[0]}
    for block in blocks[1:]:
        first = block.splitlines()[0]
        if first.startswith("# "):
            named[first[2:].split(":")[0]] = block
    return named


BLOCKS = _blocks()


@pytest.fixture
def idp() -> Iterator[LocalOidcProvider]:
    with LocalOidcProvider(audience="unused") as provider:
        yield provider


@pytest.mark.parametrize(
    ("name", "claims", "role"),
    [
        ("main", {"groups": ["sales-north"], "email": "a@other.org"}, ("analyst", "north")),
        (
            "main",
            {"groups": [], "email": "b@example.com", "email_verified": True},
            ("analyst", None),
        ),
        ("Okta", {"groups": ["Everyone", "sqlgate-reviewers"]}, ("reviewer", None)),
        ("Microsoft Entra ID", {"roles": ["Sqlgate.Ask"], "name": "Ann"}, ("analyst", None)),
        (
            "Keycloak",
            {"realm_access": {"roles": ["offline_access", "sqlgate-admin"]}},
            ("admin", None),
        ),
    ],
)
def test_each_example_maps_its_providers_tokens(
    idp: LocalOidcProvider, name: str, claims: dict, role: tuple[str, str | None]
) -> None:
    documented = OidcSettings.from_toml_text(BLOCKS[name])
    here = documented.model_copy(update={"issuer": idp.issuer})  # the same rules, our provider
    provider = IdentityProvider(here)
    principal = provider.principal(idp.mint({"sub": "s-1", **claims}, aud=documented.audience))
    assert (principal.role.value, principal.policy_role) == role
    assert principal.subject == "s-1" and principal.issuer == idp.issuer


def test_the_section_documents_the_three_providers() -> None:
    assert {"Okta", "Microsoft Entra ID", "Keycloak"} <= set(BLOCKS)
