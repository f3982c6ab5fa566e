"""The outbox outlives its processes and its receivers' outages: a receiver down for two hours
gets every event once it is back (a simulated clock; a real local receiver, gone and back on its
port), a claim whose server stopped is taken over once it expires, and a dead letter is listed,
sent again by ``sqlgate runs notifications --resend`` and shown on the reviewer page's banner."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.core.errors import ConfigurationError
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.notify import (
    NotificationSettings,
    NotificationStore,
    Notifier,
    RetryPolicy,
    WebhookChannel,
)
from orchestrator.interfaces.cli.main import app
from tests.notify.receivers import WebhookReceiver
from tests.notify.test_notify_delivery import SECRET, Clock, _requested

EVENTS = 6


@pytest.fixture
def state(tmp_path: Path) -> StateDatabase:
    db = StateDatabase(f"sqlite:///{tmp_path / 'state.sqlite'}")
    db.setup()
    return db


def _settled(store: NotificationStore, attempts: int, timeout: float = 10.0) -> None:
    """Wait until every row made at least ``attempts`` attempts (the first ones are made on
    the notifier's threads)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        rows = store.list()
        if len(rows) == EVENTS and all(r.attempts >= attempts for r in rows):
            return
        time.sleep(0.02)
    raise AssertionError(store.list())


def test_a_receiver_down_for_two_hours_gets_every_event_once_it_is_back(
    state: StateDatabase,
) -> None:
    receiver = WebhookReceiver()
    port, url = receiver.server.server_address[1], receiver.url
    receiver.close()  # down: nothing listens on its port
    clock = Clock()
    began = clock.now
    rng = random.Random(31)
    notifier = Notifier(
        state.notifications,
        [WebhookChannel(url, SECRET, timeout=2.0)],
        base_url="http://x",
        clock=clock,
        spread=rng.random,
        sweep_s=None,  # the test is the sweeper, minute by minute
    )
    back: WebhookReceiver | None = None
    try:
        for seq in range(1, EVENTS + 1):
            notifier.on_event(_requested(seq))
        _settled(state.notifications, 1)
        while clock.now - began < timedelta(hours=2):
            clock.advance(60)
            notifier.deliver_due()
        assert state.notifications.count(status="delivered") == 0
        assert state.notifications.count(status="failed") == 0  # still being retried
        back = WebhookReceiver(port=port)
        for _ in range(6 * 60):  # up to six more hours
            if state.notifications.count(status="delivered") == EVENTS:
                break
            clock.advance(60)
            notifier.deliver_due()
        received = back.wait_for(EVENTS)
    finally:
        notifier.close()
        if back is not None:
            back.close()
    rows = state.notifications.list()
    assert {r.status for r in rows} == {"delivered"}
    ids = [d.headers["x-sqlgate-delivery"] for d in received]
    assert sorted(ids) == sorted(r.delivery_id for r in rows)  # each once, by its id
    # Retried over hours, and not in lockstep: the jitter spread the attempts apart.
    assert all(r.attempts >= 7 for r in rows)
    assert clock.now - began < timedelta(hours=4)


def test_a_claim_of_a_server_that_stopped_is_taken_over_when_it_expires(
    state: StateDatabase,
) -> None:
    receiver = WebhookReceiver()
    channel = WebhookChannel(receiver.url, SECRET)
    clock = Clock()
    store = state.notifications
    # A server claimed the delivery and died before sending it.
    dead = store.claim(
        "audit:1",
        channel.label,
        "batch_created",
        "run_1",
        "batch_1",
        {"text": "t"},
        owner="gone:1:abc",
        claim_s=60,
        now=clock.now,
    )
    notifier = Notifier(store, [channel], base_url="http://x", clock=clock, sweep_s=None)
    try:
        assert notifier.deliver_due() == 0  # the claim still stands
        clock.advance(61)
        assert notifier.deliver_due() == 1
        [delivery] = receiver.wait_for(1)
        # The stopped server, back, cannot overwrite what the one that took over recorded.
        assert not store.attempted(dead or 0, "failed", "late", owner="gone:1:abc")
    finally:
        notifier.close()
        receiver.close()
    [row] = store.list()
    assert (row.status, row.attempts) == ("delivered", 1)
    assert delivery.headers["x-sqlgate-delivery"] == row.delivery_id == f"n{dead}"


def test_a_dead_letter_is_listed_resent_and_delivered(
    state: StateDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = WebhookReceiver(statuses=[503, 503])
    clock = Clock()
    notifier = Notifier(
        state.notifications,
        [WebhookChannel(receiver.url, SECRET)],
        base_url="http://x",
        retry=RetryPolicy(attempts=2, first=1),
        clock=clock,
        sweep_s=None,
    )
    monkeypatch.setenv("SQLGATE_STATE_URL", state.url)
    runner = CliRunner()
    try:
        notifier.on_event(_requested())
        end = time.monotonic() + 10
        while not state.notifications.list() or state.notifications.list()[0].attempts < 1:
            assert time.monotonic() < end
            time.sleep(0.02)
        clock.advance(5)
        notifier.deliver_due()
        [dead] = state.notifications.list(status="failed")

        listed = runner.invoke(app, ["runs", "notifications", "--failed", "--json"])
        assert listed.exit_code == 0, listed.output
        assert '"status": "failed"' in listed.output and dead.delivery_id in listed.output
        refused = runner.invoke(app, ["runs", "notifications", "--id", str(dead.id)])
        assert refused.exit_code == 2 and "--resend" in refused.output
        resent = runner.invoke(app, ["runs", "notifications", "--resend", "--id", str(dead.id)])
        assert resent.exit_code == 0, resent.output
        assert "1 dead letter(s) queued again" in " ".join(resent.output.split())

        clock.now = datetime.now(UTC)  # the command queued it due at its own time
        assert notifier.deliver_due() == 1
        received = receiver.wait_for(3)
        nothing = runner.invoke(app, ["runs", "notifications", "--resend"])
        assert "No dead letters" in nothing.output
    finally:
        notifier.close()
        receiver.close()
    [row] = state.notifications.list()
    assert row.status == "delivered" and len(received) == 3
    assert {d.headers["x-sqlgate-delivery"] for d in received} == {row.delivery_id}


def test_the_resend_help_teaches_what_it_does() -> None:
    shown = CliRunner().invoke(app, ["runs", "notifications", "--help"])
    text = " ".join(shown.output.split())
    assert shown.exit_code == 0
    for words in ("dead letter", "--resend", "SQLGATE_NOTIFY_RETRY", "delivery id"):
        assert words in text, words


def test_the_retry_schedule_is_configurable_and_jittered() -> None:
    policy = NotificationSettings.from_env(
        {"SQLGATE_NOTIFY_RETRY": "attempts=12, first=30s, cap=4h, jitter=0.1"}
    ).retry
    assert (policy.attempts, policy.first, policy.cap, policy.jitter) == (12, 30, 14400, 0.1)
    assert policy.wait(1, 0.0) == 27.0 and policy.wait(1, 1.0) == 33.0
    assert policy.wait(11) == 14400.0
    assert RetryPolicy().total_s() > 6 * 3600  # the default keeps trying for hours
    for bad in ("attempts=0", "first=soon", "colour=red", "jitter=1", "cap=1s,first=1m"):
        with pytest.raises(ConfigurationError, match="SQLGATE_NOTIFY_RETRY"):
            RetryPolicy.from_text(bad)


def test_an_outbox_of_the_first_version_is_migrated_and_its_stuck_rows_sent(
    tmp_path: Path,
) -> None:
    import sqlalchemy as sa

    from approvals.migrations import migrate
    from orchestrator.features.notify.outbox import _v1

    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = sa.create_engine(url)
    migrate(engine, "notifications", [_v1])
    moment = datetime(2026, 11, 1, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO sqlgate_notifications (origin, channel, event, run_id, status, "
                "attempts, created_at, updated_at, payload) VALUES ('audit:1', :channel, "
                "'batch_created', 'run_1', 'sending', 0, :at, :at, '{\"text\": \"t\"}')"
            ),
            {"channel": "email", "at": moment},
        )
    engine.dispose()
    state = StateDatabase(url)
    state.setup()
    clock = Clock()
    [stuck] = state.notifications.take_due("me", channels=["email"], now=clock.now)
    assert stuck.origin == "audit:1" and stuck.status == "sending"
    assert state.versions()["notifications"] == 2
