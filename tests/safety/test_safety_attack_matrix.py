"""Every attack class x SQLite, PostgreSQL, MariaDB/MySQL, DuckDB.

Each attack is shown twice: the validator refuses it, and the read-only connection (validator
switched off, the raw text sent as is) either fails or leaves no trace: same rows, no new table or
file, no lock held afterwards. Attacks that only a database superuser could carry out (reading
server files) run as the least-privilege reader role the README recommends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from safety_backends import MAKERS, drop

from safety import SqlValidator, is_statement_timeout

FILE = "{files}/sg_out.txt"
UNBOUNDED_S = 20.0


@dataclass(frozen=True)
class Attack:
    name: str
    cls: int  # attack class in issue 3: 1 statements, 2 DML/DDL/commands, 3 functions, 4 locks/quoting, 5 resources
    sql: str
    # "error" | "harmless" (may run, changes nothing) | "timeout" | "null" (no data comes back) |
    # "bounded" (stopped by the server's time or recursion limit, with or without an error)
    expect: str = "error"
    role: str = "owner"
    validator: str = (
        "refuse"  # "refuse", or "defuse": accepted, and the re-rendered text is harmless
    )


ATTACKS: dict[str, list[Attack]] = {
    "sqlite": [
        Attack("two statements", 1, "SELECT 1; DELETE FROM {t}"),
        Attack("delete", 2, "DELETE FROM {t}"),
        Attack("update", 2, "UPDATE {t} SET a = 0"),
        Attack("insert", 2, "INSERT INTO {t} (a, b) VALUES (9, 'x')"),
        Attack("drop", 2, "DROP TABLE {t}"),
        Attack("create", 2, "CREATE TABLE sg_new (a INTEGER)"),
        Attack("create as select", 2, "CREATE TABLE sg_copy AS SELECT a FROM {t}"),
        Attack("attach new file", 2, "ATTACH DATABASE '" + FILE + "' AS x"),
        Attack("vacuum into", 2, "VACUUM INTO '" + FILE + "'"),
        Attack("pragma query_only off", 2, "PRAGMA query_only = 0"),
        Attack("pragma writable_schema", 2, "PRAGMA writable_schema = 1"),
        Attack("begin immediate", 2, "BEGIN IMMEDIATE", expect="harmless"),
        Attack("load_extension", 3, "SELECT load_extension('/tmp/sg_evil.so')"),
        Attack("randomblob bomb", 3, "SELECT length(randomblob(1000000000))"),
        Attack("zeroblob bomb", 3, "SELECT length(zeroblob(1000000000))"),
        Attack("fts3_tokenizer", 3, "SELECT fts3_tokenizer('simple')"),
        Attack("for update", 4, "SELECT a FROM {t} FOR UPDATE"),
        Attack(
            "recursive cte",
            5,
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r",
            expect="timeout",
        ),
    ],
    "postgres": [
        Attack("two statements", 1, "SELECT 1; DROP TABLE {t}"),
        Attack(
            "set then commit", 1, "SET default_transaction_read_only = off; COMMIT; DELETE FROM {t}"
        ),
        Attack("delete", 2, "DELETE FROM {t}"),
        Attack("update", 2, "UPDATE {t} SET a = 0"),
        Attack("truncate", 2, "TRUNCATE {t}"),
        Attack("drop", 2, "DROP TABLE {t}"),
        Attack("create", 2, "CREATE TABLE sg_new (a INTEGER)"),
        Attack("delete in cte", 2, "WITH d AS (DELETE FROM {t} RETURNING a) SELECT a FROM d"),
        Attack(
            "insert in cte",
            2,
            "WITH d AS (INSERT INTO {t} (a) VALUES (9) RETURNING a) SELECT a FROM d",
        ),
        Attack("select into", 2, "SELECT a INTO sg_stolen FROM {t}"),
        Attack("explain analyze delete", 2, "EXPLAIN ANALYZE DELETE FROM {t}"),
        Attack("copy to file", 2, "COPY {t} TO '/tmp/sg_copy_out.csv'", role="reader"),
        Attack("set read write", 2, "SET default_transaction_read_only = off", expect="harmless"),
        Attack("commit", 2, "COMMIT", expect="harmless"),
        Attack("pg_sleep", 3, "SELECT pg_sleep(30)", expect="timeout"),
        Attack("pg_read_file", 3, "SELECT pg_read_file('/etc/passwd')", role="reader"),
        Attack("pg_ls_dir", 3, "SELECT pg_ls_dir('/')", role="reader"),
        Attack("lo_import", 3, "SELECT lo_get(lo_import('/etc/passwd'))", role="reader"),
        Attack(
            "set_config",
            3,
            "SELECT set_config('default_transaction_read_only', 'off', false)",
            expect="harmless",
        ),
        Attack("advisory lock", 3, "SELECT pg_advisory_lock({lock})", expect="harmless"),
        Attack("pg_notify", 3, "SELECT pg_notify('sg_channel', 'x')", expect="harmless"),
        Attack(
            "query_to_xml", 3, "SELECT query_to_xml('DELETE FROM {t} RETURNING a', true, true, '')"
        ),
        Attack(
            "pg_terminate_backend",
            3,
            "SELECT pg_terminate_backend(0)",
            expect="harmless",
            role="reader",
        ),
        Attack("dblink", 3, "SELECT x FROM dblink('dbname=test', 'DELETE FROM {t}') AS r(x int)"),
        Attack("for update", 4, "SELECT a FROM {t} FOR UPDATE"),
        Attack("for share", 4, "SELECT a FROM {t} FOR SHARE"),
        Attack(
            "recursive cte",
            5,
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r",
            expect="timeout",
        ),
        Attack(
            "cross-joined generators",
            5,
            "SELECT count(*) FROM generate_series(1, 100000000) AS x, generate_series(1, 100000000) AS y",
            expect="timeout",
        ),
    ],
    "mysql": [
        Attack("two statements", 1, "SELECT 1; DROP TABLE {t}"),
        Attack("delete", 2, "DELETE FROM {t}"),
        Attack("update", 2, "UPDATE {t} SET a = 0"),
        Attack("drop", 2, "DROP TABLE {t}"),
        Attack("create", 2, "CREATE TABLE sg_new (a INTEGER)"),
        Attack("truncate", 2, "TRUNCATE TABLE {t}"),
        Attack("set read write", 2, "SET SESSION TRANSACTION READ WRITE", expect="harmless"),
        Attack(
            "select into outfile",
            2,
            "SELECT a FROM {t} INTO OUTFILE '/tmp/sg_outfile.txt'",
            role="reader",
        ),
        Attack("sleep", 3, "SELECT SLEEP(30)", expect="timeout"),
        Attack("benchmark", 3, "SELECT BENCHMARK(10000000000, MD5('a'))", expect="bounded"),
        Attack(
            "executable comment",
            4,
            "SELECT a FROM {t} /*!50000 ; DROP TABLE {t} */",
        ),
        Attack("load_file", 3, "SELECT LOAD_FILE('/etc/passwd')", expect="null", role="reader"),
        Attack("get_lock", 3, "SELECT GET_LOCK('sg_lock_{lock}', 0)", expect="harmless"),
        Attack("for update", 4, "SELECT a FROM {t} FOR UPDATE", expect="harmless"),
        Attack("lock tables", 4, "LOCK TABLES {t} WRITE", expect="harmless"),
        Attack(
            "recursive cte",
            5,
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 100000000) SELECT max(i) FROM r",
            expect="bounded",
        ),
    ],
    "duckdb": [
        Attack("two statements", 1, "SELECT 1; DELETE FROM {t}"),
        Attack("delete", 2, "DELETE FROM {t}"),
        Attack("insert", 2, "INSERT INTO {t} VALUES (9, 'x')"),
        Attack("drop", 2, "DROP TABLE {t}"),
        Attack("create", 2, "CREATE TABLE sg_new (a INTEGER)"),
        Attack("delete in cte", 2, "WITH d AS (DELETE FROM {t} RETURNING a) SELECT a FROM d"),
        Attack("copy to file", 2, "COPY {t} TO '" + FILE + "'"),
        Attack("attach", 2, "ATTACH '" + FILE + "' AS x"),
        Attack("install", 2, "INSTALL httpfs"),
        Attack("load", 2, "LOAD httpfs"),
        Attack("set external access", 2, "SET enable_external_access = true"),
        Attack("read_csv", 3, "SELECT * FROM read_csv('/etc/passwd')"),
        Attack("read_text", 3, "SELECT content FROM read_text('/etc/passwd')"),
        Attack("glob", 3, "SELECT file FROM glob('/etc/*')"),
        Attack("file as table", 3, "SELECT * FROM '/etc/passwd'"),
        Attack("query function", 3, "SELECT * FROM query('DELETE FROM {t}')"),
        Attack("getenv", 3, "SELECT getenv('HOME')"),
        Attack("for update", 4, "SELECT a FROM {t} FOR UPDATE", expect="harmless"),
        Attack(
            "recursive cte",
            5,
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r",
            expect="timeout",
        ),
        Attack(
            "cross-joined generators",
            5,
            "SELECT sum(x.range * y.range) FROM range(100000000) AS x, range(100000000) AS y",
            expect="bounded",  # stopped by the timeout, or at once by DuckDB's memory_limit
        ),
    ],
}

CASES = [(dialect, attack) for dialect, attacks in ATTACKS.items() for attack in attacks]
IDS = [f"{dialect}-class{attack.cls}-{attack.name}" for dialect, attack in CASES]


def render(
    attack: Attack, table: str = "sg_victim", files: str = "/tmp/sg_files", lock: int = 4242
) -> str:
    return attack.sql.replace("{t}", table).replace("{files}", files).replace("{lock}", str(lock))


def test_every_class_is_covered_on_every_database():
    for dialect, attacks in ATTACKS.items():
        assert {a.cls for a in attacks} >= {1, 2, 3, 5}, dialect
        assert any(a.cls == 4 for a in attacks), dialect


@pytest.mark.parametrize(("dialect", "attack"), CASES, ids=IDS)
def test_validator_refuses(dialect, attack):
    result = SqlValidator(dialect=dialect).validate(render(attack))
    if attack.validator == "defuse":
        assert result.ok and "DROP" not in result.sql.upper(), result.sql
        return
    if attack.expect in ("timeout", "bounded"):
        # Resource exhaustion is bounded by the connection, not refused: the text is a plain read.
        assert result.ok or result.refusal is not None
        return
    assert not result.ok, f"{dialect}: accepted {result.sql!r}"
    assert result.sql is None
    assert result.refusal.code and result.refusal.message


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    made: dict = {}
    yield (
        lambda dialect: (
            made.get(dialect)
            or made.setdefault(dialect, MAKERS[dialect](tmp_path_factory.mktemp(dialect)))
        )
    )
    for backend in made.values():
        drop(backend)


@pytest.mark.parametrize(("dialect", "attack"), CASES, ids=IDS)
def test_connection_is_harmless_with_validator_off(backends, dialect, attack):
    backend = backends(dialect)
    before = backend.state()
    sql = render(attack, backend.table, str(backend.tmp), backend.lock)
    error: BaseException | None = None
    rows = None
    started = time.monotonic()
    with backend.engine(attack.role).connect() as conn:
        try:
            result = conn.exec_driver_sql(sql)
            rows = result.fetchall() if result.returns_rows else []
        except Exception as exc:  # the database said no: that is the point
            error = exc
    if attack.expect == "error":
        assert error is not None, f"{dialect} ran {sql!r} and returned {rows!r}"
    elif attack.expect == "timeout":
        assert error is not None and is_statement_timeout(error), f"{dialect}: {error!r}"
    elif attack.expect == "bounded":
        # Unbounded, these run for minutes; the server stops them after the statement timeout.
        assert (
            error is not None and is_statement_timeout(error)
        ) or time.monotonic() - started < UNBOUNDED_S
    elif attack.expect == "null":
        assert error is not None or all(v is None for row in rows for v in row), rows
    assert backend.state() == before, f"{dialect}: {sql!r} left a trace"
