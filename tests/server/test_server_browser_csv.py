"""The analyst page's CSV in Debian's chromium: "Download CSV" pages through ``GET /runs/{id}/rows``
and saves every kept row, not the 20-row preview; a result cut at the row cap says so in a banner
above the table, and its CSV holds exactly the kept rows; a refused request is a plain message.

The CSV is parsed with the csv module and compared with the same SQL run directly on the demo
database. Skips like tests/server/test_server_browser.py when chromium or playwright is absent.
Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_llm import scenarios as sc
from tests.server import test_server_browser as pages
from tests.server import test_server_rows as rows_tests
from tests.server.conftest import Running
from tests.server.server_helpers import pending_batch

browser = pages.browser  # the module's chromium, shared (a fixture)
live_high_cap = rows_tests.live_high_cap  # a server whose policy keeps 100,000 rows (a fixture)
_page, _shot = pages._page, pages._shot

pytestmark = pytest.mark.slow

ORDERS_SQL = sc.SCENARIOS[sc.ORDERS_2025].sql
HEADER = ["order_id", "order_date", "status"]


def _direct(db: Path) -> list[list[str]]:
    """The SQL's rows straight from sqlite, as the CSV writes them (null is an empty field)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(ORDERS_SQL).fetchall()
    return [["" if v is None else str(v) for v in row] for row in rows]


def _ask_and_approve(browser: Any, live: Running) -> tuple[Any, Any]:
    """The analyst asks on the page, a reviewer approves over HTTP; the answered run's card."""
    analyst = _page(browser, live, "/analyst", "alice")
    analyst.get_by_test_id("questions").fill(sc.ORDERS_2025)
    analyst.get_by_test_id("ask").click()
    run = analyst.get_by_test_id("run").first
    run.wait_for()
    run_id = run.get_attribute("data-run-id")
    with live.client("rita") as rita:
        record = pending_batch(rita, run_id)
        rita.post(
            f"/approvals/{record['batch_id']}/decision",
            json={"decisions": {cid: "approve" for cid in record["pending_ids"]}},
        ).raise_for_status()
    run.get_by_test_id("answer").wait_for()
    return analyst, run


def _download(analyst: Any, run: Any) -> tuple[str, list[list[str]]]:
    with analyst.expect_download() as download:
        run.get_by_test_id("csv").click()
    path = Path(download.value.path())
    with path.open(newline="", encoding="utf-8") as handle:
        parsed = list(csv.reader(handle))
    return download.value.suggested_filename, parsed


def test_the_csv_holds_the_full_result_not_the_preview(
    browser: Any, live_high_cap: Running, demo_db: Path
) -> None:
    expected = _direct(demo_db)
    assert len(expected) == 2598  # more than the preview, more than one page of /rows
    analyst, run = _ask_and_approve(browser, live_high_cap)

    assert run.get_by_test_id("table").locator("tbody tr").count() == 20  # only a preview shown
    assert run.get_by_test_id("truncated").count() == 0  # the whole result: no banner
    name, parsed = _download(analyst, run)

    assert name == f"{run.get_attribute('data-run-id')}-q1.csv"
    assert parsed[0] == HEADER
    assert parsed[1:] == expected
    assert run.get_by_test_id("csv-progress").inner_text() == "Downloaded 2,598 row(s)."
    _shot(analyst, "server-analyst-csv-full.png")


def test_a_cut_result_is_flagged_and_its_csv_holds_exactly_the_kept_rows(
    browser: Any, live: Running, demo_db: Path
) -> None:
    analyst, run = _ask_and_approve(browser, live)

    banner = run.get_by_test_id("truncated")
    assert banner.is_visible()
    assert "Showing 1,000 rows: the result was cut at the row cap; more rows exist" in (
        banner.inner_text()
    )
    # above the table, not one line among the warnings
    above = banner.evaluate(
        "(b) => !!(b.compareDocumentPosition(b.closest('.result-item')"
        ".querySelector('[data-testid=table]')) & Node.DOCUMENT_POSITION_FOLLOWING)"
    )
    assert above
    assert "row_cap_hit" in run.get_by_test_id("warnings").inner_text()
    _, parsed = _download(analyst, run)

    assert parsed[0] == HEADER
    assert parsed[1:] == _direct(demo_db)[:1000]
    progress = run.get_by_test_id("csv-progress")
    assert progress.inner_text().startswith("Downloaded 1,000 row(s) (the result was cut")
    _shot(analyst, "server-analyst-csv-truncated.png")

    # A token the server no longer accepts: a plain message, and no file.
    analyst.evaluate("localStorage.setItem('sqlgate-token', 'tok-revoked')")
    downloads: list[Any] = []
    analyst.on("download", lambda got: downloads.append(got))
    run.get_by_test_id("csv").click()
    progress.filter(has_text="CSV download failed").wait_for()
    assert "Nothing was saved" in progress.inner_text()
    assert downloads == []
    _shot(analyst, "server-analyst-csv-failed.png")
