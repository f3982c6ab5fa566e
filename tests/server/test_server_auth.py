"""Who may do what: bearer tokens with roles, 401 without a known token, 403 for the wrong role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.interfaces.server import (
    Principal,
    Role,
    TokenConfigError,
    TokenRegistry,
    Unauthenticated,
    token_digest,
)
from tests.scripted_llm import scenarios as sc
from tests.server.conftest import Running
from tests.server.server_helpers import pending_batch, wait_for_run


def test_tokens_from_a_file_or_the_environment(tmp_path: Path) -> None:
    entries = [
        {"token": "t-a", "actor": "alice", "role": "analyst"},
        {"sha256": token_digest("t-r"), "actor": "rita", "role": "reviewer"},
    ]
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": entries}))
    for registry in (
        TokenRegistry.from_file(path),
        TokenRegistry.from_env({"SQLGATE_TOKENS_FILE": str(path)}),
        TokenRegistry.from_env({"SQLGATE_TOKENS": json.dumps(entries)}),
    ):
        assert registry.authenticate("Bearer t-a") == Principal("alice", Role.ANALYST)
        assert registry.authenticate("bearer t-r") == Principal("rita", Role.REVIEWER)
    assert len(TokenRegistry.from_env({})) == 0


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer nope", "Basic dDphYmM=", "t-a"])
def test_anything_but_a_known_bearer_token_is_unauthenticated(header: str | None) -> None:
    registry = TokenRegistry.from_json('[{"token": "t-a", "actor": "alice", "role": "analyst"}]')
    with pytest.raises(Unauthenticated) as caught:
        registry.authenticate(header)
    assert caught.value.code == "unauthenticated" and caught.value.status == 401


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"no": "tokens"}',
        '[{"token": "x", "role": "analyst"}]',
        '[{"token": "x", "actor": "a", "role": "owner"}]',
        '[{"actor": "a", "role": "admin"}]',
        '[{"token": "x", "actor": "a", "role": "admin"}, {"token": "x", "actor": "b", "role": "analyst"}]',
    ],
)
def test_a_malformed_token_configuration_is_refused(text: str) -> None:
    with pytest.raises(TokenConfigError):
        TokenRegistry.from_json(text)


NO_TOKEN: dict[str, str] = {}
BAD_TOKEN = {"Authorization": "Bearer not-a-token"}


@pytest.mark.parametrize("headers", [NO_TOKEN, BAD_TOKEN, {"Authorization": "Basic dG9rLXJpdGE6"}])
@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/me"),
        ("POST", "/runs"),
        ("GET", "/runs"),
        ("GET", "/runs/run_x"),
        ("GET", "/approvals"),
        ("GET", "/approvals/batch_x"),
        ("POST", "/approvals/batch_x/decision"),
        ("GET", "/events"),
    ],
)
def test_every_endpoint_but_health_needs_a_token(
    live: Running, headers: dict, method: str, path: str
) -> None:
    with live.client() as client:
        response = client.request(
            method, path, headers=headers, json={"question": "x"} if method == "POST" else None
        )
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "unauthenticated"
        assert response.headers["www-authenticate"] == "Bearer"
        assert client.get("/health").json()["status"] == "ok"


def test_the_role_matrix(live: Running) -> None:
    decision = {"decisions": {"call_x": "approve"}}
    with (
        live.client("alice") as alice,
        live.client("bob") as bob,
        live.client("rita") as rita,
        live.client("root") as root,
    ):
        assert alice.get("/me").json() == {"actor": "alice", "role": "analyst"}
        # analysts ask and read their own runs; they do not review
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        assert alice.get(f"/runs/{run_id}").status_code == 200
        assert [r["run_id"] for r in alice.get("/runs").json()] == [run_id]
        assert alice.get("/approvals").status_code == 403
        assert alice.get("/approvals/batch_x").status_code == 403
        forbidden = alice.post("/approvals/batch_x/decision", json=decision)
        assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"
        # another analyst does not see it at all
        assert bob.get(f"/runs/{run_id}").status_code == 404
        assert bob.get("/runs").json() == []
        # reviewers review; they do not ask
        assert rita.post("/runs", json={"question": sc.PRODUCT_COUNT}).status_code == 403
        assert rita.get("/runs").status_code == 403
        assert rita.get(f"/runs/{run_id}").status_code == 403
        assert rita.get("/approvals").status_code == 200
        assert rita.post("/approvals/batch_x/decision", json=decision).status_code == 404
        # admins do both and read every run
        assert root.get(f"/runs/{run_id}").json()["owner"] == "alice"
        assert root.post("/runs", json={"question": sc.PRODUCT_COUNT}).status_code == 202
        assert {r["owner"] for r in root.get("/runs").json()} == {"alice", "root"}
        # everyone with a token may follow the events
        for client in (alice, rita, root):
            with client.stream("GET", "/events") as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
        wait_for_run(alice, run_id, ("awaiting_approval",))
        pending_batch(root, run_id)


def test_the_actor_is_the_tokens_never_the_bodys(live: Running) -> None:
    from approvals import SqlApprovalStore

    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        decisions = {cid: "approve" for cid in batch["pending_ids"]}
        smuggled = rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": decisions, "actor": "mallory"},
        )
        assert smuggled.status_code == 422 and smuggled.json()["error"]["code"] == "invalid_request"
        decided = rita.post(
            f"/approvals/{batch['batch_id']}/decision", json={"decisions": decisions}
        )
        assert decided.status_code == 200 and decided.json()["decided_by"] == "rita"
    log = SqlApprovalStore(live.state_url).audit_log(batch_id=batch["batch_id"])
    assert {e.actor for e in log if e.event in ("item_resolved", "batch_resolved")} == {"rita"}
