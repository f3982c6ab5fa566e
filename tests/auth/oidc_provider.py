"""A small OpenID Connect provider over real HTTP, for tests: discovery, JWKS, token and
authorization endpoints, RSA keys that can be rotated, and users whose groups can change.

    with LocalOidcProvider(audience="sqlgate") as idp:
        idp.users["ann"] = User(sub="u-ann", email="ann@example.com", groups=["analysts"])
        token = idp.password_token("ann")                     # a script's token
        forged = idp.mint({"sub": "x"}, aud="another-api")    # a token for negative tests

Grants: ``password`` (scripts and MCP clients in tests) and ``authorization_code`` with PKCE
(S256 only): ``/authorize`` shows a form naming the users; posting it redirects to the
client's ``redirect_uri`` with a one-time code. ``resource`` (RFC 8707) on a token request
becomes the token's audience, as an MCP client asks.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


@dataclass
class User:
    sub: str
    email: str
    groups: list[str] = field(default_factory=list)
    name: str | None = None


@dataclass
class _Key:
    kid: str
    private: rsa.RSAPrivateKey

    def jwk(self) -> dict[str, Any]:
        data = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**data, "kid": self.kid, "use": "sig", "alg": "RS256"}


def _new_key() -> _Key:
    return _Key("k-" + secrets.token_hex(4), rsa.generate_private_key(65537, 2048))


class LocalOidcProvider:
    """The provider; a context manager that serves on 127.0.0.1 on a free port."""

    def __init__(self, *, audience: str = "sqlgate", lifetime_s: int = 300) -> None:
        self.audience = audience
        self.lifetime_s = lifetime_s
        self.users: dict[str, User] = {}
        self.keys = [_new_key()]
        self.jwks_requests = 0
        self._codes: dict[str, dict[str, Any]] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.issuer = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> LocalOidcProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- keys and tokens ----------------------------------------------------------------------
    def rotate(self) -> None:
        """A new signing key; the old one is no longer published."""
        self.keys = [_new_key()]

    def mint(
        self,
        claims: dict[str, Any] | None = None,
        *,
        aud: str | None = None,
        iss: str | None = None,
        expires_in: int | None = None,
        key: _Key | None = None,
    ) -> str:
        now = int(time.time())
        body = {
            "iss": iss or self.issuer,
            "aud": aud or self.audience,
            "iat": now,
            "exp": now + (self.lifetime_s if expires_in is None else expires_in),
            **(claims or {}),
        }
        signing = key or self.keys[0]
        return jwt.encode(body, signing.private, algorithm="RS256", headers={"kid": signing.kid})

    def user_claims(self, username: str) -> dict[str, Any]:
        user = self.users[username]
        return {
            "sub": user.sub,
            "email": user.email,
            "email_verified": True,
            "preferred_username": username,
            "name": user.name or username,
            "groups": list(user.groups),
        }

    def password_token(self, username: str, *, resource: str | None = None) -> str:
        return self.mint(self.user_claims(username), aud=resource)

    # -- the authorization code flow ---------------------------------------------------------
    def _issue_code(self, username: str, query: dict[str, str]) -> str:
        code = secrets.token_urlsafe(24)
        self._codes[code] = {"user": username, **query}
        return code

    def _redeem(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        entry = self._codes.pop(form.get("code", ""), None)
        if entry is None:
            return 400, {"error": "invalid_grant"}
        if form.get("redirect_uri") != entry.get("redirect_uri") or form.get(
            "client_id"
        ) != entry.get("client_id"):
            return 400, {"error": "invalid_grant"}
        verifier = form.get("code_verifier", "")
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        if entry.get("code_challenge_method") != "S256" or challenge != entry.get("code_challenge"):
            return 400, {"error": "invalid_grant", "error_description": "PKCE check failed"}
        claims = self.user_claims(entry["user"])
        access = self.mint(claims, aud=entry.get("resource"))
        id_token = self.mint({**claims, "nonce": entry.get("nonce")}, aud=entry.get("client_id"))
        return 200, {"access_token": access, "id_token": id_token, "token_type": "Bearer"}


def _handler(idp: LocalOidcProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _form(self) -> dict[str, str]:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length).decode()
            return {k: v[0] for k, v in urllib.parse.parse_qs(raw).items()}

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
            if url.path == "/.well-known/openid-configuration":
                self._json(
                    200,
                    {
                        "issuer": idp.issuer,
                        "jwks_uri": idp.issuer + "/jwks",
                        "token_endpoint": idp.issuer + "/token",
                        "authorization_endpoint": idp.issuer + "/authorize",
                        "response_types_supported": ["code"],
                        "grant_types_supported": ["authorization_code", "password"],
                        "code_challenge_methods_supported": ["S256"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                        "subject_types_supported": ["public"],
                    },
                )
            elif url.path == "/jwks":
                idp.jwks_requests += 1
                self._json(200, {"keys": [k.jwk() for k in idp.keys]})
            elif url.path == "/authorize":
                options = "".join(
                    f'<button name="user" value="{html.escape(u)}">Sign in as {html.escape(u)}'
                    "</button>"
                    for u in idp.users
                )
                hidden = "".join(
                    f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                    for k, v in query.items()
                )
                page = f"<!doctype html><title>Local IdP</title><form method=post>{hidden}{options}</form>"
                data = page.encode()
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            form = self._form()
            if url.path == "/authorize":
                user = form.pop("user", "")
                if user not in idp.users:
                    self._json(400, {"error": "access_denied"})
                    return
                code = idp._issue_code(user, form)
                target = (
                    form["redirect_uri"]
                    + "?"
                    + urllib.parse.urlencode({"code": code, "state": form.get("state", "")})
                )
                self.send_response(302)
                self.send_header("location", target)
                self.send_header("content-length", "0")
                self.end_headers()
            elif url.path == "/token":
                grant = form.get("grant_type")
                if grant == "password" and form.get("username") in idp.users:
                    token = idp.password_token(form["username"], resource=form.get("resource"))
                    self._json(200, {"access_token": token, "token_type": "Bearer"})
                elif grant == "authorization_code":
                    self._json(*idp._redeem(form))
                else:
                    self._json(400, {"error": "invalid_grant"})
            else:
                self._json(404, {"error": "not_found"})

    return Handler
