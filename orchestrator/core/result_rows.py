"""Full results: every row a statement kept, stored beside its run, read back page by page.

A run's result object carries a short preview (``preview_rows``); the rows themselves (at most
the row cap, the same cap as the preview's ``row_count``) are written here when the statement
runs, so ``sqlgate ask --out`` and ``GET /runs/{id}/rows`` give the whole result without ever
holding more than a page in memory while reading. The tables live in sqlgate's state database
(``orchestrator.core.state_db``), the ``results`` component of the one migration runner; a caller
without one (``ask`` without ``--defer``) passes a store on a temporary SQLite file.

Example:
    >>> store = ResultRowStore("sqlite://")
    >>> store.save("run_1", "q1", ["n"], [[1], [2], [3]], truncated=True, row_cap=3)
    >>> store.header("run_1", "q1").truncated, store.page("run_1", "q1", offset=1, limit=5)
    (True, [[2], [3]])
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from approvals.migrations import migrate, state_engine, write_transaction

__all__ = ["ResultRowStore", "StoredResult"]

#: Rows written or read per statement round trip.
PAGE_ROWS = 500

_metadata = sa.MetaData()
results = sa.Table(
    "sqlgate_results",
    _metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("question_id", sa.String(32), primary_key=True),
    sa.Column("columns", sa.Text, nullable=False),
    sa.Column("row_count", sa.Integer, nullable=False),
    sa.Column("truncated", sa.Boolean, nullable=False),
    sa.Column("row_cap", sa.Integer, nullable=False),
)
result_rows = sa.Table(
    "sqlgate_result_rows",
    _metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("question_id", sa.String(32), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("row", sa.Text, nullable=False),
)


def _v1(conn: Connection) -> None:
    """The result header and its rows, one JSON array a row, in result order."""
    _metadata.create_all(conn, checkfirst=True)


MIGRATIONS = (_v1,)


@dataclass(frozen=True)
class StoredResult:
    """What a stored result is, without its rows."""

    columns: list[str]
    row_count: int
    truncated: bool
    row_cap: int


class ResultRowStore:
    """Rows of executed statements, keyed by run and question id."""

    def __init__(self, url_or_engine: str | Engine) -> None:
        self.engine = (
            url_or_engine if isinstance(url_or_engine, Engine) else state_engine(url_or_engine)
        )
        self._ready = False

    def setup(self) -> None:
        """Create or migrate the tables (the ``results`` component); safe to call twice."""
        if not self._ready:
            migrate(self.engine, "results", MIGRATIONS)
            self._ready = True

    def save(
        self,
        run_id: str,
        question_id: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        truncated: bool,
        row_cap: int,
    ) -> None:
        """Store a question's result, replacing one stored before (a re-run of the statement
        after a takeover stores the same rows again)."""
        self.setup()
        key = (results.c.run_id == run_id) & (results.c.question_id == question_id)
        row_key = (result_rows.c.run_id == run_id) & (result_rows.c.question_id == question_id)
        with write_transaction(self.engine) as conn:
            conn.execute(sa.delete(results).where(key))
            conn.execute(sa.delete(result_rows).where(row_key))
            conn.execute(
                results.insert().values(
                    run_id=run_id,
                    question_id=question_id,
                    columns=json.dumps(list(columns)),
                    row_count=len(rows),
                    truncated=truncated,
                    row_cap=row_cap,
                )
            )
            for start in range(0, len(rows), PAGE_ROWS):
                conn.execute(
                    result_rows.insert(),
                    [
                        {
                            "run_id": run_id,
                            "question_id": question_id,
                            "seq": start + i,
                            "row": json.dumps(list(row), ensure_ascii=False, default=str),
                        }
                        for i, row in enumerate(rows[start : start + PAGE_ROWS])
                    ],
                )

    def header(self, run_id: str, question_id: str) -> StoredResult | None:
        """The result's columns, size and whether it was cut; None when nothing was stored."""
        self.setup()
        key = (results.c.run_id == run_id) & (results.c.question_id == question_id)
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(results).where(key)).first()
        if row is None:
            return None
        return StoredResult(
            columns=list(json.loads(row.columns)),
            row_count=int(row.row_count),
            truncated=bool(row.truncated),
            row_cap=int(row.row_cap),
        )

    def page(self, run_id: str, question_id: str, *, offset: int, limit: int) -> list[list[Any]]:
        """Rows ``offset`` .. ``offset + limit - 1`` in result order."""
        self.setup()
        query = (
            sa.select(result_rows.c.row)
            .where(
                (result_rows.c.run_id == run_id)
                & (result_rows.c.question_id == question_id)
                & (result_rows.c.seq >= offset)
                & (result_rows.c.seq < offset + limit)
            )
            .order_by(result_rows.c.seq)
        )
        with self.engine.connect() as conn:
            return [json.loads(text) for (text,) in conn.execute(query)]

    def rows(self, run_id: str, question_id: str) -> Iterator[list[Any]]:
        """Every stored row in order, read one page at a time."""
        offset = 0
        while True:
            page = self.page(run_id, question_id, offset=offset, limit=PAGE_ROWS)
            yield from page
            if len(page) < PAGE_ROWS:
                return
            offset += PAGE_ROWS

    def close(self) -> None:
        self.engine.dispose()
