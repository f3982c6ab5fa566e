"""The reviewer's inbox in Chromium: ten waiting batches cleared with the keyboard alone, risk on
screen, and axe-core finding no critical or serious violation on either page.

axe-core comes from tests/server/axe (``npm ci --prefix tests/server/axe``; the version is pinned
by its package-lock.json) and is injected into the page; without it the accessibility test skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.features.notify import NotificationSettings, RetryPolicy
from orchestrator.interfaces.server import create_app
from tests.notify.receivers import WebhookReceiver
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run, wait_until
from tests.server.test_server_browser import _page, _shot, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

EDITED = "SELECT c.name AS category, COUNT(*) AS products FROM categories AS c GROUP BY c.name"
AXE = Path(__file__).resolve().parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
BATCHES = 10


def _ask_many(live: Running, count: int) -> list[str]:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_ids = [
            alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
            for _ in range(count)
        ]
        for run_id in run_ids:
            pending_batch(rita, run_id, timeout=60)
    return run_ids


def _press(page: Any, *keys: str) -> None:
    for key in keys:
        page.keyboard.press(key)


def test_ten_batches_are_cleared_with_the_keyboard_only(browser: Any, live: Running) -> None:  # noqa: F811
    run_ids = _ask_many(live, BATCHES)
    reviewer = _page(browser, live, "/reviewer", "rita")
    rows = reviewer.get_by_test_id("inbox-row")
    wait_until(lambda: rows.count() == BATCHES, what="ten rows in the inbox")
    assert reviewer.get_by_test_id("pending-count").inner_text() == str(BATCHES)
    # a compact list (asker, age, deadline, statements, risk) beside ONE batch in detail
    first_row = rows.first.inner_text()
    assert "alice" in first_row and sc.PRODUCT_COUNT in first_row
    assert rows.first.get_by_test_id("row-risk").inner_text() in ("low", "medium", "high")
    assert reviewer.locator(".batch:visible").count() == 1
    shown = reviewer.locator(".batch:visible")
    risk = shown.get_by_test_id("risk")
    assert risk.get_by_test_id("risk-level").inner_text().lower().endswith(" risk")
    assert "estimate (sqlite)" in risk.get_by_test_id("risk-estimate").inner_text()
    assert "rows expected" in risk.get_by_test_id("risk-estimate").inner_text()
    _shot(reviewer, "server-reviewer-inbox.png")

    # the help overlay, by keyboard
    _press(reviewer, "?")
    assert reviewer.get_by_test_id("help").is_visible()
    _press(reviewer, "Escape")
    assert not reviewer.get_by_test_id("help").is_visible()

    expected = {}
    for n in range(BATCHES):
        card = reviewer.locator(".batch:visible")
        batch_id = card.get_attribute("data-batch-id")
        if n % 3 == 0:
            _press(reviewer, "a")
            expected[batch_id] = "approved"
        elif n % 3 == 1:
            _press(reviewer, "r")
            reviewer.keyboard.type("not needed today")
            _press(reviewer, "Escape")
            expected[batch_id] = "rejected"
        else:
            _press(reviewer, "e", "Control+a")
            reviewer.keyboard.type(EDITED)
            card.get_by_test_id("verdict").filter(has_text="Accepted").wait_for()
            _press(reviewer, "Escape")
            expected[batch_id] = "edited"
        card.get_by_test_id("hint").filter(has_text="Ready to submit").wait_for()
        _press(reviewer, "s")
        card.get_by_test_id("message").filter(has_text="Decided").wait_for()
        # the decided batch left the list at once
        wait_until(lambda n=n: rows.count() == BATCHES - n - 1, what="the row to leave")
        wait_until(  # said to screen readers too
            lambda: "Decided" in (reviewer.get_by_test_id("announcer").text_content() or ""),
            what="the announcement",
        )
        _press(reviewer, "j")

    assert reviewer.get_by_test_id("pending-count").inner_text() == "0"
    assert reviewer.get_by_test_id("no-batches").is_visible()
    # history rows name the question
    history = reviewer.get_by_test_id("history-question")
    wait_until(lambda: history.count() >= min(BATCHES, 10), what="the history")
    assert sc.PRODUCT_COUNT in history.first.inner_text()
    _shot(reviewer, "server-reviewer-inbox-cleared.png")

    with live.client("rita") as rita, live.client("alice") as alice:
        for batch_id, status in expected.items():
            record = rita.get(f"/approvals/{batch_id}").json()
            [resolution] = record["outcome"]["resolutions"].values()
            assert resolution["status"] == status, batch_id
        for run_id in run_ids:
            wait_for_run(alice, run_id, ("finished",), timeout=60)


def test_a_token_without_the_reviewer_role_is_told_so(browser: Any, live: Running) -> None:  # noqa: F811
    page = _page(browser, live, "/reviewer", "alice")
    notice = page.get_by_test_id("signin-message")
    notice.wait_for()
    assert "may not review" in notice.inner_text()
    assert page.get_by_test_id("pending-count").inner_text() != "0"


def _axe_page(browser: Any, live: Running, path: str, actor: str) -> Any:  # noqa: F811
    """A page whose Content-Security-Policy lets the test inject axe-core (the page's own CSP
    stays in force for the app's scripts in every other test)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{live.base_url}{path}#token=tok-{actor}")
    page.get_by_test_id("who").filter(has_text=actor).wait_for()
    page.locator("#live.on").wait_for()
    return page


def _serious(page: Any) -> list[dict[str, Any]]:
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:3]}
        for v in violations
        if v["impact"] in ("critical", "serious")
    ]


def test_axe_finds_no_critical_or_serious_violation(browser: Any, live: Running) -> None:  # noqa: F811
    if not AXE.exists():
        pytest.skip("axe-core is not installed: npm ci --prefix tests/server/axe")
    [run_id] = _ask_many(live, 1)
    reviewer = _axe_page(browser, live, "/reviewer", "rita")
    reviewer.locator(".batch:visible").get_by_test_id("risk").wait_for()
    reviewer.locator(".batch:visible").get_by_test_id("edit").check()  # the edit box open too
    assert _serious(reviewer) == []
    reviewer.locator(".batch:visible").get_by_test_id("approve").check()
    reviewer.locator(".batch:visible").get_by_test_id("submit").click()
    analyst = _axe_page(browser, live, "/analyst", "alice")
    with live.client("alice") as alice:
        wait_for_run(alice, run_id, ("finished",), timeout=60)
    analyst.get_by_test_id("answer").first.wait_for()
    assert _serious(analyst) == []


def test_the_inbox_sorts_and_filters(browser: Any, live: Running) -> None:  # noqa: F811
    with live.client("alice") as alice, live.client("rita") as rita:
        for question in (sc.TOP_CATEGORIES, sc.PRODUCT_COUNT):
            run_id = alice.post("/runs", json={"question": question}).json()["run_id"]
            pending_batch(rita, run_id)
    reviewer = _page(browser, live, "/reviewer", "rita")
    rows = reviewer.get_by_test_id("inbox-row")
    wait_until(lambda: rows.count() == 2, what="two rows")
    assert sc.TOP_CATEGORIES in rows.first.inner_text()  # oldest first
    # the oldest is shown, with the model's assumptions beside its statement
    assumed = reviewer.locator(".batch:visible").get_by_test_id("assumptions")
    assumed.wait_for()
    assert "Revenue is quantity" in assumed.inner_text()
    question = reviewer.locator(".inbox-list th").first
    question.locator("button").click()
    assert question.get_attribute("aria-sort") == "ascending"
    assert sc.PRODUCT_COUNT in rows.first.inner_text()  # "How many ..." before "What are ..."
    question.locator("button").click()
    assert question.get_attribute("aria-sort") == "descending"
    assert sc.TOP_CATEGORIES in rows.first.inner_text()
    reviewer.get_by_test_id("inbox-filter").fill("products are in each")
    wait_until(lambda: rows.count() == 1, what="the filter")
    assert sc.PRODUCT_COUNT in rows.first.inner_text()
    rows.first.locator("button").click()  # a row opens its batch in the detail pane
    assert (
        sc.PRODUCT_COUNT
        in reviewer.locator(".batch:visible").get_by_test_id("item").first.inner_text()
    )


@pytest.fixture
def unreachable_hook(
    demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer
) -> Iterator[Running]:
    """A server whose webhook receiver answers 500 to everything."""
    receiver = WebhookReceiver(statuses=[500] * 50)
    settings = NotificationSettings(
        webhooks=(receiver.url,), secret="s", retry=RetryPolicy(attempts=2, first=0.01)
    )
    app = create_app(make_config(demo_db, state_url, scripted_model, notifications=settings))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, state_url)
    finally:
        stop_server(server, thread)
        receiver.close()


def test_the_page_says_when_nobody_could_be_notified(
    browser: Any,  # noqa: F811
    unreachable_hook: Running,
) -> None:
    _ask_many(unreachable_hook, 1)
    with unreachable_hook.client("rita") as rita:
        wait_until(
            lambda: rita.get("/notifications", params={"status": "failed"}).json()["failed"],
            what="a failed delivery",
        )
    reviewer = _page(browser, unreachable_hook, "/reviewer", "rita")
    banner = reviewer.get_by_test_id("notify-failures")
    banner.wait_for()
    text = banner.inner_text()
    assert "1 notification(s) could not be delivered after every retry" in text
    assert "batch_created" in text and "the receiver answered 500" in text
