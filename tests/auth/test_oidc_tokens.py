"""Bearer JWTs of a real local OpenID provider (``tests/auth/oidc_provider.py``, over HTTP):
what is accepted, what is refused with 401 and one sentence, and how claims become roles."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization

import orchestrator.core.llm
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.llm import LLMSettings
from orchestrator.interfaces.auth import InvalidToken, OidcSettings, OidcVerifier
from orchestrator.interfaces.server import ServerConfig, TokenRegistry, create_app
from orchestrator.interfaces.server.identity import IdentityProvider
from ratelimit import SlidingWindowLimiter
from safety import Policy
from tests.auth.oidc_provider import LocalOidcProvider, User
from tests.server.conftest import start_server, stop_server

AUDIENCE = "sqlgate-api"


@pytest.fixture
def idp() -> Iterator[LocalOidcProvider]:
    with LocalOidcProvider(audience=AUDIENCE) as provider:
        provider.users["ann"] = User("u-ann", "ann@example.com", ["analysts"])
        provider.users["rita"] = User("u-rita", "rita@example.com", ["sqlgate-reviewers"])
        provider.users["eve"] = User("u-eve", "eve@elsewhere.org", [])
        yield provider


def settings_for(idp: LocalOidcProvider, **extra: Any) -> OidcSettings:
    return OidcSettings.model_validate(
        {
            "issuer": idp.issuer,
            "audience": AUDIENCE,
            "leeway_s": 30,
            "roles": [
                {"claim": "groups", "value": "sqlgate-reviewers", "role": "reviewer"},
                {"claim": "groups", "value": "analysts", "role": "analyst", "policy": "analyst"},
            ],
            **extra,
        }
    )


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


class TestTheVerifier:
    def test_a_current_token_of_the_issuer_for_us_is_accepted(self, idp: LocalOidcProvider) -> None:
        claims = OidcVerifier(idp.issuer, AUDIENCE).verify(idp.password_token("ann"))
        assert (claims["sub"], claims["groups"]) == ("u-ann", ["analysts"])

    @pytest.mark.parametrize(
        ("forge", "told"),
        [
            (lambda idp: idp.mint({"sub": "u-ann"}, expires_in=-120), "expired"),
            (
                lambda idp: idp.mint({"sub": "u-ann"}, aud="another-api"),
                "not issued for this service",
            ),
            (lambda idp: idp.mint({"sub": "u-ann"}, iss="http://evil.example"), "not issued by"),
            (lambda idp: idp.mint({}), "no sub claim"),
            (
                lambda idp: (
                    _b64({"alg": "none", "typ": "JWT"})
                    + "."
                    + _b64({"iss": idp.issuer, "aud": AUDIENCE, "sub": "u-ann", "exp": 2**40})
                    + "."
                ),
                "'none'",
            ),
            (lambda idp: "not-a-jwt", "not a JSON Web Token"),
        ],
        ids=["expired", "wrong-audience", "wrong-issuer", "no-subject", "unsigned", "garbage"],
    )
    def test_bad_tokens_are_refused_in_one_sentence(
        self, idp: LocalOidcProvider, forge: Any, told: str
    ) -> None:
        with pytest.raises(InvalidToken, match=told) as refused:
            OidcVerifier(idp.issuer, AUDIENCE).verify(forge(idp))
        assert "\n" not in refused.value.message

    def test_a_tampered_token_is_refused(self, idp: LocalOidcProvider) -> None:
        header, payload, signature = idp.password_token("ann").split(".")
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        claims["groups"] = ["sqlgate-admins"]
        with pytest.raises(InvalidToken, match="signature does not verify"):
            OidcVerifier(idp.issuer, AUDIENCE).verify(f"{header}.{_b64(claims)}.{signature}")

    def test_an_hmac_token_keyed_with_the_public_key_is_refused(
        self, idp: LocalOidcProvider
    ) -> None:
        public = (
            idp.keys[0]
            .private.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        signing_input = (
            _b64({"alg": "HS256", "typ": "JWT", "kid": idp.keys[0].kid})
            + "."
            + _b64(
                {"iss": idp.issuer, "aud": AUDIENCE, "sub": "u-ann", "exp": int(time.time()) + 60}
            )
        )
        mac = hmac.new(public, signing_input.encode(), hashlib.sha256).digest()
        forged = signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
        with pytest.raises(InvalidToken, match="'HS256'"):
            OidcVerifier(idp.issuer, AUDIENCE).verify(forged)

    def test_rotated_keys_old_tokens_refused_new_ones_fetched_once(
        self, idp: LocalOidcProvider
    ) -> None:
        now = [time.time()]
        verifier = OidcVerifier(idp.issuer, AUDIENCE, clock=lambda: now[0], refresh_interval_s=10)
        old = idp.password_token("ann")
        verifier.verify(old)
        idp.rotate()
        new = idp.password_token("ann")
        now[0] += 11  # past the refresh interval: the unknown kid reads the keys again
        assert verifier.verify(new)["sub"] == "u-ann"
        with pytest.raises(InvalidToken, match="does not publish"):
            verifier.verify(old)
        fetched = idp.jwks_requests
        for _ in range(5):  # made-up kids within the interval: no new request to the provider
            with pytest.raises(InvalidToken):
                verifier.verify(
                    idp.mint({"sub": "x"}, key=type(idp.keys[0])("k-made-up", idp.keys[0].private))
                )
        assert idp.jwks_requests == fetched

    def test_clock_skew_within_the_leeway_is_tolerated(self, idp: LocalOidcProvider) -> None:
        token = idp.mint({"sub": "u-ann"}, expires_in=-20)
        assert OidcVerifier(idp.issuer, AUDIENCE, leeway_s=30).verify(token)["sub"] == "u-ann"
        with pytest.raises(InvalidToken, match="expired"):
            OidcVerifier(idp.issuer, AUDIENCE, leeway_s=10).verify(token)


@pytest.fixture
def served(
    idp: LocalOidcProvider, demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    # a model client is built; nothing here asks it anything (its URL is the discard port)
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    policy = Policy.model_validate({"roles": {"analyst": {"max_limit": 50}}})
    config = ServerConfig(
        database_url=f"sqlite:///{demo_db}",
        state_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
        tokens=TokenRegistry.from_json(
            '[{"token": "tok-script", "actor": "cron", "role": "admin"}]'
        ),
        identity=IdentityProvider(settings_for(idp)),
        llm=LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1"),
        policy=policy,
        limiter=SlidingWindowLimiter(limit=100, window=60.0),
    )
    server, thread, base = start_server(create_app(config))
    try:
        yield base
    finally:
        stop_server(server, thread)


class TestServe:
    def test_the_providers_tokens_name_the_caller_with_subject_and_issuer(
        self, idp: LocalOidcProvider, served: str
    ) -> None:
        me = httpx.get(
            f"{served}/me", headers={"Authorization": f"Bearer {idp.password_token('ann')}"}
        )
        assert me.status_code == 200, me.text
        body = me.json()
        assert body["role"] == "analyst" and body["policy_role"] == "analyst"
        assert (body["subject"], body["issuer"]) == ("u-ann", idp.issuer)
        assert body["actor"] == f"ann (sub u-ann at {idp.issuer})"
        script = httpx.get(f"{served}/me", headers={"Authorization": "Bearer tok-script"})
        assert script.json()["actor"] == "cron"  # static tokens stay

    def test_a_refused_token_is_a_401_pointing_at_the_resource_metadata(
        self, idp: LocalOidcProvider, served: str
    ) -> None:
        expired = idp.mint({"sub": "u-ann"}, expires_in=-3600)
        refused = httpx.get(f"{served}/me", headers={"Authorization": f"Bearer {expired}"})
        assert refused.status_code == 401
        assert refused.json()["error"]["message"] == (
            "the token expired; get a new one from the identity provider"
        )
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith("Bearer resource_metadata=")
        metadata_url = challenge.split('"')[1]
        metadata = httpx.get(metadata_url).json()
        assert metadata["authorization_servers"] == [idp.issuer]
        assert metadata["resource"] == served

    def test_no_role_for_the_claims_is_a_403_and_group_changes_count_at_the_next_token(
        self, idp: LocalOidcProvider, served: str
    ) -> None:
        eve = httpx.get(
            f"{served}/me", headers={"Authorization": f"Bearer {idp.password_token('eve')}"}
        )
        assert eve.status_code == 403
        assert "no sqlgate role" in eve.json()["error"]["message"]
        before = idp.password_token("ann")
        idp.users["ann"].groups = ["sqlgate-reviewers"]
        after = idp.password_token("ann")
        assert (
            httpx.get(f"{served}/me", headers={"Authorization": f"Bearer {before}"}).json()["role"]
            == "analyst"
        )
        assert (
            httpx.get(f"{served}/me", headers={"Authorization": f"Bearer {after}"}).json()["role"]
            == "reviewer"
        )


def test_a_mapping_to_a_policy_section_the_policy_lacks_stops_the_server(
    idp: LocalOidcProvider, demo_db: Path, tmp_path: Path
) -> None:
    config = ServerConfig(
        database_url=f"sqlite:///{demo_db}",
        state_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
        tokens=TokenRegistry({}),
        identity=IdentityProvider(settings_for(idp)),
        llm=LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1"),
    )
    with pytest.raises(ConfigurationError, match="'analyst'"):
        create_app(config)


def test_the_identity_provider_file_is_checked_when_it_loads() -> None:
    with pytest.raises(ConfigurationError, match="maps no claims"):
        OidcSettings.from_toml_text('issuer = "https://idp"\naudience = "a"')
    with pytest.raises(ConfigurationError, match="role must be one of"):
        OidcSettings.from_toml_text(
            'issuer = "https://idp"\naudience = "a"\n[[roles]]\nemail_domain = "x.org"\nrole = "root"'
        )


def test_a_token_claiming_another_algorithm_than_its_key_is_refused(
    idp: LocalOidcProvider,
) -> None:
    key = idp.keys[0]
    token = jwt.encode(
        {"iss": idp.issuer, "aud": AUDIENCE, "sub": "u-ann", "exp": int(time.time()) + 60},
        key.private,
        algorithm="PS256",  # the same RSA key, another algorithm than the JWK's RS256
        headers={"kid": key.kid},
    )
    with pytest.raises(InvalidToken, match="its key is for RS256"):
        OidcVerifier(idp.issuer, AUDIENCE).verify(token)


def test_the_auth_package_exports_a_sorted_surface() -> None:
    import orchestrator.interfaces.auth as auth

    assert auth.__all__ == sorted(auth.__all__)
    assert all(hasattr(auth, name) for name in auth.__all__)
