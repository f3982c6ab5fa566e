"""SqlValidator: parse once in the target dialect, run the rules, render what may execute."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError, UnsupportedError

from .catalog import DEFAULT_SCHEMAS, SchemaCatalog, SchemaInput
from .dialect_rules import render
from .dialects import check_dialect
from .errors import UnregisteredFindingCode
from .functions import FunctionAllowlist
from .lineage import LineageRules, ViewLineages
from .masking import MaskRules
from .models import SafetyFinding, ValidationResult
from .name_rules import NameRules
from .node_labels import label
from .policy import SafetyPolicy
from .row_predicates import IdentityValue, RowFilters
from .rule_context import Rule, RuleContext
from .rules import RULES
from .statement import _minted

__all__ = ["SqlValidator"]


def _protected_names(
    names: NameRules, catalog: SchemaCatalog | None, default_schema: str | None
) -> frozenset[str]:
    """Lower-case names of the columns the policy keeps from being read (for ``safety.shapes``)."""
    protected = {column for _, _, column in names.denied_columns}
    views_count = isinstance(names, LineageRules) and (names.has_column_rules or bool(names.masked))
    if (names.allowed_columns is not None or views_count) and catalog is not None:
        for schema, table in catalog.tables():
            for column in catalog.columns(schema, table) or ():
                if names.column_verdict(schema, table, column, default_schema):
                    protected.add(column.lower())
    return frozenset(protected)


class SqlValidator:
    """Validates model-written SQL against a ``SafetyPolicy`` for one dialect.

    The SQL to execute is always the re-rendered AST (``ast.sql(dialect, comments=False)``),
    never the submitted text, so comments and odd quoting cannot smuggle anything past the rules
    (MySQL executable comments are refused outright).

    ``schema`` is the real schema of the target database, flat ``{table: [columns]}`` or
    schema-qualified ``{"schema.table": [columns]}``; ``default_schema`` is the schema unqualified
    tables live in (defaults: ``main`` for SQLite/DuckDB, ``public`` for PostgreSQL; for MySQL
    pass the URL's database). With table or column rules in the policy, every reference is
    resolved against that schema first (see ``safety.resolve``). ``views`` maps the views among
    those tables to their definitions (None: unreadable), so that rules follow what a view reads
    (see ``safety.lineage``); ``safety.read_schema`` gives all three. ``identity`` is the
    asker's attributes, which the policy's row filters take (see ``safety.row_filters``).

    Example:
        >>> v = SqlValidator(dialect="sqlite", policy=SafetyPolicy(max_limit=10))
        >>> v.validate("select name from users").sql  # 10 rows kept, the 11th tells "cut"
        'SELECT name FROM users LIMIT 11'
        >>> v.row_limit
        10
        >>> v.validate("with x as (delete from users returning *) select name from x").refusal.code
        'dml_in_tree'
    """

    def __init__(
        self,
        dialect: str,
        policy: SafetyPolicy | None = None,
        schema: SchemaInput | None = None,
        functions: FunctionAllowlist | None = None,
        rules: Sequence[Rule] = RULES,
        *,
        default_schema: str | None = None,
        views: Mapping[str, str | None] | None = None,
        identity: Mapping[str, IdentityValue] | None = None,
    ) -> None:
        self.dialect = check_dialect(dialect)
        self._dialect = Dialect.get_or_raise(self.dialect)  # resolved once, not per statement
        self.policy = policy or SafetyPolicy()
        self.catalog = (
            SchemaCatalog(schema, self.dialect, default_schema) if schema is not None else None
        )
        self.default_schema = (
            self.catalog.default_schema
            if self.catalog is not None
            else (default_schema or DEFAULT_SCHEMAS.get(self.dialect) or None)
        )
        self.schema: dict[str, list[str]] | None = (
            {
                table: list(self.catalog.columns(s, table) or [])
                for s, table in self.catalog.tables()
            }
            if self.catalog is not None
            else None
        )
        self.views = (
            ViewLineages(views, self.catalog) if views and self.catalog is not None else None
        )
        masks = MaskRules.from_policy(self.policy.masked_columns, self.policy.mask_aggregates)
        self.names = LineageRules.wrap(
            NameRules.from_policy(
                self.policy.allowed_tables,
                self.policy.denied_tables,
                self.policy.allowed_columns,
                self.policy.denied_columns,
            ),
            self.views,
            frozenset(key for key, _ in masks.masks),
        )
        self.protected = _protected_names(self.names, self.catalog, self.default_schema) | {
            column for (_, _, column), _ in masks.masks
        }
        self.row_filters = (
            RowFilters(self.policy.row_filters, self.dialect, self.catalog, identity)
            if self.policy.row_filters
            else None
        )
        allowlist = functions or FunctionAllowlist.for_dialect(self.dialect)
        if self.policy.extra_functions:
            allowlist = allowlist.extend(*self.policy.extra_functions)
        if self.policy.denied_functions:
            allowlist = allowlist.deny(*self.policy.denied_functions)
        self.functions = allowlist
        self.rules = tuple(rules)

    @property
    def row_limit(self) -> int | None:
        """The most rows a statement this validator passed may keep, or None without a LIMIT
        policy. A LIMIT it added or lowered is one more: the executor keeps ``row_limit`` rows
        and reports the result ``truncated`` when the extra row came back."""
        return self.policy.max_limit if self.policy.enforce_limit else None

    def validate(self, sql: str) -> ValidationResult:
        """Judge ``sql``; the result's ``sql`` is what may run, or None when refused."""
        parsed = self._parse(sql)
        if isinstance(parsed, SafetyFinding):
            return ValidationResult(dialect=self.dialect, original=sql, findings=[parsed])
        ctx = RuleContext(
            dialect=self.dialect,
            policy=self.policy,
            functions=self.functions,
            schema=self.schema,
            catalog=self.catalog,
            default_schema=self.default_schema,
            names=self.names,
            sql=sql,
            protected=self.protected,
            row_filters=self.row_filters,
            views=self.views,
        )
        expression = cast(exp.Expression, parsed)  # every statement sqlglot parses is one
        try:
            for rule in self.rules:
                expression = rule(expression, ctx)
                if ctx.halted:
                    break
            rendered = None if ctx.refused else render(expression, self._dialect, sql)
        except UnregisteredFindingCode:
            raise  # a code without a kind is a bug to fix, not a refusal to show
        except UnsupportedError as error:  # the engine's dialect cannot express the statement
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            ctx.report(
                "unsupported_node",
                f"The statement uses a construct {self.dialect} cannot express ({first}); "
                f"rewrite it with this database's own syntax.",
            )
            rendered = None
        except Exception as error:  # a rule or the generator failed: refuse, never run the raw text
            ctx.report(
                "validation_failed",
                f"The statement could not be checked ({type(error).__name__}: {error}).",
            )
            rendered = None
        result = ValidationResult.model_construct(
            dialect=self.dialect, original=sql, sql=rendered, findings=ctx.findings
        )
        if rendered is not None and not ctx.refused:
            result._statement = _minted(rendered, self.dialect, self.row_limit)
        return result

    def _parse(self, sql: str) -> exp.Expr | SafetyFinding:
        try:
            statements = [s for s in self._dialect.parse(sql) if s is not None]
        except (ParseError, TokenError) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            return SafetyFinding(
                code="parse_error",
                message=f"The SQL could not be parsed as {self.dialect}: {first}",
            )
        except Exception as error:  # sqlglot raised something unexpected: still refuse
            return SafetyFinding(
                code="parse_error", message=f"The SQL could not be parsed ({type(error).__name__})."
            )
        if not statements:
            return SafetyFinding(
                code="empty_statement",
                message="There is no SQL statement, only blanks or comments.",
            )
        if len(statements) > 1:
            kinds = ", ".join(label(s) for s in statements)
            return SafetyFinding(
                code="multiple_statements",
                message=f"Exactly one statement may run, but {len(statements)} were given ({kinds}).",
                node=type(statements[1]).__name__,
            )
        return statements[0]
