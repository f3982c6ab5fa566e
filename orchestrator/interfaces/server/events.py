"""Live events for ``/events``: approvals from the audit log, runs from the service's own table.

Two append-only sources, each with an increasing ``seq``: the approvals audit log (written by
every process and by ``sqlgate approvals decide``) and ``sqlgate_server_events``. A client's
position is a ``Cursor`` ``(audit seq, run event seq)``; each event it receives advances one of
the two, and the SSE ``id`` is the cursor after that event, written ``"A-R"``. A client that
reconnects with ``Last-Event-ID: A-R`` gets everything after that position, exactly once, each
source in its order.

Event types (the SSE ``event:`` field and ``data.type``):

- ``approval_requested``: a batch opened with items needing approval (``batch_opened``)
- ``approval_decided``: a reviewer's decision resolved the batch (``item_resolved`` × n + ``batch_resolved``)
- ``approval_expired``: the deadline applied the batch's expiry action (``batch_expired``)
- ``run_progress``: a stage of a run moved (``stage``, ``done``, ``total``)
- ``run_finished``: a run ended; per question its status
- ``resync``: the client's ``Last-Event-ID`` is ahead of every source (the state database was
  replaced, or the id came from elsewhere): reload your state; the stream goes on from ``id``

Every event's data has ``run_id``, ``batch_id`` (None before a run reached the gate) and
``items``: one entry per statement with its ``call_id``.

One ``EventHub`` per process polls both sources (in a worker thread, never on the event loop),
keeps a bounded buffer of recent events, and wakes every subscriber; a subscriber that fell out of
the buffer reads its backlog from the database again.

It is a little over 400 lines: the two sources, the cursor and the hub that fans events out are
kept together because the exactly-once guarantee depends on all three.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from approvals import ApprovalStore, AuditEvent, BatchNotFound, ExpirySweeper
from orchestrator.core.server_state import RunEvent, ServerState

log = logging.getLogger("sqlgate.server")

EVENT_TYPES = (
    "approval_requested",
    "approval_decided",
    "approval_expired",
    "run_progress",
    "run_finished",
    "resync",
)
SYSTEM_ACTOR = "sqlgate"  # the approvals gate's own actor: batches resolved with nothing to review

_CURSOR = re.compile(r"^\s*(\d{1,18})-(\d{1,18})\s*$")


@dataclass(frozen=True, order=True)
class Cursor:
    """A position in both sources: the last audit seq and the last run event seq delivered."""

    audit: int = 0
    run: int = 0

    def __str__(self) -> str:
        return f"{self.audit}-{self.run}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """``"12-7"`` -> Cursor(12, 7); ``ValueError`` for anything else.

        Example:
            >>> Cursor.parse("12-7")
            Cursor(audit=12, run=7)
        """
        match = _CURSOR.match(text or "")
        if not match:
            raise ValueError(f"{text!r} is not an event id (expected A-R, e.g. 12-7)")
        return cls(int(match.group(1)), int(match.group(2)))

    def after(self, event: ServerEvent) -> Cursor | None:
        """The cursor once ``event`` is delivered; None when the cursor is already past it."""
        if event.source == "audit":
            return Cursor(event.seq, self.run) if event.seq > self.audit else None
        return Cursor(self.audit, event.seq) if event.seq > self.run else None


@dataclass(frozen=True)
class ServerEvent:
    """One event as published: where it came from (source, seq), its type and its data."""

    source: str  # "audit" or "run"
    seq: int
    type: str
    run_id: str
    batch_id: str | None
    data: dict[str, Any] = field(default_factory=dict)

    def payload(self, event_id: str) -> dict[str, Any]:
        return {
            "id": event_id,
            "type": self.type,
            "origin": self.origin,
            "run_id": self.run_id,
            "batch_id": self.batch_id,
            **self.data,
        }

    @property
    def origin(self) -> str:
        """Where the event comes from, the same for every client: ``audit:17`` or ``run:4``."""
        return f"{self.source}:{self.seq}"

    def sse(self, event_id: str) -> str:
        """The event in the text/event-stream format."""
        data = json.dumps(self.payload(event_id), ensure_ascii=False, default=str)
        return f"id: {event_id}\nevent: {self.type}\ndata: {data}\n\n"


def resync_sse(head: Cursor, reason: str) -> str:
    """The ``resync`` event: the client must reload its state; the stream resumes at ``head``.

    Example:
        >>> resync_sse(Cursor(3, 4), "ahead").splitlines()
        ['id: 3-4', 'event: resync', 'data: {"id": "3-4", "type": "resync", "reason": "ahead"}', '']
    """
    data = json.dumps({"id": str(head), "type": "resync", "reason": reason})
    return f"id: {head}\nevent: resync\ndata: {data}\n\n"


def is_ahead(cursor: Cursor, head: Cursor) -> bool:
    """True when ``cursor`` names a position neither source has reached."""
    return cursor.audit > head.audit or cursor.run > head.run


# -- from the sources to events ------------------------------------------------------------------


def approval_events(
    audit: list[AuditEvent], load_batch: Callable[[str], Any] | None = None
) -> tuple[list[ServerEvent], int | None]:
    """Events from audit log entries, and the seq of the last entry consumed.

    ``item_resolved`` entries are gathered into the batch-level event that follows them (they are
    written in one transaction); trailing ones without it are left for the next read.
    ``load_batch(batch_id)`` adds each requested item's question and SQL (optional).
    """
    events: list[ServerEvent] = []
    resolved: dict[str, list[dict[str, Any]]] = {}
    consumed: int | None = None
    for entry in audit:
        assert entry.seq is not None
        if entry.event == "item_resolved":
            resolved.setdefault(entry.batch_id, []).append(
                {
                    "call_id": entry.call_id,
                    "status": entry.detail.get("status"),
                    "reason": entry.detail.get("reason"),
                    "sql_hash": entry.detail.get("sql_hash"),
                }
            )
            continue
        if entry.event == "batch_opened" and entry.detail.get("pending"):
            events.append(
                ServerEvent(
                    "audit",
                    entry.seq,
                    "approval_requested",
                    entry.run_id,
                    entry.batch_id,
                    _requested(entry, load_batch),
                )
            )
        elif entry.event in ("batch_resolved", "batch_expired"):
            items = resolved.pop(entry.batch_id, [])
            if entry.event == "batch_expired":
                events.append(
                    ServerEvent(
                        "audit",
                        entry.seq,
                        "approval_expired",
                        entry.run_id,
                        entry.batch_id,
                        {
                            "items": items,
                            "action": entry.detail.get("action"),
                            "actor": entry.actor,
                            "at": entry.at.isoformat(),
                        },
                    )
                )
            elif entry.actor != SYSTEM_ACTOR:
                events.append(
                    ServerEvent(
                        "audit",
                        entry.seq,
                        "approval_decided",
                        entry.run_id,
                        entry.batch_id,
                        {"items": items, "decided_by": entry.actor, "at": entry.at.isoformat()},
                    )
                )
        consumed = entry.seq
    if not resolved and audit:
        consumed = audit[-1].seq
    return events, consumed


def _requested(entry: AuditEvent, load_batch: Callable[[str], Any] | None) -> dict[str, Any]:
    pending = list(entry.detail.get("pending", []))
    items: list[dict[str, Any]] = [
        {"call_id": cid, "category": "needs_approval"} for cid in pending
    ]
    items += [{"call_id": cid, "category": "denied"} for cid in entry.detail.get("denied", [])]
    items += [
        {"call_id": cid, "category": "auto_approved"}
        for cid in entry.detail.get("auto_approved", [])
    ]
    if load_batch is not None:
        try:
            batch = load_batch(entry.batch_id).batch
        except BatchNotFound:
            batch = None
        if batch is not None:
            by_id = {i.call_id: i for i in batch.items}
            for item in items:
                found = by_id.get(item["call_id"])
                if found is not None:
                    item.update(
                        question_id=found.question_id, question=found.question, sql=found.sql
                    )
    return {
        "items": items,
        "cycle": entry.detail.get("cycle"),
        "deadline": entry.detail.get("deadline"),
        "at": entry.at.isoformat(),
    }


def run_event(row: RunEvent) -> ServerEvent:
    detail = dict(row.detail)
    detail.setdefault("items", [])
    detail["at"] = row.at
    return ServerEvent("run", row.seq, row.event, row.run_id, row.batch_id, detail)


class EventSource:
    """Reads both sources after a cursor, as events."""

    def __init__(
        self, approvals: ApprovalStore, state: ServerState, *, with_items: bool = True
    ) -> None:
        self.approvals = approvals
        self.state = state
        self.with_items = with_items

    def head(self) -> Cursor:
        """The current end of both sources (a fresh subscriber without Last-Event-ID starts here)."""
        from approvals.sql_store import audit

        with self.approvals.engine.connect() as conn:  # type: ignore[attr-defined]
            last_audit = conn.execute(sa.select(sa.func.max(audit.c.seq))).scalar() or 0
        return Cursor(last_audit, self.state.last_event_seq())

    def read(self, cursor: Cursor) -> tuple[list[ServerEvent], Cursor]:
        """Events after ``cursor`` (approval events first, then run events) and the position read up to."""
        entries = self.approvals.audit_log(after=cursor.audit)
        loader = self.approvals.get_batch if self.with_items else None
        approvals, consumed = approval_events(entries, loader)
        runs = [run_event(row) for row in self.state.events_after(cursor.run)]
        position = Cursor(
            consumed if consumed is not None else cursor.audit, runs[-1].seq if runs else cursor.run
        )
        return _merged(approvals, runs), position


def _merged(first: list[ServerEvent], second: list[ServerEvent]) -> list[ServerEvent]:
    """Both lists interleaved by time, each kept in its own order (a merge, never a sort)."""
    out: list[ServerEvent] = []
    i = j = 0
    while i < len(first) and j < len(second):
        if str(second[j].data.get("at", "")) < str(first[i].data.get("at", "")):
            out.append(second[j])
            j += 1
        else:
            out.append(first[i])
            i += 1
    return out + first[i:] + second[j:]


Listener = Callable[[ServerEvent], None]


class EventHub:
    """One per process: polls the sources, buffers recent events, wakes subscribers.

    ``listeners`` are called in the polling thread for every new event (the run service resumes
    runs whose batch was decided, wherever the decision was made). ``poke()`` polls at once
    (after a write in this process). ``sweeper`` applies batch deadlines every ``sweep_interval``.
    """

    def __init__(
        self,
        source: EventSource,
        *,
        poll_interval: float = 0.2,
        buffer_size: int = 5000,
        sweeper: ExpirySweeper | None = None,
        sweep_interval: float = 1.0,
    ) -> None:
        self.source = source
        self.poll_interval = poll_interval
        self.sweeper = sweeper
        self.sweep_interval = sweep_interval
        self.listeners: list[Listener] = []
        self._buffer: deque[tuple[int, ServerEvent]] = deque(maxlen=buffer_size)
        self._next_index = 0
        self.position = Cursor()
        self._condition: asyncio.Condition | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._poll_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._condition = asyncio.Condition()
        self._wake = asyncio.Event()
        self.position = await asyncio.to_thread(self.source.head)
        self._task = asyncio.create_task(self._loop_forever(), name="sqlgate-event-hub")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._condition is not None:
            async with self._condition:
                self._condition.notify_all()

    def poke(self) -> None:
        """Poll now (thread-safe)."""
        if self._loop is not None and self._wake is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    async def _loop_forever(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        next_sweep = loop.time()
        while True:
            try:
                if self.sweeper is not None and loop.time() >= next_sweep:
                    await asyncio.to_thread(self.sweeper.sweep)
                    next_sweep = loop.time() + self.sweep_interval
                await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception:  # a database hiccup: keep following, try again next tick
                log.exception("reading events failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)
            self._wake.clear()

    async def poll(self) -> int:
        """Read new events into the buffer and wake subscribers; the number of new events."""
        events = await asyncio.to_thread(self._read_and_notify)
        if events:
            assert self._condition is not None
            async with self._condition:
                for event in events:
                    self._buffer.append((self._next_index, event))
                    self._next_index += 1
                self._condition.notify_all()
        return len(events)

    def _read_and_notify(self) -> list[ServerEvent]:
        with self._poll_lock:
            events, self.position = self.source.read(self.position)
        for event in events:
            for listener in self.listeners:
                try:
                    listener(event)
                except Exception:  # a listener's failure must not stop the stream
                    log.exception("an event listener failed on %s", event.origin)
        return events

    # -- subscribers -------------------------------------------------------------------------
    async def follow(
        self, cursor: Cursor | None = None, *, keepalive: float = 15.0
    ) -> AsyncIterator[tuple[Cursor, ServerEvent] | None]:
        """Events after ``cursor`` (None: from now on) with the cursor after each; ``None`` every
        ``keepalive`` seconds of silence."""
        assert self._condition is not None, "start() the hub first"
        index = self._next_index
        if cursor is None:
            cursor = self.position
        else:
            backlog, _ = await asyncio.to_thread(self.source.read, cursor)
            for event in backlog:
                moved = cursor.after(event)
                if moved is not None:
                    cursor = moved
                    yield cursor, event
        while True:
            async with self._condition:
                if self._next_index == index:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._condition.wait(), keepalive)
                latest = self._next_index
                oldest = self._buffer[0][0] if self._buffer else latest
                buffered = (
                    [event for i, event in self._buffer if i >= index] if index >= oldest else None
                )
            if self._task is None:
                return
            if buffered is None:  # fell out of the buffer: read the backlog again
                fresh, _ = await asyncio.to_thread(self.source.read, cursor)
            else:
                fresh = buffered
            if latest == index and not fresh:
                yield None
                continue
            index = latest
            for event in fresh:
                moved = cursor.after(event)
                if moved is not None:
                    cursor = moved
                    yield cursor, event
