import sqlalchemy as sa

from agents.result_validator import WARNING_CODES, ResultValidator
from agents.sql_executor import ExecutionResult, SQLExecutor
from safety.statement import (
    _minted as unchecked,  # the database's own walls, tested apart from the validator
)


def ran(executor: SQLExecutor, sql: str, **kwargs: object) -> ExecutionResult:
    """Run text as approved in the executor's own dialect: these tests are about execution."""
    return executor.run(unchecked(sql, executor.dialect, None), **kwargs)  # type: ignore[arg-type]


def result(columns, rows, truncated=False, row_cap=1000) -> ExecutionResult:
    return ExecutionResult(
        columns=columns, rows=rows, row_count=len(rows), truncated=truncated, row_cap=row_cap
    )


def codes(warnings: list[str]) -> list[str]:
    return [w.split(":", 1)[0] for w in warnings]


def test_a_clean_result_has_no_warnings(demo_engine: sa.Engine) -> None:
    res = ran(
        SQLExecutor(demo_engine),
        "SELECT c.name AS category, COUNT(*) AS product_count FROM products p "
        "JOIN categories c USING (category_id) GROUP BY c.name ORDER BY c.name",
    )
    assert ResultValidator().check(res) == []


def test_empty_result(demo_engine: sa.Engine) -> None:
    res = ran(SQLExecutor(demo_engine), "SELECT order_id FROM orders WHERE status = 'lost'")
    assert ResultValidator().check(res) == ["empty_result: the query returned no rows"]


def test_null_only_columns(demo_engine: sa.Engine) -> None:
    res = ran(
        SQLExecutor(demo_engine),
        "SELECT order_id, shipped_date, employee_id FROM orders WHERE status = 'cancelled' ORDER BY order_id LIMIT 5",
    )
    assert (
        "null_only_column: column 'shipped_date' is NULL in every row"
        in ResultValidator().check(res)
    )


def test_negative_counts() -> None:
    res = result(
        [
            "region",
            "order_count",
            "total_revenue",
            "qty",
            "n_orders",
            "balance",
            "counted",
            "TotalQty",
        ],
        [["North", 3, -10.5, 1, -1, -99, -5, -2], ["South", -2, 4.0, -7, 0, 3, 1, 0]],
    )
    assert ResultValidator().check(res) == [
        "negative_count: column 'order_count' has negative values (lowest -2)",
        "negative_count: column 'total_revenue' has negative values (lowest -10.5)",
        "negative_count: column 'qty' has negative values (lowest -7)",
        "negative_count: column 'n_orders' has negative values (lowest -1)",
        "negative_count: column 'TotalQty' has negative values (lowest -2)",
    ]


def test_count_star_label_is_count_like(shop_sqlite: sa.Engine) -> None:
    res = result(["COUNT(*)"], [[-1]])
    assert codes(ResultValidator().check(res)) == ["negative_count"]


def test_duplicate_leading_id_column(demo_engine: sa.Engine) -> None:
    res = ran(
        SQLExecutor(demo_engine),
        "SELECT o.order_id, i.product_id FROM orders o JOIN order_items i USING (order_id) "
        "WHERE o.order_id <= 3 ORDER BY o.order_id",
    )
    # order_id and product_id together form the key: each pair is unique
    assert ResultValidator().check(res) == []
    res = ran(
        SQLExecutor(demo_engine),
        "SELECT o.order_id, o.status FROM orders o JOIN order_items i USING (order_id) "
        "WHERE o.order_id <= 3 ORDER BY o.order_id",
    )
    (warning,) = ResultValidator().check(res)
    assert warning.startswith("duplicate_key: ")
    assert "key (order_id)" in warning


def test_duplicate_explicit_key_columns() -> None:
    res = result(
        ["region", "month", "revenue"],
        [
            ["North", "2025-01", 1.0],
            ["North", "2025-01", 2.0],
            ["North", "2025-02", 3.0],
            ["South", "2025-01", 4.0],
            ["South", "2025-01", 5.0],
            ["South", "2025-01", 6.0],
        ],
    )
    assert ResultValidator().check(res, key_columns=["REGION", "month"]) == [
        "duplicate_key: 3 rows repeat a key (region, month), e.g. (North, 2025-01), (South, 2025-01)"
    ]
    assert ResultValidator().check(res, key_columns=["region", "month", "revenue"]) == []
    assert ResultValidator().check(res, key_columns=["missing"]) == []
    # without key columns and no leading id column there is nothing to check
    assert ResultValidator().check(res) == []


def test_id_column_must_come_first_to_be_a_key() -> None:
    res = result(["name", "customer_id"], [["Ada", 1], ["Ada", 1]])
    assert ResultValidator().check(res) == []
    res = result(["id", "name"], [[1, "Ada"], [1, "Grace"], [2, "Linus"]])
    assert ResultValidator().check(res) == ["duplicate_key: 1 rows repeat a key (id), e.g. 1"]


def test_examples_are_bounded() -> None:
    rows = [[i // 2] for i in range(20)]
    (warning,) = ResultValidator(max_examples=2).check(result(["customer_id"], rows))
    assert warning == "duplicate_key: 10 rows repeat a key (customer_id), e.g. 0, 1"


def test_row_cap_hit(demo_engine: sa.Engine) -> None:
    res = ran(
        SQLExecutor(demo_engine, row_cap=10),
        "SELECT customer_id, email FROM customers ORDER BY customer_id",
    )
    assert ResultValidator().check(res) == [
        "row_cap_hit: only the first 10 rows were kept; the full result is larger"
    ]


def test_several_warnings_keep_a_fixed_order() -> None:
    res = result(
        ["customer_id", "order_count", "note"],
        [[1, -1, None], [1, 2, None]],
        truncated=True,
        row_cap=2,
    )
    assert codes(ResultValidator().check(res)) == [
        "null_only_column",
        "negative_count",
        "duplicate_key",
        "row_cap_hit",
    ]


def test_every_prefix_is_a_known_code() -> None:
    res = result(
        ["customer_id", "order_count", "note"],
        [[1, -1, None], [1, 2, None]],
        truncated=True,
        row_cap=2,
    )
    cut = ExecutionResult(
        columns=["x"], rows=[["a"]], row_count=1, truncated=True, cut_by="bytes", byte_cap=64
    )
    warnings = (
        ResultValidator().check(res)
        + ResultValidator().check(result(["x"], []))
        + ResultValidator().check(cut)
    )
    assert set(codes(warnings)) == set(WARNING_CODES)


def test_a_result_cut_by_its_byte_budget_says_so() -> None:
    cut = ExecutionResult(
        columns=["x"], rows=[["a"], ["b"]], row_count=2, truncated=True, cut_by="bytes", byte_cap=99
    )
    assert ResultValidator().check(cut) == [
        "byte_cap_hit: only the first 2 rows were kept, the most that fit in the 99 bytes a "
        "result may hold; the full result is larger"
    ]


def test_booleans_and_strings_are_not_counts() -> None:
    res = result(["count_flag", "total"], [[True, "-3"], [False, "n/a"]])
    assert ResultValidator().check(res) == []
