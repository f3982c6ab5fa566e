"""Reviewed-SQL memory over HTTP: what a server's reviews teach it, the reviewer's memory panel,
and the admin's curation (list, show, remove, export, notes, revoke). Only admins curate;
analysts never see memory. A real server with the scripted model; SQLite and PostgreSQL state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.interfaces.server import create_app
from tests.memory.conftest import state_url  # noqa: F401 (SQLite and PostgreSQL state)
from tests.memory.test_memory_pipeline import SCENARIOS, SHIPPED, SHIPPED_AGAIN
from tests.scripted_llm.scenarios import ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run
from tests.server.test_server_browser import _page, _shot, browser  # noqa: F401 (fixture)

ADMIN_ROUTES = [
    ("GET", "/memory/examples", None),
    ("GET", "/memory/examples/1", None),
    ("DELETE", "/memory/examples/1", None),
    ("GET", "/memory/export", None),
    ("GET", "/memory/notes", None),
    ("POST", "/memory/notes", {"text": "Revenue means ..."}),
    ("DELETE", "/memory/notes/1", None),
    ("POST", "/memory/revocations", {"template": "abcd"}),
]


@pytest.fixture
def served(
    demo_db: Path,
    state_url: str,  # noqa: F811 (the fixture imported above)
    allow_scripted_model: None,
) -> Iterator[Running]:
    with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as model:
        app = create_app(make_config(demo_db, state_url, model))
        server, thread, base_url = start_server(app)
        try:
            yield Running(base_url, app, state_url)
        finally:
            stop_server(server, thread)


def _ask_and_decide(live: Running, question: str, decision: object) -> tuple[str, dict]:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": question}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        (item,) = batch["batch"]["items"]
        if decision is not None:
            rita.post(
                f"/approvals/{batch['batch_id']}/decision",
                json={"decisions": {item["call_id"]: decision}},
            ).raise_for_status()
            wait_for_run(alice, run_id, ("finished", "failed"))
    return run_id, batch


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
def test_only_admins_curate_memory(
    served: Running, method: str, path: str, body: dict | None
) -> None:
    for who, status in ((None, 401), ("alice", 403), ("rita", 403)):
        with served.client(who) as client:
            answer = client.request(method, path, json=body)
        assert answer.status_code == status, (who, answer.text)
        assert answer.json()["error"]["code"] == ("unauthenticated" if who is None else "forbidden")
    with served.client("root") as root:
        assert root.request(method, path, json=body).status_code in (200, 201, 404)


def test_the_panel_is_for_reviewers_not_analysts(served: Running) -> None:
    with served.client(None) as anonymous, served.client("alice") as alice:
        assert anonymous.get("/approvals/batch_x/memory").status_code == 401
        assert alice.get("/approvals/batch_x/memory").status_code == 403


def test_reviews_teach_the_server_and_admins_curate_what_it_learned(served: Running) -> None:
    # A reviewer approves a statement; it runs; memory keeps it with the reviewer's name.
    _, first = _ask_and_decide(served, SHIPPED, "approve")
    with served.client("root") as root:
        (example,) = root.get("/memory/examples").json()
        assert (example["question"], example["status"], example["reviewers"]) == (
            SHIPPED,
            "approved",
            ["rita"],
        )
        note = root.post(
            "/memory/notes",
            json={"text": "Shipped means status 'shipped' only", "tables": ["orders"]},
        )
        assert note.status_code == 201 and note.json()["author"] == "root"

    # A paraphrase waits for review: the panel says what memory knows about it.
    _, second = _ask_and_decide(served, SHIPPED_AGAIN, None)
    (item,) = second["batch"]["items"]
    with served.client("rita") as rita:
        panel = rita.get(f"/approvals/{second['batch_id']}/memory").json()
    assert panel["enabled"] is True
    shown = panel["items"][item["call_id"]]
    assert [(s["id"], s["question"], s["batch_id"]) for s in shown["similar"]] == [
        (example["id"], SHIPPED, first["batch_id"])  # with the batch it was approved in
    ]
    assert shown["template_id"] == example["template_id"]  # other years, same template
    assert [a["reviewers"] for a in shown["template_approvals"]] == [["rita"]]
    assert [n["text"] for n in shown["notes"]] == ["Shipped means status 'shipped' only"]

    with served.client("root") as root:
        # revoke by prefix, as `memory list` shows it
        revoked = root.post(
            "/memory/revocations",
            json={"template": example["template_id"][:10], "reason": "years differ in meaning"},
        )
        assert revoked.status_code == 201
        assert revoked.json()["template_id"] == example["template_id"]
        assert revoked.json()["actor"] == "root"
        unknown = root.post("/memory/revocations", json={"template": "ffffffffff"})
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "memory_not_found"

        lines = [json.loads(line) for line in root.get("/memory/export").text.splitlines()]
        assert [(row["type"], row["id"]) for row in lines] == [
            ("example", example["id"]),
            ("note", note.json()["id"]),
        ]
        assert root.get(f"/memory/examples/{example['id']}").json()["sql"] == example["sql"]
        assert root.delete(f"/memory/examples/{example['id']}").json() == {
            "removed": example["id"],
            "type": "example",
        }
        assert root.get(f"/memory/examples/{example['id']}").status_code == 404
        assert root.delete(f"/memory/notes/{note.json()['id']}").status_code == 200
        assert root.get("/memory/notes").json() == []
        assert root.post("/memory/notes", json={"text": "  "}).status_code == 422
        assert root.post("/memory/notes", json={"text": "a\x00b"}).status_code == 422
        assert root.get("/memory/examples", params={"template": "x\x00"}).status_code == 422
        assert (
            root.post("/memory/notes", json={"text": "x", "author": "mallory"}).status_code == 422
        )

    with served.client("rita") as rita:
        shown = rita.get(f"/approvals/{second['batch_id']}/memory").json()["items"][item["call_id"]]
    assert shown["similar"] == [] and shown["notes"] == []


def test_a_rejection_is_shown_with_its_reason(served: Running) -> None:
    _ask_and_decide(served, SHIPPED, {"action": "reject", "reason": "count by ship date"})
    _, second = _ask_and_decide(served, SHIPPED_AGAIN, None)
    (item,) = second["batch"]["items"]
    with served.client("root") as root:
        shown = root.get(f"/approvals/{second['batch_id']}/memory").json()["items"][item["call_id"]]
        (negative,) = root.get("/memory/examples", params={"kind": "negative"}).json()
    assert shown["similar"] == []  # a rejected pair is never offered as an example
    assert [(r["reason"], r["reviewers"]) for r in shown["template_rejections"]] == [
        ("count by ship date", ["rita"])
    ]
    assert negative["reason"] == "count by ship date"


@pytest.mark.slow
def test_the_reviewer_page_shows_the_memory_panel_with_links(
    browser: Any,  # noqa: F811 (the fixture imported above)
    served: Running,
) -> None:
    _, first = _ask_and_decide(served, SHIPPED, "approve")
    with served.client("root") as root:
        root.post("/memory/notes", json={"text": "Shipped means status 'shipped' only"})
    _ask_and_decide(served, SHIPPED_AGAIN, None)

    page = _page(browser, served, "/reviewer", "rita")
    panel = page.locator(".batch").get_by_test_id("memory")
    similar = panel.get_by_test_id("memory-similar")
    similar.wait_for()
    assert "1 similar question was approved before" in similar.inner_text()
    assert "approved 1 time(s)" in panel.get_by_test_id("memory-template").inner_text()
    assert (
        "Shipped means status 'shipped' only" in panel.get_by_test_id("memory-notes").inner_text()
    )
    similar.locator("summary").first.click()
    link = similar.get_by_test_id("memory-link")
    assert link.inner_text() == first["batch_id"]
    link.click()  # the batch it was approved in, with who decided, inline
    similar.get_by_test_id("decided-by").filter(has_text="decided by rita").wait_for()
    _shot(page, "server-reviewer-memory.png")


def test_a_superseded_approval_is_shown_but_never_offered_as_an_edit(served: Running) -> None:
    _ask_and_decide(served, SHIPPED, "approve")
    _, second = _ask_and_decide(served, SHIPPED_AGAIN, None)
    (item,) = second["batch"]["items"]
    url = f"/approvals/{second['batch_id']}/memory"
    with served.client("rita") as rita, served.client("root") as root:
        shown = rita.get(url).json()["items"][item["call_id"]]
        assert [s["offerable"] for s in shown["similar"]] == [True]
        assert [a["offerable"] for a in shown["template_approvals"]] == [True]
        root.post(
            "/memory/revocations", json={"template": shown["template_id"], "reason": "wrong"}
        ).raise_for_status()
        shown = rita.get(url).json()["items"][item["call_id"]]
    # the approval is still shown (what happened), but a revoked template offers no edit
    assert [s["offerable"] for s in shown["similar"]] == [False]
    assert [a["offerable"] for a in shown["template_approvals"]] == [False]
