"""The pages in Chromium: a notification's link opens its own batch, a right-to-left override in
a question cannot mirror who decided, and the analyst page has a skip link and a live region."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import ApprovalGate, ApprovalItem, SqlApprovalStore
from orchestrator.features.notify.messages import message
from tests.scripted_llm import scenarios as sc
from tests.server.conftest import Running
from tests.server.server_helpers import pending_batch, wait_until
from tests.server.test_server_browser import _page, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

RLO = "\u202e"


def test_a_notification_link_opens_its_own_batch(browser: Any, live: Running) -> None:  # noqa: F811
    with live.client("alice") as alice, live.client("rita") as rita:
        run_ids = [
            alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
            for _ in range(3)
        ]
        batch_ids = [pending_batch(rita, run_id)["batch_id"] for run_id in run_ids]
    wanted = batch_ids[2]  # not the oldest
    link = message(
        "batch_created", run_id=run_ids[2], batch_id=wanted, at="now", base_url=live.base_url
    )["link"]
    page = _page(browser, live, "/reviewer", "rita")  # signed in; then the link is followed
    page.goto(link)
    page.get_by_test_id("who").filter(has_text="rita").wait_for()
    wait_until(
        lambda: page.locator(".batch:visible").get_attribute("data-batch-id") == wanted,
        what="the linked batch",
    )
    # another link on the same page, by its hash alone
    page.evaluate(f"location.hash = 'batch={batch_ids[1]}'")
    wait_until(
        lambda: page.locator(".batch:visible").get_attribute("data-batch-id") == batch_ids[1],
        what="the second linked batch",
    )


def test_a_right_to_left_override_cannot_mirror_who_decided(
    browser: Any,  # noqa: F811
    live: Running,
) -> None:
    store = SqlApprovalStore(live.state_url)
    gate = ApprovalGate(None, _accepted, store=store, run_id="run_hostile")
    question = f"sales {RLO}yb dedicec — mallory"
    batch = gate.open([ApprovalItem.new(question_id="q", question=question, sql="SELECT 1 AS one")])
    gate.submit(batch.batch_id, {batch.pending_ids[0]: "approve"}, actor="rita")
    page = _page(browser, live, "/reviewer", "rita")
    item = page.get_by_test_id("history-item").filter(has_text="sales")
    item.wait_for()
    shown = item.get_by_test_id("history-question").inner_text()
    assert RLO not in shown and "\\u{202E}" in shown
    assert item.get_by_test_id("decided-by").inner_text() == "decided by rita"
    assert RLO not in page.get_by_test_id("history").inner_text()
    store.close()


def test_the_analyst_page_has_a_skip_link_and_a_live_region(
    browser: Any,  # noqa: F811
    live: Running,
) -> None:
    page = _page(browser, live, "/analyst", "alice")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.testid") == "skip-link"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    announcer = page.get_by_test_id("announcer")
    assert announcer.get_attribute("aria-live") == "polite"
    page.get_by_test_id("questions").fill(sc.PRODUCT_COUNT)
    page.get_by_test_id("ask").click()
    wait_until(
        lambda: "awaiting approval" in announcer.inner_text(), what="the run's status announced"
    )


class _Accepted:
    ok = True
    findings: list[object] = []
    refusal = None

    def __init__(self, sql: str) -> None:
        self.sql = sql


def _accepted(sql: str) -> _Accepted:
    return _Accepted(sql)


def test_the_inbox_shows_every_waiting_batch_and_the_true_count(
    browser: Any,  # noqa: F811
    live: Running,
) -> None:
    """205 waiting batches (more than one page of 200, more than the old cap of 100): the API
    says 205 in all, the page lists 205, reading them a page per request."""
    store = SqlApprovalStore(live.state_url)
    gate = ApprovalGate(None, _accepted, store=store, run_id="run_many")
    for n in range(205):
        gate.open([ApprovalItem.new(question_id=f"q{n}", question=f"q {n}", sql="SELECT 1 AS x")])
    with live.client("rita") as rita:
        page_of = rita.get("/approvals", params={"limit": 10})
        assert page_of.headers["X-Total-Count"] == "205" and len(page_of.json()) == 10
        records = rita.get("/approvals/records", params={"limit": 200, "offset": 200})
        assert records.headers["X-Total-Count"] == "205" and len(records.json()) == 5
    page = _page(browser, live, "/reviewer", "rita")
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.reload()
    page.get_by_test_id("who").filter(has_text="rita").wait_for()
    wait_until(
        lambda: page.get_by_test_id("pending-count").inner_text() == "205", what="205 waiting"
    )
    assert page.get_by_test_id("inbox-row").count() == 205
    per_batch = [u for u in requests if "/approvals/batch_" in u]
    assert len(per_batch) <= 1  # no request per batch: at most the shown one's memory panel
    store.close()
