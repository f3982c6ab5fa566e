"""How results look in a terminal: highlighted SQL, result tables, the answer and the trace."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from orchestrator.core.result import RunResult, RunStatus

_STATUS_STYLE = {
    RunStatus.ANSWERED: "bold green",
    RunStatus.NEEDS_CLARIFICATION: "bold yellow",
    RunStatus.CANCELLED: "bold yellow",
}


def sql_block(sql: str) -> Syntax:
    return Syntax(sql, "sql", word_wrap=True, theme="ansi_dark", background_color="default")


def rows_table(columns: list[str], rows: list[list[Any]], *, title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold cyan")
    for column in columns:
        table.add_column(Text(str(column)), overflow="fold")
    for row in rows:  # cells are text, never markup: values come from the database or the asker
        table.add_row(*[Text("NULL" if v is None else str(v)) for v in row])
    return table


def trace_table(result: RunResult) -> Table:
    table = Table(title="trace", header_style="bold", title_justify="left")
    for name in ("agent", "batch", "call", "tokens", "ms", "output"):
        table.add_column(name, overflow="fold")
    for entry in result.trace:
        table.add_row(
            Text(entry.agent, style="" if entry.ok else "red"),
            "-" if entry.batch is None else str(entry.batch),
            "-" if entry.llm_call is None else str(entry.llm_call),
            "-" if entry.tokens is None else str(entry.tokens.total),
            f"{entry.duration_ms:.1f}",
            entry.output_summary,
        )
    return table


def render_result(console: Console, result: RunResult, *, trace: bool = True) -> None:
    style = _STATUS_STYLE.get(result.status, "bold red")
    header = Text.assemble(("status: ", "dim"), (result.status.value, style))
    header.append(f"   LLM calls: {result.llm_calls}", style="dim")
    header.append(f"   tokens: {result.tokens.total}", style="dim")
    parts: list[Any] = [header]
    if result.sql:
        parts += [Text("SQL", style="bold"), sql_block(result.sql)]
    if result.columns:
        shown = len(result.rows_preview)
        title = f"{result.row_count} row(s)" + (
            f", first {shown} shown" if shown < (result.row_count or 0) else ""
        )
        if result.truncated:
            title += " — TRUNCATED: the result has more rows than were kept"
        parts.append(rows_table(result.columns, result.rows_preview, title=title))
        if result.truncated:
            parts.append(
                Text(
                    f"truncated: only {result.row_count} row(s) were kept by the LIMIT or the row "
                    "cap; raise --max-limit / --row-cap for more",
                    style="bold yellow",
                )
            )
    if result.clarification_questions:
        parts.append(Text("The question needs clarification:", style="bold yellow"))
        parts += [Text(f"  [{q.id}] {q.text}") for q in result.clarification_questions]
    if result.answer:
        parts += [Text("Answer", style="bold"), Text(result.answer)]
    if result.assumptions:
        parts.append(Text("Assumptions: " + "; ".join(result.assumptions), style="dim"))
    for warning in result.warnings:
        parts.append(Text(f"warning: {warning}", style="yellow"))
    if result.error:
        retry = (
            f" (retry after {result.error.retry_after:.1f} s)" if result.error.retry_after else ""
        )
        parts.append(Text(f"{result.error.code}: {result.error.message}{retry}", style="red"))
    console.print(
        Panel(Group(*parts), title=Text(result.question, style="bold"), title_align="left")
    )
    if trace and result.trace:
        console.print(trace_table(result))
    elif result.trace:
        console.print(compact_trace(result))


def compact_trace(result: RunResult) -> Text:
    """The trace in one line: the agents in order (failed ones in red), calls and time."""
    line = Text("trace: ", style="dim")
    for i, entry in enumerate(result.trace):
        if i:
            line.append(" → ", style="dim")
        line.append(entry.agent, style="dim" if entry.ok else "red")
    line.append(
        f"  ({result.llm_calls} LLM call(s), {result.duration_ms / 1000:.1f} s; --trace for each step)",
        style="dim",
    )
    return line


def render_validation(console: Console, result: Any, original: str) -> None:
    verdict = (
        Text("accepted", style="bold green") if result.ok else Text("refused", style="bold red")
    )
    parts: list[Any] = [Text.assemble(("validation: ", "dim"), verdict)]
    for finding in result.findings:
        style = {"error": "red", "rewrite": "cyan"}.get(str(finding.severity), "yellow")
        node = f" [{finding.node}]" if getattr(finding, "node", None) else ""
        parts.append(
            Text(f"{finding.severity} {finding.code}{node}: {finding.message}", style=style)
        )
    if result.ok and result.sql:
        parts += [Text("SQL to run", style="bold"), sql_block(result.sql)]
    console.print(
        Panel(Group(*parts), title=Text(" ".join(original.split())[:80]), title_align="left")
    )
