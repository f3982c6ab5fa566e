"""Column and table comments written in a SQLite ``CREATE TABLE`` text.

SQLite keeps no comment catalogue: the only description an abbreviated column often has is the
``-- ...`` or ``/* ... */`` its author wrote beside it, which ``sqlite_master.sql`` keeps verbatim
(SQLAlchemy reports none). The text is tokenized with sqlglot, so quotes and strings are read
as SQL reads them; comments are the text between tokens. Where a comment belongs:

- before the opening parenthesis, or on its line after it: the table;
- on the same line as the end of a column definition (before or after its comma): that column;
- inside a definition (``amount REAL -- in CZK`` then ``NOT NULL`` on the next line): that column;
- on lines of its own: the definition that follows.

Table constraints (``PRIMARY KEY (...)``, ``FOREIGN KEY``, ``CONSTRAINT``, ``UNIQUE``, ``CHECK``)
take no comments.

Example:
    >>> comments = create_table_comments('''CREATE TABLE trans -- money moved
    ... (
    ...   trans_id INTEGER PRIMARY KEY, -- transaction id
    ...   /* the account it moved on */
    ...   account_id INTEGER,
    ...   A11 INTEGER  -- average salary
    ... )''')
    >>> comments.table, comments.columns
    ('money moved', {'trans_id': 'transaction id', 'account_id': 'the account it moved on', 'A11': 'average salary'})
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

__all__ = ["TableComments", "create_table_comments"]

#: A comment is cut to this many characters: it is a description, not a document.
MAX_COMMENT_CHARS = 300

_CONSTRAINT_STARTS = frozenset({"PRIMARY", "FOREIGN", "CONSTRAINT", "UNIQUE", "CHECK"})


@dataclass
class TableComments:
    """What a ``CREATE TABLE`` text says about its table and columns."""

    table: str | None = None
    columns: dict[str, str] = field(default_factory=dict)


@dataclass
class _Comment:
    text: str
    start: int  # offset in the SQL text
    line: int


def create_table_comments(sql: str) -> TableComments:
    """The table's and columns' comments in ``sql`` (empty when it has none or cannot be read)."""
    found = TableComments()
    if "--" not in sql and "/*" not in sql:
        return found
    try:
        tokens = Dialect.get_or_raise("sqlite").tokenize(sql)
    except TokenError:
        return found
    if not tokens:
        return found
    opening = next((i for i, t in enumerate(tokens) if t.token_type == TokenType.L_PAREN), None)
    if opening is None:
        return found
    definitions = _definitions(tokens, opening)
    table_parts: list[str] = []
    column_parts: dict[int, list[str]] = {}
    lines = _line_starts(sql)
    # every gap between two tokens (and after the last) holds only blanks and comments
    for i in range(len(tokens)):
        start = tokens[i].end + 1
        end = tokens[i + 1].start if i + 1 < len(tokens) else len(sql)
        for comment in _comments(sql, start, end, lines):
            owner = _owner(i, comment, tokens, opening, definitions)
            if owner is None:
                continue
            if owner < 0:
                table_parts.append(comment.text)
            else:
                column_parts.setdefault(owner, []).append(comment.text)
    if table_parts:
        found.table = _joined(table_parts)
    for index, parts in column_parts.items():
        name = _column_name(tokens, definitions[index])
        if name is not None:
            found.columns[name] = _joined(parts)
    return found


def _definitions(tokens: list[Token], opening: int) -> list[tuple[int, int]]:
    """(first, last) token index of each definition inside the outer parentheses."""
    out: list[tuple[int, int]] = []
    depth, first = 0, opening + 1
    for i in range(opening, len(tokens)):
        kind = tokens[i].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                if first <= i - 1:
                    out.append((first, i - 1))
                break
        elif kind == TokenType.COMMA and depth == 1:
            if first <= i - 1:
                out.append((first, i - 1))
            first = i + 1
    return out


def _owner(
    gap: int,
    comment: _Comment,
    tokens: list[Token],
    opening: int,
    definitions: list[tuple[int, int]],
) -> int | None:
    """-1 for the table, a definition's index for a column, None for nobody."""
    if gap < opening:
        return -1
    if gap == opening:  # just after "(": the table when on its line, else the first column
        if comment.line == tokens[opening].line:
            return -1
        return 0 if definitions else None
    for index, (first, last) in enumerate(definitions):
        if first <= gap < last:
            return index  # inside the definition
        if gap == last or (gap == last + 1 and tokens[gap].token_type == TokenType.COMMA):
            # after the definition (or its comma): its own when on the line it ends on
            if comment.line == tokens[last].line:
                return index
            return index + 1 if index + 1 < len(definitions) else None
    if definitions and gap > definitions[-1][1]:
        return -1  # after the closing parenthesis
    return None


def _column_name(tokens: list[Token], definition: tuple[int, int]) -> str | None:
    first = tokens[definition[0]]
    words = first.text.upper().split()
    if first.token_type != TokenType.IDENTIFIER and words and words[0] in _CONSTRAINT_STARTS:
        return None
    return first.text


def _line_starts(sql: str) -> list[int]:
    starts = [0]
    starts.extend(i + 1 for i, ch in enumerate(sql) if ch == "\n")
    return starts


def _line_of(offset: int, starts: list[int]) -> int:
    return bisect_right(starts, offset)


def _comments(sql: str, start: int, end: int, lines: list[int]) -> list[_Comment]:
    """The comments in ``sql[start:end]``, a stretch that holds nothing but blanks and comments."""
    out: list[_Comment] = []
    i = start
    while i < end:
        if sql.startswith("--", i):
            stop = sql.find("\n", i, end)
            stop = end if stop < 0 else stop
            out.append(_Comment(sql[i + 2 : stop], i, _line_of(i, lines)))
            i = stop
        elif sql.startswith("/*", i):
            stop = sql.find("*/", i + 2, end)
            stop = end if stop < 0 else stop
            out.append(_Comment(sql[i + 2 : stop], i, _line_of(i, lines)))
            i = stop + 2
        else:
            i += 1
    return [c for c in out if _clean(c.text)]


def _clean(text: str) -> str:
    return " ".join(text.replace("*", " ").split()) if text.strip(" *-\t\r\n") else ""


def _joined(parts: list[str]) -> str:
    return " ".join(_clean(p) for p in parts)[:MAX_COMMENT_CHARS]
