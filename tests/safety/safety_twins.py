"""Twin databases: the same tables and rows, except the values of the protected columns.

Not a test module. A statement the validator accepts must give the same answer on both twins
(rows, or the same error text): if it does not, a protected value reached the output. That is
non-interference, judged by the real engine rather than by a list of values to look for.

Tables (both twins): ``customers(id, name, email, info)`` and ``staff(id, name, salary)``; the
policy denies ``customers.email``, ``customers.info`` (JSON) and ``staff.salary``.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from safety_backends import MYSQL_ENV, POSTGRES_ENV
from sqlalchemy.engine import make_url

from safety import ReadOnlySettings, SafetyPolicy, SqlValidator, open_readonly_engine, read_schema

DENIED = ("customers.email", "customers.info", "staff.salary")
POLICY = SafetyPolicy(denied_columns=DENIED)
#: The same protection written as an allowlist: every other column of the two tables.
ALLOWED = ("customers.id", "customers.name", "staff.id", "staff.name")
ALLOW_POLICY = SafetyPolicy(allowed_columns=ALLOWED)
#: Protected values per twin: different lengths, cases, digits and JSON, so that any function of
#: them (length, upper, a comparison, a JSON key) differs between the twins.
SECRETS = {
    "a": (
        [
            ("ann@one.example", '{"ssn": "111-22-3333", "n": 1}'),
            ("bob@two.example", '{"ssn": "444-55-6666", "n": 2}'),
        ],
        [51000, 62000],
    ),
    "b": (
        [("Zed-Q@x.org", '{"ssn": "9", "k": [7]}'), ("", '{"n": 2, "ssn": null}')],
        [7, -3],
    ),
}
TYPES = {
    "sqlite": ("TEXT", "INTEGER"),
    "duckdb": ("VARCHAR", "INTEGER"),
    "postgres": ("JSONB", "INTEGER"),
    "mysql": ("JSON", "INTEGER"),
}


@dataclass
class Twin:
    dialect: str
    engine: sa.Engine
    schema: dict[str, list[str]]
    default_schema: str

    def validator(self, policy: SafetyPolicy = POLICY) -> SqlValidator:
        return SqlValidator(
            self.dialect,
            policy,
            schema=self.schema,
            default_schema=self.default_schema,
            views=self.views,
        )

    conn: sa.Connection | None = None
    views: dict[str, str | None] = field(default_factory=dict)

    def outcome(self, sql: str) -> tuple[str, Any]:
        """("rows", rows) or ("error", the driver's text) of running ``sql`` raw, on one
        connection kept for the twin's life (each statement in its own transaction)."""
        if self.conn is None:
            self.conn = self.engine.connect()
        conn = self.conn
        try:
            result = conn.execution_options(no_parameters=True).exec_driver_sql(sql)
            rows = [tuple(r) for r in result.fetchall()] if result.returns_rows else []
            return "rows", rows
        except Exception as error:  # the engine refused: its text is part of the outcome
            text = str(getattr(error, "orig", error))
            return "error", text.split("\n[SQL:")[0]
        finally:
            try:
                conn.rollback()
            except Exception:  # the connection broke: the next statement gets a new one
                conn.invalidate()
                self.conn = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass
class Twins:
    dialect: str
    a: Twin
    b: Twin
    cleanup: list = field(default_factory=list)

    def pair(self) -> tuple[Twin, Twin]:
        return self.a, self.b


def _fill(execute, dialect: str, twin: str, extra: tuple[str, ...] = ()) -> None:
    json_type, int_type = TYPES[dialect]
    people, salaries = SECRETS[twin]
    execute(
        f"CREATE TABLE customers (id {int_type}, name VARCHAR(40), email VARCHAR(40), "
        f"info {json_type})"
    )
    execute(f"CREATE TABLE staff (id {int_type}, name VARCHAR(40), salary {int_type})")
    for i, (email, info) in enumerate(people, 1):
        execute(f"INSERT INTO customers VALUES ({i}, 'name{i}', '{email}', '{info}')")
    for i, salary in enumerate(salaries, 1):
        execute(f"INSERT INTO staff VALUES ({i}, 'staff{i}', {salary})")
    for statement in extra:  # views over the two tables, the same on both twins
        execute(statement)


def _twin(
    dialect: str,
    engine: sa.Engine,
    views: bool = False,
    keep: tuple[str, ...] = ("customers", "staff"),
) -> Twin:
    found = read_schema(engine)
    schema = {
        k: v
        for k, v in found.tables.items()
        if k.split(".")[-1] in keep or (views and k in found.views)
    }
    kept = {k: v for k, v in found.views.items() if k in schema}
    return Twin(dialect, engine, schema, found.default_schema or "", views=kept)


SETTINGS = ReadOnlySettings(statement_timeout_s=5, sandbox_workers=0)


def make_twins(
    dialect: str,
    tmp: Path,
    extra: tuple[str, ...] = (),
    fill: Callable[[Callable, str, str], None] | None = None,
    keep: tuple[str, ...] = ("customers", "staff"),
) -> Twins:
    """Two databases of ``dialect`` that differ only in the protected values; ``extra``
    statements (views) run on both after the tables are filled. ``fill(execute, dialect, twin)``
    fills twin ``"a"`` or ``"b"`` instead of the default tables; ``keep`` names the tables the
    validator sees."""
    if fill is not None:

        def filler(execute, dialect: str, twin: str, extra: tuple[str, ...] = ()) -> None:
            fill(execute, dialect, twin)
            for statement in extra:
                execute(statement)
    else:
        filler = _fill
    if dialect == "sqlite":
        twins = []
        for name in "ab":
            path = tmp / f"{name}.db"
            with sqlite3.connect(path) as conn:
                filler(conn.execute, dialect, name, extra)
            engine = open_readonly_engine(f"sqlite:///{path}", SETTINGS)
            twins.append(_twin(dialect, engine, bool(extra), keep))
        return Twins(dialect, *twins)
    if dialect == "duckdb":
        import duckdb

        twins = []
        for name in "ab":
            path = tmp / f"{name}.duckdb"
            conn = duckdb.connect(str(path))
            filler(conn.execute, dialect, name, extra)
            conn.close()
            engine = open_readonly_engine(f"duckdb:///{path}", SETTINGS)
            twins.append(_twin(dialect, engine, bool(extra), keep))
        return Twins(dialect, *twins)
    env = POSTGRES_ENV if dialect == "postgres" else MYSQL_ENV
    url = os.environ.get(env)
    if not url:
        pytest.skip(f"{env} is not set; {dialect} twin databases need a server")
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    stem = f"sg_twin_{uuid.uuid4().hex[:8]}"
    twins = []
    names = []
    for name in "ab":
        database = f"{stem}_{name}"
        names.append(database)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {database}")
        twin_url = make_url(url).set(database=database)
        owner = sa.create_engine(twin_url)
        with owner.begin() as conn:
            filler(conn.exec_driver_sql, dialect, name, extra)
        owner.dispose()
        rendered = twin_url.render_as_string(hide_password=False)
        engine = open_readonly_engine(rendered, SETTINGS)
        twins.append(_twin(dialect, engine, bool(extra), keep))
    return Twins(dialect, *twins, cleanup=[admin, names])


def drop_twins(twins: Twins) -> None:
    twins.a.close()
    twins.b.close()
    twins.a.engine.dispose()
    twins.b.engine.dispose()
    if twins.cleanup:
        admin, names = twins.cleanup
        with admin.connect() as conn:
            for database in names:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {database}")
        admin.dispose()
