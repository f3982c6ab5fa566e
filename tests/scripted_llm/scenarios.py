"""Scripted model behaviour for sqlgate's scenarios, served by ``ScriptedLLMServer``.

This is NOT a model. Each scenario fixes, per question, what the "model" replies at each batch:
the reasoning JSON, the SQL, the corrections, and an answer written by a small template from the
result preview that sqlgate itself put in the prompt. Cassettes recorded from it say so in every
response's ``x-sqlgate-scripted-server`` header.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.features.demo import (
    AMBIGUOUS,
    DEMO_QUESTIONS,
    ORDERS_BY_SEGMENT,
    TABLES_META,
    TOP_CATEGORIES,
)
from tests.scripted_llm.server import ScriptedReply

AnswerFn = Callable[[dict[str, Any]], str]


def reasoning(
    intent: str = "DATA_QUERY",
    *,
    tables: list[str],
    filters: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    joins: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    needs_data_context: bool = False,
    complexity: str = "simple",
    steps: list[str] = (),  # type: ignore[assignment]
    assumptions: list[str] = (),  # type: ignore[assignment]
    questions: list[tuple[str, str]] = (),  # type: ignore[assignment]
    aggregations: list[str] = (),  # type: ignore[assignment]
    order_by: list[str] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """A Batch-1 reply: the four parts in one object."""
    resolved = not questions
    return {
        "intent": {
            "intent": intent,
            "confidence": 0.9 if resolved else 0.4,
            "rationale": f"Scripted: {intent}.",
        },
        "clarification": {
            "resolved": resolved,
            "assumptions": list(assumptions),
            "questions": [{"id": i, "text": t} for i, t in questions],
        },
        "decomposition": {"complexity": complexity, "steps": list(steps)},
        "plan": {
            "tables": list(tables),
            "joins": [{"left": a, "right": b, "on": on} for a, b, on in joins],
            "filters": [{"table": t, "column": c, "condition": cond} for t, c, cond in filters],
            "aggregations": list(aggregations),
            "order_by": list(order_by),
            "needs_data_context": needs_data_context,
        },
    }


@dataclass
class Scenario:
    """What the scripted model says for one question."""

    reasoning: dict[str, Any]
    sql: str | None = None
    corrections: list[str] = field(default_factory=list)
    answer: AnswerFn | None = None
    #: Replies served before the real one, per batch ("reasoning", "sql", "correction", "answer").
    faults: dict[str, list[ScriptedReply]] = field(default_factory=dict)


_BATCH_BY_SCHEMA = {
    "ReasoningBatch": "reasoning",
    "SQLBatch": "sql",
    "CorrectionBatch": "correction",
    "AnswerBatch": "answer",
}
_BATCH_BY_PROMPT = (
    ("reasoning stage", "reasoning"),
    ("SQL queries written for data analysts failed", "correction"),
    ("You write SQL", "sql"),
    ("You answer data analysts", "answer"),
)


def batch_of(request: dict[str, Any]) -> str:
    fmt = request.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name")
    if name in _BATCH_BY_SCHEMA:
        return _BATCH_BY_SCHEMA[name]
    system = request["messages"][0]["content"]
    for needle, batch in _BATCH_BY_PROMPT:
        if needle in system:
            return batch
    raise LookupError("request matches no sqlgate batch")


_SECTION = re.compile(r"^### \[(\w+)\] Question: (.*)$", re.MULTILINE)


def sections_of(request: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(question id, question, section body) for every question in the request."""
    user = request["messages"][1]["content"]
    found = list(_SECTION.finditer(user))
    if not found:
        raise LookupError("request carries no question section")
    out = []
    for n, match in enumerate(found):
        end = found[n + 1].start() if n + 1 < len(found) else len(user)
        out.append((match.group(1), match.group(2).strip(), user[match.end() : end]))
    return out


def preview_of(body: str) -> dict[str, Any]:
    """What sqlgate put in a question's synthesis section: the result preview, or the failure."""
    match = re.search(r"Result preview:\n(\{.*\})", body)
    count = re.search(r"Row count: (\d+)", body)
    failure = re.search(r"The query did not produce a result: (.*)", body)
    return {
        "columns": json.loads(match.group(1))["columns"] if match else [],
        "rows": json.loads(match.group(1))["rows"] if match else [],
        "row_count": int(count.group(1)) if count else 0,
        "truncated": bool(re.search(r"Row count: \d+ \(TRUNCATED", body)),
        "failure": failure.group(1) if failure else None,
        "schema": body.split("Schema:\n", 1)[1] if "about the database itself" in body else None,
    }


class ScenarioScript:
    """A responder for ``ScriptedLLMServer``: answers each question of a request from its scenario.

    ``drop`` and ``duplicate`` name questions whose answer the scripted reply leaves out or
    repeats when the request carries several questions (to test recovery).
    """

    def __init__(
        self,
        scenarios: dict[str, Scenario],
        *,
        drop: set[str] = frozenset(),
        duplicate: set[str] = frozenset(),
    ) -> None:
        self.scenarios = scenarios
        self.drop = set(drop)
        self.duplicate = set(duplicate)
        self._faults = {q: {b: list(r) for b, r in s.faults.items()} for q, s in scenarios.items()}

    def __call__(self, request: dict[str, Any]) -> ScriptedReply:
        batch = batch_of(request)
        parts = sections_of(request)
        for _, question, _ in parts:
            pending = self._faults[question].get(batch)
            if pending:
                return pending.pop(0)
        results = []
        for qid, question, body in parts:
            if len(parts) > 1 and question in self.drop:
                continue
            entry = {"question_id": qid, **self._content(self.scenarios[question], batch, body)}
            results.append(entry)
            if len(parts) > 1 and question in self.duplicate:
                results.append(entry)
        return ScriptedReply(json.dumps({"results": results}))

    def _content(self, scenario: Scenario, batch: str, body: str) -> dict[str, Any]:
        if batch == "reasoning":
            return scenario.reasoning
        if batch == "sql":
            return {"sql": scenario.sql, "explanation": "Scripted SQL for this scenario."}
        if batch == "correction":
            attempt = int(re.search(r"\(attempt (\d+)\)", body).group(1))
            return {
                "diagnosis": "Scripted diagnosis of the error.",
                "sql": scenario.corrections[attempt - 1],
            }
        preview = preview_of(body)
        if preview["failure"]:
            text = f"The question could not be answered: {preview['failure']}"
        elif scenario.answer is not None:
            text = scenario.answer(preview)
        else:
            text = f"The query returned {preview['row_count']} row(s)."
        return {"answer": text, "caveats": []}


# -- the scenarios of the seed design, on the demo database -----------------------------------------

SALES_BY_REGION = "What was the total revenue per region in 2025?"
DELETE_CANCELLED = "Remove all cancelled orders from the database."
DML_IN_CTE = "List customers, and tidy up returned orders while you are at it."
GARBLED_TWICE = "How many products are there? (the model garbles its JSON twice)"
GARBLED_ONCE = "Which columns does the products table have? (the model garbles its JSON once)"
THROTTLED = "How many customers are there? (the provider throttles first)"
FLAKY = "How many employees are there? (the provider fails once)"
SLOW_QUERY = "How many pairs of order items are there?"
PRODUCT_COUNT = "How many products are in each category?"
#: The model quotes a string with double quotes, which PostgreSQL reads as a column name.
CATS_QUOTED = "How many of the pets are cats?"
ORDERS_2025 = "List every order placed in 2025 with its date and status."
#: The first SQL fails with an error that quotes a customer's last name (SQLite's JSON path error).
VALUE_IN_ERROR = "How many customers are in each segment? (the first query fails on a JSON path)"


def _top_categories_answer(p: dict[str, Any]) -> str:
    top = ", ".join(f"{r[0]} ({float(r[1]):,.2f})" for r in p["rows"])
    return f"The top {len(p['rows'])} categories by 2025 revenue were: {top}."


def _segments_answer(p: dict[str, Any]) -> str:
    parts = ", ".join(f"{r[0]}: {r[1]}" for r in p["rows"])
    return f"Orders placed in 2025 by customer segment — {parts}."


def _regions_answer(p: dict[str, Any]) -> str:
    parts = ", ".join(f"{r[0]} {float(r[1]):,.2f}" for r in p["rows"])
    return f"Revenue in 2025 per region: {parts}."


def _tables_answer(p: dict[str, Any]) -> str:
    names = re.findall(r"^(?:TABLE |CREATE TABLE )?(\w+)\s*\(", p["schema"] or "", re.MULTILINE)
    return (
        f"The database has {len(names)} tables: {', '.join(names)}. Orders belong to customers and "
        "employees, order items link orders to products, products belong to categories, and "
        "customers and employees belong to regions."
    )


_REVENUE = "SUM(oi.quantity * oi.unit_price * (1 - oi.discount))"
ALL_TABLES = [
    "regions",
    "employees",
    "customers",
    "categories",
    "products",
    "orders",
    "order_items",
]

SCENARIOS: dict[str, Scenario] = {
    TOP_CATEGORIES: Scenario(
        reasoning=reasoning(
            tables=["categories", "products", "order_items", "orders"],
            joins=[
                ("order_items", "products", "order_items.product_id = products.product_id"),
                ("products", "categories", "products.category_id = categories.category_id"),
                ("order_items", "orders", "order_items.order_id = orders.order_id"),
            ],
            filters=[("orders", "order_date", "in 2025"), ("orders", "status", "not cancelled")],
            needs_data_context=True,
            complexity="moderate",
            steps=[
                "join items to products, categories and orders",
                "sum revenue per category",
                "take the top 5",
            ],
            assumptions=[
                "Revenue is quantity × unit price after discount, excluding cancelled orders."
            ],
            aggregations=[_REVENUE],
            order_by=["revenue DESC"],
        ),
        sql=(
            f"SELECT c.name AS category, ROUND({_REVENUE}, 2) AS revenue "
            "FROM order_items AS oi "
            "JOIN products AS p ON p.product_id = oi.product_id "
            "JOIN categories AS c ON c.category_id = p.category_id "
            "JOIN orders AS o ON o.order_id = oi.order_id "
            "WHERE o.order_date >= '2025-01-01' AND o.order_date < '2026-01-01' AND o.status <> 'cancelled' "
            "GROUP BY c.name ORDER BY revenue DESC LIMIT 5"
        ),
        answer=_top_categories_answer,
    ),
    TABLES_META: Scenario(
        reasoning=reasoning("META_QUERY", tables=[], steps=["describe the schema"]),
        answer=_tables_answer,
    ),
    ORDERS_BY_SEGMENT: Scenario(
        reasoning=reasoning(
            tables=["customers", "orders"],
            joins=[("orders", "customers", "orders.customer_id = customers.customer_id")],
            filters=[("orders", "order_date", "in 2025")],
            steps=["join orders to customers", "count orders per segment"],
            aggregations=["COUNT(orders.order_id)"],
        ),
        # Ambiguous column: both tables have customer_id, so the database refuses it at execution.
        sql=(
            "SELECT segment, COUNT(order_id) AS orders FROM orders JOIN customers "
            "ON customer_id = customer_id WHERE order_date >= '2025-01-01' AND order_date < '2026-01-01' "
            "GROUP BY segment ORDER BY orders DESC"
        ),
        corrections=[
            "SELECT c.segment, COUNT(o.order_id) AS orders FROM orders AS o JOIN customers AS c "
            "ON o.customer_id = c.customer_id WHERE o.order_date >= '2025-01-01' "
            "AND o.order_date < '2026-01-01' GROUP BY c.segment ORDER BY orders DESC"
        ],
        answer=_segments_answer,
    ),
    SALES_BY_REGION: Scenario(
        reasoning=reasoning(
            tables=["regions", "customers", "orders", "order_items"],
            joins=[
                ("customers", "regions", "customers.region_id = regions.region_id"),
                ("orders", "customers", "orders.customer_id = customers.customer_id"),
                ("order_items", "orders", "order_items.order_id = orders.order_id"),
            ],
            filters=[("orders", "order_date", "in 2025")],
            complexity="moderate",
            steps=["join items, orders, customers, regions", "sum revenue per region"],
        ),
        sql=(  # two mistakes, fixed one at a time: ambiguous join column, then a misspelt column
            f"SELECT r.name AS region, ROUND({_REVENUE}, 2) AS revenue FROM order_items AS oi "
            "JOIN orders AS o ON o.order_id = oi.order_id JOIN customers AS c ON customer_id = customer_id "
            "JOIN regions AS r ON r.region_id = c.region_id "
            "WHERE o.order_date >= '2025-01-01' AND o.order_date < '2026-01-01' GROUP BY r.name ORDER BY revenue DESC"
        ),
        corrections=[
            f"SELECT r.region_name AS region, ROUND({_REVENUE}, 2) AS revenue FROM order_items AS oi "
            "JOIN orders AS o ON o.order_id = oi.order_id JOIN customers AS c ON c.customer_id = o.customer_id "
            "JOIN regions AS r ON r.region_id = c.region_id "
            "WHERE o.order_date >= '2025-01-01' AND o.order_date < '2026-01-01' "
            "GROUP BY r.region_name ORDER BY revenue DESC",
            f"SELECT r.name AS region, ROUND({_REVENUE}, 2) AS revenue FROM order_items AS oi "
            "JOIN orders AS o ON o.order_id = oi.order_id JOIN customers AS c ON c.customer_id = o.customer_id "
            "JOIN regions AS r ON r.region_id = c.region_id "
            "WHERE o.order_date >= '2025-01-01' AND o.order_date < '2026-01-01' GROUP BY r.name ORDER BY revenue DESC",
        ],
        answer=_regions_answer,
    ),
    AMBIGUOUS: Scenario(
        reasoning=reasoning(
            "AMBIGUOUS",
            tables=[],
            questions=[
                ("metric", "Best by which measure: revenue, units sold, or margin?"),
                ("entity", "The best what: products, customers, employees or regions?"),
            ],
        ),
    ),
    DELETE_CANCELLED: Scenario(
        reasoning=reasoning(tables=["orders"], filters=[("orders", "status", "= 'cancelled'")]),
        sql="DELETE FROM orders WHERE status = 'cancelled'",
    ),
    DML_IN_CTE: Scenario(
        reasoning=reasoning(tables=["customers", "orders"]),
        sql=(
            "WITH gone AS (DELETE FROM orders WHERE status = 'returned' RETURNING order_id) "
            "SELECT c.first_name, c.last_name FROM customers AS c LIMIT 10"
        ),
    ),
}


def _count_answer(what: str) -> AnswerFn:
    return lambda p: f"There are {p['rows'][0][0]} {what}."


SCENARIOS.update(
    {
        GARBLED_TWICE: Scenario(
            reasoning=reasoning(tables=["products"]),
            faults={
                "reasoning": [
                    ScriptedReply.invalid_json(),
                    ScriptedReply.invalid_json('{"intent": '),
                ]
            },
        ),
        GARBLED_ONCE: Scenario(
            reasoning=reasoning("META_QUERY", tables=["products"]),
            faults={"reasoning": [ScriptedReply.invalid_json('{"intent": "META_QUERY"}')]},
        ),
        THROTTLED: Scenario(
            reasoning=reasoning(tables=["customers"], aggregations=["COUNT(*)"]),
            sql="SELECT COUNT(*) AS customers FROM customers",
            answer=_count_answer("customers"),
            faults={"reasoning": [ScriptedReply.rate_limited(2.5)]},
        ),
        FLAKY: Scenario(
            reasoning=reasoning(tables=["employees"], aggregations=["COUNT(*)"]),
            sql="SELECT COUNT(*) AS employees FROM employees",
            answer=_count_answer("employees"),
            faults={"sql": [ScriptedReply.server_error()]},
        ),
        SLOW_QUERY: Scenario(
            reasoning=reasoning(tables=["order_items"], aggregations=["COUNT(*)"]),
            sql="SELECT COUNT(*) AS pairs FROM order_items AS a CROSS JOIN order_items AS b "
            "CROSS JOIN order_items AS c",
        ),
        CATS_QUOTED: Scenario(
            reasoning=reasoning(
                tables=["pets"],
                filters=[("pets", "pettype", "= cat")],
                aggregations=["COUNT(*)"],
            ),
            sql='SELECT COUNT(*) AS cats FROM pets WHERE pets.pettype = "cat"',
            corrections=["SELECT COUNT(*) AS cats FROM pets WHERE pets.pettype = 'cat'"],
            answer=_count_answer("cats"),
        ),
        VALUE_IN_ERROR: Scenario(
            reasoning=reasoning(tables=["customers"], aggregations=["COUNT(*)"]),
            sql="SELECT c.segment, json_extract('{}', c.last_name) AS v FROM customers AS c",
            corrections=[
                "SELECT c.segment, COUNT(*) AS customers FROM customers AS c GROUP BY c.segment"
            ],
            answer=_segments_answer,
        ),
        ORDERS_2025: Scenario(
            reasoning=reasoning(tables=["orders"], filters=[("orders", "order_date", "in 2025")]),
            sql="SELECT o.order_id, o.order_date, o.status FROM orders AS o "
            "WHERE o.order_date >= '2025-01-01' AND o.order_date < '2026-01-01' ORDER BY o.order_id",
            answer=lambda p: (
                f"These are only the first {p['row_count']} orders of 2025: the result was cut."
                if p["truncated"]
                else f"{p['row_count']} orders were placed in 2025."
            ),
        ),
        PRODUCT_COUNT: Scenario(
            reasoning=reasoning(
                tables=["categories", "products"],
                joins=[("products", "categories", "products.category_id = categories.category_id")],
            ),
            sql="SELECT c.name AS category, COUNT(p.product_id) AS products FROM categories AS c "
            "JOIN products AS p ON p.category_id = c.category_id GROUP BY c.name ORDER BY c.name",
            answer=lambda p: (
                "Products per category: " + ", ".join(f"{r[0]} {r[1]}" for r in p["rows"]) + "."
            ),
        ),
    }
)


def _month_question(month: int) -> str:
    return f"How many orders were placed in 2025-{month:02d}?"


def _category_question(category: str) -> str:
    return f"How many products are in the {category} category?"


CATEGORIES = [
    "Electronics",
    "Clothing",
    "Home & Kitchen",
    "Sports & Outdoors",
    "Office Supplies",
    "Toys & Games",
    "Beauty",
    "Books",
]
MONTH_QUESTIONS = [_month_question(m) for m in range(1, 13)]
CATEGORY_QUESTIONS = [_category_question(c) for c in CATEGORIES]
#: Twenty simple questions for batch tests and benchmarks.
COUNT_QUESTIONS = MONTH_QUESTIONS + CATEGORY_QUESTIONS

for _month, _q in enumerate(MONTH_QUESTIONS, start=1):
    SCENARIOS[_q] = Scenario(
        reasoning=reasoning(
            tables=["orders"], filters=[("orders", "order_date", f"in 2025-{_month:02d}")]
        ),
        sql=f"SELECT COUNT(*) AS orders FROM orders WHERE order_date >= '2025-{_month:02d}-01' "
        f"AND order_date < '{'2026-01' if _month == 12 else f'2025-{_month + 1:02d}'}-01'",
        answer=_count_answer(f"orders in 2025-{_month:02d}"),
    )
for _category, _q in zip(CATEGORIES, CATEGORY_QUESTIONS, strict=False):
    SCENARIOS[_q] = Scenario(
        reasoning=reasoning(
            tables=["products", "categories"],
            filters=[("categories", "name", f"= '{_category}'")],
            needs_data_context=True,
        ),
        sql="SELECT COUNT(p.product_id) AS products FROM products AS p JOIN categories AS c "
        f"ON c.category_id = p.category_id WHERE c.name = '{_category}'",
        answer=_count_answer(f"products in {_category}"),
    )

#: A question on the 300-table ERP schema (tests/fixtures/erp_db.py): the large-schema path.
ERP_REVENUE = "What was total invoiced revenue per customer in 2025?"
SCENARIOS[ERP_REVENUE] = Scenario(
    reasoning=reasoning(
        tables=["ar_invoices", "crm_customers"],
        joins=[
            ("ar_invoices", "crm_customers", "ar_invoices.customer_id = crm_customers.customer_id")
        ],
        filters=[("ar_invoices", "invoice_date", "in 2025")],
        aggregations=["SUM(ar_invoices.total_amount)"],
    ),
    sql="SELECT c.name AS customer, SUM(i.total_amount) AS revenue FROM ar_invoices AS i "
    "JOIN crm_customers AS c ON c.customer_id = i.customer_id "
    "WHERE i.invoice_date >= '2025-01-01' AND i.invoice_date < '2026-01-01' GROUP BY c.name ORDER BY revenue DESC",
    answer=lambda p: f"{len(p['rows'])} customers were invoiced in 2025.",
)

# -- the clarification loop: the ambiguous demo question, answered -----------------------------------

#: The analyst's answers to the ambiguous question's clarifying questions (ids as the model asks).
AMBIGUOUS_ANSWERS = {"metric": "revenue", "entity": "products"}


def follow_up_text(original: str, answers: dict[str, str]) -> str:
    """The follow-up question as the prompt's section header shows it (whitespace flattened)."""
    from orchestrator.core.result import ClarifyingQuestionOut
    from orchestrator.features.clarify import follow_up_question

    asked = [
        ClarifyingQuestionOut(id=q["id"], text=q["text"])
        for q in SCENARIOS[original].reasoning["clarification"]["questions"]
    ]
    return " ".join(follow_up_question(original, asked, answers).split())


AMBIGUOUS_FOLLOW_UP = follow_up_text(AMBIGUOUS, AMBIGUOUS_ANSWERS)
SCENARIOS[AMBIGUOUS_FOLLOW_UP] = Scenario(
    reasoning=reasoning(
        tables=["products", "order_items", "orders"],
        joins=[
            ("order_items", "products", "order_items.product_id = products.product_id"),
            ("order_items", "orders", "order_items.order_id = orders.order_id"),
        ],
        filters=[("orders", "status", "not cancelled")],
        complexity="moderate",
        assumptions=["Best means the highest revenue; the top 5 products are shown."],
        aggregations=[_REVENUE],
        order_by=["revenue DESC"],
    ),
    sql=f"SELECT p.name AS product, ROUND({_REVENUE}, 2) AS revenue FROM order_items AS oi "
    "JOIN products AS p ON p.product_id = oi.product_id "
    "JOIN orders AS o ON o.order_id = oi.order_id WHERE o.status <> 'cancelled' "
    "GROUP BY p.name ORDER BY revenue DESC LIMIT 5",
    answer=lambda p: f"The best product by revenue is {p['rows'][0][0]}." if p["rows"] else "None.",
)

#: A time series: one row per month (a line chart, not bars).
MONTHLY_ORDERS = "How many orders were placed each month in 2025?"
SCENARIOS[MONTHLY_ORDERS] = Scenario(
    reasoning=reasoning(
        tables=["orders"],
        filters=[("orders", "order_date", "in 2025")],
        aggregations=["COUNT(orders.order_id)"],
        order_by=["month"],
    ),
    sql="SELECT strftime('%Y-%m', order_date) AS month, COUNT(order_id) AS orders FROM orders "
    "WHERE order_date >= '2025-01-01' AND order_date < '2026-01-01' GROUP BY month ORDER BY month",
    answer=lambda p: f"Orders were placed in {len(p['rows'])} months of 2025.",
)

__all__ = [
    "AMBIGUOUS_ANSWERS",
    "AMBIGUOUS_FOLLOW_UP",
    "COUNT_QUESTIONS",
    "MONTHLY_ORDERS",
    "DEMO_QUESTIONS",
    "SCENARIOS",
    "Scenario",
    "ScenarioScript",
    "reasoning",
]
