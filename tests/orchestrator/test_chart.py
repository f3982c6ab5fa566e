"""The chart a result's shape deserves: bars, a line, or none when a chart would mislead."""

from __future__ import annotations

import pytest

from orchestrator.features.chart import MAX_BARS, choose_chart


def test_a_label_and_a_number_get_bars() -> None:
    choice = choose_chart(["category", "revenue"], [["Books", 12.5], ["Toys", "7.25"], ["Tea", 0]])
    assert (choice.kind, choice.x, choice.y) == ("bar", 0, 1)
    assert choice.reason == "revenue by category"


def test_the_number_may_come_first() -> None:
    choice = choose_chart(["orders", "region"], [[4, "North"], [9, "South"]])
    assert (choice.kind, choice.x, choice.y) == ("bar", 1, 0)


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        ("month", ["2025-01", "2025-02", "2025-03"]),
        ("day", ["2025-01-01", "2025-01-02", "2025-01-03"]),
        ("at", ["2025-01-01T10:00:00Z", "2025-01-01 11:00:00", "2025-01-01T12:00:00+02:00"]),
        ("quarter", ["2025-Q1", "2025-Q2", "2025-Q3"]),
        ("year", [2023, 2024, 2025]),
        ("order_year", ["2023", "2024", "2025"]),
    ],
)
def test_a_time_column_gets_a_line(name: str, labels: list) -> None:
    choice = choose_chart([name, "n"], [[label, i] for i, label in enumerate(labels)])
    assert (choice.kind, choice.x, choice.y) == ("line", 0, 1), choice.reason


@pytest.mark.parametrize(
    ("columns", "rows", "row_count", "why"),
    [
        (["region", "revenue"], [["North", 1]], None, "fewer than two rows"),
        (["region", "revenue"], [["North", 1], ["South", 2]], 40, "only 2 of 40 rows"),
        (["a", "b"], [["x", "y"], ["z", "w"]], None, "no numeric column"),
        (["region", "n", "m"], [["a", 1, 2], ["b", 3, 4]], None, "more than two columns"),
        (["n"], [[1], [2]], None, "a label column and a numeric column"),
        (["bucket", "n"], [[1, 10], [2, 20]], None, "the only label column is a number"),
        (["year", "n"], [[2024, 1], [2025, 2]], None, "fewer than 3 points in time"),
        (["region", "n"], [["a", 1], ["a", 2]], None, "appears more than once"),
        (["region", "n"], [["a", 1], [None, 2]], None, "a label is missing"),
        (["region", "n"], [["a", 1], ["b", None]], None, "no numeric column"),
        (["region", "delta"], [["a", 5], ["b", -2]], None, "negative values"),
        (["flag", "n"], [["a", True], ["b", False]], None, "no numeric column"),
    ],
)
def test_no_chart_when_it_would_mislead(columns, rows, row_count, why) -> None:
    choice = choose_chart(columns, rows, row_count)
    assert choice.kind == "none" and choice.x is None
    assert why in choice.reason


def test_too_many_categories_get_no_chart_but_as_many_as_the_limit_do() -> None:
    rows = [[f"c{i}", i] for i in range(MAX_BARS + 1)]
    assert choose_chart(["c", "n"], rows[:MAX_BARS]).kind == "bar"
    too_many = choose_chart(["c", "n"], rows)
    assert too_many.kind == "none" and f"{MAX_BARS + 1} categories" in too_many.reason


def test_the_whole_result_at_hand_is_charted() -> None:
    rows = [["North", 1], ["South", 2]]
    assert choose_chart(["region", "n"], rows, row_count=2).kind == "bar"
    assert choose_chart(["region", "n"], rows).to_dict() == {
        "kind": "bar",
        "reason": "n by region",
        "x": 0,
        "y": 1,
    }
