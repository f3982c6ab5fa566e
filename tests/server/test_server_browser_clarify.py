"""The analyst page in Debian's chromium: an ambiguous question answered on the page through to an
answer, the chart the result's shape gets (bars, a line, none with the reason), the history search.

Skips like tests/server/test_server_browser.py when chromium or playwright is absent. Screenshots
go to test-artifacts/.
"""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.features.demo import AMBIGUOUS
from tests.scripted_llm import scenarios as sc
from tests.server import test_server_browser as pages
from tests.server.conftest import Running
from tests.server.server_helpers import pending_batch, wait_for_run

browser = pages.browser  # the module's chromium, shared (a fixture)
_page, _shot = pages._page, pages._shot

pytestmark = pytest.mark.slow


def _approve_all(live: Running, run_id: str) -> None:
    with live.client("rita") as rita:
        record = pending_batch(rita, run_id)
        rita.post(
            f"/approvals/{record['batch_id']}/decision",
            json={"decisions": {cid: "approve" for cid in record["pending_ids"]}},
        ).raise_for_status()


def test_an_ambiguous_question_is_answered_on_the_page_through_to_an_answer(
    browser: Any, live: Running
) -> None:
    analyst = _page(browser, live, "/analyst", "alice")
    analyst.get_by_test_id("questions").fill(AMBIGUOUS)
    analyst.get_by_test_id("ask").click()

    form = analyst.get_by_test_id("clarify")
    form.wait_for()
    asked = analyst.get_by_test_id("run").first
    assert asked.get_by_test_id("run-status").inner_text() == "needs clarification"
    text = form.inner_text()
    assert "metric Best by which measure: revenue, units sold, or margin?" in text
    assert "entity The best what: products, customers, employees or regions?" in text
    parent_id = asked.get_attribute("data-run-id")

    # Nothing typed: the page says so and asks nothing.
    form.get_by_test_id("clarify-submit").click()
    form.get_by_test_id("clarify-message").filter(has_text="Answer at least one").wait_for()
    answers = form.get_by_test_id("clarify-answer")
    answers.nth(0).fill(sc.AMBIGUOUS_ANSWERS["metric"])
    answers.nth(1).fill(sc.AMBIGUOUS_ANSWERS["entity"])
    _shot(analyst, "server-analyst-clarify.png")
    form.get_by_test_id("clarify-submit").click()

    # The follow-up run appears on top, linked to the run that asked; that run links to it.
    follow = analyst.get_by_test_id("run").first
    follow.get_by_test_id("follow-up-of").filter(has_text=parent_id).wait_for()
    follow_id = follow.get_attribute("data-run-id")
    assert follow_id != parent_id
    assert analyst.get_by_test_id("clarified").inner_text().endswith(follow_id)
    assert (
        "Show me the best ones.\n\nThe analyst's answers"
        in follow.locator(".questions li").inner_text()
    )

    _approve_all(live, follow_id)
    follow.get_by_test_id("answer").wait_for()
    assert follow.get_by_test_id("run-status").inner_text() == "answered"
    assert follow.get_by_test_id("answer").inner_text() == (
        "The best product by revenue is Alpine Ergonomic Chair."
    )
    assert follow.get_by_test_id("chart").get_attribute("data-kind") == "bar"
    assert follow.get_by_test_id("table").locator("tbody tr").count() == 5
    assert "64,661.9" in follow.get_by_test_id("table").inner_text()  # formatted numbers
    _shot(analyst, "server-analyst-follow-up.png")

    # After a reload the link is still there, both ways (kept by the server, not the page).
    analyst.reload()
    analyst.get_by_test_id("clarified").wait_for()
    analyst.get_by_test_id("clarified").locator("a").click()
    assert analyst.locator(f"[data-run-id='{follow_id}'] [data-testid=follow-up-of]").is_visible()


def test_each_result_gets_the_chart_its_shape_deserves(browser: Any, live: Running) -> None:
    with live.client("alice") as alice:
        questions = [sc.MONTHLY_ORDERS, sc.PRODUCT_COUNT, sc.MONTH_QUESTIONS[0]]
        run_id = alice.post("/runs", json={"questions": questions}).json()["run_id"]
        _approve_all(live, run_id)
        wait_for_run(alice, run_id, ("finished",))
    analyst = _page(browser, live, "/analyst", "alice")
    run = analyst.get_by_test_id("run").first
    run.get_by_test_id("table").nth(2).wait_for()

    items = run.get_by_test_id("result")
    line = items.nth(0).get_by_test_id("chart")
    assert line.get_attribute("data-kind") == "line"
    assert line.locator("circle").count() == 12
    assert "orders over month: a time series" in line.text_content()
    assert items.nth(1).get_by_test_id("chart").get_attribute("data-kind") == "bar"
    assert items.nth(1).get_by_test_id("chart").locator("rect").count() == 8
    assert items.nth(2).get_by_test_id("chart").count() == 0
    assert items.nth(2).get_by_test_id("chart-none").inner_text() == (
        "no chart: fewer than two rows"
    )
    _shot(analyst, "server-analyst-charts.png")


def test_the_history_is_searchable_a_page_at_a_time(browser: Any, live: Running) -> None:
    with live.client("alice") as alice:
        months = [
            alice.post("/runs", json={"question": q}).json()["run_id"] for q in sc.MONTH_QUESTIONS
        ]
        other = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
    with live.client("bob") as bob:
        bob.post("/runs", json={"question": sc.MONTH_QUESTIONS[0]})
    analyst = _page(browser, live, "/analyst", "alice")
    analyst.locator(f"[data-run-id='{other}']").wait_for()

    analyst.get_by_test_id("search").fill("orders were PLACED")
    analyst.get_by_test_id("search-button").click()
    analyst.get_by_test_id("search-message").filter(has_text="match").wait_for()
    shown = analyst.get_by_test_id("run")
    assert shown.count() == 10  # a page: the 12 month questions, newest first
    assert analyst.locator(f"[data-run-id='{other}']").count() == 0
    assert shown.first.get_attribute("data-run-id") == months[-1]
    assert analyst.get_by_test_id("search-message").inner_text().startswith("10+ run(s) match")
    analyst.get_by_test_id("older").click()
    analyst.locator(f"[data-run-id='{months[0]}']").wait_for()
    assert shown.count() == 12 and analyst.get_by_test_id("older").is_hidden()
    _shot(analyst, "server-analyst-search.png")

    analyst.get_by_test_id("search").fill("no such question anywhere")
    analyst.get_by_test_id("search-button").click()
    analyst.get_by_test_id("search-message").filter(has_text="No run matches").wait_for()
    assert shown.count() == 0
    analyst.get_by_test_id("search").fill("")
    analyst.get_by_test_id("search-button").click()
    analyst.locator(f"[data-run-id='{other}']").wait_for()


def test_the_clarification_form_and_the_search_fit_a_420_px_screen(
    browser: Any, live: Running
) -> None:
    with live.client("alice") as alice:
        run_id = alice.post("/runs", json={"question": AMBIGUOUS}).json()["run_id"]
        wait_for_run(alice, run_id, ("finished",))
    analyst = _page(browser, live, "/analyst", "alice", width=420, height=900)
    analyst.get_by_test_id("clarify-answer").nth(1).wait_for()
    overflow = analyst.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, overflow
    assert analyst.get_by_test_id("search").is_visible()
    _shot(analyst, "server-analyst-clarify-420px.png")
