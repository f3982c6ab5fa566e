"""The MCP server's engine: the state database, the run service and the event hub, shared by
every tool call of the process.

Runs go through ``RunService`` like those of ``sqlgate serve``: they pause at the approval gate,
and a decision from anywhere (the reviewer page, ``sqlgate approvals decide``, another server
sharing the state database) resumes them: the ``EventHub`` reads the approvals audit log and
tells the run service. Tools wait on the hub, never on a thread, so a long ``wait_for_run`` holds
no worker. The run service's recovery loop runs here too: a run whose process stopped, or whose
batch was decided while no server of its database and login was up, goes on once one is.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from approvals import AuditEvent, ExpirySweeper, sql_hash
from approvals.expiry import supersede
from orchestrator.core.checkpoint import FinishedCheckpoint, PausedCheckpoint
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import RunConflict, RunNotFound, SqlgateError
from orchestrator.core.identity import Identity
from orchestrator.core.result import RunError, RunResult, RunStatus
from orchestrator.core.server_state import RunRow
from orchestrator.features.memory import MemoryStore, memory_for
from orchestrator.interfaces.mcp.config import McpConfig, login_name
from orchestrator.interfaces.mcp.template_tools import (
    TemplateTool,
    TemplateToolError,
    TemplateToolStore,
    parameters_of,
)
from orchestrator.interfaces.mcp.views import RowsPage, RunReport, run_report
from orchestrator.interfaces.server.events import Cursor, EventHub, EventSource
from orchestrator.interfaces.server.runner import RunService, shared_pipeline
from orchestrator.wiring import state_database
from safety import Policy

#: Run states in which nothing more happens without a person (or at all).
RESTING = frozenset({"awaiting_approval", "finished", "failed"})
ENDED = frozenset({"finished", "failed"})

OnProgress = Callable[[str, int, int], Awaitable[None]]


def submitted_event(
    run_id: str, owner: str, purposes: list[str], statements: list[str]
) -> AuditEvent:
    """The audit entry of SQL an agent submitted: who asked, why, and each statement's hash."""
    return AuditEvent(
        at=datetime.now(UTC),
        run_id=run_id,
        batch_id="",  # no batch yet: the validator and the gate come next
        event="sql_submitted",
        actor=owner,
        detail={
            "via": "mcp submit_sql",
            "statements": [
                {"purpose": purpose, "sql": sql, "sql_hash": sql_hash(sql)}
                for purpose, sql in zip(purposes, statements, strict=True)
            ],
        },
    )


class NotCancellable(SqlgateError):
    """The run is not waiting at the gate: it cannot be stopped without running half of it."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


class McpService:
    """Stores, pipeline, run service and event hub, built once from an ``McpConfig``."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self.state_db = state_database(config.state_url)
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
            from orchestrator.core.config import Settings
            from orchestrator.core.limits import build_limiter

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
            asker=self._authors_of,  # who asked a run authored its SQL
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
        self.template_tools = TemplateToolStore(self.state_db.engine)
        self._started = False

    async def start(self) -> None:
        """Follow the state database's events, and recover this database's runs as ``serve``
        does: stopped ones, and those decided while no process of this login listened."""
        if not self._started:
            await self.hub.start()
            self.runs.start_recovery()
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
        runs_as = own = None
        try:
            stored = self.state_db.runs.load(row.run_id)
        except SqlgateError:  # not recorded yet (queued in this process) or unreadable
            stored = None
        if stored is not None and stored.login is not None:
            runs_as = str(stored.login)
            policy = getattr(stored.checkpoint, "policy", None)
            with contextlib.suppress(SqlgateError):
                own = str(self.database.login_for(Policy.from_data(policy) if policy else None))
        return run_report(
            row,
            self.approvals,
            reviewer_url=self.config.reviewer_url,
            max_rows=self.config.max_rows,
            runs_as=runs_as,
            own_login=own,
        )

    def own_runs(self, owner: str, *, status: str | None, limit: int, offset: int) -> list[RunRow]:
        """Up to ``limit + 1`` of ``owner``'s runs, newest first (the extra one says "more")."""
        if status is None:
            return self.state.runs(owner=owner, limit=limit + 1, offset=offset)
        kept: list[RunRow] = []
        skipped = 0
        page = 0
        while len(kept) <= limit:
            rows = self.state.runs(owner=owner, limit=200, offset=page * 200)
            for row in rows:
                if row.status != status:
                    continue
                if skipped < offset:
                    skipped += 1
                else:
                    kept.append(row)
            if len(rows) < 200:
                break
            page += 1
        return kept[: limit + 1]

    def _authors_of(self, run_id: str) -> list[str]:
        """Who authored a run's SQL: its owner and, on stdio (no tokens, no identity provider),
        the login the agent runs as, whatever actor name ``SQLGATE_MCP_ACTOR`` chose, so that
        login deciding at the command line is still the author (four eyes, earned trust)."""
        owner = self.state.owner_of(run_id)
        authors = [owner] if owner else []
        if self.config.tokens is None and self.config.identity is None:
            authors.append(login_name())
        return authors

    def cancel(self, row: RunRow, actor: str) -> RunRow:
        """Withdraw a run waiting at the gate: its checkpoint ends (cancelled), its pending
        batch is closed (every waiting statement rejected as cancelled), nothing of it runs.

        The run store's conditional update decides a race with a decision that came first:
        the run is then resuming, and this raises ``NotCancellable``.
        """
        if row.status != "awaiting_approval":
            ended = row.status in ENDED
            raise NotCancellable(
                f"run {row.run_id} has {'ended' if ended else 'not reached the approval gate'} "
                f"({row.status}); only a run waiting for approval can be cancelled",
                row.status,
            )
        reason = f"cancelled by {actor} before review; nothing ran"
        results = [
            RunResult(
                run_id=row.run_id,
                question=question,
                status=RunStatus.CANCELLED,
                answer=f"The run was cancelled by {actor} before a reviewer decided; nothing ran.",
                error=RunError(code="cancelled", message=reason),
            )
            for question in row.questions
        ]
        try:
            stored = self.state_db.runs.load(row.run_id)
            if stored.status != "awaiting_approval" or not isinstance(
                stored.checkpoint, PausedCheckpoint
            ):
                raise NotCancellable(
                    f"run {row.run_id} is already being resumed ({stored.status})", row.status
                )
            self.state_db.runs.transition(
                row.run_id,
                expected=(stored.status, stored.version),
                status="finished",
                checkpoint=FinishedCheckpoint(results=results),
            )
        except (RunConflict, RunNotFound) as exc:
            raise NotCancellable(
                f"run {row.run_id} changed meanwhile (a decision came first): {exc}", row.status
            ) from None
        self.state.update_run(
            row.run_id,
            status="finished",
            expected=("awaiting_approval",),
            results=[r.model_dump(mode="json") for r in results],
            event=(
                "run_finished",
                {"items": [], "batch_ids": [], "statuses": ["cancelled"] * len(results)},
            ),
        )
        for record in self.approvals.pending_batches(run_id=row.run_id):
            supersede(self.approvals, record, datetime.now(UTC), reason=reason, actor=actor)
        self.hub.poke()
        cancelled = self.state.run(row.run_id)
        assert cancelled is not None
        return cancelled

    # -- published template tools -------------------------------------------------------------
    def published_tools(self) -> list[TemplateTool]:
        return self.template_tools.tools(self.database.safe_url)

    def publish_template(
        self, name: str, example_id: int, names: list[str], description: str, actor: str
    ) -> TemplateTool:
        """Publish a statement reviewers approved (a positive example of memory on this
        database) as a tool; its SQL must pass the policy now too.

        Raises:
            TemplateToolError: no such approved example here, names that do not fit its
                literals, or SQL the policy refuses today.
        """
        from orchestrator.features.memory import MemoryNotFound

        try:
            example = self.state_db.store(MemoryStore).example(example_id)
        except MemoryNotFound:
            raise TemplateToolError(f"no example {example_id} in reviewed-SQL memory") from None
        if example.kind != "positive" or example.status not in ("approved", "edited"):
            raise TemplateToolError(
                f"example {example_id} is {example.status}: only SQL a reviewer approved "
                "(or edited) at the gate can be published"
            )
        if example.database != self.database.safe_url:
            raise TemplateToolError(f"example {example_id} is of another database")
        parameters = parameters_of(example.sql, example.dialect, names)
        verdict = self.pipeline.validator().validate(example.sql)
        if not verdict.ok:
            refusal = verdict.refusal
            raise TemplateToolError(
                f"the policy refuses example {example_id} now: "
                f"{refusal.message if refusal else 'refused'}"
            )
        tool = TemplateTool(
            name=name,
            description=description,
            database=self.database.safe_url,
            dialect=example.dialect,
            example_id=example.id,
            template_id=example.template_id,
            sql=example.sql,
            parameters=parameters,
            published_by=actor,
            published_at=datetime.now(UTC),
        )
        self.template_tools.publish(tool)
        return tool

    def rows_page(
        self, row: RunRow, question_id: str, *, offset: int, limit: int
    ) -> RowsPage | None:
        """A page of the rows a question of the run kept; None when it kept none."""
        store = self.pipeline.result_rows
        if store is None or row.status != "finished":
            return None
        header = store.header(row.run_id, question_id)
        if header is None:
            return None
        rows = store.page(row.run_id, question_id, offset=offset, limit=limit)
        end = offset + len(rows)
        return RowsPage(
            run_id=row.run_id,
            question_id=question_id,
            columns=header.columns,
            rows=rows,
            offset=offset,
            row_count=header.row_count,
            next_offset=end if end < header.row_count else None,
            truncated=header.truncated,
        )

    async def submit(
        self,
        questions: list[str],
        owner: str,
        role: str | None = None,
        *,
        follow_up_of: str | None = None,
        statements: list[str] | None = None,
        identity: Identity | None = None,
        hints: list[str] | None = None,
    ) -> tuple[str, Cursor]:
        """Start a run; the cursor is the event position before it, for ``watch``. ``identity``:
        the caller's proven attributes, which the run's row filters are bound to; ``hints`` one
        per question (``ask``'s evidence), recorded with the run.

        ``statements``: the caller's own SQL, one per question (its purpose); the audit log
        records who submitted it (``sql_submitted``) before anything is reviewed."""
        await self.start()
        cursor = self.hub.position

        def start() -> str:
            run_id = self.runs.submit(
                questions,
                owner,
                role,
                follow_up_of=follow_up_of,
                statements=statements,
                identity=identity,
                hints=hints,
            )
            if statements is not None:
                self.approvals.append_audit([submitted_event(run_id, owner, questions, statements)])
            return run_id

        run_id = await asyncio.to_thread(start)
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

        ``on_progress(stage, done, total)`` is awaited for each stage the run reports, in order,
        and again ("still <stage>") when ``heartbeat_s`` passes without one, so a client sees
        the run is alive however long a stage lasts.
        """
        await self.start()
        row = await asyncio.to_thread(self.state.run, run_id)
        assert row is not None, f"unknown run {run_id}"
        if row.status in until:
            return row
        keepalive = min(1.0, self.config.heartbeat_s, max(timeout_s, 0.05))
        events = self.hub.follow(after, keepalive=keepalive)
        stage, done, total = row.status, 0, len(row.questions)
        heard = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                async for entry in events:
                    if entry is None:
                        if on_progress is not None and (
                            time.monotonic() - heard >= self.config.heartbeat_s
                        ):
                            heard = time.monotonic()
                            await on_progress(f"still {stage}", done, total)
                    else:
                        event = entry[1]
                        if event.run_id != run_id:
                            continue
                        if event.type == "run_progress" and on_progress is not None:
                            data = event.data
                            stage = str(data.get("stage", ""))
                            done, total = int(data.get("done") or 0), int(data.get("total") or 0)
                            heard = time.monotonic()
                            await on_progress(stage, done, total)
                    row = await asyncio.to_thread(self.state.run, run_id)
                    assert row is not None
                    if row.status in until:
                        break
        await events.aclose()  # type: ignore[attr-defined]  # an async generator
        row = await asyncio.to_thread(self.state.run, run_id)
        assert row is not None
        return row
