"""A target database that counts the statements run on it: one PostgreSQL table per question.

Question ``n`` asks how many rows table ``q_NNN`` holds; the scripted model answers it with one
``SELECT COUNT(*)`` on that table and nothing else reads it (one integer column: no label values
to index, no data context asked). PostgreSQL counts every scan of every table
(``pg_stat_user_tables``), so after the workers stopped (their connections closed, their
statistics flushed) the database itself tells how many times each question's statement ran.
"""

from __future__ import annotations

import time
import uuid

import sqlalchemy as sa

from tests.scripted_llm.scenarios import Scenario, reasoning


def table_of(n: int) -> str:
    return f"q_{n:03d}"


def question_of(n: int) -> str:
    return f"How many rows does table {table_of(n)} hold?"


def counted_scenarios(count: int) -> dict[str, Scenario]:
    """What the scripted model says for each of the ``count`` questions."""
    return {
        question_of(n): Scenario(
            reasoning=reasoning(tables=[table_of(n)], aggregations=["COUNT(*)"]),
            sql=f"SELECT COUNT(*) AS n FROM {table_of(n)}",
            answer=lambda p, n=n: f"Table {table_of(n)} holds {p['rows'][0][0]} rows.",
        )
        for n in range(1, count + 1)
    }


def create_counted_database(server_url: str, count: int) -> str:
    """A new database on ``server_url`` with tables q_001..q_<count> (n + 1 rows each); its URL."""
    name = f"sqlgate_counted_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    url = sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for n in range(1, count + 1):
            conn.exec_driver_sql(f"CREATE TABLE {table_of(n)} (n INTEGER)")
            conn.exec_driver_sql(
                f"INSERT INTO {table_of(n)} SELECT generate_series(0, {n})"  # n + 1 rows
            )
    engine.dispose()
    return url


def drop_counted_database(server_url: str, url: str) -> None:
    name = sa.make_url(url).database
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


def statement_counts(url: str, count: int, *, settle_s: float = 15.0) -> dict[int, int]:
    """Scans of each question's table as PostgreSQL counted them (question number -> scans).

    Backends flush their statistics when idle or when they end; the counts are read until
    two readings a second apart agree (at most ``settle_s``).
    """
    engine = sa.create_engine(url)
    query = sa.text(
        "SELECT relname, seq_scan + COALESCE(idx_scan, 0) AS scans FROM pg_stat_user_tables "
        "WHERE relname LIKE 'q\\_%'"
    )
    previous: dict[int, int] | None = None
    deadline = time.monotonic() + settle_s
    try:
        while True:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
                rows = conn.execute(query).all()
            counts = {n: 0 for n in range(1, count + 1)}
            counts.update({int(r.relname[2:]): int(r.scans) for r in rows})
            if counts == previous or time.monotonic() > deadline:
                return counts
            previous = counts
            time.sleep(1.0)
    finally:
        engine.dispose()
