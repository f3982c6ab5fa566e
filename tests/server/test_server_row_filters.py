"""Row filters through the HTTP API: each asker's run is bound to the attributes their token
proves (a static token's ``attributes``, a provider token's claims), so two askers of the same
question get only their own rows; a reviewer's edit is checked with the ASKER's attributes; an
asker without the attribute is refused (``row_filter_unbound``). Nothing in a request body can
set an attribute."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from orchestrator.interfaces.auth import OidcSettings
from orchestrator.interfaces.server import TokenRegistry, create_app
from orchestrator.interfaces.server.identity import IdentityProvider
from safety import Policy
from tests.auth.oidc_provider import LocalOidcProvider
from tests.scripted_llm.scenarios import Scenario, ScenarioScript, reasoning
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run

QUESTION = "Which orders are there, with their region?"
POLICY = Policy.from_toml_text('[rows]\n"orders" = "region = {user.region}"\n')
TOKENS = [
    {"token": "tok-ann", "actor": "ann", "role": "analyst", "attributes": {"region": "EU"}},
    {"token": "tok-ben", "actor": "ben", "role": "analyst", "attributes": {"region": "US"}},
    {"token": "tok-cal", "actor": "cal", "role": "analyst"},
    # the reviewer's own attributes never bind another asker's filter
    {"token": "tok-rita", "actor": "rita", "role": "reviewer", "attributes": {"region": "APAC"}},
]
DONE = ("finished", "failed")


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, region TEXT, total REAL)")
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)",
            [(1, "EU", 10.0), (2, "US", 20.0), (3, "EU", 30.0), (4, "APAC", 40.0)],
        )
    return path


@pytest.fixture
def idp() -> Iterator[LocalOidcProvider]:
    with LocalOidcProvider(audience="sqlgate-api") as provider:
        yield provider


@pytest.fixture
def served(
    shop: Path, state_url: str, allow_scripted_model: None, idp: LocalOidcProvider
) -> Iterator[Running]:
    script = ScenarioScript(
        {
            QUESTION: Scenario(
                reasoning=reasoning(tables=["orders"]),
                sql="SELECT order_id, region FROM orders ORDER BY order_id",
            )
        }
    )
    with ScriptedLLMServer(script) as model:
        config = make_config(
            shop,
            state_url,
            model,
            policy=POLICY,
            tokens=TokenRegistry.from_json(json.dumps(TOKENS)),
            identity=IdentityProvider(
                OidcSettings.model_validate(
                    {
                        "issuer": idp.issuer,
                        "audience": "sqlgate-api",
                        "roles": [{"claim": "groups", "value": "analysts", "role": "analyst"}],
                    }
                )
            ),
        )
        app = create_app(config)
        server, thread, base_url = start_server(app)
        try:
            yield Running(base_url, app, state_url)
        finally:
            stop_server(server, thread)


def _client(running: Running, bearer: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {bearer}"}
    return httpx.Client(base_url=running.base_url, headers=headers, timeout=30.0)


def _ask(running: Running, bearer: str) -> str:
    with _client(running, bearer) as client:
        response = client.post("/runs", json={"question": QUESTION})
        assert response.status_code == 202, response.text
        return response.json()["run_id"]


def test_static_token_askers_get_only_their_rows_and_edits_keep_the_askers_filter(
    served: Running,
) -> None:
    _each_their_rows(served, "tok-ann", "tok-ben", "tok-cal")


def test_provider_token_askers_get_only_their_rows(served: Running, idp: LocalOidcProvider) -> None:
    def token(sub: str, **claims: str) -> str:
        return idp.mint({"sub": sub, "groups": ["analysts"], **claims})

    _each_their_rows(
        served, token("u-ann", region="EU"), token("u-ben", region="US"), token("u-cal")
    )


def _each_their_rows(served: Running, ann_token: str, ben_token: str, cal_token: str) -> None:
    ann_run, ben_run, cal_run = (_ask(served, t) for t in (ann_token, ben_token, cal_token))

    with _client(served, cal_token) as cal:
        refused = wait_for_run(cal, cal_run, DONE)["results"][0]
    assert refused["status"] != "answered" and refused["rows_preview"] == []
    assert "row_filter_unbound" in json.dumps(refused)

    with served.client("rita") as rita:
        ann_batch = pending_batch(rita, ann_run)
        ben_batch = pending_batch(rita, ben_run)
        assert "region = 'EU'" in ann_batch["batch"]["items"][0]["sql"]
        assert "region = 'US'" in ben_batch["batch"]["items"][0]["sql"]
        # only what the filters name is recorded and shown (no token ids, times or e-mail)
        assert ann_batch["batch"]["context"]["identity"] == {"region": "EU"}

        # rita edits ann's statement: checked (and run) with ann's attributes, not rita's
        call_id = ann_batch["pending_ids"][0]
        checked = rita.post(
            f"/approvals/{ann_batch['batch_id']}/items/{call_id}/validate",
            json={"sql": "SELECT order_id, region, total FROM orders"},
        ).json()
        assert checked["ok"] is True and "region = 'EU'" in checked["sql"]
        assert "APAC" not in checked["sql"]
        decided = rita.post(
            f"/approvals/{ann_batch['batch_id']}/decision",
            json={
                "decisions": {
                    call_id: {"action": "edit", "sql": "SELECT order_id, region FROM orders"}
                }
            },
        )
        assert decided.status_code == 200, decided.text
        decided = rita.post(
            f"/approvals/{ben_batch['batch_id']}/decision",
            json={"decisions": {c: {"action": "approve"} for c in ben_batch["pending_ids"]}},
        )
        assert decided.status_code == 200, decided.text

    with _client(served, ann_token) as ann, _client(served, ben_token) as ben:
        ann_result = wait_for_run(ann, ann_run, DONE)["results"][0]
        ben_result = wait_for_run(ben, ben_run, DONE)["results"][0]
    assert ann_result["status"] == ben_result["status"] == "answered"
    assert sorted(ann_result["rows_preview"]) == [[1, "EU"], [3, "EU"]]
    assert ben_result["rows_preview"] == [[2, "US"]]


def test_token_attributes_must_be_values() -> None:
    from orchestrator.interfaces.server.errors import TokenConfigError

    entry = {"token": "t", "actor": "x", "role": "analyst", "attributes": {"region": ["EU"]}}
    with pytest.raises(TokenConfigError, match="region"):
        TokenRegistry.from_json(json.dumps([entry]))
    entry["attributes"] = {"region": "EU", "limit": 500}
    principal = TokenRegistry.from_json(json.dumps([entry])).authenticate("Bearer t")
    assert principal.identity == {"region": "EU", "limit": 500}
