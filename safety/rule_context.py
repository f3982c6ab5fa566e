"""``RuleContext``: what every validation rule reads and where it reports; ``Rule``: a rule's type.

The rules themselves are in ``safety.rules`` (and the modules it lists); they take the context,
and the context names only the data they read, so no rule module is imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from .catalog import SchemaCatalog
from .codes import check_code
from .functions import FunctionAllowlist
from .models import SafetyFinding, Severity
from .name_rules import NameRules
from .policy import SafetyPolicy

if TYPE_CHECKING:
    from .lineage import ViewLineages
    from .row_predicates import RowFilters

__all__ = ["Rule", "RuleContext"]


@dataclass
class RuleContext:
    """What every rule may read (dialect, policy, schema, raw text) and where it reports findings.

    ``catalog`` is the real schema (None when unknown); ``default_schema`` is the schema an
    unqualified table lives in; ``names`` the policy's table/column lists, parsed once;
    ``protected`` the lower-case names of the columns those lists keep from being read.
    """

    dialect: str
    policy: SafetyPolicy
    functions: FunctionAllowlist
    schema: Mapping[str, Sequence[str]] | None = None
    catalog: SchemaCatalog | None = None
    default_schema: str | None = None
    names: NameRules = field(default_factory=NameRules.from_policy)
    sql: str = ""
    protected: frozenset[str] = frozenset()
    row_filters: RowFilters | None = None
    views: ViewLineages | None = None
    findings: list[SafetyFinding] = field(default_factory=list)
    halted: bool = False
    _index: dict[type, list[exp.Expression]] | None = None
    _root: exp.Expression | None = None

    def report(
        self,
        code: str,
        message: str,
        node: exp.Expr | None = None,
        severity: Severity = "error",
    ) -> None:
        check_code(code)  # a code without a kind in safety/codes.py is a programming error
        if any(f.code == code and f.message == message for f in self.findings):
            return  # the same refusal twice (one column named twice) is told once
        # model_construct: the fields are built right here, so pydantic's validation is skipped (hot path).
        self.findings.append(
            SafetyFinding.model_construct(
                code=code,
                message=message,
                severity=severity,
                node=type(node).__name__ if node else None,
            )
        )

    def index(self, root: exp.Expression) -> dict[type, list[exp.Expression]]:
        """Every node of ``root`` grouped by class: the tree is walked once, until ``invalidate``."""
        if self._index is None or self._root is not root:
            self._index = _index_tree(root)
            self._root = root
        return self._index

    def of(self, root: exp.Expression, *classes: type) -> list[exp.Expression]:
        """The nodes of ``root`` that are instances of ``classes`` (subclasses included)."""
        found: list[exp.Expression] = []
        for cls, nodes in self.index(root).items():
            if issubclass(cls, classes):
                found.extend(nodes)
        return found

    def invalidate(self) -> None:
        self._index = None

    @property
    def refused(self) -> bool:
        return any(f.blocking for f in self.findings)


Rule = Callable[[exp.Expression, RuleContext], exp.Expression]


def _index_tree(root: exp.Expression) -> dict[type, list[exp.Expression]]:
    """Group every node by class in one pass over ``args`` (cheaper than ``Expression.walk``)."""
    index: dict[type, list[exp.Expression]] = {}
    stack = [root]
    expression = exp.Expression
    while stack:
        node = stack.pop()
        cls = type(node)
        bucket = index.get(cls)
        if bucket is None:
            index[cls] = [node]
        else:
            bucket.append(node)
        for value in node.args.values():
            if type(value) is list:
                stack.extend(v for v in value if isinstance(v, expression))
            elif isinstance(value, expression):
                stack.append(value)
    return index
