"""The pages in a real browser: Debian's chromium driven by Playwright, against a live server.

Skips when /usr/bin/chromium or the playwright package is absent (``apt-get install -y chromium``;
Playwright never downloads a browser here). Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.scripted_llm import scenarios as sc
from tests.server.conftest import Running
from tests.server.server_helpers import wait_for_run

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
EDITED = "SELECT c.name AS category, COUNT(*) AS products FROM categories AS c GROUP BY c.name"
TIMEOUT_MS = 30_000

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM if CHROMIUM.exists() else shutil.which("chromium")),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-quic",
                "--no-first-run",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


def _page(browser: Any, live: Running, path: str, actor: str) -> Any:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{live.base_url}{path}#token=tok-{actor}")
    page.get_by_test_id("who").filter(has_text=actor).wait_for()
    page.locator("#live.on").wait_for()
    return page


def _shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def test_an_analyst_asks_two_questions_a_reviewer_edits_one_and_approves_both(
    browser: Any, live: Running
) -> None:
    reviewer = _page(browser, live, "/reviewer", "rita")
    analyst = _page(browser, live, "/analyst", "alice")

    analyst.get_by_test_id("questions").fill(f"{sc.PRODUCT_COUNT}\n{sc.TOP_CATEGORIES}")
    analyst.get_by_test_id("ask").click()

    # the reviewer page shows ONE batch with both statements, live (no reload)
    batch = reviewer.locator(".batch")
    batch.get_by_test_id("item").nth(1).wait_for()
    assert batch.count() == 1 and batch.get_by_test_id("item").count() == 2
    first = batch.get_by_test_id("item").nth(0)
    assert sc.PRODUCT_COUNT in first.inner_text()
    first.get_by_test_id("edit").check()
    first.get_by_test_id("edit-sql").fill(EDITED)
    batch.get_by_test_id("submit").click()
    message = batch.get_by_test_id("message")
    message.filter(has_text="Decided").wait_for()
    assert "1 edited" in message.inner_text() and "1 approved" in message.inner_text()
    _shot(reviewer, "server-reviewer.png")

    # the analyst page shows both answers, the SQL that ran, the rows and a chart
    analyst.get_by_test_id("answer").nth(1).wait_for()
    run = analyst.get_by_test_id("run").first
    assert run.get_by_test_id("run-status").inner_text() == "finished"
    answers = run.get_by_test_id("answer").all_inner_texts()
    assert answers[0].startswith("Products per category") and answers[1].startswith(
        "The top 5 categories"
    )
    assert run.get_by_test_id("sql").first.inner_text().startswith(EDITED)
    assert run.get_by_test_id("table").count() == 2
    assert run.get_by_test_id("chart").count() >= 1
    assert _shot(analyst, "server-analyst.png").stat().st_size > 10_000


def test_two_reviewers_decide_one_batch_the_second_sees_the_conflict(
    browser: Any, live: Running
) -> None:
    with live.client("alice") as alice:
        run_id = alice.post(
            "/runs", json={"questions": [sc.PRODUCT_COUNT, sc.TOP_CATEGORIES]}
        ).json()["run_id"]
        wait_for_run(alice, run_id, ("awaiting_approval",))
    rita = _page(browser, live, "/reviewer", "rita")
    ravi = _page(browser, live, "/reviewer", "ravi")
    for page in (rita, ravi):
        page.locator(".batch").get_by_test_id("item").nth(1).wait_for()
    second = ravi.locator(".batch").get_by_test_id("item").nth(1)
    second.get_by_test_id("reject").check()
    second.get_by_test_id("reason").fill("revenue must exclude returns")

    click = "document.querySelector('[data-testid=submit]').click()"
    rita.evaluate(click)
    ravi.evaluate(click)  # at once: a 409 or the live event first, the same message either way

    rita.locator(".batch").get_by_test_id("message").filter(has_text="Decided").wait_for()
    lost = ravi.locator(".batch").get_by_test_id("message")
    lost.filter(has_text="decided this batch first").wait_for()
    assert "rita" in lost.inner_text()
    assert ravi.locator(".batch").get_by_test_id("submit").is_disabled()
    _shot(ravi, "server-reviewer-conflict.png")
    with live.client("alice") as alice:
        done = wait_for_run(alice, run_id, ("finished",))
    assert [r["status"] for r in done["results"]] == ["answered", "answered"]
