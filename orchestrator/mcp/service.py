"""The MCP server's engine: the state database, the run service and the event hub, shared by
every tool call of the process.

Runs go through ``RunService`` like those of ``sqlgate serve``: they pause at the approval gate,
and a decision from anywhere (the reviewer page, ``sqlgate approvals decide``, another server
sharing the state database) resumes them: the ``EventHub`` reads the approvals audit log and
tells the run service. Tools wait on the hub, never on a thread, so a long ``wait_for_run`` holds
no worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from approvals import ExpirySweeper
from orchestrator.database import TargetDatabase
from orchestrator.mcp.config import McpConfig
from orchestrator.mcp.views import RunReport, run_report
from orchestrator.memory import memory_for
from orchestrator.server.events import Cursor, EventHub, EventSource
from orchestrator.server.runner import RunService, shared_pipeline
from orchestrator.server.state import RunRow
from orchestrator.state_db import StateDatabase

#: Run states in which nothing more happens without a person (or at all).
RESTING = frozenset({"awaiting_approval", "finished", "failed"})
ENDED = frozenset({"finished", "failed"})

OnProgress = Callable[[str, int, int], Awaitable[None]]


class McpService:
    """Stores, pipeline, run service and event hub, built once from an ``McpConfig``."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self.state_db = StateDatabase(config.state_url)
        self.state_db.setup()
        self.approvals = self.state_db.approvals
        self.state = self.state_db.server
        self.database = TargetDatabase(
            config.database_url,
            policy=config.policy,
            statement_timeout_s=config.statement_timeout_s,
        )
        limiter = config.limiter
        if limiter is None:
            from orchestrator.config import Settings
            from orchestrator.limits import build_limiter

            limiter = build_limiter(Settings(), mode="fail_fast")
        self.pipeline = shared_pipeline(
            self.database,
            config.llm,
            limiter,
            self.approvals,
            self.state_db.runs,
            config=config.pipeline,
            http_client=config.http_client,
            memory=memory_for(self.state_db, self.database),
        )
        self.hub = EventHub(
            EventSource(self.approvals, self.state, with_items=False),
            poll_interval=config.poll_interval,
            sweeper=ExpirySweeper(self.approvals),
            sweep_interval=config.sweep_interval,
        )
        self.runs = RunService(
            self.state,
            self.approvals,
            self.state_db.runs,
            self.pipeline,
            workers=config.workers,
            notify=self.hub.poke,
        )
        self.hub.listeners.append(self.runs.on_event)
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self.hub.start()
            self._started = True

    async def stop(self) -> None:
        if self._started:
            await self.hub.stop()
            self._started = False
        self.runs.close()
        self.database.dispose()
        self.state_db.close()

    # -- runs --------------------------------------------------------------------------------
    def row(self, run_id: str) -> RunRow | None:
        return self.state.run(run_id)

    def report(self, row: RunRow) -> RunReport:
        return run_report(
            row,
            self.approvals,
            reviewer_url=self.config.reviewer_url,
            max_rows=self.config.max_rows,
        )

    async def submit(
        self, questions: list[str], owner: str, role: str | None = None
    ) -> tuple[str, Cursor]:
        """Start a run; the cursor is the event position before it, for ``watch``."""
        await self.start()
        cursor = self.hub.position
        run_id = await asyncio.to_thread(self.runs.submit, questions, owner, role)
        return run_id, cursor

    async def watch(
        self,
        run_id: str,
        *,
        until: frozenset[str],
        timeout_s: float,
        on_progress: OnProgress | None = None,
        after: Cursor | None = None,
    ) -> RunRow:
        """The run's row once its status is in ``until``, or as it is after ``timeout_s``.

        ``on_progress(stage, done, total)`` is awaited for each stage the run reports, in order.
        """
        await self.start()
        row = await asyncio.to_thread(self.state.run, run_id)
        assert row is not None, f"unknown run {run_id}"
        if row.status in until:
            return row
        events = self.hub.follow(after, keepalive=min(1.0, max(timeout_s, 0.05)))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                async for entry in events:
                    if entry is not None:
                        event = entry[1]
                        if event.run_id != run_id:
                            continue
                        if event.type == "run_progress" and on_progress is not None:
                            data = event.data
                            await on_progress(
                                str(data.get("stage", "")),
                                int(data.get("done") or 0),
                                int(data.get("total") or 0),
                            )
                    row = await asyncio.to_thread(self.state.run, run_id)
                    assert row is not None
                    if row.status in until:
                        break
        await events.aclose()  # type: ignore[attr-defined]  # an async generator
        row = await asyncio.to_thread(self.state.run, run_id)
        assert row is not None
        return row
