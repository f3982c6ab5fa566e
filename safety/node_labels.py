"""How a finding's message names a node (``label``) and says where it sits (``where``).

Example:
    >>> import sqlglot
    >>> from sqlglot import exp
    >>> tree = sqlglot.parse_one("WITH t AS (DELETE FROM x RETURNING 1) SELECT * FROM t", read="postgres")
    >>> node = tree.find(exp.Delete)
    >>> f"{label(node)} {where(node)}"
    'DELETE inside the CTE t'
"""

from __future__ import annotations

import re

from sqlglot import exp

__all__ = ["label", "where"]


def label(node: exp.Expr) -> str:
    """How a node is named in a message: ``DELETE``, ``EXPLAIN command``, ``TRUNCATE TABLE``."""
    if isinstance(node, exp.Command):
        return f"{str(node.this).upper()} command"
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", type(node).__name__).upper()


def where(node: exp.Expr) -> str:
    """Where a node sits, for messages: inside a CTE, a subquery, or the statement itself."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.CTE):
            return f"inside the CTE {parent.alias or '(unnamed)'}"
        if isinstance(parent, (exp.Subquery, exp.Exists)):
            return "inside a subquery"
        parent = parent.parent
    return "in the statement"
