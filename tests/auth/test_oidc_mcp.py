"""Identity from the organisation, end to end: two askers sign in at a local OpenID provider
(real HTTP), ask ``sqlgate mcp`` over HTTP with the MCP SDK's own client the same SQL, a
reviewer signed in at the same provider decides on ``sqlgate serve``, and each asker gets the
rows of the PostgreSQL role their group maps to (row-level security). The audit log names every
one of them by the provider's subject and issuer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import orchestrator.core.llm
from orchestrator.core.llm import LLMSettings
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.auth import OidcSettings, OidcVerifier
from orchestrator.interfaces.mcp import McpConfig, create_http_app
from orchestrator.interfaces.server import ServerConfig, TokenRegistry, create_app
from orchestrator.interfaces.server.identity import IdentityProvider
from ratelimit import SlidingWindowLimiter
from safety import Policy
from tests.auth.oidc_provider import LocalOidcProvider, User
from tests.fixtures.rls import SQL, RlsDatabase, rls_database
from tests.mcp.test_mcp_http import serving_app

AUDIENCE = "sqlgate"


@pytest.fixture
def rls(postgres_database: str) -> Iterator[RlsDatabase]:
    with rls_database(postgres_database) as made:
        yield made


@pytest.fixture
def idp() -> Iterator[LocalOidcProvider]:
    with LocalOidcProvider(audience=AUDIENCE) as provider:
        provider.users["ann"] = User("u-ann", "ann@example.com", ["sales-north"])
        provider.users["bob"] = User("u-bob", "bob@example.com", ["sales-south"])
        provider.users["rita"] = User("u-rita", "rita@example.com", ["sqlgate-reviewers"])
        yield provider


def identity(idp: LocalOidcProvider) -> IdentityProvider:
    return IdentityProvider(
        OidcSettings.model_validate(
            {
                "issuer": idp.issuer,
                "audience": AUDIENCE,
                "roles": [
                    {"claim": "groups", "value": "sqlgate-reviewers", "role": "reviewer"},
                    {
                        "claim": "groups",
                        "value": "sales-north",
                        "role": "analyst",
                        "policy": "north",
                    },
                    {
                        "claim": "groups",
                        "value": "sales-south",
                        "role": "analyst",
                        "policy": "south",
                    },
                ],
            }
        )
    )


def policy(rls: RlsDatabase) -> Policy:
    return Policy.model_validate(
        {
            "roles": {
                "north": {"database_role": rls.north},
                "south": {"database_role": rls.south},
            }
        }
    )


def token_of(idp: LocalOidcProvider, username: str) -> str:
    """A token from the provider's token endpoint, over HTTP."""
    response = httpx.post(
        f"{idp.issuer}/token", data={"grant_type": "password", "username": username}
    )
    response.raise_for_status()
    return str(response.json()["access_token"])


def mcp_client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0, read=60.0)
    )
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60)


def test_two_askers_get_their_roles_rows_from_one_reviewed_statement(
    rls: RlsDatabase,
    idp: LocalOidcProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a model client is built; submit_sql asks it nothing (its URL is the discard port)
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    state_url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    llm = LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1", max_attempts=1)
    mcp = McpConfig(
        database_url=rls.reader,
        state_url=state_url,
        tokens=TokenRegistry({}),
        identity=identity(idp),
        llm=llm,
        limiter=SlidingWindowLimiter(limit=100, window=60.0),
        policy=policy(rls),
        poll_interval=0.05,
    )
    serve = ServerConfig(
        database_url=rls.reader,
        state_url=state_url,
        tokens=TokenRegistry({}),
        identity=identity(idp),
        llm=llm,
        limiter=SlidingWindowLimiter(limit=100, window=60.0),
        policy=policy(rls),
        poll_interval=0.05,
    )

    async def session(url: str, reviewer_base: str) -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with (
            mcp_client(url, token_of(idp, "ann")) as ann,
            mcp_client(url, token_of(idp, "bob")) as bob,
        ):
            for name, client in (("ann", ann), ("bob", bob)):
                asked = await client.call_tool(
                    "submit_sql", {"sql": SQL, "purpose": "orders per region"}
                )
                got[name] = asked.structured_content
            rita = {"Authorization": f"Bearer {token_of(idp, 'rita')}"}
            async with httpx.AsyncClient(base_url=reviewer_base, headers=rita) as web:
                for name in ("ann", "bob"):
                    batch = got[name]["review"]["batch_id"]
                    response = await web.get(f"/approvals/{batch}")
                    assert response.status_code == 200, response.text
                    shown = response.json()
                    got[f"{name}_shown"] = shown
                    pending = shown["pending_ids"]
                    decided = await web.post(
                        f"/approvals/{batch}/decision",
                        json={"decisions": {cid: "approve" for cid in pending}},
                    )
                    assert decided.status_code == 200, decided.text
            for name, client in (("ann", ann), ("bob", bob)):
                run_id = got[name]["run_id"]
                done = await client.call_tool("wait_for_run", {"run_id": run_id, "timeout_s": 20})
                got[f"{name}_done"] = done.structured_content
        return got

    with (
        serving_app(create_app(serve)) as reviewer_base,
        serving_app(create_http_app(mcp)) as mcp_base,
    ):
        got = anyio.run(session, f"{mcp_base}/mcp", reviewer_base)

    assert got["ann"]["status"] == got["bob"]["status"] == "awaiting_approval"
    # the reviewer sees who each statement runs as
    assert got["ann_shown"]["runs_as"] == f"{rls.reader_user} as {rls.north}"
    assert got["bob_shown"]["runs_as"] == f"{rls.reader_user} as {rls.south}"
    ann_rows = got["ann_done"]["questions"][0]["rows"]
    bob_rows = got["bob_done"]["questions"][0]["rows"]
    assert ann_rows == rls.rows(rls.reader, rls.north) and [r[0] for r in ann_rows] == ["north"]
    assert bob_rows == rls.rows(rls.reader, rls.south) and [r[0] for r in bob_rows] == ["south"]
    assert got["ann_done"]["runs_as"] == f"{rls.reader_user} as {rls.north}"

    state = StateDatabase(state_url)
    actors = {event.actor for event in state.approvals.audit_log()}
    for sub in ("u-ann", "u-bob", "u-rita"):
        assert f"(sub {sub} at {idp.issuer})" in " ".join(actors), actors
    state.close()


def test_mcp_over_http_points_clients_at_the_provider_and_refuses_other_audiences(
    idp: LocalOidcProvider, demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    config = McpConfig(
        database_url=f"sqlite:///{demo_db}",
        state_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
        identity=IdentityProvider(
            OidcSettings.model_validate(
                {
                    "issuer": idp.issuer,
                    "audience": AUDIENCE,
                    "roles": [{"claim": "groups", "value": "sales-north", "role": "analyst"}],
                }
            )
        ),
        llm=LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1", max_attempts=1),
        limiter=SlidingWindowLimiter(limit=100, window=60.0),
    )
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with serving_app(create_http_app(config)) as base:
        bare = httpx.post(f"{base}/mcp", json=ping)
        expired = idp.mint({"sub": "u-ann", "groups": ["sales-north"]}, expires_in=-3600)
        late = httpx.post(f"{base}/mcp", json=ping, headers={"Authorization": f"Bearer {expired}"})
        other = idp.mint({"sub": "u-ann", "groups": ["sales-north"]}, aud="another-api")
        foreign = httpx.post(f"{base}/mcp", json=ping, headers={"Authorization": f"Bearer {other}"})
        challenge = bare.headers["www-authenticate"]
        metadata = httpx.get(challenge.split('"')[1]).json()

    assert bare.status_code == late.status_code == foreign.status_code == 401
    assert challenge == (
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
    )
    assert late.headers["www-authenticate"].endswith('error="invalid_token"')
    assert metadata["resource"] == f"{base}/mcp"
    assert metadata["authorization_servers"] == [idp.issuer]
    assert late.json()["error"]["message"] == (
        "the token expired; get a new one from the identity provider"
    )
    assert foreign.json()["error"]["message"] == (
        f"the token was not issued for this service ({AUDIENCE})"
    )


class _Storage:
    """The SDK client's token storage, with a client registered at the provider beforehand."""

    def __init__(self, client: Any) -> None:
        self.tokens: Any = None
        self.client = client

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


def test_the_sdk_clients_own_oauth_flow_finds_the_provider_and_asks(
    rls: RlsDatabase,
    idp: LocalOidcProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The MCP Python SDK's ``OAuthClientProvider``: a 401, the protected-resource metadata,
    the provider's metadata, the authorization-code flow with PKCE and the resource indicator
    (the token's audience is this MCP server's URL), then the tool call with that token."""
    import socket
    import threading
    import time

    import uvicorn
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import (
        AuthorizationCodeResult,
        OAuthClientInformationFull,
        OAuthClientMetadata,
    )

    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    settings = identity(idp).settings.model_copy(update={"audience": url})  # audience-bound
    config = McpConfig(
        database_url=rls.reader,
        state_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
        identity=IdentityProvider(settings),
        llm=LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1", max_attempts=1),
        limiter=SlidingWindowLimiter(limit=100, window=60.0),
        policy=policy(rls),
        poll_interval=0.05,
    )
    server = uvicorn.Server(uvicorn.Config(create_http_app(config), log_level="warning"))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # not the main thread
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.01)

    redirect = "http://127.0.0.1:1/callback"  # never opened: the code is read from the redirect
    answered: list[AuthorizationCodeResult] = []

    async def sign_in_as_ann(authorization_url: str) -> None:
        async with httpx.AsyncClient() as browser:
            page = await browser.get(authorization_url)  # the provider's sign-in form
            assert "Sign in as ann" in page.text
            query = dict(httpx.URL(authorization_url).params)
            chosen = await browser.post(f"{idp.issuer}/authorize", data={**query, "user": "ann"})
            back = httpx.URL(chosen.headers["location"])
            answered.append(
                AuthorizationCodeResult(code=back.params["code"], state=back.params["state"])
            )

    async def callback() -> AuthorizationCodeResult:
        return answered.pop()

    storage = _Storage(
        OAuthClientInformationFull(
            client_id="mcp-test-client", redirect_uris=[redirect], token_endpoint_auth_method="none"
        )
    )
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[redirect], token_endpoint_auth_method="none"
        ),
        storage=storage,
        redirect_handler=sign_in_as_ann,
        callback_handler=callback,
    )

    async def session() -> Any:
        http = httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0, read=60.0))
        async with Client(streamable_http_client(url, http_client=http)) as client:
            return await client.call_tool("submit_sql", {"sql": SQL, "purpose": "per region"})

    try:
        asked = anyio.run(session)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert not asked.is_error, asked.content
    report = asked.structured_content
    assert report["status"] == "awaiting_approval"
    assert report["runs_as"] == f"{rls.reader_user} as {rls.north}"  # ann's group -> north
    token = storage.tokens.access_token
    assert OidcVerifier(idp.issuer, url).verify(token)["aud"] == url


def test_the_typescript_sdk_client_asks_with_a_token_of_the_provider(
    rls: RlsDatabase,
    idp: LocalOidcProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.mcp.drivers import node_http, node_ready

    why = node_ready()
    if why is not None:
        pytest.skip(why)
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    config = McpConfig(
        database_url=rls.reader,
        state_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
        identity=identity(idp),
        llm=LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1", max_attempts=1),
        limiter=SlidingWindowLimiter(limit=100, window=60.0),
        policy=policy(rls),
        poll_interval=0.05,
    )

    async def session(url: str) -> dict[str, Any]:
        async with node_http(url, token_of(idp, "bob")) as bob:
            return await bob.call("submit_sql", {"sql": SQL, "purpose": "orders per region"})

    with serving_app(create_http_app(config)) as base:
        asked = anyio.run(session, f"{base}/mcp")
    assert not asked["isError"], asked
    report = asked["structuredContent"]
    assert report["status"] == "awaiting_approval"
    assert report["runs_as"] == f"{rls.reader_user} as {rls.south}"  # bob's group -> south
