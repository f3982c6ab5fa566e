"""``SELECT *``: explain what to write instead, or expand it to the schema's columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

if TYPE_CHECKING:
    from .rules import RuleContext

__all__ = ["expand_stars", "star_message"]


def _source_columns(source: object, ctx: RuleContext) -> list[str] | None:
    if isinstance(source, exp.Table):
        if not isinstance(source.this, exp.Identifier) or ctx.schema is None:
            return None
        columns = ctx.schema.get(source.name.lower())
        return list(columns) if columns else None
    if isinstance(source, Scope):
        query = source.expression
        if isinstance(query, (exp.Select, exp.SetOperation)):
            names = query.named_selects
            if names and all(names) and not any(p.is_star for p in query.selects):
                return list(names)
    return None


def _star_sources(scope: Scope, star: exp.Expression) -> list[tuple[str, object]] | None:
    sources = list(scope.selected_sources.items())
    if isinstance(star, exp.Column):  # t.*
        wanted = star.table.lower()
        sources = [(name, src) for name, (_, src) in sources if name.lower() == wanted]
        return sources or None
    return [(name, src) for name, (_, src) in sources]


def _expand_one(scope: Scope, ctx: RuleContext) -> bool:
    select = scope.expression
    projections: list[exp.Expression] = []
    several = len(scope.selected_sources) > 1
    for projection in select.expressions:
        if not projection.is_star:
            projections.append(projection)
            continue
        star = projection.this if isinstance(projection, exp.Column) else projection
        if isinstance(star, exp.Star) and any(
            star.args.get(k) for k in ("except_", "except", "replace", "rename")
        ):
            return False
        qualify = several or isinstance(projection, exp.Column)
        sources = _star_sources(scope, projection)
        if not sources:
            return False
        for name, source in sources:
            columns = _source_columns(source, ctx)
            if columns is None:
                return False
            for column in columns:
                projections.append(
                    exp.column(
                        exp.to_identifier(column),
                        table=exp.to_identifier(name) if qualify else None,
                    )
                )
    select.set("expressions", projections)
    return True


def expand_stars(
    expression: exp.Expression, selects: list[exp.Select], ctx: RuleContext
) -> tuple[exp.Expression, list[exp.Select]]:
    """Replace each star of ``selects`` with explicit columns; return the selects left unresolved."""
    wanted = {id(s) for s in selects}
    for scope in traverse_scope(expression):  # innermost scopes first
        select = scope.expression
        if id(select) not in wanted:
            continue
        if _expand_one(scope, ctx):
            ctx.report(
                "star_expanded",
                f"SELECT * was expanded to the columns {', '.join(p.sql(ctx.dialect) for p in select.expressions)}.",
                select,
                "rewrite",
            )
    return expression, [s for s in selects if any(p.is_star for p in s.expressions)]


def star_message(select: exp.Select, star: exp.Expression, ctx: RuleContext, where: str) -> str:
    """A refusal the self-correction step can act on: which columns exist, where known."""
    hints: list[str] = []
    if ctx.schema:
        for table in select.find_all(exp.Table):
            if table.parent_select is not select:
                continue
            columns = ctx.schema.get(table.name.lower())
            if columns:
                hints.append(f"{table.name} has columns {', '.join(columns)}")
    text = f"SELECT {star.sql(ctx.dialect)} {where} is not allowed: list the columns you need explicitly"
    return text + (f" ({'; '.join(hints)})." if hints else ".")
