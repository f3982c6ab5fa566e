"""The pages in a real browser: Debian's chromium driven by Playwright, against a live server.

The reviewer's inbox (no decision pre-selected, edits checked live, history with who decided), the
analyst's results (who approved, what failed shows as failed), the walls (no framing by another
origin, sign-out) and a 420-px phone width without horizontal overflow.

Skips when /usr/bin/chromium or the playwright package is absent (``apt-get install -y chromium``;
Playwright never downloads a browser here). Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.pipeline import PipelineConfig
from orchestrator.interfaces.server import create_app
from tests.conftest import ROOT
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run

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


def _page(
    browser: Any, live: Running, path: str, actor: str, width: int = 1200, height: int = 900
) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height})
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


def _no_choice_made(batch: Any) -> bool:
    return batch.locator("input[type=radio]:checked").count() == 0


def test_an_analyst_asks_two_questions_a_reviewer_edits_one_and_approves_both(
    browser: Any, live: Running
) -> None:
    reviewer = _page(browser, live, "/reviewer", "rita")
    analyst = _page(browser, live, "/analyst", "alice")

    analyst.get_by_test_id("questions").fill(f"{sc.PRODUCT_COUNT}\n{sc.TOP_CATEGORIES}")
    analyst.get_by_test_id("ask").click()

    # the reviewer page shows ONE batch with both statements, live (no reload), nothing chosen
    batch = reviewer.locator(".batch")
    batch.get_by_test_id("item").nth(1).wait_for()
    assert batch.count() == 1 and batch.get_by_test_id("item").count() == 2
    assert reviewer.get_by_test_id("pending-count").inner_text() == "1"
    assert reviewer.title().startswith("(1) ")
    assert "asked by alice" in batch.get_by_test_id("asked").inner_text()
    assert "votes 0 of 1" in batch.get_by_test_id("quorum").inner_text()
    assert _no_choice_made(batch) and batch.get_by_test_id("submit").is_disabled()
    assert "2 statement(s) without a decision" in batch.get_by_test_id("hint").inner_text()
    first, second = batch.get_by_test_id("item").nth(0), batch.get_by_test_id("item").nth(1)
    assert sc.PRODUCT_COUNT in first.inner_text()
    assert "\n" in first.get_by_test_id("item-sql").inner_text()  # pretty-printed
    assert first.locator("pre.sql .kw").count() > 2  # highlighted
    first.get_by_test_id("edit").check()
    first.get_by_test_id("edit-sql").fill(EDITED)
    first.get_by_test_id("verdict").filter(has_text="Accepted").wait_for()
    diff = first.get_by_test_id("diff")
    assert diff.locator(".add").count() >= 1 and diff.locator(".del").count() >= 1
    second.get_by_test_id("approve").check()
    batch.get_by_test_id("submit").click()
    message = batch.get_by_test_id("message")
    message.filter(has_text="Decided").wait_for()
    assert "1 edited" in message.inner_text() and "1 approved" in message.inner_text()
    assert reviewer.get_by_test_id("pending-count").inner_text() == "0"
    _shot(reviewer, "server-reviewer.png")

    # the analyst page shows both answers, the SQL that ran and who let it run, rows and a chart
    analyst.get_by_test_id("answer").nth(1).wait_for()
    run = analyst.get_by_test_id("run").first
    assert run.get_by_test_id("run-status").inner_text() == "answered"
    answers = run.get_by_test_id("answer").all_inner_texts()
    assert answers[0].startswith("Products per category") and answers[1].startswith(
        "The top 5 categories"
    )
    assert run.get_by_test_id("sql").first.inner_text().startswith(EDITED)
    assert run.get_by_test_id("sql-by").all_inner_texts()[0].startswith("edited by rita")
    assert run.get_by_test_id("sql-by").all_inner_texts()[1].startswith("approved by rita")
    assert run.get_by_test_id("table").count() == 2
    assert run.get_by_test_id("chart").count() >= 1
    with analyst.expect_download() as download:
        run.get_by_test_id("csv").first.click()
    text = Path(download.value.path()).read_text()
    # text cells are quoted (a cell is never read as a formula), the header's too
    assert text.splitlines()[0] == '"category","products"' and len(text.splitlines()) > 2
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
    rita.locator(".batch").get_by_test_id("approve-all").click()
    ravi_batch = ravi.locator(".batch")
    ravi_batch.get_by_test_id("bulk-reason").fill("revenue must exclude returns")
    ravi_batch.get_by_test_id("reject-all").click()
    ravi_batch.get_by_test_id("item").nth(0).get_by_test_id("approve").check()
    for page in (rita, ravi):
        assert not page.locator(".batch").get_by_test_id("submit").is_disabled()

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


def test_an_unsafe_edit_is_refused_before_submit_and_the_history_shows_who_decided(
    browser: Any, live: Running
) -> None:
    with live.client("alice") as alice:
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
    reviewer = _page(browser, live, "/reviewer", "rita")
    batch = reviewer.locator(".batch")
    item = batch.get_by_test_id("item").first
    item.wait_for()
    assert _no_choice_made(batch)
    item.get_by_test_id("edit").check()
    item.get_by_test_id("edit-sql").fill("DELETE FROM products")
    item.get_by_test_id("verdict").filter(has_text="Refused").wait_for()
    assert batch.get_by_test_id("submit").is_disabled()
    assert "refused by the validator" in batch.get_by_test_id("hint").inner_text()
    _shot(reviewer, "server-reviewer-refused-edit.png")
    with live.client("rita") as rita:
        record = pending_batch(rita, run_id)
        assert record["status"] == "pending" and record["voters"] == []  # nothing was sent

    item.get_by_test_id("approve").check()
    batch.get_by_test_id("submit").click()
    batch.get_by_test_id("message").filter(has_text="Decided").wait_for()
    past = reviewer.locator(f"[data-testid=history-item][data-batch-id='{record['batch_id']}']")
    assert sc.PRODUCT_COUNT in past.get_by_test_id("history-question").inner_text()
    past.wait_for()
    assert past.get_by_test_id("decided-by").inner_text() == "decided by rita"
    past.locator("summary").click()
    trail = past.get_by_test_id("audit")
    trail.wait_for()
    rows = trail.locator("tbody tr").all_inner_texts()
    assert any("rita" in row and "resolved the batch" in row for row in rows), rows
    assert any("opened the batch" in row for row in rows), rows
    reviewer.get_by_test_id("history-filter").fill("nobody-like-this")
    assert past.is_hidden()
    reviewer.get_by_test_id("history-filter").fill("rita")
    assert past.is_visible()
    _shot(reviewer, "server-reviewer-history.png")


@pytest.fixture
def other_origin(live: Running) -> Iterator[str]:
    """A real page on another origin (another port) that frames the reviewer page."""
    framing = (
        "<html><body><h1>not sqlgate</h1>"
        f'<iframe src="{live.base_url}/reviewer#token=tok-rita" width="900" height="600"></iframe>'
        "</body></html>"
    ).encode()

    class Framing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(framing)))
            self.end_headers()
            self.wfile.write(framing)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Framing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def test_the_reviewer_page_refuses_to_render_inside_another_origins_frame(
    browser: Any, live: Running, other_origin: str
) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    with page.expect_response(lambda r: r.url.startswith(f"{live.base_url}/reviewer")) as got:
        page.goto(other_origin)
    assert "frame-ancestors 'none'" in got.value.headers["content-security-policy"]
    assert got.value.headers["x-frame-options"] == "DENY"
    page.wait_for_timeout(500)
    frame = page.frames[1]
    assert frame.locator("[data-testid=who]").count() == 0  # nothing of the page rendered
    assert page.evaluate("localStorage.getItem('sqlgate-token')") is None
    _shot(page, "server-reviewer-framed.png")
    context.close()


def test_a_rejected_question_is_not_green_and_signing_out_forgets_the_token(
    browser: Any, live: Running
) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        record = pending_batch(rita, run_id)
        rita.post(
            f"/approvals/{record['batch_id']}/decision",
            json={
                "decisions": {
                    cid: {"action": "reject", "reason": "not this table"}
                    for cid in record["pending_ids"]
                }
            },
        ).raise_for_status()
        wait_for_run(alice, run_id, ("finished",))
    analyst = _page(browser, live, "/analyst", "alice")
    status = analyst.get_by_test_id("run").first.get_by_test_id("run-status")
    status.filter(has_text="rejected").wait_for()
    colour = status.evaluate("el => getComputedStyle(el).color")
    assert colour == "rgb(179, 38, 30)", colour  # --bad, not --ok
    sql_by = analyst.get_by_test_id("sql-by").first.inner_text()
    assert sql_by.startswith("rejected by rita"), sql_by
    assert analyst.get_by_test_id("sql-label").first.inner_text() == "SQL (not run)"

    analyst.get_by_test_id("sign-out").click()
    analyst.get_by_test_id("signin-message").wait_for()
    assert analyst.evaluate("localStorage.getItem('sqlgate-token')") is None
    assert analyst.get_by_test_id("ask").is_disabled()
    assert analyst.get_by_test_id("run").count() == 0


def test_a_bad_token_says_so_plainly(browser: Any, live: Running) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{live.base_url}/analyst#token=not-a-token")
    notice = page.get_by_test_id("signin-message")
    notice.wait_for()
    assert "not accepted" in notice.inner_text() and "unknown token" in notice.inner_text()
    assert page.get_by_test_id("ask").is_disabled()
    context.close()


def test_both_pages_fit_a_420_px_screen(browser: Any, live: Running) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        done = alice.post("/runs", json={"questions": [sc.PRODUCT_COUNT, sc.TOP_CATEGORIES]})
        run_id = done.json()["run_id"]
        record = pending_batch(rita, run_id)
        rita.post(
            f"/approvals/{record['batch_id']}/decision",
            json={"decisions": {cid: "approve" for cid in record["pending_ids"]}},
        ).raise_for_status()
        wait_for_run(alice, run_id, ("finished",))
        alice.post("/runs", json={"question": sc.PRODUCT_COUNT})  # one left pending
    analyst = _page(browser, live, "/analyst", "alice", width=420, height=900)
    analyst.get_by_test_id("table").nth(1).wait_for()
    reviewer = _page(browser, live, "/reviewer", "rita", width=420, height=900)
    reviewer.locator(".batch").get_by_test_id("item").first.wait_for()
    reviewer.get_by_test_id("history-item").first.wait_for()
    for page, name in ((analyst, "analyst"), (reviewer, "reviewer")):
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, (name, overflow)
        _shot(page, f"server-{name}-420px.png")
    # chart text stays readable on the phone: drawn at its size, not scaled down
    smallest = analyst.evaluate(
        "Math.min(...[...document.querySelectorAll('svg.chart text')]"
        ".map((t) => parseFloat(getComputedStyle(t).fontSize)"
        " * t.getScreenCTM().a))"
    )
    assert smallest >= 10.5, smallest


@pytest.fixture
def quorum_of_two(
    demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer
) -> Iterator[Running]:
    config = make_config(
        demo_db,
        state_url,
        scripted_model,
        pipeline=PipelineConfig(approval_ttl_s=600, approval_quorum=2),
    )
    server, thread, base_url = start_server(create_app(config))
    try:
        yield Running(base_url, None, state_url)
    finally:
        stop_server(server, thread)


def test_the_inbox_shows_the_deadline_counting_down_and_the_votes_so_far(
    browser: Any, quorum_of_two: Running
) -> None:
    live = quorum_of_two
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        record = pending_batch(rita, run_id)
        rita.post(
            f"/approvals/{record['batch_id']}/decision",
            json={"decisions": {cid: "approve" for cid in record["pending_ids"]}},
        ).raise_for_status()
    ravi = _page(browser, live, "/reviewer", "ravi")
    batch = ravi.locator(".batch")
    batch.get_by_test_id("item").first.wait_for()
    assert batch.get_by_test_id("quorum").inner_text() == "votes 1 of 2 (rita)"
    deadline = batch.get_by_test_id("deadline")
    first = deadline.inner_text()
    assert first.startswith("expires in 9m") or first.startswith("expires in 10m"), first
    for _ in range(40):  # it counts down (a loaded machine may skip a tick: poll, up to 10 s)
        ravi.wait_for_timeout(250)
        if deadline.inner_text() != first:
            break
    assert deadline.inner_text() != first
    _shot(ravi, "server-reviewer-quorum.png")
    rita_page = _page(browser, live, "/reviewer", "rita")
    mine = rita_page.locator(".batch").get_by_test_id("message")
    mine.filter(has_text="You voted").wait_for()


def test_a_correction_cycle_shows_the_error_and_the_change(browser: Any, live: Running) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.SALES_BY_REGION}).json()["run_id"]
        # Both mistakes are refused by the validator before review (an ambiguous column, then a
        # misspelt one): the first batch the reviewer sees is the second correction.
        pending_batch(rita, run_id)
    reviewer = _page(browser, live, "/reviewer", "rita")
    correction = reviewer.locator(".batch").get_by_test_id("correction")
    correction.wait_for()
    assert "region_name" in correction.inner_text()
    diff = correction.get_by_test_id("correction-diff")
    assert diff.locator(".add").count() >= 1 and diff.locator(".del").count() >= 1
    _shot(reviewer, "server-reviewer-correction.png")
