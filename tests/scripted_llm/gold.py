"""A scripted "model" that answers every question with its gold SQL (for eval recordings).

This is NOT a model and what it scores is not a model's accuracy: it shows that the pipeline
carries a right statement through planning, validation, approval and execution, and how often
the pipeline itself (the validator's rewrites, the row cap) changes a right answer. Every reply
says so in the ``x-sqlgate-scripted-server`` header, which ``sqlgate eval`` reports as scripted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from tests.scripted_llm.scenarios import batch_of, preview_of, reasoning, sections_of
from tests.scripted_llm.server import ScriptedReply

__all__ = ["GoldScript"]


def _tables(sql: str, dialect: str) -> list[str]:
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError:
        return []
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    seen: dict[str, None] = {}
    for table in tree.find_all(exp.Table):
        if table.name and table.name not in ctes:
            seen.setdefault(table.name)
    return list(seen)


class GoldScript:
    """Responder for ``ScriptedLLMServer``: ``gold`` maps each question (whitespace flattened)
    to the SQL it answers with; the plan names the SQL's tables, the answer counts the rows."""

    def __init__(self, gold: Mapping[str, str], dialect: str = "sqlite") -> None:
        self.gold = {" ".join(q.split()): sql for q, sql in gold.items()}
        self.dialect = dialect

    def __call__(self, request: dict[str, Any]) -> ScriptedReply:
        batch = batch_of(request)
        results = []
        for qid, question, body in sections_of(request):
            sql = self.gold[" ".join(question.split())]
            if batch == "reasoning":
                content: dict[str, Any] = reasoning(tables=_tables(sql, self.dialect))
            elif batch in ("sql", "correction"):
                content = {"sql": sql, "explanation": "Scripted: the gold SQL."}
                if batch == "correction":
                    content = {"diagnosis": "Scripted: the gold SQL again.", "sql": sql}
            else:
                preview = preview_of(body)
                text = (
                    f"The question could not be answered: {preview['failure']}"
                    if preview["failure"]
                    else f"The query returned {preview['row_count']} row(s)."
                )
                content = {"answer": text, "caveats": []}
            results.append({"question_id": qid, **content})
        return ScriptedReply(json.dumps({"results": results}))
