"""Sign-in on the pages with the identity provider: the authorization-code flow with PKCE.

``/auth/login`` sends the browser to the provider with a one-use ``state``, a nonce and an S256
code challenge (kept server-side, ``web_sessions``); ``/auth/callback`` redeems the code with the
verifier at the provider's token endpoint, verifies the ID token (this client's audience, the
nonce), maps its claims to a role as for bearer tokens, and starts a session: the browser gets an
HttpOnly, SameSite=Lax cookie holding a random id, nothing else. Requests that carry the cookie
and change something must come from the service's own origin (``security.authenticate``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import urllib.parse
from datetime import timedelta
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse

from orchestrator.interfaces.auth import InvalidToken, OidcVerifier, ProviderUnavailable
from orchestrator.interfaces.server.dependencies import ServiceDep
from orchestrator.interfaces.server.errors import (
    ProviderDown,
    SignInFailed,
    SignInUnavailable,
    Unauthenticated,
)
from orchestrator.interfaces.server.identity import IdentityProvider
from orchestrator.interfaces.server.security import PUBLIC, SESSION_COOKIE, GuardedRoute
from orchestrator.interfaces.server.web_sessions import PendingSignIn

router = APIRouter(prefix="/auth", route_class=GuardedRoute, include_in_schema=False)


def _web(service: Any) -> IdentityProvider:
    provider: IdentityProvider | None = service.tokens.provider
    if provider is None or provider.settings.web is None:
        raise SignInUnavailable("this service has no sign-in with an identity provider")
    return provider


def _redirect_uri(request: Request) -> str:
    return str(request.base_url).rstrip("/") + "/auth/callback"


def _back_to(value: str | None) -> str:
    """Only a path of this service (never ``//host`` or a scheme): no open redirect."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/reviewer"
    return value


@router.get("/config", openapi_extra=PUBLIC)
def sign_in_config(service: ServiceDep) -> dict[str, Any]:
    """Whether the pages can sign in with the identity provider (and which)."""
    provider = service.tokens.provider
    web = provider is not None and provider.settings.web is not None
    return {"sign_in": web, "issuer": provider.settings.issuer if web and provider else None}


@router.get("/login", openapi_extra=PUBLIC)
def login(request: Request, service: ServiceDep, next: str | None = None) -> RedirectResponse:
    provider = _web(service)
    web = provider.settings.web
    assert web is not None
    try:
        endpoint = str(provider.verifier.metadata()["authorization_endpoint"])
    except (ProviderUnavailable, KeyError) as exc:
        raise ProviderDown(f"the identity provider cannot be reached: {exc}") from None
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    nonce = secrets.token_urlsafe(16)
    state = service.web_sessions.begin(PendingSignIn(verifier, nonce, _back_to(next)))
    query = urllib.parse.urlencode(
        {
            "response_type": "code",
            "client_id": web.client_id,
            "redirect_uri": _redirect_uri(request),
            "scope": " ".join(web.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge.decode(),
            "code_challenge_method": "S256",
        }
    )
    return RedirectResponse(f"{endpoint}?{query}", status_code=302)


@router.get("/callback", openapi_extra=PUBLIC)
def callback(
    request: Request,
    service: ServiceDep,
    state: str = "",
    code: str = "",
    error: str | None = None,
) -> RedirectResponse:
    provider = _web(service)
    web = provider.settings.web
    assert web is not None
    pending = service.web_sessions.complete(state) if state else None
    if pending is None:
        raise SignInFailed("this sign-in is unknown, used or older than ten minutes: start again")
    if error or not code:
        raise SignInFailed(f"the identity provider did not sign you in ({error or 'no code'})")
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": _redirect_uri(request),
        "client_id": web.client_id,
        "code_verifier": pending.verifier,
    }
    if web.client_secret_env:
        form["client_secret"] = os.environ.get(web.client_secret_env, "")
    try:
        endpoint = str(provider.verifier.metadata()["token_endpoint"])
        answer = provider.verifier.http.post(endpoint, data=form)
        tokens = answer.json()
    except (ProviderUnavailable, KeyError, httpx.HTTPError, ValueError) as exc:
        raise ProviderDown(f"the identity provider cannot be reached: {exc}") from None
    if answer.status_code != 200 or not isinstance(tokens.get("id_token"), str):
        raise SignInFailed("the identity provider refused the sign-in code")
    ids = OidcVerifier(
        provider.settings.issuer,
        web.client_id,
        http=provider.verifier.http,
        leeway_s=provider.settings.leeway_s,
    )
    try:
        claims = ids.verify(tokens["id_token"])
    except (InvalidToken, ProviderUnavailable) as exc:
        raise Unauthenticated(exc.message) from None
    if claims.get("nonce") != pending.nonce:
        raise SignInFailed("the ID token does not answer this sign-in (nonce): start again")
    principal = provider.principal_of_claims(claims)
    secret = service.web_sessions.create(principal, timedelta(hours=web.session_hours))
    response = RedirectResponse(pending.back_to, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=int(web.session_hours * 3600),
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout", openapi_extra=PUBLIC)
def logout(request: Request, service: ServiceDep) -> RedirectResponse:
    secret = request.cookies.get(SESSION_COOKIE)
    if secret:
        service.web_sessions.end(secret)
    response = RedirectResponse("/reviewer", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
