"""Validation and rewriting rules over the sqlglot AST.

Each rule is ``rule(expression, context) -> expression``: it reports findings to the
context and returns the (possibly rewritten) tree. ``RULES`` lists them in the order the
validator applies them; a rule may stop the pipeline by setting ``context.halted``.

The context (``safety.rule_context``) and the node labels in messages (``safety.node_labels``)
sit below every rule module, so the rules written in their own modules (``access``, ``star``,
``dialect_rules``, ``masking``, ``row_filters``, ``value_bound``) never import this one.
"""

from __future__ import annotations

import re

from sqlglot import exp

from .access import check_access
from .dialect_rules import check_executable_comments, check_regexp, check_session_state
from .masking import apply_masks
from .node_labels import label, where
from .row_filters import filter_rows
from .rule_context import Rule, RuleContext
from .shapes import opaque_names, unsupported_nodes
from .star import check_selectors, expand_stars, star_message
from .value_bound import bound_values, unwrap_value_bound

__all__ = [
    "RULES",
    "Rule",
    "RuleContext",
    "apply_masks",
    "bound_values",
    "check_access",
    "check_executable_comments",
    "check_file_tables",
    "check_functions",
    "check_hints",
    "check_locks",
    "check_regexp",
    "check_root",
    "check_select_into",
    "check_selectors",
    "check_session_state",
    "check_shapes",
    "check_statements_in_tree",
    "check_system_tables",
    "enforce_limit",
    "filter_rows",
    "handle_star",
    "unwrap_value_bound",
]


# --- statement shape ---------------------------------------------------------------------

_QUERY_ROOTS = (exp.Select, exp.SetOperation, exp.Subquery)


def check_root(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """The statement must be a query: SELECT, a set operation, or WITH ... SELECT."""
    while isinstance(expression, exp.Subquery) and not any(
        v for k, v in expression.args.items() if k != "this"
    ):
        expression = expression.this
    if not isinstance(expression, _QUERY_ROOTS):
        ctx.report(
            "not_a_query",
            f"The statement ({label(expression)}) is not a query: only SELECT (optionally with WITH, "
            f"UNION, INTERSECT or EXCEPT) may run.",
            expression,
        )
        ctx.halted = True
    elif isinstance(expression, exp.Select) and not expression.expressions:
        ctx.report(
            "empty_select",
            "The SELECT has no columns (in MySQL, # starts a comment that runs to the end of the line).",
            expression,
        )
        ctx.halted = True
    return expression


_DML = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.TruncateTable,
    exp.Returning,
    exp.OnConflict,
)
_COMMANDS = tuple(
    getattr(exp, name)
    for name in (
        "Command",
        "Set",
        "SetItem",
        "Pragma",
        "Transaction",
        "Commit",
        "Rollback",
        "Use",
        "Attach",
        "Detach",
        "Install",
        "Copy",
        "LoadData",
        "Execute",
        "ExecuteSql",
        "Kill",
        "Export",
        "Show",
        "Describe",
        "Summarize",
        "Declare",
        "DeclareItem",
        "Analyze",
        "Grant",
        "Revoke",
        "Refresh",
        "Cache",
        "Uncache",
        "LockingStatement",
        "ConnectTo",
        "Disconnect",
        "AlterSession",
    )
    if hasattr(exp, name)
)
# Classes of the DDL/DML modules that do appear inside ordinary queries.
_HARMLESS_STATEMENT_PARTS = frozenset({exp.Comprehension, exp.CharacterSet, exp.Heredoc})
# Clauses that only exist inside a statement node which is reported itself.
_STATEMENT_CLAUSES = tuple(
    getattr(exp, name)
    for name in (
        "Returning",
        "OnConflict",
        "When",
        "Whens",
        "SetItem",
        "DeclareItem",
        "CopyParameter",
    )
    if hasattr(exp, name)
)
_STATEMENT_MODULES = ("sqlglot.expressions.ddl", "sqlglot.expressions.dml")


_CATEGORIES: dict[type, str | None] = {}


def _statement_category(cls: type) -> str | None:
    try:
        return _CATEGORIES[cls]
    except KeyError:
        pass
    category: str | None = None
    if issubclass(cls, _DML):
        category = "dml_in_tree"
    elif issubclass(cls, _COMMANDS):
        category = "command_in_tree"
    elif cls.__module__ in _STATEMENT_MODULES and cls not in _HARMLESS_STATEMENT_PARTS:
        category = "ddl_in_tree"
    _CATEGORIES[cls] = category
    return category


def check_statements_in_tree(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """No DML, DDL or command node anywhere: data-modifying CTEs, subqueries, EXPLAIN wrappers."""
    kinds = {
        "dml_in_tree": "data-modifying",
        "command_in_tree": "command",
        "ddl_in_tree": "schema-changing",
    }
    for cls, nodes in ctx.index(expression).items():
        category = _statement_category(cls)
        if category is None:
            continue
        for node in nodes:
            if issubclass(cls, _STATEMENT_CLAUSES) and node.parent is not None:
                continue
            ctx.report(
                category,
                f"{label(node)} {where(node)} is not allowed: a {kinds[category]} statement cannot run "
                f"through a read-only query.",
                node,
            )
    return expression


def check_select_into(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """``SELECT ... INTO`` creates a table or writes variables/files."""
    for node in ctx.of(expression, exp.Into):
        ctx.report(
            "select_into",
            f"SELECT ... INTO {node.this.sql(ctx.dialect) if node.this else ''} {where(node)} is not allowed: "
            f"it writes a table, variable or file; return the rows instead.".replace("  ", " "),
            node,
        )
    return expression


def check_locks(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Locking clauses (FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE) take row locks."""
    for node in ctx.of(expression, exp.Lock):
        clause = "FOR UPDATE" if node.args.get("update") else "FOR SHARE"
        ctx.report(
            "locking_clause",
            f"The {clause} locking clause {where(node)} is not allowed: a read-only query takes no row locks; "
            f"remove it.",
            node,
        )
    return expression


def check_hints(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Optimizer hints can lift per-statement limits (MySQL ``MAX_EXECUTION_TIME``)."""
    for node in ctx.of(expression, exp.Hint):
        ctx.report(
            "optimizer_hint",
            f"The optimizer hint {node.sql(ctx.dialect)} {where(node)} is not allowed; remove it.",
            node,
        )
    return expression


# --- functions and sources -----------------------------------------------------------------


def check_functions(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Every function call must pass the dialect's allowlist; denylisted ones never do."""
    for node in ctx.of(expression, exp.Func):
        if not isinstance(node, exp.Func) or isinstance(node, (exp.Binary, exp.Connector)):
            continue
        verdict = ctx.functions(node)
        if verdict is None:
            continue
        if verdict.code == "function_denied":
            message = (
                f"The function {verdict.name}() {where(node)} is not allowed: it has side effects or reaches "
                f"files, the network, locks, sleep or server state."
            )
        else:
            message = (
                f"The function {verdict.name}() {where(node)} is not on the {ctx.dialect} allowlist; use a "
                f"standard function, or add it to SafetyPolicy.extra_functions if it is safe."
            )
        ctx.report(verdict.code, message, node)
    return expression


_FILE_LIKE = re.compile(
    r"[/\\:~]|\.(csv|tsv|parquet|json|jsonl|ndjson|txt|xlsx|gz|zst|db|duckdb|sqlite|arrow|avro)$",
    re.IGNORECASE,
)


def check_file_tables(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """A table name that is a path or URL (DuckDB reads ``FROM '/etc/passwd'`` as a file)."""
    for node in ctx.of(expression, exp.Table):
        if not isinstance(node, exp.Table):
            continue
        if isinstance(node.this, exp.Identifier) and _FILE_LIKE.search(node.name):
            ctx.report(
                "file_as_table",
                f"The table name {node.name!r} {where(node)} looks like a file path or URL; only database "
                f"tables may be read.",
                node,
            )
    return expression


_SYSTEM_SCHEMAS = frozenset(
    {
        "pg_catalog",
        "information_schema",
        "mysql",
        "performance_schema",
        "sys",
        "pg_toast",
        "sqlite_temp",
        "temp",
    }
)
_SYSTEM_CATALOGS = frozenset({"system", "temp"})
_SYSTEM_PREFIXES = ("pg_", "sqlite_", "duckdb_")


def check_system_tables(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Catalog tables hold password hashes, settings and other users' objects; refused by default.

    Judged on the resolved name: the schema written or the engine's default one made explicit
    (``main.sqlite_master`` is ``sqlite_master``), and a catalog name prefix in any schema, since
    PostgreSQL finds ``pg_catalog`` before the default schema.
    """
    if ctx.policy.allow_system_tables:
        return expression
    for node in ctx.of(expression, exp.Table):
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            continue
        schema = (node.db or ctx.default_schema or "").lower()
        name = node.name.lower()
        if (
            schema in _SYSTEM_SCHEMAS
            or node.catalog.lower() in _SYSTEM_CATALOGS
            or name.startswith(_SYSTEM_PREFIXES)
        ):
            shown = ".".join(p for p in (node.catalog, node.db, node.name) if p)
            ctx.report(
                "system_table",
                f"The catalog table {shown} {where(node)} may not be read; query the application's own tables.",
                node,
            )
    return expression


# --- SELECT * ----------------------------------------------------------------------------


def _star_projections(select: exp.Select) -> list[exp.Expression]:
    return [p for p in select.expressions if p.is_star]


def _in_exists(select: exp.Select) -> bool:
    parent = select.parent
    return isinstance(parent, exp.Exists) or (
        isinstance(parent, exp.Subquery) and isinstance(parent.parent, exp.Exists)
    )


def handle_star(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """``SELECT *`` is expanded to the schema's columns (default) or refused (``star="reject"``)."""
    selects = [
        n
        for n in ctx.of(expression, exp.Select)
        if isinstance(n, exp.Select) and _star_projections(n) and not _in_exists(n)
    ]
    if not selects:
        return expression
    if ctx.policy.star == "expand" and ctx.catalog is not None:
        expression, unresolved = expand_stars(expression, selects, ctx)
        ctx.invalidate()
        selects = unresolved
        if not selects:
            return expression
    for select in selects:
        star = _star_projections(select)[0]
        ctx.report("select_star", star_message(select, star, ctx, where(select)), star)
    return expression


# --- LIMIT -------------------------------------------------------------------------------


def enforce_limit(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """The outermost query keeps at most ``policy.max_limit`` rows: LIMIT added or lowered.

    A LIMIT the policy adds or lowers is ``max_limit + 1``: the executor keeps ``max_limit``
    rows and the one extra row tells it, honestly, that the result was cut (``truncated``). A
    LIMIT the question asked for (at most ``max_limit``) is kept as written: those rows are the
    whole answer. The statement the reviewer approves is the one that runs, so the extra row is
    in the approved text, never added behind the reviewer's back.
    """
    if not ctx.policy.enforce_limit or ctx.refused:
        return expression
    cap = ctx.policy.max_limit
    peek = cap + 1
    kept = f"at most {cap} rows are kept; the extra row only shows whether there were more"
    limit = expression.args.get("limit")
    if limit is None:
        expression.set("limit", exp.Limit(expression=exp.Literal.number(peek)))
        ctx.report(
            "limit_added",
            f"LIMIT {peek} was added to the outermost query: {kept}.",
            expression,
            "rewrite",
        )
        return expression
    if isinstance(limit, exp.Fetch):
        count = limit.args.get("count")
        options = limit.args.get("limit_options")
        if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
            ctx.report(
                "limit_not_literal",
                f"FETCH ... PERCENT / WITH TIES cannot be bounded; use LIMIT n with n at most {cap}.",
                limit,
            )
            return expression
        if count is None:
            limit.set("count", exp.Literal.number(peek))
            ctx.report(
                "limit_added",
                f"FETCH FIRST {peek} ROWS was set on the outermost query: {kept}.",
                limit,
                "rewrite",
            )
            return expression
        _lower(limit, "count", count, cap, ctx)
        return expression
    _lower(limit, "expression", limit.expression, cap, ctx)
    return expression


def _lower(
    limit: exp.Expression, arg: str, value: exp.Expression | None, cap: int, ctx: RuleContext
) -> None:
    if not (isinstance(value, exp.Literal) and value.is_int):
        shown = value.sql(ctx.dialect) if value is not None else "?"
        ctx.report(
            "limit_not_literal",
            f"LIMIT {shown} is not a whole number literal, so the row cap cannot be checked; "
            f"use LIMIT n with n at most {cap}.",
            limit,
        )
        return
    if int(value.name) > cap:
        limit.set(arg, exp.Literal.number(cap + 1))
        ctx.report(
            "limit_lowered",
            f"LIMIT {value.name} was lowered to {cap + 1}: the row cap keeps {cap} rows, and the "
            "extra row shows that the result was cut.",
            limit,
            "rewrite",
        )


_NAME_NODES = (exp.Identifier, exp.Column, exp.Table, exp.Lambda, exp.Dot, exp.Var)


def check_shapes(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Fail closed on what resolution cannot see: node types outside the allowlist, and (when
    the policy names tables or columns) names standing where no column reference is (see
    ``safety.shapes``)."""
    index = ctx.index(expression)
    for cls in unsupported_nodes(index):
        node = index[cls][0]
        ctx.report(
            "unsupported_node",
            f"The construct {label(node)} {where(node)} is not one the validator knows how to "
            f"check; rewrite it with plain SELECT clauses, operators and functions.",
            node,
        )
    for node in ctx.of(expression, exp.Lambda):
        # The parser reads every name in a lambda's body as its parameter, even inside a
        # subquery there (DuckDB ``email -> (SELECT max(email) FROM customers)``), so such a
        # subquery's columns cannot be resolved; DuckDB refuses subqueries in lambdas anyway.
        if node.this is not None and node.this.find(exp.Query):
            ctx.report(
                "opaque_reference",
                f"The lambda {where(node)} holds a subquery, whose names cannot be told apart "
                f"from the lambda's parameters; compute the subquery outside the lambda.",
                node,
            )
    if ctx.names.empty and not ctx.policy.require_resolution and not ctx.policy.masked_columns:
        return expression
    for code, message, node in opaque_names(
        expression, ctx.dialect, ctx.protected, ctx.of(expression, *_NAME_NODES)
    ):
        ctx.report(code, message, node)
    return expression


RULES: tuple[Rule, ...] = (
    unwrap_value_bound,
    check_root,
    check_executable_comments,
    check_statements_in_tree,
    check_select_into,
    check_locks,
    check_hints,
    check_session_state,
    check_functions,
    check_regexp,
    check_file_tables,
    check_system_tables,
    check_selectors,
    handle_star,
    check_shapes,
    filter_rows,
    check_access,
    apply_masks,
    enforce_limit,
    bound_values,
)
