"""An earlier reviewer's edit, proposed from the memory panel: checked live, diffed, submitted."""

from __future__ import annotations

from typing import Any

import pytest

from tests.memory.conftest import state_url  # noqa: F401 (SQLite and PostgreSQL state)
from tests.memory.test_memory_pipeline import SHIPPED, SHIPPED_AGAIN
from tests.server.conftest import Running
from tests.server.test_server_browser import _page, _shot, browser  # noqa: F401 (fixture)
from tests.server.test_server_review_memory import _ask_and_decide, served  # noqa: F401

pytestmark = pytest.mark.slow

EARLIER_EDIT = (
    "SELECT COUNT(order_id) AS shipped FROM orders WHERE status = 'shipped' "
    "AND order_date >= '2025-01-01' AND order_date < '2026-01-01'"
)


def test_an_earlier_edit_is_proposed_checked_and_diffed(
    browser: Any,  # noqa: F811
    served: Running,  # noqa: F811
) -> None:
    _ask_and_decide(served, SHIPPED, {"action": "edit", "sql": EARLIER_EDIT})
    run_id, _ = _ask_and_decide(served, SHIPPED_AGAIN, None)

    page = _page(browser, served, "/reviewer", "rita")
    batch = page.locator(".batch:visible")
    similar = batch.get_by_test_id("memory-similar")
    similar.wait_for()
    similar.locator("summary").first.click()
    item = batch.get_by_test_id("item").first
    assert item.locator("input[type=radio]:checked").count() == 0  # nothing chosen for them
    similar.get_by_test_id("use-edit").first.click()
    assert item.get_by_test_id("edit").is_checked()
    assert "AS shipped FROM" in item.get_by_test_id("edit-sql").input_value()
    item.get_by_test_id("verdict").filter(has_text="Accepted").wait_for()
    diff = item.get_by_test_id("diff")
    assert diff.locator(".add").count() >= 1 and diff.locator(".del").count() >= 1
    assert "rows expected" in item.get_by_test_id("edit-risk").inner_text()  # the edit's own risk
    _shot(page, "server-reviewer-memory-edit.png")
    batch.get_by_test_id("submit").click()
    batch.get_by_test_id("message").filter(has_text="1 edited").wait_for()
    with served.client("rita") as rita:
        listed = rita.get("/approvals", params={"run_id": run_id, "status": "resolved"}).json()
        record = rita.get(f"/approvals/{listed[0]['batch_id']}").json()
    [resolution] = record["outcome"]["resolutions"].values()
    assert resolution["status"] == "edited" and "AS shipped FROM" in resolution["sql"]
