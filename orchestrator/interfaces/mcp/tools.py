"""The tools an agent calls. None of them approves anything: there is no approve tool, and no
argument of any tool carries a decision or an identity (``errors.refuse_arguments``).

No tool holds a request longer than a client's patience: each answers within seconds with the
run id and where the run is; waiting is ``wait_for_run``, bounded (``WAIT_DEFAULT_S``, at most
``MAX_WAIT_S``), with progress notifications while the run works.

    ask(question | questions)      start a run; back within seconds (at the gate, or still working)
    submit_sql(sql | statements, purpose)   the agent's own SQL: same validator, same ONE review,
                                   no model call
    run_status(run_id)             where a run is, and its results once known
    wait_for_run(run_id, timeout_s)   wait (<= 25 s) until the run ends; call again if it has not
    list_runs(status?, limit, offset)   the caller's own runs, newest first
    cancel_run(run_id)             stop a run waiting at the gate: nothing of it runs
    answer_clarification(run_id, answers)   answer a run's clarifying questions: a follow-up run
    get_rows(run_id, question_id, offset, limit)   page through every row a question kept
    publish_template(name, example_id, parameters, description)   admins: a reviewed statement
                                   becomes a typed tool (``template_tools``)
    schema(tables?)                the tables and columns sqlgate sees
    validate(sql)                  the safety policy's verdict and the SQL that would run
    explain_policy()               what sqlgate allows, and who decides
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from orchestrator.core.result import ClarifyingQuestionOut
from orchestrator.core.server_state import RunRow
from orchestrator.features.clarify import ClarificationError, follow_up_question
from orchestrator.interfaces.mcp.elicitation import may_elicit, review_at_client
from orchestrator.interfaces.mcp.errors import ToolRefusal
from orchestrator.interfaces.mcp.service import (
    ENDED,
    RESTING,
    McpService,
    NotCancellable,
    OnProgress,
)
from orchestrator.interfaces.mcp.template_tools import TemplateTool, TemplateToolError, bind
from orchestrator.interfaces.mcp.views import (
    PolicyView,
    PublishedTool,
    RowsPage,
    RunList,
    RunReport,
    RunSummary,
    SchemaAnswer,
    Verdict,
)
from orchestrator.interfaces.server.auth import Principal, Role

PRINCIPAL_SCOPE_KEY = "sqlgate.principal"
MAX_QUESTIONS = 100
#: ``wait_for_run`` waits this long unless told otherwise, and never longer than ``MAX_WAIT_S``:
#: well inside the 60 s request timeout of the common MCP clients.
WAIT_DEFAULT_S = 20.0
MAX_WAIT_S = 25.0
MAX_PAGE_ROWS = 500
#: The largest offset a page may start at: every JSON reader keeps it exact, and the database's
#: 64-bit integers hold it plus a page.
MAX_OFFSET = 2**53 - 1
MAX_SQL_CHARS = 100_000
GUARANTEE = (
    "No SQL runs before a person with a reviewer's credentials approves it, in one batched "
    "review, under the safety policy; an agent can ask, never approve."
)
RunState = Literal["queued", "running", "awaiting_approval", "resuming", "finished", "failed"]
RUN_ID = Annotated[str, Field(max_length=64, description="The run_id returned by ask")]


def purpose_text(actor: str, purpose: str) -> str:
    """What the reviewer reads beside a submitted statement (the run's "question").

    Example:
        >>> purpose_text("alice", "  Revenue per   month ")
        'SQL written by alice (agent), purpose: Revenue per month'
    """
    return f"SQL written by {actor} (agent), purpose: {' '.join(purpose.split())}"


def principal_of(ctx: Context[Any, Any], service: McpService) -> Principal:
    """The transport's authenticated caller: the bearer token's principal over HTTP; on stdio
    (no authentication) the configured actor as an analyst. Never from tool arguments."""
    request = ctx.request_context.request
    if request is None:
        return Principal(actor=service.config.actor, role=Role.ANALYST)
    principal = getattr(request, "scope", {}).get(PRINCIPAL_SCOPE_KEY)
    if not isinstance(principal, Principal):
        raise ToolRefusal("unauthenticated", "this request carries no authenticated identity")
    return principal


def _require(principal: Principal, permission: str) -> None:
    if not principal.may(permission):
        raise ToolRefusal(
            "forbidden",
            f"{principal.actor} ({principal.role}) may not {permission.replace('_', ' ')}",
        )


def outcome(report: RunReport, *, waiting_is_error: bool) -> RunReport:
    """The report, or a ``ToolRefusal`` whose code says why there is no answer."""
    run = report.model_dump(mode="json")
    if report.status == "failed":
        error = report.error
        raise ToolRefusal(
            error.code if error else "run_failed",
            f"the run failed: {error.message if error else 'unknown error'}",
            run=run,
        )
    if report.status == "awaiting_approval":
        if (
            waiting_is_error
            and report.error is not None
            and report.error.code == "awaiting_execution"
        ):
            raise ToolRefusal("awaiting_execution", report.error.message, run=run)
        if waiting_is_error:
            review = report.review
            where = review.reviewer_url or review.command if review else "sqlgate approvals list"
            raise ToolRefusal(
                "awaiting_approval",
                f"the SQL waits for a reviewer ({where}); this server runs it by itself once "
                "approved: call wait_for_run again",
                review=review.model_dump(mode="json") if review else None,
                run=run,
            )
        return report
    if report.status in ("queued", "running", "resuming"):
        if waiting_is_error:
            raise ToolRefusal(
                "still_running", "the run is still working; call wait_for_run again", run=run
            )
        return report
    if any(q.status == "answered" for q in report.questions) or not report.questions:
        return report
    first = report.questions[0]
    error = first.error
    message = error.message if error else first.status
    raise ToolRefusal(
        first.status,
        message,
        reason=message if first.status in ("unsafe", "rejected", "cancelled") else None,
        reason_code=error.code if error and error.code != first.status else None,
        retry_after=error.retry_after if error else None,
        clarification_questions=[q.model_dump() for q in first.clarification_questions] or None,
        run=run,
    )


class SqlgateTools:
    """The tool functions, bound to one service."""

    def __init__(self, service: McpService) -> None:
        self.service = service
        #: the names of sqlgate's own tools (a published tool may not take one)
        self.builtin: set[str] = set()
        #: awaited after a tool is published (the server tells its clients)
        self.on_tools_changed: Callable[[], Awaitable[None]] = _nothing

    async def ask(
        self,
        ctx: Context[Any, Any],
        question: Annotated[
            str | None,
            Field(description="One question about the data, in plain language"),
        ] = None,
        questions: Annotated[
            list[str] | None,
            Field(
                max_length=MAX_QUESTIONS,
                description="Several questions, answered together with ONE review",
            ),
        ] = None,
        evidence: Annotated[
            str | None,
            Field(
                description="Optional: what the question does not say but the data needs, e.g. "
                "\"female refers to gender = 'F'\" or the table that holds it (applies to every "
                "question of the call); sqlgate plans with it and learns its words once the run "
                "is reviewed"
            ),
        ] = None,
    ) -> RunReport:
        """Ask the database a question (or several) in plain language.

        sqlgate plans and writes the SQL, checks it against the safety policy, and then WAITS for
        a person to approve it. This call answers within a few seconds with the run_id and the
        run's status: awaiting_approval (the SQL waiting and where a reviewer decides), or
        queued/running when it has not reached the gate yet. You cannot approve it yourself.
        Tell the user what is waiting, then call wait_for_run (again while it says
        awaiting_approval or still_running). Give either `question` or `questions`; add
        `evidence` when you know what the question leaves unsaid (a definition, a table, a
        value's spelling).
        """
        principal = principal_of(ctx, self.service)
        _require(principal, "ask")
        asked = [question] if question is not None else list(questions or [])
        if (question is None) == (questions is None) or not asked:
            raise ToolRefusal("invalid_input", "give either question or questions (not both)")
        if any(not q.strip() for q in asked):
            raise ToolRefusal("invalid_input", "questions must not be empty")
        limit = self.service.config.pipeline.max_question_chars
        longest = max(len(q) for q in asked)
        if longest > limit:
            raise ToolRefusal(
                "invalid_input",
                f"a question has {longest} characters; the limit is {limit}",
            )
        if evidence is not None and len(evidence) > limit:
            raise ToolRefusal(
                "invalid_input",
                f"evidence has {len(evidence)} characters; the limit is {limit} (as a question's)",
            )
        run_id, cursor = await self.service.submit(
            asked,
            principal.actor,
            principal.policy_section,
            identity=principal.identity,
            hints=[evidence] * len(asked) if evidence and evidence.strip() else None,
        )
        return await self._first_answer(ctx, principal, run_id, cursor)

    async def submit_sql(
        self,
        ctx: Context[Any, Any],
        purpose: Annotated[
            str,
            Field(
                min_length=1,
                description="Why this SQL should run: shown to the reviewer beside each statement",
            ),
        ],
        sql: Annotated[
            str | None, Field(max_length=MAX_SQL_CHARS, description="One SQL statement")
        ] = None,
        statements: Annotated[
            list[Annotated[str, Field(max_length=MAX_SQL_CHARS)]] | None,
            Field(
                max_length=MAX_QUESTIONS,
                description="Several SQL statements, reviewed together in ONE review",
            ),
        ] = None,
    ) -> RunReport:
        """Run SQL you wrote yourself, through the same gate as ask: the safety policy's
        validator (read-only, allowed tables and columns, every column resolved, LIMIT enforced)
        and ONE review by a person, who sees your purpose beside each statement. No language
        model is involved: the SQL is not rewritten or corrected, and the answer is its result.
        Returns like ask (run_id, status, the SQL waiting, where a reviewer decides); then call
        wait_for_run. A statement the policy refuses ends with the error code unsafe and its
        reason. Give either `sql` or `statements`."""
        principal = principal_of(ctx, self.service)
        _require(principal, "ask")
        given = [sql] if sql is not None else list(statements or [])
        if (sql is None) == (statements is None) or not given:
            raise ToolRefusal("invalid_input", "give either sql or statements (not both)")
        if any(not s.strip() for s in given):
            raise ToolRefusal("invalid_input", "a statement is empty")
        text = purpose_text(principal.actor, purpose)
        limit = self.service.config.pipeline.max_question_chars
        if not purpose.strip() or len(text) > limit:
            raise ToolRefusal(
                "invalid_input",
                f"the purpose must say why, in at most {limit - len(text) + len(purpose)} "
                "characters",
            )
        purposes = [
            text if len(given) == 1 else f"{text} (statement {i} of {len(given)})"
            for i in range(1, len(given) + 1)
        ]
        run_id, cursor = await self.service.submit(
            purposes,
            principal.actor,
            principal.policy_section,
            statements=given,
            identity=principal.identity,
        )
        return await self._first_answer(ctx, principal, run_id, cursor)

    def run_status(self, ctx: Context[Any, Any], run_id: RUN_ID) -> RunReport:
        """Where a run is now: queued, running, awaiting_approval (with the SQL waiting and
        where a reviewer decides), finished (answers, SQL that ran, rows, who approved) or failed.
        Returns at once."""
        row = self._own_row(ctx, run_id)
        return outcome(self.service.report(row), waiting_is_error=False)

    async def wait_for_run(
        self,
        ctx: Context[Any, Any],
        run_id: RUN_ID,
        timeout_s: Annotated[
            float,
            Field(ge=0, le=MAX_WAIT_S, description=f"Seconds to wait at most (<= {MAX_WAIT_S:g})"),
        ] = WAIT_DEFAULT_S,
    ) -> RunReport:
        """Wait (at most 25 s, 20 s by default) until a run ends: a reviewer decided, the
        approved SQL ran and the answer is written. Returns the answer, the SQL that ran, the
        first rows (`truncated` when there are more: page with get_rows), warnings and who
        approved. While the SQL still waits for a reviewer the error code is awaiting_approval,
        and while it works still_running: call wait_for_run again; you cannot approve it."""
        await asyncio.to_thread(self._own_row, ctx, run_id)
        row = await self.service.watch(
            run_id, until=ENDED, timeout_s=timeout_s, on_progress=_progress_reporter(ctx)
        )
        return outcome(self.service.report(row), waiting_is_error=True)

    def list_runs(
        self,
        ctx: Context[Any, Any],
        status: Annotated[
            RunState | None,
            Field(description="Only runs in this state"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="Runs per page")] = 20,
        offset: Annotated[
            int, Field(ge=0, le=MAX_OFFSET, description="Runs to skip (newest first)")
        ] = 0,
    ) -> RunList:
        """Your own runs, newest first: run_id, status, questions and when. Use it to find a
        run again; run_status or wait_for_run give its details."""
        principal = principal_of(ctx, self.service)
        _require(principal, "read_runs")
        rows = self.service.own_runs(principal.actor, status=status, limit=limit, offset=offset)
        return RunList(
            runs=[RunSummary.of(row) for row in rows[:limit]],
            next_offset=offset + limit if len(rows) > limit else None,
        )

    async def cancel_run(self, ctx: Context[Any, Any], run_id: RUN_ID) -> RunReport:
        """Cancel a run of yours that waits at the approval gate: its waiting SQL is withdrawn
        from review and nothing of it runs. A run that is still being planned or is running
        its approved SQL cannot be stopped (error not_cancellable); one that ended stays as it
        ended."""
        principal = principal_of(ctx, self.service)
        row = await asyncio.to_thread(self._own_row, ctx, run_id)
        try:
            row = await asyncio.to_thread(self.service.cancel, row, principal.actor)
        except NotCancellable as exc:
            raise ToolRefusal("not_cancellable", exc.message, status=exc.status) from None
        return self.service.report(row)

    async def answer_clarification(
        self,
        ctx: Context[Any, Any],
        run_id: RUN_ID,
        answers: Annotated[
            dict[str, str],
            Field(
                max_length=20,
                description="The answers, keyed by the clarifying question's id "
                '(e.g. {"metric": "revenue"})',
            ),
        ],
        question_id: Annotated[
            str | None,
            Field(
                max_length=16,
                description="The question (q1, q2, ...) whose clarifying questions these answer; "
                "needed only when several questions of the run asked back",
            ),
        ] = None,
    ) -> RunReport:
        """Answer the clarifying questions a run asked (status needs_clarification): a follow-up
        run starts with the original question and your answers, and is reviewed like any other.
        Returns the follow-up run as ask does."""
        principal = principal_of(ctx, self.service)
        _require(principal, "ask")
        row = await asyncio.to_thread(self._own_row, ctx, run_id)
        asking = [
            (f"q{i}", result)
            for i, result in enumerate(row.results or [], start=1)
            if result.get("status") == "needs_clarification"
            and (question_id is None or f"q{i}" == question_id)
        ]
        if not asking:
            raise ToolRefusal(
                "invalid_input",
                f"run {run_id} has no question waiting for clarification"
                + (f" under {question_id}" if question_id else ""),
            )
        if len(asking) > 1:
            raise ToolRefusal(
                "invalid_input",
                "several questions of this run asked back: give question_id "
                f"({', '.join(qid for qid, _ in asking)})",
            )
        _, result = asking[0]
        asked = [ClarifyingQuestionOut(**q) for q in result.get("clarification_questions") or []]
        try:
            text = follow_up_question(result["question"], asked, answers)
        except ClarificationError as exc:
            raise ToolRefusal("invalid_input", exc.message) from None
        new_id, cursor = await self.service.submit(
            [text],
            principal.actor,
            principal.policy_section,
            follow_up_of=run_id,
            identity=principal.identity,
            hints=[result.get("hint") or ""],
        )
        return await self._first_answer(ctx, principal, new_id, cursor)

    def get_rows(
        self,
        ctx: Context[Any, Any],
        run_id: RUN_ID,
        question_id: Annotated[
            str, Field(max_length=16, description="The question's id in the run: q1, q2, ...")
        ] = "q1",
        offset: Annotated[
            int, Field(ge=0, le=MAX_OFFSET, description="The first row to return (from 0)")
        ] = 0,
        limit: Annotated[
            int, Field(ge=1, le=MAX_PAGE_ROWS, description="Rows to return at most")
        ] = 100,
    ) -> RowsPage:
        """Every row a finished question kept (up to the policy's row cap), a page at a time:
        call again with next_offset until it is null."""
        row = self._own_row(ctx, run_id)
        page = self.service.rows_page(row, question_id, offset=offset, limit=limit)
        if page is None:
            raise ToolRefusal(
                "no_rows",
                f"question {question_id} of run {run_id} kept no rows "
                "(it has not run, it failed, or there is no such question)",
            )
        return page

    def schema(
        self,
        ctx: Context[Any, Any],
        tables: Annotated[
            list[Annotated[str, Field(max_length=200)]] | None,
            Field(
                max_length=200,
                description="Tables to describe, with their foreign-key neighbours; "
                "omit for a one-line-per-table catalogue of everything",
            ),
        ] = None,
    ) -> SchemaAnswer:
        """The tables and columns sqlgate sees in the database (read-only; nothing is run)."""
        principal_of(ctx, self.service)
        schema = self.service.database.schema
        if not tables:
            every = schema.tables()
            return SchemaAnswer(
                dialect=self.service.database.dialect,
                tables=list(every),
                text="\n".join(info.catalogue_line() for info in every.values()),
            )
        context = schema.explore(tables)
        return SchemaAnswer(
            dialect=context.dialect,
            tables=[t.name for t in context.tables],
            unknown_tables=context.unknown_tables,
            text=context.render(),
        )

    def validate(
        self,
        ctx: Context[Any, Any],
        sql: Annotated[str, Field(max_length=100_000, description="One SQL statement to check")],
    ) -> Verdict:
        """Check SQL against sqlgate's safety policy, as the pipeline does before review. Returns
        the SQL that WOULD run (LIMIT enforced); nothing is executed. A refusal is an error with
        code `unsafe` and the validator's reason. Passing validation does not approve anything."""
        principal = principal_of(ctx, self.service)
        database = self.service.database
        policy = database.policy_for(database.section_for(principal.policy_section))
        result = self.service.pipeline.validator(policy, principal.identity).validate(sql)
        findings = [f.model_dump(mode="json") for f in result.findings]
        refusal = result.refusal
        if refusal is not None:
            raise ToolRefusal(
                "unsafe",
                refusal.message,
                reason=refusal.message,
                reason_code=refusal.code,
                findings=findings,
            )
        return Verdict(ok=True, dialect=result.dialect, sql=result.sql, findings=findings)

    def explain_policy(self, ctx: Context[Any, Any]) -> PolicyView:
        """What sqlgate allows and who decides: the safety policy, row cap, timeouts, approval
        rules (quorum, deadline) and rate limiting. Read this before asking."""
        principal_of(ctx, self.service)
        config = self.service.config
        validator = self.service.pipeline.validator()
        pipeline = config.pipeline
        return PolicyView(
            guarantee=GUARANTEE,
            dialect=validator.dialect,
            safety={
                **validator.policy.model_dump(mode="json"),
                "statements": "exactly one read-only query (SELECT / WITH ... SELECT / UNION); "
                "no DML, DDL, SELECT INTO, locking clauses or denylisted functions",
            },
            row_cap=self.service.database.policy.row_cap,
            statement_timeout_s=self.service.database.policy.statement_timeout,
            approval={
                "quorum": pipeline.approval_quorum,
                "deadline_s": pipeline.approval_ttl_s,
                "on_expiry": pipeline.on_expiry,
                "reviewer_url": config.reviewer_url,
            },
            who_decides="a person whose credentials have the reviewer (or admin) role, on the "
            "reviewer page, over HTTP or with `sqlgate approvals decide`; never this server's tools",
            rate_limit="questions are refused with code rate_limited and retry_after when the "
            "model budget cannot fit them"
            if pipeline.admission
            else "questions wait for the model budget",
        )

    async def publish_template(
        self,
        ctx: Context[Any, Any],
        name: Annotated[
            str, Field(max_length=48, description="The tool's name: lower case letters, digits, _")
        ],
        example_id: Annotated[
            int, Field(ge=1, description="The approved example of reviewed-SQL memory")
        ],
        parameters: Annotated[
            list[Annotated[str, Field(max_length=48)]],
            Field(
                min_length=1,
                max_length=50,
                description="One argument name per literal of the statement, in the order they "
                'are written; "" keeps that literal as reviewed',
            ),
        ],
        description: Annotated[
            str, Field(min_length=1, max_length=500, description="What the tool answers")
        ],
    ) -> PublishedTool:
        """Admins only: publish a statement reviewers approved (reviewed-SQL memory) as a named,
        typed tool, e.g. orders_above(amount: number). Each argument replaces one literal of the
        reviewed statement; a call is validated by the policy and goes through the gate, where
        earned auto-approval applies when the policy allows it. Every client is told the tool
        list changed."""
        principal = principal_of(ctx, self.service)
        _require(principal, "curate_memory")
        if name in self.builtin:
            raise ToolRefusal("invalid_input", f"{name} is one of sqlgate's own tools")
        try:
            tool = await asyncio.to_thread(
                self.service.publish_template,
                name,
                example_id,
                parameters,
                description,
                principal.actor,
            )
        except TemplateToolError as exc:
            raise ToolRefusal("invalid_input", exc.message) from None
        await self.on_tools_changed()
        return PublishedTool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema(),
            sql=tool.sql,
            template_id=tool.template_id,
            example_id=tool.example_id,
            published_by=tool.published_by,
        )

    async def call_template(
        self, ctx: Context[Any, Any], tool: TemplateTool, arguments: dict[str, Any]
    ) -> RunReport:
        """A published tool's call: the reviewed statement with the arguments as its literals,
        then the way of ``submit_sql``."""
        principal = principal_of(ctx, self.service)
        _require(principal, "ask")
        try:
            sql = bind(tool.sql, tool.dialect, tool.parameters, arguments)
        except TemplateToolError as exc:
            raise ToolRefusal("invalid_arguments", exc.message) from None
        shown = ", ".join(f"{p.name}={arguments[p.name]!r}" for p in tool.parameters)
        purpose = purpose_text(
            principal.actor,
            f"{tool.name}({shown}), the reviewed template of example {tool.example_id} "
            f"published by {tool.published_by}",
        )
        run_id, cursor = await self.service.submit(
            [purpose],
            principal.actor,
            principal.policy_section,
            statements=[sql],
            identity=principal.identity,
        )
        return await self._first_answer(ctx, principal, run_id, cursor)

    # -- helpers ------------------------------------------------------------------------------
    async def _first_answer(
        self, ctx: Context[Any, Any], principal: Principal, run_id: str, cursor: Any
    ) -> RunReport:
        """The run as it is once it pauses at the gate or ends, or after ``ask_wait_s``
        (queued or running then): never a long hold of the request."""
        config = self.service.config
        progress = _progress_reporter(ctx)
        row = await self.service.watch(
            run_id,
            until=RESTING,
            timeout_s=config.ask_wait_s,
            on_progress=progress,
            after=cursor,
        )
        report = self.service.report(row)
        if report.status == "awaiting_approval" and may_elicit(ctx, principal, self.service):
            if await review_at_client(ctx, principal, self.service, report):
                row = await self.service.watch(
                    run_id, until=ENDED, timeout_s=WAIT_DEFAULT_S, on_progress=progress
                )
                report = self.service.report(row)
        return outcome(report, waiting_is_error=False)

    def _own_row(self, ctx: Context[Any, Any], run_id: str) -> RunRow:
        principal = principal_of(ctx, self.service)
        _require(principal, "read_runs")
        row = self.service.row(run_id)
        if row is None or (row.owner != principal.actor and not principal.may("read_any_run")):
            raise ToolRefusal("run_not_found", f"no run {run_id!r} of yours")
        return row


async def _nothing() -> None:
    return None


def _progress_reporter(ctx: Context[Any, Any]) -> OnProgress:
    """Progress notifications (when the client sent a progress token): one per pipeline stage,
    numbered in the order the stages happened, and a "still ..." one when a stage lasts
    (``McpService.watch`` beats every ``heartbeat_s``)."""
    count = 0

    async def report(stage: str, done: int, total: int) -> None:
        nonlocal count
        count += 1
        await ctx.report_progress(count, None, f"{stage} ({done}/{total})" if total else stage)

    return report
