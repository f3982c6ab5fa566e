"""Which chart a result's shape deserves: bars, a line, or none when a chart would mislead.

A pure function of the result's columns and rows (no I/O), so it is tested on its own and the
analyst page only draws what it decides:

- ``line``: two columns, a time column (dates, ``YYYY-MM`` months, years, ...) and a number, at
  least three distinct points: a time series.
- ``bar``: two columns, a label and a number, 2 to ``MAX_BARS`` distinct labels, no negative
  value (bars start at zero).
- ``none`` otherwise, with the reason: fewer than two rows, only part of the rows at hand (a chart
  of a preview would show a false whole), no numeric column, more than one measure, too many
  categories, a repeated label, a number as the only label, negative or missing values.

Example:
    >>> choose_chart(["region", "revenue"], [["North", 10.5], ["South", 7]]).kind
    'bar'
    >>> choose_chart(["month", "orders"], [["2025-01", 3], ["2025-02", 4], ["2025-03", 2]]).kind
    'line'
    >>> choose_chart(["n"], [[1], [2]]).reason
    'no chart: a chart needs a label column and a numeric column'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["MAX_BARS", "ChartChoice", "choose_chart"]

#: More categories than this make an unreadable bar chart.
MAX_BARS = 25
#: A line needs at least this many points to show a trend.
MIN_LINE_POINTS = 3

_TIME_VALUE = re.compile(
    r"^\d{4}(-(0[1-9]|1[0-2])(-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?)?)?"
    r"|-?Q[1-4]|-W\d{2})?$"
)
_TIME_NAME = re.compile(r"(^|_)(date|day|week|month|quarter|year|time|period|at)$", re.IGNORECASE)


@dataclass(frozen=True)
class ChartChoice:
    """The chart for a result: ``kind``, the label column ``x`` and measure ``y`` (indices), and
    ``reason`` in words (why this chart, or why none)."""

    kind: Literal["bar", "line", "none"]
    reason: str
    x: int | None = None
    y: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _is_time(name: str, values: Sequence[Any]) -> bool:
    """Every value looks like a moment (ISO date, month, year, quarter), or the column is named
    like a time and holds years."""
    texts = [str(v).strip() for v in values]
    if all(_TIME_VALUE.match(t) for t in texts) and not all(t.isdigit() for t in texts):
        return True
    years = [_number(v) for v in values]
    return bool(_TIME_NAME.search(name)) and all(
        y is not None and y.is_integer() and 1800 <= y <= 2200 for y in years
    )


def _none(reason: str) -> ChartChoice:
    return ChartChoice(kind="none", reason=f"no chart: {reason}")


def choose_chart(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], row_count: int | None = None
) -> ChartChoice:
    """The chart ``rows`` (under ``columns``) deserve; ``row_count`` is how many rows the result
    has in all (more than ``len(rows)``: only a preview is at hand, and no chart is drawn)."""
    if row_count is not None and row_count > len(rows):
        return _none(f"only {len(rows)} of {row_count} rows are shown; a chart would show a part")
    if len(rows) < 2:
        return _none("fewer than two rows")
    if len(columns) < 2:
        return _none("a chart needs a label column and a numeric column")
    if len(columns) > 2:
        return _none("more than two columns; read the table")
    numeric = [i for i in (0, 1) if all(_number(r[i]) is not None for r in rows)]
    if not numeric:
        return _none("no numeric column")
    names = [str(c) for c in columns]
    y = 1 if 1 in numeric else 0
    x = 1 - y
    labels = [r[x] for r in rows]
    values = [_number(r[y]) for r in rows]
    if any(label is None for label in labels):
        return _none("a label is missing")
    if len({str(label) for label in labels}) != len(labels):
        return _none("a label appears more than once")
    if _is_time(names[x], labels):
        if len(rows) < MIN_LINE_POINTS:
            return _none(f"fewer than {MIN_LINE_POINTS} points in time")
        return ChartChoice("line", f"{names[y]} over {names[x]}: a time series", x, y)
    if x in numeric:
        return _none("the only label column is a number")
    if len(rows) > MAX_BARS:
        return _none(
            f"{len(rows)} categories are too many for a readable chart (at most {MAX_BARS})"
        )
    if any(v is not None and v < 0 for v in values):
        return _none("negative values; bars from zero would mislead")
    return ChartChoice("bar", f"{names[y]} by {names[x]}", x, y)
