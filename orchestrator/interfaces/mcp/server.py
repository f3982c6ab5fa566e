"""``sqlgate mcp``: sqlgate as a Model Context Protocol server, on the official ``mcp`` SDK.

Agents ask; only people approve. The tools (``orchestrator.interfaces.mcp.tools``) start runs that pause at
the approval gate and report where a reviewer decides; no tool approves, and every tool's input
schema is closed (``additionalProperties: false``): an argument the schema does not declare is
refused with a tool error before the tool runs, ``argument_refused`` when it looks like a
decision or an identity. Refusals are tool errors whose structured content is
``{"error": {"code": ..., "message": ...}}`` (``errors.ToolRefusal``), arguments that fail the
input schema included (``invalid_arguments``); every tool's output schema declares that shape
beside its answer, so clients that validate structured content accept both.

Published template tools (``template_tools``) are listed after sqlgate's own, read from the state
database on every ``tools/list``; publishing one sends ``notifications/tools/list_changed`` to the
connections that have called a tool (handshake era) and on the subscription bus
(``subscriptions/listen``).

Resources: ``sqlgate://schema`` (the catalogue, one line per table) and
``sqlgate://schema/{table}`` (one table with its keys and foreign keys).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import ConfigDict, ValidationError

from orchestrator.interfaces.mcp.config import McpConfig
from orchestrator.interfaces.mcp.errors import ToolRefusal, refuse_arguments, with_error_shape
from orchestrator.interfaces.mcp.service import McpService
from orchestrator.interfaces.mcp.tools import GUARANTEE, SqlgateTools
from orchestrator.interfaces.mcp.views import RunReport

log = logging.getLogger("sqlgate.mcp")
#: Connections remembered to tell of tool list changes (the most recent ones).
MAX_SESSIONS_TOLD = 1000

INSTRUCTIONS = (
    "sqlgate answers questions about one SQL database. "
    + GUARANTEE
    + " Call `ask` (or `submit_sql` with SQL you wrote: the same validator and review, no "
    "model). It answers within seconds with a run_id; when the run pauses at the approval gate, "
    "tell the user which SQL waits and where a reviewer decides, then call `wait_for_run` (25 s "
    "at most: call it again while the code is awaiting_approval or still_running). "
    "`list_runs` finds your runs again, `get_rows` pages through a result, "
    "`answer_clarification` answers a question sqlgate asked back, `cancel_run` withdraws a run "
    "waiting for review. Other tools may be reviewed statements an admin published (typed "
    "arguments, the same gate). Use `schema` and `validate` to look before asking; `explain_policy` "
    "says what is allowed. Errors carry a `code`: awaiting_approval, rate_limited (with "
    "retry_after), unsafe (with the reason), rejected, ..."
)

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


def _closed(tool: Tool) -> Tool:
    """The tool with a closed input schema, refused extras included (defence in depth), and an
    output schema that declares the error shape beside the answer."""
    tool.parameters["additionalProperties"] = False
    tool.fn_metadata.output_schema = with_error_shape(tool.fn_metadata.output_schema)
    base = tool.fn_metadata.arg_model
    tool.fn_metadata.arg_model = type(
        base.__name__,
        (base,),
        {"model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True)},
    )
    return tool


#: Starts or stops a run (state is written) but never changes the database it reads.
_STARTS_RUN = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def _tools(tools: SqlgateTools, max_question_chars: int) -> list[Tool]:
    entries: list[tuple[Callable[..., Any], ToolAnnotations]] = [
        (tools.ask, _STARTS_RUN),
        (tools.submit_sql, _STARTS_RUN),
        (tools.run_status, _READ_ONLY),
        (tools.wait_for_run, _READ_ONLY),
        (tools.list_runs, _READ_ONLY),
        (tools.cancel_run, _STARTS_RUN),
        (tools.answer_clarification, _STARTS_RUN),
        (tools.get_rows, _READ_ONLY),
        (tools.publish_template, _STARTS_RUN),
        (tools.schema, _READ_ONLY),
        (tools.validate, _READ_ONLY),
        (tools.explain_policy, _READ_ONLY),
    ]
    built = [_closed(Tool.from_function(fn, annotations=notes)) for fn, notes in entries]
    _limit_question_length(built[0], max_question_chars)
    return built


def _limit_question_length(ask: Tool, limit: int) -> None:
    """``ask``'s schema says the pipeline's own question limit, for the questions and the
    evidence (the tool checks it before a run is created)."""
    properties = ask.parameters["properties"]
    for option in properties["evidence"].get("anyOf", [properties["evidence"]]):
        if option.get("type") == "string":
            option["maxLength"] = limit
    for option in properties["question"].get("anyOf", [properties["question"]]):
        if option.get("type") == "string":
            option["maxLength"] = limit
    for option in properties["questions"].get("anyOf", [properties["questions"]]):
        if option.get("type") == "array":
            option["items"] = {**option.get("items", {}), "maxLength": limit}


def _invalid_arguments(name: str, exc: ValidationError) -> ToolRefusal:
    """The SDK's input-schema failure, in the documented error shape."""
    problems = [
        {"field": ".".join(str(part) for part in error["loc"]) or name, "message": error["msg"]}
        for error in exc.errors(include_url=False)
    ]
    told = "; ".join(f"{p['field']}: {p['message']}" for p in problems[:5])
    return ToolRefusal(
        "invalid_arguments", f"{name} arguments are invalid: {told}", errors=problems
    )


def refusal_result(refusal: ToolRefusal) -> CallToolResult:
    payload = refusal.payload()
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, default=str))],
        structured_content=payload,
        is_error=True,
    )


class SqlgateMCPServer(MCPServer[McpService]):
    """``MCPServer`` whose tools take only the arguments their schemas declare, and whose
    refusals carry their code as structured content."""

    def __init__(self, service: McpService, **kwargs: Any) -> None:
        self.service = service
        self.tool_set = SqlgateTools(service)
        tools = _tools(self.tool_set, service.config.pipeline.max_question_chars)
        self._declared = {t.name: set(t.parameters.get("properties", {})) for t in tools}
        self.tool_set.builtin = set(self._declared)
        self.tool_set.on_tools_changed = self.announce_tools_changed
        #: per connection, the session that last called a tool: told when the tool list changes
        self._sessions: dict[Any, Any] = {}
        self._run_report_schema = with_error_shape(
            RunReport.model_json_schema(ref_template="#/$defs/{model}")
        )

        @asynccontextmanager
        async def lifespan(_server: MCPServer[McpService]) -> AsyncIterator[McpService]:
            await service.start()
            try:
                yield service
            finally:
                await service.stop()

        super().__init__(
            "sqlgate",
            title="sqlgate",
            instructions=INSTRUCTIONS,
            version=_version(),
            tools=tools,
            lifespan=lifespan,
            **kwargs,
        )
        self._add_resources()
        self._announce_list_changes()

    def _announce_list_changes(self) -> None:
        """Initialisation says ``tools.listChanged``: published tools come and change."""
        low = self._lowlevel_server
        original = low.create_initialization_options

        def with_tool_changes(
            notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
        ) -> Any:
            options = notification_options or NotificationOptions(tools_changed=True)
            return original(options, *args, **kwargs)

        low.create_initialization_options = with_tool_changes  # type: ignore[method-assign]

    async def announce_tools_changed(self) -> None:
        """``notifications/tools/list_changed``: to every handshake-era session that has called
        a tool, and on the subscription bus for clients following ``subscriptions/listen``."""
        await self._subscriptions.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a closed session: it lists again when it reconnects
                log.info("tools/list_changed not delivered: %s", exc)
                self._sessions.pop(key, None)

    async def list_tools(self) -> list[MCPTool]:
        """sqlgate's own tools, then the published template tools of this database."""
        own = await super().list_tools()
        published = await asyncio.to_thread(self.service.published_tools)
        return own + [
            MCPTool(
                name=tool.name,
                title=tool.name,
                description=tool.full_description(),
                input_schema=tool.input_schema(),
                output_schema=self._run_report_schema,
                annotations=_STARTS_RUN,
            )
            for tool in published
            if tool.name not in self._declared
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[McpService, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        self._remember(context)
        try:
            if name not in self._declared:
                return await self._call_published(name, arguments, context)
            refuse_arguments(name, set(arguments), self._declared[name])
            return await super().call_tool(name, arguments, context)
        except ToolRefusal as refusal:
            return refusal_result(refusal)
        except ToolError as exc:
            if isinstance(exc.__cause__, ToolRefusal):
                return refusal_result(exc.__cause__)
            if isinstance(exc.__cause__, ValidationError):
                return refusal_result(_invalid_arguments(name, exc.__cause__))
            raise

    def _remember(self, context: Context[McpService, Any] | None) -> None:
        """Keep the calling session (the latest per connection) to tell it of tool changes."""
        try:
            session = context.request_context.session if context is not None else None
        except (AttributeError, LookupError, ValueError):  # no request context (in-process call)
            return
        if session is None or not hasattr(session, "send_tool_list_changed"):
            return
        request = context.request_context.request if context is not None else None
        headers = getattr(request, "headers", None)
        key = (headers.get("mcp-session-id") if headers is not None else None) or id(session)
        self._sessions.pop(key, None)
        self._sessions[key] = session
        while len(self._sessions) > MAX_SESSIONS_TOLD:  # the oldest connections first
            self._sessions.pop(next(iter(self._sessions)))

    async def _call_published(
        self, name: str, arguments: dict[str, Any], context: Context[McpService, Any] | None
    ) -> CallToolResult:
        tool = await asyncio.to_thread(
            self.service.template_tools.tool, self.service.database.safe_url, name
        )
        if tool is None or context is None:
            known = sorted(self._declared) + [
                t.name for t in await asyncio.to_thread(self.service.published_tools)
            ]
            raise ToolRefusal(
                "unknown_tool", f"there is no tool {name!r}; the tools are: {', '.join(known)}"
            )
        refuse_arguments(name, set(arguments), {p.name for p in tool.parameters})
        report = await self.tool_set.call_template(context, tool, arguments)
        payload = report.model_dump(mode="json")
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(payload, default=str))],
            structured_content=payload,
        )

    def _add_resources(self) -> None:
        schema = self.service.database.schema

        @self.resource(
            "sqlgate://schema",
            name="schema",
            description="The database catalogue: one line per table with its columns",
            mime_type="text/plain",
        )
        def catalogue() -> str:
            return "\n".join(info.catalogue_line() for info in schema.tables().values())

        @self.resource(
            "sqlgate://schema/{table}",
            name="table",
            description="One table: columns, types, primary key, foreign keys",
            mime_type="text/plain",
        )
        def table(table: str) -> str:
            found = schema.table(table)
            if found is None:
                raise ResourceNotFoundError(
                    f"no table {table!r}: read sqlgate://schema for the list"
                )
            return found.render(self.service.database.dialect)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sqlgate")
    except PackageNotFoundError:
        return "0"


def build_server(config: McpConfig) -> SqlgateMCPServer:
    """The MCP server and its service (opened now: the state database, the target database)."""
    return SqlgateMCPServer(McpService(config), log_level="WARNING")


def run_stdio(config: McpConfig) -> None:
    """Serve MCP on stdin/stdout until the client closes the stream; a client that leaves
    before an answer is written (a broken pipe, at start-up or later) ends it quietly."""
    server = build_server(config)
    try:
        server.run("stdio")
    except BaseException as exc:
        if not _client_left(exc):
            raise
        # Nothing can reach the client any more: let the interpreter's last flush go nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _client_left(exc: BaseException) -> bool:
    """True when ``exc`` (or every exception of a group) says the client's end is closed."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_client_left(inner) for inner in exc.exceptions)
    return isinstance(exc, BrokenPipeError | ConnectionResetError)
