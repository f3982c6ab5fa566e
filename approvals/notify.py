"""Waking a run paused at the gate when its batch moves on: notifications first, polling behind.

A store publishes the batch id each time a batch leaves a state (decided, expired, a quorum
vote). Three ways carry it to a waiter, fastest first:

- in this process: ``DecisionSignals``, one per database, shared by every store opened on it;
- from another process, on PostgreSQL: ``NOTIFY sqlgate_approvals, '<batch_id>'`` sent in the
  transaction of the conditional update (delivered at commit), received by one
  ``PostgresListener`` thread per database and process;
- anything else (another process on SQLite, a lost notification, a listener reconnecting):
  polling, the safety net of every wait.

A notification only wakes a waiter; what it does next is decided by reading the stored state,
so a lost, duplicated or early notification never changes an outcome.

Example:
    >>> signals = DecisionSignals()
    >>> watch = DecisionWatch(signals, "batch_1")
    >>> signals.publish("batch_1", "process")
    >>> watch.take()
    'process'
    >>> watch.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Literal

log = logging.getLogger("sqlgate.approvals")

#: The PostgreSQL channel decisions are announced on; the payload is the batch id.
CHANNEL = "sqlgate_approvals"

#: Why a waiter woke: a decision in this process, a PostgreSQL notification, or its poll timer.
WakeReason = Literal["process", "postgres", "poll"]
Wake = Callable[[WakeReason], None]


class DecisionSignals:
    """Who waits for which batch in this process, and the wake-up when a batch moves on.

    ``subscribe(batch_id, wake)`` registers a callback (``None``: every batch) and returns the
    function that removes it. ``publish`` calls the callbacks of the batch in the caller's
    thread; callbacks must be quick (set an event). Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str | None, list[Wake]] = {}
        self.published = 0

    def subscribe(self, batch_id: str | None, wake: Wake) -> Callable[[], None]:
        with self._lock:
            self._waiters.setdefault(batch_id, []).append(wake)

        def unsubscribe() -> None:
            with self._lock:
                waiting = self._waiters.get(batch_id, [])
                if wake in waiting:
                    waiting.remove(wake)
                if not waiting:
                    self._waiters.pop(batch_id, None)

        return unsubscribe

    def publish(self, batch_id: str | None, reason: WakeReason) -> None:
        """Wake the waiters of ``batch_id`` and those of every batch (``None``: wake all)."""
        with self._lock:
            self.published += 1
            if batch_id is None:
                wakes = [w for waiting in self._waiters.values() for w in waiting]
            else:
                wakes = [*self._waiters.get(batch_id, ()), *self._waiters.get(None, ())]
        for wake in wakes:
            try:
                wake(reason)
            except Exception:  # one waiter's failure must not keep the others asleep
                log.exception("waking a waiter of %s failed", batch_id)


_registry_lock = threading.Lock()
_signals: dict[str, DecisionSignals] = {}
_listeners: dict[str, PostgresListener] = {}
_listener_users: dict[str, int] = {}


def signals_for(key: str) -> DecisionSignals:
    """The process's ``DecisionSignals`` of one database (``key``: its URL without password)."""
    with _registry_lock:
        return _signals_locked(key)


def _signals_locked(key: str) -> DecisionSignals:
    found = _signals.get(key)
    if found is None:
        found = _signals[key] = DecisionSignals()
    return found


class DecisionWatch:
    """One waiter's subscription: remembers the first wake since the last ``take``.

    ``wait(poll, sleep)`` returns at the first notification, or when ``sleep(poll)`` returns
    (``"poll"``). Usable from any thread; the async wait never blocks the event loop.
    """

    def __init__(
        self,
        signals: DecisionSignals,
        batch_id: str,
        *,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._on_close = on_close
        self._lock = threading.Lock()
        self._reason: WakeReason | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._unsubscribe = signals.subscribe(batch_id, self._wake)

    def _wake(self, reason: WakeReason) -> None:
        with self._lock:
            if self._reason is None:
                self._reason = reason
            loop, event = self._loop, self._event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                loop.call_soon_threadsafe(event.set)

    def take(self) -> WakeReason | None:
        """The notification received since the last call, if any (and forget it)."""
        with self._lock:
            reason, self._reason = self._reason, None
            if self._event is not None:
                self._event.clear()
            return reason

    async def wait(
        self, poll: float, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    ) -> WakeReason:
        """Until a notification arrives or ``sleep(poll)`` returns; why it woke.

        The event can be set with no notification left behind it: a notification that arrives
        while the previous wait is taking the one before has its ``set`` run after that take.
        Such a set is not a wake: the wait goes on for the rest of its nap."""
        with self._lock:
            if self._event is None:
                self._loop, self._event = asyncio.get_running_loop(), asyncio.Event()
            event = self._event
        timer = asyncio.ensure_future(sleep(poll))
        try:
            while True:
                with self._lock:
                    if self._reason is not None:
                        event.set()
                notified = asyncio.ensure_future(event.wait())
                try:
                    await asyncio.wait({timer, notified}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    notified.cancel()
                    await asyncio.gather(notified, return_exceptions=True)
                if timer.done():
                    break
                reason = self.take()
                if reason is not None:
                    return reason
        finally:
            timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
        failure = timer.exception() if not timer.cancelled() else None
        if failure is not None:  # the sleep's own failure, not a wake
            raise failure
        return self.take() or "poll"

    def close(self) -> None:
        self._unsubscribe()
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def __enter__(self) -> DecisionWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PostgresListener:
    """A thread holding one connection that ``LISTEN``s on ``CHANNEL`` and wakes local waiters.

    ``connect()`` returns a new psycopg connection (autocommit is set here). After a lost
    connection it connects again and wakes every waiter, since notifications sent while it was
    away are gone (their waiters then read the state at once instead of at their next poll).
    ``received`` counts notifications, ``connections`` successful connects.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        signals: DecisionSignals,
        *,
        retry_after: float = 1.0,
    ) -> None:
        self._connect = connect
        self.signals = signals
        self.retry_after = retry_after
        self.listening = threading.Event()
        self.received = 0
        self.connections = 0
        self.backend_pid: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlgate-approvals-listen")
        self._thread.daemon = True

    def start(self, timeout: float = 5.0) -> bool:
        """Start listening; True once ``LISTEN`` is in place (False: polling carries on alone)."""
        self._thread.start()
        return self.listening.wait(timeout)

    def stop(self, *, wait: bool = True) -> None:
        """Stop listening (the thread ends within half a second; ``wait`` joins it)."""
        self._stop.set()
        if wait:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except Exception as exc:
                if not failing:  # said once per outage, not at every retry
                    log.warning("cannot listen for approval decisions (%s); polling only", exc)
                failing = True
                self._stop.wait(self.retry_after)
                continue
            failing = False
            try:
                conn.autocommit = True
                conn.execute(f"LISTEN {CHANNEL}")
                self.backend_pid = conn.info.backend_pid
                self.connections += 1
                if self.connections > 1:
                    self.signals.publish(None, "postgres")
                self.listening.set()
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=0.5):
                        self.received += 1
                        self.signals.publish(note.payload or None, "postgres")
            except Exception as exc:
                log.warning("the approvals listener lost its connection (%s); reconnecting", exc)
                self.listening.clear()
                self._stop.wait(self.retry_after)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()


def listener_for(key: str, connect: Callable[[], Any]) -> PostgresListener:
    """The process's listener of one PostgreSQL database, started on first use; each call is
    one more user, until its ``release_listener``. The last user's release stops it."""
    with _registry_lock:
        found = _listeners.get(key)
        started = found is None
        if found is None:
            found = _listeners[key] = PostgresListener(connect, _signals_locked(key))
        _listener_users[key] = _listener_users.get(key, 0) + 1
    if started:
        found.start()
    elif found.connections == 0:  # another thread is starting it
        found.listening.wait(5.0)
    return found


def release_listener(key: str) -> None:
    """One user of the listener of ``key`` is done; the last one stops it (without waiting)."""
    with _registry_lock:
        users = _listener_users.get(key, 0) - 1
        if users > 0:
            _listener_users[key] = users
            return
        _listener_users.pop(key, None)
        listener = _listeners.pop(key, None)
    if listener is not None:
        listener.stop(wait=False)
