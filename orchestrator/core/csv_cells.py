"""CSV cells a spreadsheet reads as text, never as a formula (CSV injection).

A cell whose text begins — after any spaces — with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return, or with their full-width forms (``＝＋－＠``, which some spreadsheets fold to ASCII), or
that holds a separator followed by one (``x;=1+1``: a spreadsheet splitting on ``;`` starts a new
cell there), is written with a leading apostrophe, which spreadsheets hide and read as "text".
So is a cell that already begins with an apostrophe, so reading back (``from_spreadsheet``)
gives every value exactly as it was. Plain numbers (``-5``, ``+1.5e3``) are left alone. Writers
also quote every text cell (``QUOTE``), so a separator inside one never splits it.

Example:
    >>> [spreadsheet_safe(v) for v in ["=1+1", " @SUM(A1)", "x;=1+1", "＝1", "-5", "'a", "plain"]]
    ["'=1+1", "' @SUM(A1)", "'x;=1+1", "'＝1", '-5', "''a", 'plain']
    >>> all(from_spreadsheet(spreadsheet_safe(v)) == v for v in ["=1", "'=1", "''", "-5", "a'"])
    True
"""

from __future__ import annotations

import csv
import re
from typing import Final

__all__ = ["QUOTE", "from_spreadsheet", "spreadsheet_safe"]

#: The quoting every CSV writer of sqlgate uses: text cells always quoted.
QUOTE: Final = csv.QUOTE_NONNUMERIC

#: What starts a formula: ASCII and full-width ``= + - @``, and a tab or CR before them.
_TRIGGERS = "=+-@\t\r\uff1d\uff0b\uff0d\uff20"
#: Leading blanks a spreadsheet may skip before reading the first character.
_BLANKS = " \t\r\n\u00a0\u3000"
_SEPARATOR_THEN_TRIGGER = re.compile(rf"[,;|\t][{re.escape(_BLANKS)}]*[{re.escape(_TRIGGERS)}]")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_safe(text: str) -> str:
    """``text`` as a cell no spreadsheet evaluates (see the module docstring)."""
    if _NUMBER.fullmatch(text.strip()):
        return text
    head = text.lstrip(_BLANKS)
    if (
        text.startswith("'")
        or (head and head[0] in _TRIGGERS)
        or (text and text[0] in "\t\r")
        or _SEPARATOR_THEN_TRIGGER.search(text)
    ):
        return "'" + text
    return text


def from_spreadsheet(cell: str) -> str:
    """The value ``spreadsheet_safe`` wrote as ``cell``."""
    if cell.startswith("'") and spreadsheet_safe(cell[1:]) == cell:
        return cell[1:]
    return cell
