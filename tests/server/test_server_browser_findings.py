"""Small findings, in Chromium and over HTTP: no caching, bounded paging, CSV cells a spreadsheet
would run as formulas, a #token= link that would replace a stored token."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripted_llm import scenarios as sc
from tests.server.conftest import Running
from tests.server.server_helpers import pending_batch, wait_for_run
from tests.server.test_server_browser import _page, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


def test_pages_and_data_are_never_cached(live: Running) -> None:
    with live.client("rita") as rita:
        for path in ("/reviewer", "/analyst", "/approvals", "/me", "/notifications"):
            response = rita.get(path)
            assert response.status_code == 200, path
            assert response.headers["cache-control"] == "no-store", path


def test_paging_past_any_bound_is_refused_not_a_server_error(live: Running) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        rows = alice.get("/runs/run_x/rows", params={"offset": 10**30})
        assert rows.status_code == 422
        for path in ("/runs", "/approvals"):
            huge = (alice if path == "/runs" else rita).get(path, params={"offset": 10**30})
            assert huge.status_code == 422, path
            big = (alice if path == "/runs" else rita).get(path, params={"limit": 10**9})
            assert big.status_code == 422, path


def test_csv_cells_that_would_be_formulas_are_neutralised(browser: Any, live: Running) -> None:  # noqa: F811
    page = _page(browser, live, "/analyst", "alice")
    text = page.evaluate(
        """() => sqlgate.csv(["name", "=cmd"], [
            ["=HYPERLINK(\\"http://x\\")", -5], ["+1+1", "-3.5"], ["@SUM(A1)", "-x"], ["plain", null],
            ["x;=1+1", " =1"], ["\\uff1d1+1", "'a"]])"""
    )
    assert text.split("\r\n")[:7] == [
        '"name","\'=cmd"',
        '"\'=HYPERLINK(""http://x"")",-5',
        '"\'+1+1","-3.5"',
        '"\'@SUM(A1)","\'-x"',
        '"plain",',
        '"\'x;=1+1","\' =1"',
        '"\'\uff1d1+1","\'\'a"',
    ]


def test_a_token_link_never_silently_replaces_a_stored_token(browser: Any, live: Running) -> None:  # noqa: F811
    signed_in = _page(browser, live, "/analyst", "alice")
    page = signed_in.context.new_page()  # the same browser profile opens a link with bob's token
    page.goto(f"{live.base_url}/analyst#token=tok-bob")
    notice = page.get_by_test_id("signin-message")
    notice.filter(has_text="different token").wait_for()
    page.get_by_test_id("who").filter(has_text="alice").wait_for()
    assert page.evaluate("localStorage.getItem('sqlgate-token')") == "tok-alice"
    page.get_by_test_id("use-link-token").click()
    page.get_by_test_id("who").filter(has_text="bob").wait_for()
    assert page.evaluate("localStorage.getItem('sqlgate-token')") == "tok-bob"


def test_ids_are_labels_not_quantities(browser: Any, live: Running) -> None:  # noqa: F811
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.ORDERS_2025}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {cid: "approve" for cid in batch["pending_ids"]}},
        ).raise_for_status()
        wait_for_run(alice, run_id, ("finished",))
    page = _page(browser, live, "/analyst", "alice")
    table = page.get_by_test_id("table").first
    table.wait_for()
    assert table.locator("th").first.inner_text() == "order_id"
    first_id = table.locator("tbody tr td").first.inner_text()
    assert first_id == "1403", first_id  # not "1,403"
    assert page.get_by_test_id("sql-label").first.inner_text() == "SQL that ran"
