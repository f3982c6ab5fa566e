"""Reviewed templates published as MCP tools: ``orders_above(amount: number)``.

An admin picks a statement people approved (a positive example of reviewed-SQL memory) and names
its literals; the result is a typed tool whose arguments replace those literals and nothing else.
A call builds the statement from the reviewed SQL's own syntax tree (each value becomes one typed
literal node, never text spliced into SQL), and it then goes the way of ``submit_sql``: the
policy's validator, and the gate, where the policy's earned auto-approval may approve it (its
template is the reviewed one) or a person reviews it.

Published tools live in their own table of the state database (component ``mcp_tools``), keyed
by name and target database, so every sqlgate process serving that database lists them.

Example:
    >>> sql = "SELECT order_id FROM orders WHERE order_id > 3990 LIMIT 1001"
    >>> params = parameters_of(sql, "sqlite", ["above"])
    >>> [(p.name, p.type, p.example) for p in params]
    [('above', 'number', '3990')]
    >>> bind(sql, "sqlite", params, {"above": 12})
    'SELECT order_id FROM orders WHERE order_id > 12 LIMIT 1001'
    >>> bind(sql, "sqlite", params, {"above": "12; DROP TABLE orders"})
    Traceback (most recent call last):
    ...
    orchestrator.interfaces.mcp.template_tools.TemplateToolError: above must be a number
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
import sqlglot
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection, Engine
from sqlglot import exp

from approvals.migrations import migrate, write_transaction
from orchestrator.core.errors import SqlgateError

__all__ = [
    "TemplateParameter",
    "TemplateTool",
    "TemplateToolError",
    "TemplateToolStore",
    "bind",
    "parameters_of",
]

NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
MAX_STRING_ARGUMENT = 200

_metadata = sa.MetaData()
template_tools = sa.Table(
    "sqlgate_mcp_template_tools",
    _metadata,
    sa.Column("database", sa.String(500), primary_key=True),
    sa.Column("name", sa.String(48), primary_key=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("published_by", sa.String(200), nullable=False),
    sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
)


def _v1(conn: Connection) -> None:
    """Published template tools, one row per (database, name)."""
    _metadata.create_all(conn, checkfirst=True)


MIGRATIONS = (_v1,)


class TemplateToolError(SqlgateError):
    """A tool that cannot be published, or arguments that cannot be bound."""


class TemplateParameter(BaseModel):
    name: str = Field(description="The argument's name")
    type: Literal["number", "string"] = Field(description="The literal's type in the template")
    position: int = Field(ge=0, description="Which literal of the statement it replaces (from 0)")
    example: str = Field(description="The value the reviewed statement had")


class TemplateTool(BaseModel):
    """A published tool: the reviewed statement, its named literals, who published it."""

    name: str
    description: str
    database: str
    dialect: str
    example_id: int = Field(description="The reviewed example of memory it was published from")
    template_id: str
    sql: str = Field(description="The reviewed statement, with the example's values")
    parameters: list[TemplateParameter]
    published_by: str
    published_at: datetime

    def input_schema(self) -> dict[str, Any]:
        properties = {
            p.name: {
                "type": p.type,
                "description": f"Replaces {p.example} in the reviewed statement",
                **({"maxLength": MAX_STRING_ARGUMENT} if p.type == "string" else {}),
            }
            for p in self.parameters
        }
        return {
            "type": "object",
            "properties": properties,
            "required": [p.name for p in self.parameters],
            "additionalProperties": False,
        }

    def full_description(self) -> str:
        shown = " ".join(self.sql.split())
        return (
            f"{self.description} (a reviewed statement, published by {self.published_by}: "
            f"{shown}). The arguments replace its values; the statement is validated and "
            "approved like any other (earned auto-approval applies when the policy allows it)."
        )


def _literals(tree: exp.Expr) -> list[exp.Literal]:
    """The statement's literals in the order they are written (the order its text shows them)."""
    found = [node for node in tree.walk() if isinstance(node, exp.Literal)]
    marked = tree.copy()
    for i, node in enumerate(n for n in marked.walk() if isinstance(n, exp.Literal)):
        node.replace(exp.Placeholder(this=f"sqlgate_literal_{i}_"))
    text = marked.sql()
    order = sorted(range(len(found)), key=lambda i: text.index(f"sqlgate_literal_{i}_"))
    return [found[i] for i in order]


def _parse(sql: str, dialect: str) -> exp.Expr:
    statements = sqlglot.parse(sql, read=dialect)
    if len(statements) != 1 or statements[0] is None:
        raise TemplateToolError("the reviewed statement is not one SQL statement")
    return statements[0]


def parameters_of(sql: str, dialect: str, names: list[str]) -> list[TemplateParameter]:
    """The named literals of ``sql``: ``names[i]`` names its i-th literal (in syntax-tree order);
    an empty name keeps that literal as reviewed."""
    literals = _literals(_parse(sql, dialect))
    if len(names) > len(literals):
        raise TemplateToolError(
            f"{len(names)} parameter names for {len(literals)} literals in the statement"
        )
    named = [(i, n) for i, n in enumerate(names) if n]
    if not named:
        raise TemplateToolError("name at least one literal: a tool without arguments is a query")
    seen: set[str] = set()
    for _, name in named:
        if not NAME.match(name) or name in seen:
            raise TemplateToolError(
                f"parameter name {name!r} must be unique, lower case, letters, digits and _"
            )
        seen.add(name)
    return [
        TemplateParameter(
            name=name,
            type="string" if literals[i].is_string else "number",
            position=i,
            example=literals[i].this,
        )
        for i, name in named
    ]


def _literal(parameter: TemplateParameter, value: Any) -> exp.Expr:
    if parameter.type == "number":
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise TemplateToolError(f"{parameter.name} must be a number")
        return exp.Literal.number(value)
    if not isinstance(value, str) or len(value) > MAX_STRING_ARGUMENT:
        raise TemplateToolError(
            f"{parameter.name} must be a string of at most {MAX_STRING_ARGUMENT} characters"
        )
    return exp.Literal.string(value)


def bind(
    sql: str, dialect: str, parameters: list[TemplateParameter], values: dict[str, Any]
) -> str:
    """The reviewed statement with each named literal replaced by its typed value (one literal
    node of the syntax tree each: a value can never become SQL syntax)."""
    missing = sorted({p.name for p in parameters} - set(values))
    extra = sorted(set(values) - {p.name for p in parameters})
    if missing or extra:
        raise TemplateToolError(
            "arguments: "
            + "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"unknown {', '.join(extra)}" if extra else "",
                )
                if part
            )
        )
    tree = _parse(sql, dialect)
    literals = _literals(tree)
    replacements = {p.position: _literal(p, values[p.name]) for p in parameters}
    for position, literal in replacements.items():
        literals[position].replace(literal)
    return tree.sql(dialect=dialect)


class TemplateToolStore:
    """Published template tools in the state database (their own ``mcp_tools`` component)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._ready = False

    def setup(self) -> None:
        if not self._ready:
            migrate(self.engine, "mcp_tools", MIGRATIONS)
            self._ready = True

    def publish(self, tool: TemplateTool) -> None:
        """Store ``tool``, replacing one of the same name for the same database."""
        self.setup()
        key = (template_tools.c.database == tool.database) & (template_tools.c.name == tool.name)
        with write_transaction(self.engine) as conn:
            conn.execute(sa.delete(template_tools).where(key))
            conn.execute(
                template_tools.insert().values(
                    database=tool.database,
                    name=tool.name,
                    spec=tool.model_dump_json(),
                    published_by=tool.published_by,
                    published_at=tool.published_at,
                )
            )

    def tools(self, database: str) -> list[TemplateTool]:
        self.setup()
        query = (
            sa.select(template_tools.c.spec)
            .where(template_tools.c.database == database)
            .order_by(template_tools.c.name)
        )
        with self.engine.connect() as conn:
            return [
                TemplateTool.model_validate(json.loads(row.spec)) for row in conn.execute(query)
            ]

    def tool(self, database: str, name: str) -> TemplateTool | None:
        return next((t for t in self.tools(database) if t.name == name), None)


def now() -> datetime:
    return datetime.now(UTC)
