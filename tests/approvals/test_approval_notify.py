"""The notified gate: a decision wakes the waiting run; polling catches what no notification told.

A waiter's ``sleep`` here never returns by itself (it parks until cancelled), so a wait that
ends with ``"process"`` or ``"postgres"`` was ended by the notification and nothing else; the
lost-notification cases use a ``sleep`` that returns at once, so only polling can resolve them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from approval_fakes import ManualClock, fake_validate, item

from approvals import (
    AlreadyExecuted,
    ApprovalGate,
    ApprovalStore,
    Approve,
    DecisionConflict,
    DecisionSignals,
    NotRunnable,
    PostgresListener,
    Reject,
    SqlApprovalStore,
)
from approvals.notify import DecisionWatch, listener_for, release_listener


def gate_on(store: ApprovalStore, **kw) -> ApprovalGate:
    return ApprovalGate(None, fake_validate, store=store, clock=ManualClock(), **kw)


@pytest.fixture
def sql_backend(backend):
    if backend.kind == "memory":
        pytest.skip("the memory store has no other process to hear from")
    return backend


class DecideWhileWaiting:
    """A ``sleep`` that, on its first call, lets ``decide`` run in another thread, then parks.

    Only a notification can end such a wait; ``naps`` records each wait begun."""

    def __init__(self, decide: Callable[[], object]) -> None:
        self.decide = decide
        self.naps: list[float] = []
        self.threads: list[threading.Thread] = []

    async def __call__(self, seconds: float) -> None:
        self.naps.append(seconds)
        if len(self.naps) == 1:
            thread = threading.Thread(target=self.decide)
            thread.start()
            self.threads.append(thread)
        await asyncio.Event().wait()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=10)


def wait_for_outcome(gate: ApprovalGate, batch_id: str, sleep, reasons: list[str], **kw):
    async def main():
        return await asyncio.wait_for(
            gate.await_outcome(batch_id, sleep=sleep, on_wake=reasons.append, **kw), 20
        )

    return asyncio.run(main())


def test_a_decision_in_this_process_wakes_the_waiter(backend):
    waiting, reviewing = gate_on(backend.open()), gate_on(backend.open())
    a = item()
    batch = waiting.open([a])
    decide = DecideWhileWaiting(
        lambda: reviewing.submit(batch.batch_id, {a.call_id: Approve()}, actor="dana")
    )
    reasons: list[str] = []
    outcome = wait_for_outcome(waiting, batch.batch_id, decide, reasons)
    decide.join()
    # on PostgreSQL the commit's NOTIFY may reach the listener before the writer's own signal
    assert reasons == ["process"] or (backend.kind == "postgres" and reasons == ["postgres"])
    assert len(decide.naps) == 1
    assert outcome.decided_by == "dana" and outcome.runnable(a.call_id) == a.sql


def test_a_vote_that_leaves_the_batch_pending_wakes_and_the_state_decides(backend):
    """Two wakes for a 2-of-n quorum: the first finds the batch still pending and waits again.

    On PostgreSQL the reviewer shares no in-process signals, so each vote wakes once (NOTIFY)."""
    by_notify = backend.kind == "postgres"
    waiting = gate_on(backend.open(), quorum=2)
    reviewing = gate_on(
        backend.open(signals=DecisionSignals()) if by_notify else backend.open(), quorum=2
    )
    a = item()
    batch = waiting.open([a])
    votes = iter(["dana", "eve"])

    class VoteEachWait(DecideWhileWaiting):
        async def __call__(self, seconds: float) -> None:
            self.naps.append(seconds)
            actor = next(votes, None)
            if actor is None:  # woken by another batch's decision (a shared listener): no vote
                await asyncio.Event().wait()
            thread = threading.Thread(
                target=reviewing.submit,
                args=(batch.batch_id, {a.call_id: Approve()}),
                kwargs={"actor": actor},
            )
            thread.start()
            self.threads.append(thread)
            await asyncio.Event().wait()

    vote = VoteEachWait(lambda: None)
    reasons: list[str] = []
    outcome = wait_for_outcome(waiting, batch.batch_id, vote, reasons)
    vote.join()
    # at least one wake per vote, each by the expected path (an earlier test's decision on the
    # same PostgreSQL channel may add one: its batch is read, found not ours, and waited on again)
    expected = "postgres" if by_notify else "process"
    assert len(reasons) >= 2 and set(reasons) == {expected}
    assert outcome.status == "resolved" and outcome.votes == 2


def test_two_waiters_and_three_racing_reviewers_one_decision_one_execution(backend):
    """Notifications change nothing of the guarantees: one submission wins, every waiter gets
    that outcome, and the approved statement is claimed once whoever holds it."""
    run = gate_on(backend.open())
    a = item()
    batch = run.open([a])
    waiters = [gate_on(backend.open(), run_id=run.run_id) for _ in range(2)]
    reviewers = [gate_on(backend.open(), run_id=run.run_id) for _ in range(3)]
    barrier = threading.Barrier(3)
    won, lost = [], []

    def review(gate: ApprovalGate, actor: str) -> None:
        decision = Approve() if actor != "eve" else Reject(reason="not today")
        barrier.wait()
        try:
            won.append(gate.submit(batch.batch_id, {a.call_id: decision}, actor=actor))
        except DecisionConflict:
            lost.append(actor)

    async def wait_all():
        async def one(gate: ApprovalGate):
            return await gate.await_outcome(batch.batch_id, poll=0.05)

        tasks = [asyncio.create_task(one(g)) for g in waiters]
        await asyncio.sleep(0.01)
        threads = [
            threading.Thread(target=review, args=(g, actor))
            for g, actor in zip(reviewers, ("dana", "eve", "frank"), strict=True)
        ]
        for thread in threads:
            thread.start()
        outcomes = await asyncio.wait_for(asyncio.gather(*tasks), 20)
        for thread in threads:
            thread.join()
        return outcomes

    outcomes = asyncio.run(wait_all())
    assert len(won) == 1 and len(lost) == 2
    assert outcomes[0] == outcomes[1] == won[0]
    claimed, refused = [], []
    for gate, outcome in zip(waiters, outcomes, strict=True):
        try:
            with gate.ledger.executing(outcome, a.call_id) as claim:
                claimed.append(claim.sql)
        except (AlreadyExecuted, NotRunnable) as exc:
            refused.append(type(exc).__name__)
    if won[0].decided_by == "eve":  # her rejection won: nothing may run
        assert claimed == [] and refused == ["NotRunnable", "NotRunnable"]
    else:
        assert claimed == [a.sql] and refused == ["AlreadyExecuted"]


def test_a_lost_notification_still_resolves_by_polling(sql_backend):
    """The reviewer's store sends nothing (as a writer of an older version would)."""
    waiting = gate_on(sql_backend.open())
    silent = gate_on(sql_backend.open(notify=False, signals=DecisionSignals()))
    a = item()
    batch = waiting.open([a])
    naps: list[float] = []

    async def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 1:
            silent.submit(batch.batch_id, {a.call_id: Approve()}, actor="dana")

    reasons: list[str] = []
    outcome = wait_for_outcome(waiting, batch.batch_id, sleep, reasons, poll=0.25)
    assert reasons == ["poll"] and naps == [0.25]
    assert outcome.decided_by == "dana"
    assert [e.event for e in waiting.store.audit_log(batch_id=batch.batch_id)].count(
        "batch_resolved"
    ) == 1


def test_a_failing_sleep_is_raised_not_taken_for_a_wake(store):
    gate = gate_on(store)
    batch = gate.open([item()])

    async def broken(seconds: float) -> None:
        raise RuntimeError("the clock broke")

    with pytest.raises(RuntimeError, match="the clock broke"):
        asyncio.run(gate.await_outcome(batch.batch_id, poll=0.1, sleep=broken))


def test_the_store_polls_less_where_decisions_notify(sql_backend):
    store = sql_backend.open()
    assert store.wait_poll == (5.0 if sql_backend.kind == "postgres" else 0.5)


def test_a_decision_from_another_process_wakes_the_waiter_by_postgres_notify(postgres_url):
    """The reviewer's store shares no in-process signals with the waiter: only NOTIFY tells."""
    waiting = gate_on(SqlApprovalStore(postgres_url))
    waiting.store.setup()
    elsewhere = gate_on(SqlApprovalStore(postgres_url, signals=DecisionSignals()))
    a = item()
    batch = waiting.open([a])
    decide = DecideWhileWaiting(
        lambda: elsewhere.submit(batch.batch_id, {a.call_id: Approve()}, actor="dana")
    )
    reasons: list[str] = []
    outcome = wait_for_outcome(waiting, batch.batch_id, decide, reasons)
    decide.join()
    assert reasons == ["postgres"]
    assert outcome.decided_by == "dana"
    for store in (waiting.store, elsewhere.store):
        store.close()


def test_the_listener_reconnects_and_wakes_every_waiter(postgres_url):
    """Notifications sent while the listener was away are lost: it wakes everyone to read."""
    signals = DecisionSignals()
    url = sa.make_url(postgres_url).set(drivername="postgresql")

    def connect():
        import psycopg

        return psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)

    listener = PostgresListener(connect, signals, retry_after=0.05)
    assert listener.start()
    woken = threading.Event()
    unsubscribe = signals.subscribe("batch_anything", lambda reason: woken.set())
    try:
        engine = sa.create_engine(postgres_url)
        with engine.begin() as conn:
            conn.execute(
                sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": listener.backend_pid}
            )
        assert woken.wait(10), "the listener did not come back"
        assert listener.connections == 2
        engine.dispose()
    finally:
        unsubscribe()
        listener.stop()


def test_one_listener_per_database_and_process_while_anyone_waits(postgres_url):
    store = SqlApprovalStore(postgres_url)
    with store.watch("batch_x"):
        first = listener_for(store._key, store._listen_connection)
        with store.watch("batch_y"):
            assert listener_for(store._key, store._listen_connection) is first
            release_listener(store._key)
        release_listener(store._key)
        assert first.listening.is_set()
    # the last user gone, the listener stops; the next wait starts a new one
    first._thread.join(timeout=5)
    assert not first._thread.is_alive()
    with store.watch("batch_z"):
        assert listener_for(store._key, store._listen_connection) is not first
        release_listener(store._key)
    store.close()


def test_signals_wake_the_batch_and_every_batch_waiters_only():
    signals = DecisionSignals()
    woke: list[tuple[str, str]] = []
    stop_a = signals.subscribe("a", lambda r: woke.append(("a", r)))
    signals.subscribe("b", lambda r: woke.append(("b", r)))
    signals.subscribe(None, lambda r: woke.append(("*", r)))
    signals.publish("a", "process")
    stop_a()
    signals.publish("a", "postgres")
    signals.publish(None, "postgres")
    assert woke == [
        ("a", "process"),
        ("*", "process"),
        ("*", "postgres"),
        ("b", "postgres"),
        ("*", "postgres"),
    ]


def test_a_set_left_by_a_wake_already_taken_is_not_a_wake() -> None:
    """A notification can arrive while the previous wait is taking the one before it: its
    ``set`` then runs after that take, with no reason left behind it. The next wait must not
    end there (it used to, as a "poll"), but at the next real notification."""

    async def never(seconds: float) -> None:
        await asyncio.Event().wait()

    async def main() -> list[str]:
        woke: list[str] = []
        with DecisionWatch(DecisionSignals(), "batch_1") as watch:
            loop = asyncio.get_running_loop()
            loop.call_later(0.01, watch._wake, "postgres")
            woke.append(await watch.wait(60.0, never))
            assert watch._event is not None
            watch._event.set()  # the late set of a notification whose reason was taken
            loop.call_later(0.05, watch._wake, "process")
            woke.append(await asyncio.wait_for(watch.wait(60.0, never), 5))
        return woke

    assert asyncio.run(main()) == ["postgres", "process"]
