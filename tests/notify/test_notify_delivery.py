"""Notifications reach a real local receiver, signed, retried after a 500, recorded in the outbox."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.core.errors import ConfigurationError
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.notify import (
    NotificationSettings,
    NotificationStore,
    Notifier,
    RetryPolicy,
    WebhookChannel,
    verify,
)
from orchestrator.features.notify.channels import EmailChannel
from tests.notify.receivers import SilentReceiver, SmtpReceiver, WebhookReceiver

SECRET = "whsec-test-only"


@dataclass
class Event:
    """A server event as the hub hands it to listeners."""

    type: str
    run_id: str
    batch_id: str | None
    seq: int
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        return f"audit:{self.seq}"


def _requested(seq: int = 1) -> Event:
    return Event(
        "approval_requested",
        "run_1",
        "batch_1",
        seq,
        {
            "items": [
                {"call_id": "c1", "category": "needs_approval", "sql": "SELECT secret_col FROM t"},
                {"call_id": "c2", "category": "needs_approval"},
                {"call_id": "c3", "category": "auto_approved"},
            ],
            "at": "2026-11-24T12:00:00+00:00",
        },
    )


@pytest.fixture
def store(tmp_path) -> NotificationStore:
    state = StateDatabase(f"sqlite:///{tmp_path / 'state.sqlite'}")
    state.setup()
    return state.notifications


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    yield r
    r.close()


def _wait_status(store: NotificationStore, status: str, timeout: float = 10.0) -> list[Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = store.list(status=status)
        if found:
            return found
        time.sleep(0.02)
    return store.list(status=status)


def test_a_delivery_is_signed_over_timestamp_and_body(store, receiver) -> None:
    notifier = Notifier(
        store,
        [WebhookChannel(receiver.url, SECRET)],
        base_url="https://sqlgate.example",
        batch_risk=lambda batch_id: "high",
    )
    try:
        notifier.on_event(_requested())
        [delivery] = receiver.wait_for(1)
    finally:
        notifier.close()
    headers = delivery.headers
    assert verify(
        SECRET,
        headers["x-sqlgate-timestamp"],
        delivery.body,
        headers["x-sqlgate-signature"],
        now=time.time(),
    )
    assert not verify(
        "another-secret",
        headers["x-sqlgate-timestamp"],
        delivery.body,
        headers["x-sqlgate-signature"],
        now=time.time(),
    )
    assert not verify(
        SECRET,
        headers["x-sqlgate-timestamp"],
        delivery.body + b" ",
        headers["x-sqlgate-signature"],
        now=time.time(),
    )
    assert headers["x-sqlgate-event"] == "batch_created"
    body = json.loads(delivery.body)
    assert body["text"] == (
        "2 statements wait for approval (risk: high): https://sqlgate.example/reviewer#batch=batch_1"
    )
    assert body["link"].endswith("#batch=batch_1") and body["statements"] == 2
    assert "SELECT" not in delivery.body.decode()  # never SQL, never rows
    [row] = _wait_status(store, "delivered")
    assert (row.attempts, row.event, row.batch_id) == (1, "batch_created", "batch_1")
    assert receiver.url not in row.channel  # the label keeps the host, not the path


class Clock:
    """The notifier's time, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _wait_attempts(store: NotificationStore, attempts: int, timeout: float = 10.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        rows = store.list()
        if rows and rows[0].attempts >= attempts and rows[0].next_attempt_at is not None:
            return rows[0]
        time.sleep(0.02)
    raise AssertionError(f"no attempt {attempts}: {store.list()}")


def test_a_500_is_retried_on_the_schedule_then_delivered(store) -> None:
    receiver = WebhookReceiver(statuses=[500, 502])
    clock = Clock()
    notifier = Notifier(
        store,
        [WebhookChannel(receiver.url, SECRET)],
        base_url="http://x",
        retry=RetryPolicy(attempts=4, first=0.25, factor=2),
        clock=clock,
        spread=lambda: 0.5,
        sweep_s=None,
    )
    try:
        notifier.on_event(_requested())
        first = _wait_attempts(store, 1)
        assert first.next_attempt_at == clock.now + timedelta(seconds=0.25)
        assert notifier.deliver_due() == 0  # not due yet
        clock.advance(0.25)
        assert notifier.deliver_due() == 1
        second = store.list()[0]
        assert second.next_attempt_at == clock.now + timedelta(seconds=0.5)
        clock.advance(0.5)
        assert notifier.deliver_due() == 1
        deliveries = receiver.wait_for(3)
        [row] = _wait_status(store, "delivered")
    finally:
        notifier.close()
        receiver.close()
    assert len(deliveries) == 3
    # each attempt signed afresh, the same body and delivery id every time
    assert len({d.body for d in deliveries}) == 1
    assert {d.headers["x-sqlgate-delivery"] for d in deliveries} == {row.delivery_id}
    assert row.attempts == 3 and row.last_error is None and row.next_attempt_at is None


def test_a_receiver_that_keeps_failing_ends_a_dead_letter(store) -> None:
    receiver = WebhookReceiver(statuses=[500] * 10)
    clock = Clock()
    notifier = Notifier(
        store,
        [WebhookChannel(receiver.url, SECRET)],
        base_url="http://x",
        retry=RetryPolicy(attempts=3, first=0.01),
        clock=clock,
        sweep_s=None,
    )
    try:
        notifier.on_event(_requested())
        _wait_attempts(store, 1)
        for _ in range(5):
            clock.advance(60)
            notifier.deliver_due()
        [row] = _wait_status(store, "failed")
    finally:
        notifier.close()
        receiver.close()
    assert row.attempts == 3 and row.last_error == "the receiver answered 500"
    assert len(receiver.received) == 3


def test_a_4xx_is_not_retried(store) -> None:
    receiver = WebhookReceiver(statuses=[410])
    notifier = Notifier(
        store, [WebhookChannel(receiver.url, SECRET)], base_url="http://x", sweep_s=None
    )
    try:
        notifier.on_event(_requested())
        [row] = _wait_status(store, "failed")
    finally:
        notifier.close()
        receiver.close()
    assert row.attempts == 1 and len(receiver.received) == 1


def test_a_hanging_receiver_never_blocks_the_listener(store) -> None:
    silent = SilentReceiver()
    notifier = Notifier(
        store,
        [WebhookChannel(silent.url, SECRET, timeout=5.0)],
        base_url="http://x",
        sweep_s=None,
    )
    try:
        started = time.monotonic()
        for seq in range(1, 51):
            notifier.on_event(_requested(seq))
        assert time.monotonic() - started < 0.5  # queued, not sent, on the caller's thread
    finally:
        notifier.close(timeout=0.1)
        silent.close()


def test_two_notifiers_on_one_outbox_send_each_event_once(store, receiver) -> None:
    first = Notifier(store, [WebhookChannel(receiver.url, SECRET)], base_url="http://x")
    second = Notifier(store, [WebhookChannel(receiver.url, SECRET)], base_url="http://x")
    try:
        for seq in range(1, 6):
            first.on_event(_requested(seq))
            second.on_event(_requested(seq))
        receiver.wait_for(5)
        time.sleep(0.3)  # give a duplicate time to arrive, if one were sent
    finally:
        first.close()
        second.close()
    assert len(receiver.received) == 5


def test_email_goes_through_a_local_smtp_server(store) -> None:
    smtp = SmtpReceiver()
    notifier = Notifier(
        store,
        [EmailChannel("127.0.0.1", smtp.port, "sqlgate@example.org", ["rita@example.org"])],
        base_url="https://sqlgate.example",
    )
    try:
        notifier.on_event(_requested())
        [mail] = smtp.wait_for(1)
        [row] = _wait_status(store, "delivered")
    finally:
        notifier.close()
        smtp.close()
    assert mail["to"] == ["<rita@example.org>"]
    # A date, and an id the same on every attempt of this delivery (a repeat is dropped).
    assert re.search(
        r"^Date: \w{3}, \d{2} \w{3} \d{4} [\d:]{8} (GMT|[+-]\d{4})\r?$", mail["data"], re.M
    )
    assert re.search(
        rf"^Message-ID: <sqlgate\.{row.delivery_id}\.[0-9a-f]{{8}}@example\.org>\r?$",
        mail["data"],
        re.M,
    )
    assert "Subject: [sqlgate] batch created" in mail["data"]
    assert "https://sqlgate.example/reviewer#batch=batch_1" in mail["data"]
    assert row.channel == "email"


def test_settings_refuse_unsigned_webhooks_and_hide_the_secret(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="SQLGATE_WEBHOOK_SECRET"):
        NotificationSettings.from_env({"SQLGATE_WEBHOOK_URLS": "https://hooks.example/a"})
    with pytest.raises(ConfigurationError, match="http"):
        NotificationSettings.from_env(
            {"SQLGATE_WEBHOOK_URLS": "file:///etc/passwd", "SQLGATE_WEBHOOK_SECRET": "x"}
        )
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-a-file\n")
    settings = NotificationSettings.from_env(
        {
            "SQLGATE_WEBHOOK_URLS": "https://hooks.example/T0/secret-path, https://other.example/b",
            "SQLGATE_WEBHOOK_SECRET_FILE": str(secret_file),
        }
    )
    assert settings.secret == "from-a-file" and len(settings.webhooks) == 2
    shown = repr(settings) + repr(settings.channels())
    assert "from-a-file" not in shown and "secret-path" not in shown
    assert not NotificationSettings.from_env({}).enabled


def test_every_event_becomes_its_notification(store, receiver) -> None:
    events = [
        Event(
            "approval_decided",
            "run_1",
            "batch_1",
            2,
            {"items": [{"call_id": "c1", "status": "approved"}], "decided_by": "rita", "at": "t"},
        ),
        Event("approval_expired", "run_1", "batch_2", 3, {"items": [], "action": "reject"}),
        Event("run_progress", "run_1", None, 4, {"stage": "executing"}),  # not notified
        Event(
            "run_finished",
            "run_1",
            "batch_2",
            5,
            {"items": [], "statuses": ["answered", "rejected", "answered"], "at": "t"},
        ),
    ]
    asker = "ann (sub u-ann at https://idp.example)"  # a run's owner, as the service names it
    notifier = Notifier(
        store,
        [WebhookChannel(receiver.url, SECRET)],
        base_url="https://s.example",
        asker=lambda run_id: asker if run_id == "run_1" else None,
    )
    try:
        for event in events:
            notifier.on_event(event)
        bodies = [json.loads(d.body) for d in receiver.wait_for(3)]
    finally:
        notifier.close()
    texts = {b["event"]: b["text"] for b in bodies}
    assert texts == {
        "batch_decided": "batch decided by rita: https://s.example/reviewer#batch=batch_1",
        "batch_expired": (
            "batch expired before a decision (reject applied): "
            "https://s.example/reviewer#batch=batch_2"
        ),
        "run_finished": "run finished: 2 answered, 1 rejected: https://s.example/analyst#run=run_1",
    }
    assert len(receiver.received) == 3
    assert {b["asked_by"] for b in bodies} == {asker}


class _SlowFirstChannel:
    """A channel whose first delivery takes a while (a receiver slow to answer), recording the
    order in which deliveries reach it."""

    label = "slow-first"

    def __init__(self, first_takes_s: float) -> None:
        self.first_takes_s = first_takes_s
        self.started = 0
        self.heard: list[tuple[str, str]] = []

    def send(self, event: str, delivery_id: str, payload: dict[str, Any]) -> None:
        self.started += 1
        if self.started == 1:
            time.sleep(self.first_takes_s)
        self.heard.append((payload["run_id"], event))


def test_one_runs_events_reach_the_receiver_in_the_order_they_happened(store) -> None:
    """Two delivery workers: a slow first delivery must not let the run's later events overtake
    it (a receiver hears created, decided, finished, in that order)."""
    channel = _SlowFirstChannel(first_takes_s=0.5)
    notifier = Notifier(store, [channel], base_url="http://x", workers=2, sweep_s=None)
    kinds = ("approval_requested", "approval_decided", "run_finished")
    try:
        for seq, kind in enumerate(kinds, start=1):
            notifier.on_event(Event(kind, "run_a", "batch_a", seq, {"items": []}))
        deadline = time.monotonic() + 10
        while len(channel.heard) < 3:
            assert time.monotonic() < deadline, channel.heard
            time.sleep(0.01)
    finally:
        notifier.close()
    assert [event for _run, event in channel.heard] == [
        "batch_created",
        "batch_decided",
        "run_finished",
    ]
