"""Every finding code the validator can emit, each with its kind: the one registry of them.

A finding's kind says what may happen next:

- ``unknown_name``: the SQL names a table, column or function that does not exist, cannot be
  told apart, or this query may not read. The model can fix that by rewriting, so the statement
  goes back to self-correction with the finding.
- ``fixable_form``: a form the policy refuses that a rewrite avoids (a parse error, ``SELECT *``
  under the refuse policy, a LIMIT that is not a number). Also sent back for correction.
- ``forbidden``: what a read-only query never does (writes, commands, locks, files, catalogs,
  dangerous functions, several statements). Never retried: asking again would only help an
  attack.
- ``rewrite``: a change the validator made itself (a LIMIT added); the statement still runs.
- ``internal``: the validator could not judge the statement (no schema to resolve against, a
  rule failed). Refused, not retried.

``SafetyFinding`` refuses a code that is not registered here (``UnregisteredFindingCode``), so a
new code cannot reach a run without a kind, and ``CORRECTABLE_CODES`` (what the pipeline sends to
self-correction) is derived from the kinds, never listed by hand.

Example:
    >>> kind_of("unresolved_column").correctable, kind_of("dml_in_tree").correctable
    (True, False)
    >>> "unresolved_table" in CORRECTABLE_CODES
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from .errors import UnregisteredFindingCode

__all__ = [
    "CORRECTABLE_CODES",
    "FINDING_CODES",
    "FindingCode",
    "FindingKind",
    "check_code",
    "codes_of",
    "kind_of",
]


class FindingKind(StrEnum):
    """What a finding means for the statement and for the run."""

    UNKNOWN_NAME = "unknown_name"
    FIXABLE_FORM = "fixable_form"
    FORBIDDEN = "forbidden"
    REWRITE = "rewrite"
    INTERNAL = "internal"

    @property
    def correctable(self) -> bool:
        """True when the model may be asked to rewrite the statement."""
        return self in (FindingKind.UNKNOWN_NAME, FindingKind.FIXABLE_FORM)


@dataclass(frozen=True)
class FindingCode:
    """One registered code: its kind and what it means, in one sentence."""

    code: str
    kind: FindingKind
    meaning: str


_N, _F, _X, _R, _I = (
    FindingKind.UNKNOWN_NAME,
    FindingKind.FIXABLE_FORM,
    FindingKind.FORBIDDEN,
    FindingKind.REWRITE,
    FindingKind.INTERNAL,
)

_REGISTRY = (
    # names something that does not exist or is not allowed: the model can fix it
    FindingCode("unresolved_table", _N, "a table the database does not have"),
    FindingCode("unresolved_column", _N, "a column no table in scope has"),
    FindingCode("unresolved_reference", _N, "a reference that resolves to nothing"),
    FindingCode("ambiguous_column", _N, "a column several tables in scope have"),
    FindingCode("table_not_allowed", _N, "a table outside the policy's allowlist"),
    FindingCode("table_denied", _N, "a table the policy denies"),
    FindingCode("column_not_allowed", _N, "a column outside the policy's allowlist"),
    FindingCode("column_denied", _N, "a column the policy denies"),
    FindingCode("view_unreadable", _N, "a view whose definition cannot be followed, not named"),
    FindingCode("view_reads_protected", _N, "a view whose rows depend on a protected column"),
    FindingCode("row_filter_view", _N, "a view over a table whose rows are filtered per asker"),
    FindingCode("function_not_allowed", _N, "a function outside the dialect's allowlist"),
    # a form a rewrite avoids
    FindingCode("parse_error", _F, "text the dialect's parser cannot read"),
    FindingCode("select_star", _F, "SELECT * under a policy that refuses it"),
    FindingCode("nested_star", _F, "a star inside an expression"),
    FindingCode("column_selector", _F, "columns picked by a pattern"),
    FindingCode("positional_reference", _F, "a column named by its position"),
    FindingCode("whole_row_reference", _F, "a table's whole row used as a value"),
    FindingCode(
        "opaque_reference", _F, "a name where resolution cannot follow it (method, field, lambda)"
    ),
    FindingCode("unsupported_node", _F, "a construct the validator does not understand"),
    FindingCode("masked_column_use", _F, "a masked column used where its hidden value leaks"),
    FindingCode("limit_not_literal", _F, "a LIMIT whose row count cannot be checked"),
    FindingCode("regexp_unsupported", _F, "REGEXP where the engine has none"),
    # what a read-only query never does: never retried
    FindingCode("empty_statement", _X, "no statement, only blanks or comments"),
    FindingCode("multiple_statements", _X, "more than one statement"),
    FindingCode("not_a_query", _X, "a statement that is not a query"),
    FindingCode("empty_select", _X, "a SELECT whose columns a comment hid"),
    FindingCode("dml_in_tree", _X, "a data-modifying statement inside the query"),
    FindingCode("ddl_in_tree", _X, "a schema-changing statement inside the query"),
    FindingCode("command_in_tree", _X, "a command inside the query"),
    FindingCode("select_into", _X, "SELECT ... INTO, which writes"),
    FindingCode("locking_clause", _X, "a row-locking clause"),
    FindingCode("optimizer_hint", _X, "an optimizer hint, which can lift limits"),
    FindingCode("function_denied", _X, "a denylisted function (files, sleep, admin)"),
    FindingCode("system_table", _X, "a system catalog table"),
    FindingCode("file_as_table", _X, "a file path or URL read as a table"),
    FindingCode("executable_comment", _X, "a MySQL executable comment"),
    FindingCode("session_variable_write", _X, "an assignment to a session variable"),
    FindingCode("row_filter_unbound", _X, "a row filter needing an attribute the asker lacks"),
    FindingCode("server_setting", _X, "a read of a server setting"),
    # changes the validator made
    FindingCode("limit_added", _R, "a LIMIT added to the outermost query"),
    FindingCode("limit_lowered", _R, "a LIMIT lowered to the row cap"),
    FindingCode("star_expanded", _R, "SELECT * expanded to the columns"),
    FindingCode("rows_filtered", _R, "row filters added for who asks"),
    FindingCode("column_masked", _R, "masked columns shown through their masks"),
    FindingCode("star_columns_omitted", _R, "columns the policy hides left out of SELECT *"),
    # the validator could not judge
    FindingCode("schema_unknown", _I, "column rules without a schema to resolve against"),
    FindingCode("validation_failed", _I, "a rule failed while checking"),
)

#: code -> its registration, for every code the validator can emit.
FINDING_CODES: Mapping[str, FindingCode] = MappingProxyType({c.code: c for c in _REGISTRY})

#: The refusals a model can fix by rewriting: what the pipeline sends to self-correction.
CORRECTABLE_CODES = frozenset(c.code for c in _REGISTRY if c.kind.correctable)


def kind_of(code: str) -> FindingKind:
    """The kind of ``code``; ``UnregisteredFindingCode`` when it is not registered."""
    return check_code(code).kind


def check_code(code: str) -> FindingCode:
    """The registration of ``code``, or ``UnregisteredFindingCode`` naming it."""
    try:
        return FINDING_CODES[code]
    except KeyError:
        raise UnregisteredFindingCode(
            f"finding code {code!r} is not registered in safety/codes.py; register it with its kind"
        ) from None


def codes_of(*kinds: FindingKind) -> frozenset[str]:
    """The registered codes of ``kinds``."""
    return frozenset(c.code for c in _REGISTRY if c.kind in kinds)
