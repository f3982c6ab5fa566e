"""What the database role may do beyond reading: a startup check that names each excess right.

The read-only connection (``safety.readonly``) stops writes, but some reads reach past the
database: MySQL/MariaDB's ``LOAD_FILE`` needs only the FILE privilege and is not stopped by a
read-only transaction; PostgreSQL's superuser and its ``pg_read_server_files`` /
``pg_execute_server_program`` roles read server files and run programs. sqlgate should run with
a role that has SELECT only; ``check_privileges`` says, in one sentence each, what else the
role of an engine has, so a deployment can log it at startup (or refuse to start).
"""

from __future__ import annotations

import re

from sqlalchemy.engine import Connection, Engine

from .dialects import dialect_for_url

__all__ = ["check_privileges", "mysql_grant_warnings"]

_ADVICE = "; connect with a role that has SELECT only"

# Global MySQL privileges that reach beyond reading this database's rows.
_MYSQL_GLOBAL_RISKS = {
    "FILE": "the FILE privilege: LOAD_FILE reads files on the database server",
    "SUPER": "the SUPER privilege: it can change server settings and kill other sessions",
    "PROCESS": "the PROCESS privilege: it sees every session's statements",
    "SHUTDOWN": "the SHUTDOWN privilege: it can stop the server",
    "CREATE USER": "the CREATE USER privilege: it can create and change accounts",
    "RELOAD": "the RELOAD privilege: it can flush and reload server state",
}
_MYSQL_WRITES = frozenset(
    {
        "INSERT",
        "UPDATE",
        "DELETE",
        "CREATE",
        "DROP",
        "ALTER",
        "INDEX",
        "CREATE VIEW",
        "CREATE ROUTINE",
        "ALTER ROUTINE",
        "EXECUTE",
        "TRIGGER",
        "EVENT",
        "LOCK TABLES",
        "CREATE TEMPORARY TABLES",
        "DELETE HISTORY",
    }
)
_GRANT = re.compile(r"^GRANT\s+(?P<privs>.+?)\s+ON\s+(?P<scope>\S+)\s+TO\s", re.I | re.S)


def check_privileges(engine: Engine) -> list[str]:
    """Warnings, one sentence each, for every right of ``engine``'s role beyond reading.

    An empty list for SQLite and DuckDB (the file is opened read-only) and for a SELECT-only
    role. The check runs through ``engine``, so a PostgreSQL ``postgres_role`` taken in every
    transaction is the role checked.
    """
    dialect = dialect_for_url(engine.url.drivername)
    if dialect not in ("postgres", "mysql"):
        return []
    with engine.connect() as conn:
        if dialect == "postgres":
            return _postgres_warnings(conn)
        grants = [str(row[0]) for row in conn.exec_driver_sql("SHOW GRANTS").fetchall()]
    return mysql_grant_warnings(grants)


def mysql_grant_warnings(grants: list[str]) -> list[str]:
    """Warnings for the lines of MySQL/MariaDB ``SHOW GRANTS``.

    Example:
        >>> [w[:60] for w in mysql_grant_warnings(["GRANT FILE ON *.* TO `r`@`%`"])]
        ['the database role has the FILE privilege: LOAD_FILE reads fi']
        >>> mysql_grant_warnings(["GRANT SELECT ON `shop`.* TO `r`@`%`"])
        []
    """
    warnings: list[str] = []
    for line in grants:
        match = _GRANT.match(line.strip())
        if match is None:
            continue
        scope = match["scope"]
        privs = {p.strip().upper() for p in match["privs"].split(",")}
        if "ALL" in privs or "ALL PRIVILEGES" in privs:
            privs = (set(_MYSQL_GLOBAL_RISKS) if scope == "*.*" else set()) | _MYSQL_WRITES
        where = f"(GRANT {match['privs']} ON {scope})"
        for name, risk in _MYSQL_GLOBAL_RISKS.items():
            if name in privs and scope == "*.*":
                warnings.append(f"the database role has {risk} {where}{_ADVICE}")
        writes = sorted(privs & _MYSQL_WRITES)
        if writes:
            warnings.append(
                f"the database role is not read-only: it has {', '.join(writes)} on {scope} "
                f"{where}{_ADVICE}"
            )
        if re.search(r"WITH\s+GRANT\s+OPTION", line, re.I):
            warnings.append(
                f"the database role may grant its rights to others on {scope} (WITH GRANT OPTION)"
                f"{_ADVICE}"
            )
    return warnings


_POSTGRES_ROLE = """
SELECT current_user, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls,
       pg_has_role(current_user, 'pg_read_server_files', 'USAGE'),
       pg_has_role(current_user, 'pg_write_server_files', 'USAGE'),
       pg_has_role(current_user, 'pg_execute_server_program', 'USAGE')
FROM pg_roles r WHERE r.rolname = current_user
"""
_POSTGRES_WRITABLE = """
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
  AND (has_table_privilege(c.oid, 'INSERT') OR has_table_privilege(c.oid, 'UPDATE')
       OR has_table_privilege(c.oid, 'DELETE') OR has_table_privilege(c.oid, 'TRUNCATE'))
"""
_POSTGRES_CREATE = """
SELECT count(*) FROM pg_namespace n
WHERE n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
  AND has_schema_privilege(n.oid, 'CREATE')
"""


def _postgres_warnings(conn: Connection) -> list[str]:
    row = conn.exec_driver_sql(_POSTGRES_ROLE).one()
    role, superuser, createrole, createdb, bypassrls, read_files, write_files, run_programs = row
    named = f"the database role {role!r}"
    warnings: list[str] = []
    if superuser:
        warnings.append(
            f"{named} is a superuser: it can read server files, run programs and change any "
            f"setting{_ADVICE}"
        )
    for held, what in (
        (read_files, "pg_read_server_files: pg_read_file and COPY read files on the server"),
        (write_files, "pg_write_server_files: COPY writes files on the server"),
        (run_programs, "pg_execute_server_program: COPY ... PROGRAM runs programs on the server"),
    ):
        if held and not superuser:
            warnings.append(f"{named} is a member of {what}{_ADVICE}")
    for held, what in (
        (createrole, "CREATEROLE"),
        (createdb, "CREATEDB"),
        (bypassrls, "BYPASSRLS"),
    ):
        if held and not superuser:
            warnings.append(f"{named} has {what}{_ADVICE}")
    writable = conn.exec_driver_sql(_POSTGRES_WRITABLE).scalar() or 0
    if writable and not superuser:
        warnings.append(
            f"{named} is not read-only: it may insert, update, delete or truncate in {writable} "
            f"table(s){_ADVICE}"
        )
    creatable = conn.exec_driver_sql(_POSTGRES_CREATE).scalar() or 0
    if creatable and not superuser:
        warnings.append(f"{named} may create objects in {creatable} schema(s){_ADVICE}")
    return warnings
