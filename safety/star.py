"""``SELECT *``: expand it to the schema's columns the policy allows, or explain what to write.

Expansion (the default) gives the reviewer explicit columns. A column the policy denies (or does
not allow) is never expanded: it is left out of the list, and a ``star_columns_omitted``
rewrite names it; when nothing is left the star is refused (``select_star``). Expansion follows
alias column lists (``users AS c(a, b)`` expands to ``a, b`` and the remaining columns) and
schema-qualified tables.

Stars anywhere else (``CAST(c.* AS TEXT)``, ``ROW(c.*)``, ``count(t.*)``) and DuckDB's column
selectors (``COLUMNS(...)``, ``#n``) are refused: they read columns nobody listed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from .node_labels import where

if TYPE_CHECKING:
    from .rule_context import RuleContext

__all__ = ["check_selectors", "expand_stars", "star_message"]


def _table_columns(source: exp.Table, ctx: RuleContext, omitted: list[str]) -> list[str] | None:
    """The names ``*`` stands for over a real table, without the ones the policy refuses."""
    catalog = ctx.catalog
    if not isinstance(source.this, exp.Identifier) or catalog is None or source.catalog:
        return None
    schema = catalog.schema_of(source.db)
    real = catalog.columns(schema, source.name)
    if not real:
        return None
    renamed = list(source.alias_column_names) if source.args.get("alias") else []
    if len(renamed) > len(real):
        return None
    shown = catalog.original_columns(schema, source.name) or real
    visible = renamed + shown[len(renamed) :]
    kept: list[str] = []
    for index, name in enumerate(visible):
        if ctx.names.column_verdict(schema, source.name.lower(), real[index], ctx.default_schema):
            omitted.append(f"{source.name}.{real[index]}")
        else:
            kept.append(name)
    return kept or None


def _source_columns(source: object, ctx: RuleContext, omitted: list[str]) -> list[str] | None:
    if isinstance(source, exp.Table):
        return _table_columns(source, ctx, omitted)
    if isinstance(source, Scope):
        query = source.expression
        if isinstance(query, (exp.Select, exp.SetOperation)):
            names = query.named_selects
            if names and all(names) and not any(p.is_star for p in query.selects):
                return list(names)
    return None


def _star_sources(scope: Scope, star: exp.Expr) -> list[tuple[str, object]] | None:
    sources: list[tuple[str, object]] = [
        (name, src) for name, (_, src) in scope.selected_sources.items()
    ]
    if isinstance(star, exp.Column):  # t.*
        wanted = star.table.lower()
        return [(name, src) for name, src in sources if name.lower() == wanted] or None
    return sources


def _expand_one(scope: Scope, ctx: RuleContext, omitted: list[str]) -> bool:
    select = scope.expression
    if any(
        join.args.get("using") or join.method.upper() == "NATURAL"
        for join in select.args.get("joins") or ()
    ):
        return False  # USING / NATURAL merge columns: expanding per table would change the result
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
            columns = _source_columns(source, ctx, omitted)
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
        omitted: list[str] = []
        if _expand_one(scope, ctx, omitted):
            if omitted:
                ctx.report(
                    "star_columns_omitted",
                    f"SELECT * left out the columns the policy does not let this query read: "
                    f"{', '.join(omitted)}.",
                    select,
                    "rewrite",
                )
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
    if ctx.catalog is not None:
        for table in select.find_all(exp.Table):
            if table.parent_select is not select:
                continue
            columns = ctx.catalog.original_columns(ctx.catalog.schema_of(table.db), table.name)
            if columns:
                hints.append(f"{table.name} has columns {', '.join(columns)}")
    text = f"SELECT {star.sql(ctx.dialect)} {where} is not allowed: list the columns you need explicitly"
    return text + (f" ({'; '.join(hints)})." if hints else ".")


def _projection_star(star: exp.Star) -> bool:
    node: exp.Expression = star
    if isinstance(star.parent, exp.Column):
        node = star.parent
    parent = node.parent
    if isinstance(parent, exp.Select) and node.arg_key == "expressions":
        return True
    return isinstance(parent, exp.Count) and node is star and node.arg_key == "this"


def check_selectors(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Refuse stars inside expressions and DuckDB column selectors (``COLUMNS(...)``, ``#n``)."""
    for node in ctx.of(expression, exp.Columns):
        ctx.report(
            "column_selector",
            f"The column selector {node.sql(ctx.dialect)} {where(node)} picks columns by pattern; list the "
            f"columns explicitly.",
            node,
        )
    positional = getattr(exp, "PositionalColumn", None)
    if positional is not None:
        for node in ctx.of(expression, positional):
            ctx.report(
                "positional_reference",
                f"The positional column reference {node.sql(ctx.dialect)} {where(node)} does not name a column; "
                f"use the column's name.",
                node,
            )
    for star in ctx.of(expression, exp.Star):
        assert isinstance(star, exp.Star)
        if isinstance(star.parent, exp.Columns) or _projection_star(star):
            continue
        shown = star.parent.sql(ctx.dialect) if isinstance(star.parent, exp.Column) else "*"
        ctx.report(
            "nested_star",
            f"The star {shown} {where(star)} stands inside an expression, so the columns it reads are not "
            f"listed; name the columns instead.",
            star.parent if isinstance(star.parent, exp.Column) else star,
        )
    return expression
