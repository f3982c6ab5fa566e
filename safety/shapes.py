"""The shapes the validator understands: an allowlist of node types and of the places a name may stand.

Resolution (``safety.resolve``) follows every ``exp.Column`` to a real column. A name the parser
put anywhere else is invisible to it, and an engine may still read it as a column: SQLite reads
``'c'.email`` and ``coalesce(info -> '$.ssn', 0)`` (parsed as a lambda over ``info``) as column
references, DuckDB reads ``email.upper()`` as ``upper(email)``. So the walk fails closed:

- every node must be of a type listed here (query structure, literals, functions, operators and
  predicates; functions are judged by name by the function allowlist): anything else is refused
  with ``unsupported_node``;
- when the policy names tables or columns, every identifier must stand where resolution sees it
  (the parts of a column or table reference, an alias, a lambda's own variable, a struct key, a
  field of a resolved column, a collation): anywhere else, and for a string literal standing as
  a name (SQLite's ``x.'email'``), the statement is refused with ``opaque_reference``;
- a lambda is accepted only where the engine has lambdas (DuckDB) and only as the argument of a
  function that takes one; anywhere else ``->`` is an operator and the lambda a misreading;
- a bare keyword (``exp.Var``, e.g. a date part) spelled like a column the policy protects is
  refused too, since some engines take a column where a keyword is expected.

Example:
    >>> import sqlglot
    >>> from safety.catalog import SchemaCatalog
    >>> tree = sqlglot.parse_one("SELECT email.upper() FROM users", read="duckdb")
    >>> [code for code, _, _ in opaque_names(tree, "duckdb", frozenset({"email"}))]
    ['opaque_reference']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlglot import exp

__all__ = [
    "LAMBDA_DIALECTS",
    "LAMBDA_FUNCTIONS",
    "opaque_names",
    "understood",
    "unsupported_nodes",
]

# Whole families: functions (the function allowlist judges each by name), operators and predicates.
_FAMILIES: tuple[type, ...] = tuple(
    getattr(exp, name)
    for name in ("Func", "Binary", "Unary", "Predicate", "JSONPathPart", "DataType")
    if hasattr(exp, name)
)
# Query structure and leaves, by name.
_NODES = frozenset(
    getattr(exp, name)
    for name in (
        "Select",
        "Union",
        "Intersect",
        "Except",
        "Subquery",
        "With",
        "CTE",
        "From",
        "Join",
        "Where",
        "Group",
        "Having",
        "Qualify",
        "Order",
        "Ordered",
        "Limit",
        "Offset",
        "Fetch",
        "LimitOptions",
        "Distinct",
        "Window",
        "WindowSpec",
        "Lateral",
        "Values",
        "Tuple",
        "TableAlias",
        "Alias",
        "Table",
        "Column",
        "Identifier",
        "Star",
        "Literal",
        "Boolean",
        "Null",
        "DataTypeParam",
        "Var",
        "Slice",
        "Lambda",
        "JSONPath",
        "PositionalColumn",
        "TableColumn",
        "Hint",
        "Lock",
        "Into",
        "GroupingSets",
        "Cube",
        "Rollup",
        "WithinGroup",
        "Filter",
        "IgnoreNulls",
        "RespectNulls",
        "HavingMax",
        "SessionParameter",
        "Parameter",
        "National",
        "HexString",
        "BitString",
        "ByteString",
        "RawString",
        "UnicodeString",
        "Bracket",
        "Interval",
        "TableSample",
    )
    if hasattr(exp, name)
)
_KNOWN: dict[type, bool] = {}


def understood(cls: type) -> bool:
    """True when the validator's rules and resolution know what nodes of ``cls`` mean."""
    known = _KNOWN.get(cls)
    if known is None:
        known = _KNOWN[cls] = cls in _NODES or issubclass(cls, _FAMILIES)
    return known


def unsupported_nodes(classes: Iterable[type]) -> list[type]:
    """The classes of ``classes`` (a tree's node types) the validator does not understand."""
    return [cls for cls in classes if not understood(cls)]


#: Dialects whose engines have lambdas (``x -> x + 1``, ``lambda x: x + 1``).
LAMBDA_DIALECTS = frozenset({"duckdb"})
#: The functions whose arguments may be lambdas there (names lower-case, as sqlglot reports them).
LAMBDA_FUNCTIONS = frozenset(
    {
        "transform",
        "list_transform",
        "array_transform",
        "list_apply",
        "array_apply",
        "apply",
        "filter",
        "list_filter",
        "array_filter",
        "list_reduce",
        "array_reduce",
        "reduce",
    }
)

# (parent type, arg key) where an identifier is a name resolution sees or a name of the query's own.
_NAME_PLACES = frozenset(
    {
        (exp.Column, "this"),
        (exp.Column, "table"),
        (exp.Column, "db"),
        (exp.Column, "catalog"),
        (exp.Table, "this"),
        (exp.Table, "db"),
        (exp.Table, "catalog"),
        (exp.TableAlias, "this"),
        (exp.TableAlias, "columns"),
        (exp.Alias, "alias"),
        (exp.Window, "alias"),
        (exp.Window, "this"),  # the name of a WINDOW clause's window
        (exp.Join, "using"),
        (exp.Lambda, "expressions"),
        (exp.PropertyEQ, "this"),
        (exp.Kwarg, "this"),
        (exp.Collate, "expression"),
    }
)


def _function_name(node: exp.Expr | None) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return ""


def _lambda_variable(identifier: exp.Expression) -> bool:
    name = identifier.name
    parent = identifier.parent
    while parent is not None:
        if isinstance(parent, exp.Lambda) and any(e.name == name for e in parent.expressions):
            return True
        parent = parent.parent
    return False


def _field_of_column(dot: exp.Expression) -> bool:
    """``Dot`` over a column reference (a struct field, a method on a resolved column): the
    column is resolved and judged like any other (``(c).email`` over a table alias is a whole-row
    reference to the resolver)."""
    base = dot.this
    while isinstance(base, (exp.Dot, exp.Paren)):
        base = base.this
    return isinstance(base, exp.Column) and isinstance(base.this, exp.Identifier)


def _inside_opaque_dot(node: exp.Expression) -> bool:
    parent = node.parent
    while isinstance(parent, (exp.Paren, exp.Dot)):
        if isinstance(parent, exp.Dot) and not _field_of_column(parent):
            return True
        parent = parent.parent
    return False


def opaque_names(
    tree: exp.Expression,
    dialect: str,
    protected: frozenset[str],
    nodes: Iterable[exp.Expression] | None = None,
) -> Iterator[tuple[str, str, exp.Expression]]:
    """(code, message, node) for every name resolution cannot see, in ``tree``.

    ``protected`` is the lower-case names of columns the policy protects (a keyword spelled
    like one is refused); ``nodes``, when given, is every node of the tree (the rule context's
    index), so the tree is not walked again.
    """
    for node in tree.walk() if nodes is None else nodes:
        if isinstance(node, exp.Identifier):
            parent = node.parent
            key = (type(parent), node.arg_key)
            if key in _NAME_PLACES or _lambda_variable(node):
                continue
            if isinstance(parent, exp.Dot) and node.arg_key == "expression":
                if _field_of_column(parent):
                    continue
            if _inside_opaque_dot(node):
                continue  # the Dot around it is reported, once
            yield (
                "opaque_reference",
                f"The name {node.sql(dialect)} stands where it is not a column reference the "
                f"validator can follow (in {_shown(parent, dialect)}); write it as a plain column, "
                f"e.g. upper(col) instead of col.upper().",
                node,
            )
        elif isinstance(node, exp.Column):
            parts = [node.args.get(k) for k in ("table", "db", "catalog")]
            if not isinstance(node.this, (exp.Identifier, exp.Star)) or any(
                p is not None and not isinstance(p, exp.Identifier) for p in parts
            ):
                yield (
                    "opaque_reference",
                    f"The reference {node.sql(dialect)} names a column with something that is "
                    f"not a name (a quoted string?); quote names with the dialect's identifier "
                    f"quotes.",
                    node,
                )
        elif isinstance(node, exp.Table):
            parts = [node.args.get(k) for k in ("db", "catalog")]
            if any(p is not None and not isinstance(p, exp.Identifier) for p in parts):
                yield (
                    "opaque_reference",
                    f"The table {node.sql(dialect)} is named with something that is not a name.",
                    node,
                )
        elif isinstance(node, exp.Lambda):
            function = _function_name(node.parent)
            if dialect not in LAMBDA_DIALECTS or function not in LAMBDA_FUNCTIONS:
                yield (
                    "opaque_reference",
                    f"The expression {node.sql(dialect)} reads as a lambda, which "
                    f"{dialect} has not in this place (an arrow operator such as ->?); name the "
                    f"columns with a function instead, e.g. json_extract(col, '$.key').",
                    node,
                )
        elif isinstance(node, exp.Dot):
            if not _field_of_column(node) and not _inside_opaque_dot(node):
                yield (
                    "opaque_reference",
                    f"The expression {node.sql(dialect)} reads a field or method of something "
                    f"that is not a column reference; call the function on the column instead.",
                    node,
                )
        elif isinstance(node, exp.Var) and node.name.lower() in protected:
            yield (
                "opaque_reference",
                f"The keyword {node.sql(dialect)} is spelled like a protected column; the engine "
                f"could read it as that column.",
                node,
            )


def _shown(node: exp.Expr | None, dialect: str) -> str:
    if node is None:
        return "the statement"
    text = node.sql(dialect)
    return text if len(text) <= 80 else text[:77] + "..."
