"""A reviewer signs in on the reviewer page through the local OpenID provider (authorization
code + PKCE, real HTTP, Debian's chromium driven by Playwright) and decides a batch; the audit
log names them by the provider's subject and issuer. Skips like ``tests/server/test_server_browser.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import orchestrator.core.llm
from orchestrator.core.database import TargetDatabase
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.result import RunStatus
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.auth import OidcSettings
from orchestrator.interfaces.server import ServerConfig, TokenRegistry, create_app
from orchestrator.interfaces.server.identity import IdentityProvider
from ratelimit import SlidingWindowLimiter
from tests.auth.oidc_provider import LocalOidcProvider, User
from tests.server.conftest import start_server, stop_server
from tests.server.test_server_browser import CHROMIUM, TIMEOUT_MS, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

SQL = "SELECT COUNT(*) AS products FROM products"


@pytest.fixture
def idp() -> Iterator[LocalOidcProvider]:
    with LocalOidcProvider(audience="sqlgate") as provider:
        provider.users["rita"] = User("u-rita", "rita@example.com", ["sqlgate-reviewers"])
        provider.users["mallory"] = User("u-mallory", "mallory@example.com", [])
        yield provider


@pytest.fixture
def live(
    idp: LocalOidcProvider, demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, str]]:
    # a model client is built; nothing here asks it anything (its URL is the discard port)
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    state_url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    settings = OidcSettings.model_validate(
        {
            "issuer": idp.issuer,
            "audience": "sqlgate",
            "web": {"client_id": "sqlgate-web"},
            "roles": [{"claim": "groups", "value": "sqlgate-reviewers", "role": "reviewer"}],
        }
    )
    llm = LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1", max_attempts=1)
    config = ServerConfig(
        database_url=f"sqlite:///{demo_db}",
        state_url=state_url,
        tokens=TokenRegistry({}),
        identity=IdentityProvider(settings),
        llm=llm,
        limiter=SlidingWindowLimiter(limit=100, window=60.0),
        poll_interval=0.05,
    )
    server, thread, base = start_server(create_app(config))
    try:
        yield base, state_url
    finally:
        stop_server(server, thread)


def _waiting_batch(demo_db: Path, state_url: str) -> str:
    """A run of the caller's own SQL, paused at the gate (no model request)."""
    state = StateDatabase(state_url)
    pipeline = Pipeline(
        TargetDatabase(f"sqlite:///{demo_db}"),
        LLMClient(
            LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1"),
            limiter=SlidingWindowLimiter(limit=100, window=60.0),
        ),
        None,
        approval_store=state.approvals,
        run_store=state.runs,
    )
    [paused] = pipeline.run_batch(["how many products"], statements=[SQL])
    pipeline.db.dispose()
    assert paused.status == RunStatus.AWAITING_APPROVAL
    [record] = state.approvals.pending_batches(run_id=paused.run_id)
    return record.batch_id


def test_a_reviewer_signs_in_at_the_provider_and_decides_a_batch(
    browser: Any,  # noqa: F811 (the fixture)
    live: tuple[str, str],
    idp: LocalOidcProvider,
    demo_db: Path,
) -> None:
    base, state_url = live
    batch_id = _waiting_batch(demo_db, state_url)
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{base}/reviewer")
    page.get_by_test_id("organisation-sign-in").click()
    page.get_by_role("button", name="Sign in as rita").click()  # the provider's own page
    page.get_by_test_id("who").filter(has_text="sub u-rita").wait_for()
    assert page.url == f"{base}/reviewer"
    cookies = {c["name"]: c for c in context.cookies()}
    assert cookies["sqlgate_session"]["httpOnly"]  # the page's script never sees it

    batch = page.locator(".batch")
    batch.get_by_test_id("item").first.wait_for()
    assert "runs as no login (a database file)" in batch.get_by_test_id("asked").inner_text()
    batch.get_by_test_id("item").first.get_by_test_id("approve").check()
    batch.get_by_test_id("submit").click()
    batch.get_by_test_id("message").filter(has_text="Decided").wait_for()

    state = StateDatabase(state_url)
    decided = state.approvals.get_batch(batch_id)
    assert decided.outcome is not None
    assert decided.outcome.decided_by == f"rita (sub u-rita at {idp.issuer})"
    assert any(
        "sub u-rita" in event.actor for event in state.approvals.audit_log(batch_id=batch_id)
    )
    # the session cookie cannot act from another origin, and ends at sign-out
    session = cookies["sqlgate_session"]["value"]
    forged = httpx.post(
        f"{base}/approvals/{batch_id}/decision",
        json={"decisions": {}},
        cookies={"sqlgate_session": session},
        headers={"Origin": "http://evil.example"},
    )
    assert forged.status_code == 401
    page.get_by_test_id("sign-out").click()
    page.get_by_test_id("organisation-sign-in").wait_for()
    after = httpx.get(f"{base}/me", cookies={"sqlgate_session": session})
    assert after.status_code == 401
    context.close()


def test_a_person_whose_groups_give_no_role_is_not_signed_in(
    browser: Any,  # noqa: F811 (the fixture)
    live: tuple[str, str],
) -> None:
    base, _ = live
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{base}/reviewer")
    page.get_by_test_id("organisation-sign-in").click()
    page.get_by_role("button", name="Sign in as mallory").click()
    assert "no sqlgate role" in page.content()
    assert "sqlgate_session" not in {c["name"] for c in context.cookies()}
    context.close()
