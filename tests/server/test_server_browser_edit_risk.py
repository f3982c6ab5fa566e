"""On the reviewer page, an edit that raises the risk re-opens the batch for a second reviewer.

The policy makes ``customers.email`` sensitive (high) and a high statement needs two reviewers.
rita edits a low-risk count into e-mail addresses and submits: the page says the batch now needs
two reviewers, the run still waits, and the analyst's page and the run's JSON hold no address.
ravi then sees the edited SQL, its high risk and rita's vote, approves, and only then it runs.
SQLite and PostgreSQL state; skipped without Debian's chromium or Playwright.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.interfaces.server import create_app
from safety import Policy
from tests.memory.conftest import state_url  # noqa: F401 (SQLite and PostgreSQL state)
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run
from tests.server.test_server_browser import _page, _shot, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

POLICY = Policy.from_toml_text(
    '[risk]\nsensitive_columns = ["customers.email"]\nsensitive = "high"\n[risk.quorum]\nhigh = 2\n'
)
EMAILS = "SELECT customer_id, email FROM customers ORDER BY customer_id LIMIT 5"


@pytest.fixture
def guarded(
    demo_db: Path,
    state_url: str,  # noqa: F811
    scripted_model: ScriptedLLMServer,
) -> Iterator[Running]:
    app = create_app(make_config(demo_db, state_url, scripted_model, policy=POLICY))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, state_url)
    finally:
        stop_server(server, thread)


def test_an_edit_raising_the_risk_waits_for_a_second_reviewer_on_the_page(
    browser: Any,  # noqa: F811
    guarded: Running,
) -> None:
    with guarded.client("alice") as alice, guarded.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        before = pending_batch(rita, run_id)
    assert before["batch"]["quorum"] == 1

    page = _page(browser, guarded, "/reviewer", "rita")
    batch = page.locator(".batch:visible")
    assert "votes 0 of 1" in batch.get_by_test_id("quorum").inner_text()
    item = batch.get_by_test_id("item").first
    item.get_by_test_id("edit").check()
    item.get_by_test_id("edit-sql").fill(EMAILS)
    item.get_by_test_id("verdict").filter(has_text="Accepted").wait_for()
    batch.get_by_test_id("submit").click()
    message = batch.get_by_test_id("message")
    message.filter(has_text="now needs 2 reviewers").wait_for()
    assert "Nothing runs until then" in message.inner_text()
    _shot(page, "server-reviewer-edit-raises-risk.png")

    with guarded.client("alice") as alice:
        run = alice.get(f"/runs/{run_id}").json()
        assert run["status"] == "awaiting_approval" and "@" not in str(run)
        analyst = _page(browser, guarded, "/analyst", "alice")
        assert "@example.com" not in analyst.content()

        # ravi sees the text rita wrote, its own risk, and rita's vote
        second = _page(browser, guarded, "/reviewer", "ravi")
        card = second.locator(".batch:visible")
        assert "votes 1 of 2 (rita)" in card.get_by_test_id("quorum").inner_text()
        shown = card.get_by_test_id("item").first
        assert "email" in shown.get_by_test_id("item-sql").inner_text()
        assert "edited by rita" in shown.get_by_test_id("edited-by").inner_text()
        assert shown.get_by_test_id("risk-level").inner_text().lower() == "high risk"
        shown.get_by_test_id("approve").check()
        card.get_by_test_id("submit").click()
        card.get_by_test_id("message").filter(has_text="Decided").wait_for()
        done = wait_for_run(alice, run_id, ("finished",))
    [result] = done["results"]
    assert result["row_count"] == 5
    [approval] = result["approvals"]
    assert approval["status"] == "edited"
