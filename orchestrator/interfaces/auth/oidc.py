"""Bearer JWTs from an OpenID Connect provider, verified against the keys it publishes.

``OidcVerifier(issuer, audience)`` accepts a token only when all of these hold:

- it is a JWS signed with an asymmetric algorithm (RS*, PS*, ES*, EdDSA): never ``none``, never
  an HMAC (a public key used as an HMAC secret is the classic confusion attack);
- its ``kid`` names a key of the issuer's JWKS (found through the issuer's discovery document,
  whose own ``issuer`` must be the configured one), and the signature verifies with that key;
- ``iss`` is the configured issuer, ``aud`` contains the configured audience (a token minted
  for another API is refused), ``sub`` is present, ``exp`` is in the future and ``nbf``/``iat``
  are not, each within ``leeway_s`` of clock skew.

Keys are cached for ``jwks_ttl_s``; a token naming an unknown ``kid`` fetches the JWKS again
(the provider rotated its keys), at most once per ``refresh_interval_s``, so made-up ``kid``s
cannot turn into a flood of requests to the provider. The HTTP client and the clock come in
through the constructor.

Every refusal is ``InvalidToken`` with one sentence saying why.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import jwt

from orchestrator.interfaces.auth.errors import InvalidToken, ProviderUnavailable

__all__ = ["ACCEPTED_ALGORITHMS", "OidcVerifier"]

#: Signature algorithms a token may use: asymmetric only.
ACCEPTED_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


class OidcVerifier:
    """Verifies bearer JWTs of one issuer for one audience.

    Args:
        issuer: the provider's issuer URL, exactly as its tokens' ``iss`` (no trailing-slash
            guessing: the discovery document must state the same issuer).
        audience: the audience tokens must be minted for (this API's identifier).
        http: the HTTP client the discovery document and the keys are read with.
        clock: seconds since the epoch, for ``exp``/``nbf``/``iat``.
        leeway_s: clock skew tolerated on each time claim.
        jwks_ttl_s: how long fetched keys are trusted before they are read again.
        refresh_interval_s: the least time between two reads of the keys.
    """

    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        leeway_s: float = 60.0,
        jwks_ttl_s: float = 3600.0,
        refresh_interval_s: float = 10.0,
    ) -> None:
        if not issuer or not audience:
            raise ValueError("an OIDC verifier needs an issuer and an audience")
        self.issuer = issuer
        self.audience = audience
        self.http = http or httpx.Client(timeout=10.0, follow_redirects=False)
        self.clock = clock
        self.leeway_s = leeway_s
        self.jwks_ttl_s = jwks_ttl_s
        self.refresh_interval_s = refresh_interval_s
        self._lock = threading.Lock()
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str, dict[str, Any]] = {}
        self._fetched_at: float | None = None

    # -- the provider ----------------------------------------------------------------------

    def metadata(self) -> Mapping[str, Any]:
        """The issuer's discovery document (read once)."""
        with self._lock:
            return self._discover()

    def _discover(self) -> dict[str, Any]:
        if self._metadata is None:
            url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
            document = self._get_json(url)
            if document.get("issuer") != self.issuer:
                raise ProviderUnavailable(
                    f"the discovery document at {url} names issuer {document.get('issuer')!r}, "
                    f"not {self.issuer!r}"
                )
            if not isinstance(document.get("jwks_uri"), str):
                raise ProviderUnavailable(f"the discovery document at {url} has no jwks_uri")
            self._metadata = document
        return self._metadata

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            response = self.http.get(url, headers={"accept": "application/json"})
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            raise ProviderUnavailable(f"cannot read {url}: {exc}") from exc
        if not isinstance(body, dict):
            raise ProviderUnavailable(f"{url} did not answer a JSON object")
        return body

    def _key(self, kid: str | None) -> dict[str, Any] | None:
        """The JWK named ``kid``; the keys are read again when stale, or once per refresh
        interval when the kid is unknown (the provider rotated its keys)."""
        with self._lock:
            now = self.clock()
            stale = self._fetched_at is None or now - self._fetched_at >= self.jwks_ttl_s
            unknown = kid not in self._keys
            may_refresh = (
                self._fetched_at is None or now - self._fetched_at >= self.refresh_interval_s
            )
            if stale or (unknown and may_refresh):
                jwks = self._get_json(str(self._discover()["jwks_uri"]))
                keys = jwks.get("keys")
                if not isinstance(keys, list):
                    raise ProviderUnavailable("the provider's JWKS has no keys list")
                self._keys = {
                    str(k.get("kid")): k
                    for k in keys
                    if isinstance(k, dict) and k.get("use", "sig") == "sig"
                }
                self._fetched_at = now
            return self._keys.get(str(kid))

    # -- tokens ----------------------------------------------------------------------------

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, once every check of the module docstring passed.

        Raises:
            InvalidToken: one sentence saying what is wrong with the token.
            ProviderUnavailable: the provider's keys cannot be read now.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the bearer token is not a JSON Web Token") from None
        algorithm = header.get("alg")
        if algorithm not in ACCEPTED_ALGORITHMS:
            raise InvalidToken(
                f"the token is signed with {algorithm!r}; only asymmetric signatures "
                "(RS256, ES256, ...) of the identity provider are accepted"
            )
        jwk = self._key(header.get("kid"))
        if jwk is None:
            raise InvalidToken(
                "the token is signed with a key the identity provider does not publish"
            )
        if jwk.get("alg") not in (None, algorithm):
            raise InvalidToken(f"the token says {algorithm}, but its key is for {jwk.get('alg')}")
        try:
            key = jwt.PyJWK(jwk, algorithm=algorithm)
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                options={
                    "require": ["exp", "iss", "aud", "sub"],
                    "verify_exp": False,  # checked below against the injected clock
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.InvalidAudienceError:
            raise InvalidToken(
                f"the token was not issued for this service ({self.audience})"
            ) from None
        except jwt.InvalidIssuerError:
            raise InvalidToken(f"the token was not issued by {self.issuer}") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the token has no {exc.claim} claim") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the token is not valid: {exc}") from None
        self._check_times(claims)
        return claims

    def _check_times(self, claims: Mapping[str, Any]) -> None:
        now = self.clock()
        exp, nbf, iat = claims.get("exp"), claims.get("nbf"), claims.get("iat")
        for name, value in (("exp", exp), ("nbf", nbf), ("iat", iat)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise InvalidToken(f"the token's {name} claim is not a number")
        assert isinstance(exp, (int, float))
        if now >= exp + self.leeway_s:
            raise InvalidToken("the token expired; get a new one from the identity provider")
        if nbf is not None and now < nbf - self.leeway_s:
            raise InvalidToken("the token is not valid yet (nbf is in the future)")
        if iat is not None and now < iat - self.leeway_s:
            raise InvalidToken("the token was issued in the future (iat); check the clocks")
