"""SchemaExplorer: what the database holds, read once per database and cached.

Only the tables the plan names, plus their foreign-key neighbours in both directions, go into
the prompt (``explore``); ``catalogue`` gives the whole database one line per table for the
reasoning step. The models it returns (``TableInfo``, ``SchemaContext``, ...) are defined in
``agents.schema_models`` and named here too.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.engine.reflection import ObjectKind

from agents.errors import SchemaInspectionError
from agents.schema_models import ColumnInfo, ForeignKeyInfo, SchemaContext, TableInfo, match_name
from agents.sql_executor import clean_message

if TYPE_CHECKING:
    from agents.descriptions import Descriptions

__all__ = [
    "ColumnInfo",
    "ForeignKeyInfo",
    "SchemaContext",
    "SchemaExplorer",
    "TableInfo",
    "clear_schema_cache",
    "dialect_name",
]

CACHE_SIZE = 32

#: A text column's sampled value is kept only up to this many characters (names, codes, labels).
SHORT_TEXT_CHARS = 40
#: Rows read per column when sampling values: the sample is bounded whatever the table's size.
SAMPLE_ROWS = 1000
_TEXT_TYPES = ("CHAR", "TEXT", "STRING", "CLOB", "ENUM", "NAME", "CITEXT")


_cache: OrderedDict[str, dict[str, TableInfo]] = OrderedDict()
_cache_lock = threading.Lock()


def clear_schema_cache() -> None:
    """Forget every cached schema, e.g. after a migration."""
    with _cache_lock:
        _cache.clear()


def dialect_name(engine: Engine) -> str:
    """The engine's dialect as sqlglot spells it: sqlite, postgres, mysql or duckdb."""
    name = engine.dialect.name
    return {"postgresql": "postgres", "mariadb": "mysql"}.get(name, name)


class SchemaExplorer:
    """Reads tables, columns, keys, foreign keys and comments, once per database.

    Comments come from the engine's own catalogue (PostgreSQL and DuckDB ``COMMENT ON``,
    MySQL/MariaDB ``COMMENT``) and, on SQLite, which keeps none, from the ``-- ...`` and
    ``/* ... */`` written in each ``CREATE TABLE`` text (``agents.sqlite_comments``). A
    ``descriptions`` file (``agents.descriptions``) adds to them where the database says little.

    ``cache_key`` names the database in the module-level cache (default: the URL without its
    password, plus ``db_schema``). ``db_schema`` selects a non-default schema (PostgreSQL, DuckDB).
    With ``sample_values`` > 0, up to that many distinct values of each short text column (read
    from at most ``SAMPLE_ROWS`` rows, each value at most ``SHORT_TEXT_CHARS`` long) are kept in
    ``ColumnInfo.values`` and cached with the schema: they tell the catalogue's ranker that
    "English" is a language. Off by default: it costs one bounded query per text column.
    """

    def __init__(
        self,
        engine: Engine,
        cache_key: str | None = None,
        db_schema: str | None = None,
        *,
        sample_values: int = 0,
        descriptions: Descriptions | None = None,
    ) -> None:
        self.engine = engine
        self.db_schema = db_schema
        self.dialect = dialect_name(engine)
        self.sample_values = max(sample_values, 0)
        self.descriptions = descriptions
        base = (
            cache_key if cache_key is not None else engine.url.render_as_string(hide_password=True)
        )
        self.cache_key = f"{base}#{db_schema}" if db_schema else base
        if self.sample_values:
            self.cache_key += f"#values={self.sample_values}"
        if descriptions is not None:
            self.cache_key += f"#descriptions={descriptions.fingerprint()}"
        self._fk_links: (
            tuple[dict[str, TableInfo], dict[str, set[str]], dict[str, set[str]]] | None
        ) = None

    def tables(self, refresh: bool = False) -> dict[str, TableInfo]:
        """Every table and view, keyed by name (read from the database on first use)."""
        with _cache_lock:
            cached = None if refresh else _cache.get(self.cache_key)
            if cached is not None:
                _cache.move_to_end(self.cache_key)
                return cached
        loaded = self._read()
        with _cache_lock:
            _cache[self.cache_key] = loaded
            _cache.move_to_end(self.cache_key)
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
        return loaded

    def table_names(self) -> list[str]:
        return list(self.tables())

    def table(self, name: str) -> TableInfo | None:
        """The table called ``name``, matched without regard to case, quotes or schema prefix."""
        return match_name(name, self.tables())

    def catalogue(self) -> str:
        """One line per table: ``name(col type, ...)``."""
        return "\n".join(t.catalogue_line() for t in self.tables().values())

    def render(self) -> str:
        """The whole schema as CREATE-TABLE-like text."""
        return self.explore(None).render()

    def explore(
        self, tables: Iterable[str] | None, neighbours: bool = True, *, incoming: bool = True
    ) -> SchemaContext:
        """The planned ``tables`` plus, with ``neighbours``, every table one foreign key away.

        With ``incoming=False`` only the tables the planned ones refer to are added (not the
        tables referring to them): on large schemas a look-up table is referred to by hundreds.

        ``None`` means every table. Names that match nothing are ignored and listed in
        ``unknown_tables``.
        """
        everything = self.tables()
        if tables is None:
            return SchemaContext(
                dialect=self.dialect,
                db_schema=self.db_schema,
                tables=list(everything.values()),
                requested=list(everything),
            )
        requested: list[str] = []
        unknown: list[str] = []
        for raw in tables:
            found = match_name(raw, everything)
            if found is None:
                if raw not in unknown:
                    unknown.append(raw)
            elif found.name not in requested:
                requested.append(found.name)
        extra: set[str] = set()
        if neighbours:
            wanted = set(requested)
            refers_to, referred_by = self._links(everything)
            for name in wanted:
                extra |= refers_to.get(name, set())
                if incoming:
                    extra |= referred_by.get(name, set())
            extra -= wanted
        added = sorted(extra)
        return SchemaContext(
            dialect=self.dialect,
            db_schema=self.db_schema,
            tables=[everything[n] for n in requested + added],
            requested=requested,
            neighbours=added,
            unknown_tables=unknown,
        )

    def _links(
        self, everything: dict[str, TableInfo]
    ) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """The foreign keys of ``everything`` as (tables each refers to, tables referring to
        each): built once per schema read, not per question (a walk over every key)."""
        cached = self._fk_links
        if cached is not None and cached[0] is everything:
            return cached[1], cached[2]
        refers_to: dict[str, set[str]] = {}
        referred_by: dict[str, set[str]] = {}
        for info in everything.values():
            for fk in info.foreign_keys:
                if fk.referred_table in everything:
                    refers_to.setdefault(info.name, set()).add(fk.referred_table)
                referred_by.setdefault(fk.referred_table, set()).add(info.name)
        self._fk_links = (everything, refers_to, referred_by)
        return refers_to, referred_by

    def _read(self) -> dict[str, TableInfo]:
        try:
            conn = self.engine.connect()
        except sa.exc.SQLAlchemyError as exc:
            raise SchemaInspectionError(clean_message(exc), code="database_unreachable") from exc
        try:
            with conn:
                if self.engine.dialect.name == "duckdb":
                    tables = _read_duckdb(conn, self.db_schema)
                else:
                    tables = _read_inspector(conn, self.db_schema)
                if self.engine.dialect.name == "sqlite":
                    _sqlite_comments(conn, tables, self.db_schema)
                if self.sample_values:
                    _sample_values(conn, tables, self.db_schema, self.sample_values)
                if self.descriptions is not None:
                    tables = self.descriptions.apply(tables)
                return tables
        except sa.exc.SQLAlchemyError as exc:
            raise SchemaInspectionError(clean_message(exc)) from exc


def _sample_values(
    conn: sa.Connection, tables: dict[str, TableInfo], schema: str | None, limit: int
) -> None:
    """Fill ``ColumnInfo.values`` of short text columns; a column that cannot be read is skipped."""
    # PostgreSQL aborts the transaction on an error, so each read gets a savepoint there
    # (DuckDB has none, and SQLite and MySQL carry on after a failed SELECT).
    guarded = conn.dialect.name == "postgresql"
    for info in tables.values():
        for column in info.columns:
            if not any(kind in column.type.upper() for kind in _TEXT_TYPES):
                continue
            table = sa.table(info.name, sa.column(column.name), schema=schema)
            rows = (
                sa.select(table.c[column.name].label("v"))
                .where(table.c[column.name].is_not(None))
                .limit(SAMPLE_ROWS)
                .subquery()
            )
            query = sa.select(rows.c.v).distinct().limit(limit * 2)
            try:
                with conn.begin_nested() if guarded else contextlib.nullcontext():
                    found = conn.execute(query).scalars().all()
            except sa.exc.SQLAlchemyError:
                continue
            values = [str(v) for v in found if 0 < len(str(v)) <= SHORT_TEXT_CHARS]
            column.values = sorted(set(values), key=values.index)[:limit]


def _sqlite_comments(conn: sa.Connection, tables: dict[str, TableInfo], schema: str | None) -> None:
    """Comments written in the ``CREATE TABLE`` texts, where SQLAlchemy found none (it never
    does on SQLite: the engine keeps no comment catalogue)."""
    from agents.sqlite_comments import create_table_comments

    master = (
        f'"{schema.replace(chr(34), chr(34) * 2)}".sqlite_master' if schema else "sqlite_master"
    )
    rows = conn.exec_driver_sql(f"SELECT name, sql FROM {master} WHERE type = 'table'").all()
    for name, sql in rows:
        info = tables.get(name)
        if info is None or not sql:
            continue
        found = create_table_comments(str(sql))
        if found.table and not info.comment:
            info.comment = found.table
        if found.columns:
            folded = {k.casefold(): v for k, v in found.columns.items()}
            for column in info.columns:
                text = found.columns.get(column.name) or folded.get(column.name.casefold())
                if text and not column.comment:
                    column.comment = text


def _read_inspector(conn: sa.Connection, schema: str | None) -> dict[str, TableInfo]:
    insp = sa.inspect(conn)
    kinds: dict[str, Literal["table", "view"]] = {
        name: "table" for name in insp.get_table_names(schema=schema)
    }
    kinds.update({name: "view" for name in insp.get_view_names(schema=schema)})
    columns = insp.get_multi_columns(schema=schema, kind=ObjectKind.ANY)
    comments: dict[Any, Any]
    try:
        comments = dict(insp.get_multi_table_comment(schema=schema, kind=ObjectKind.ANY))
    except NotImplementedError:  # SQLite keeps no comments
        comments = {}
    pks: dict[Any, Any] = dict(insp.get_multi_pk_constraint(schema=schema))
    fks = insp.get_multi_foreign_keys(schema=schema)
    out: dict[str, TableInfo] = {}
    for name in sorted(kinds):
        key = (schema, name)
        pk = list((pks.get(key) or {}).get("constrained_columns") or [])
        out[name] = TableInfo(
            name=name,
            kind=kinds[name],
            comment=(comments.get(key) or {}).get("text") or None,
            columns=[
                ColumnInfo(
                    name=c["name"],
                    type=_type_text(c["type"], conn.dialect),
                    nullable=bool(c.get("nullable", True)) and c["name"] not in pk,
                    primary_key=c["name"] in pk,
                    comment=c.get("comment") or None,
                )
                for c in columns.get(key, [])
            ],
            primary_key=pk,
            foreign_keys=[
                ForeignKeyInfo(
                    columns=list(fk["constrained_columns"]),
                    referred_table=fk["referred_table"],
                    referred_columns=list(fk["referred_columns"]),
                )
                for fk in fks.get(key, [])
                if fk.get("referred_table")
            ],
        )
    return out


def _read_duckdb(conn: sa.Connection, schema: str | None) -> dict[str, TableInfo]:
    # duckdb_engine's inspector relies on pg_catalog pieces DuckDB lacks; DuckDB's own catalogue
    # functions give the same facts.
    schema = schema or conn.exec_driver_sql("SELECT current_schema()").scalar_one()
    params = {"schema": schema}
    rows = conn.execute(
        sa.text(
            "SELECT t.table_name, t.table_type, c.column_name, c.data_type, c.is_nullable "
            "FROM information_schema.tables t JOIN information_schema.columns c "
            "  ON c.table_catalog = t.table_catalog AND c.table_schema = t.table_schema "
            "AND c.table_name = t.table_name "
            "WHERE t.table_schema = :schema AND t.table_catalog = current_database() "
            "ORDER BY t.table_name, c.ordinal_position"
        ),
        params,
    ).all()
    constraints = conn.execute(
        sa.text(
            "SELECT table_name, constraint_type, constraint_column_names, referenced_table, referenced_column_names "
            "FROM duckdb_constraints() WHERE schema_name = :schema AND database_name = current_database() "
            "AND constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY') ORDER BY table_name, constraint_index"
        ),
        params,
    ).all()
    comments = {
        (table, column): comment
        for table, column, comment in conn.execute(
            sa.text(
                "SELECT table_name, NULL, comment FROM duckdb_tables() "
                "WHERE schema_name = :schema AND database_name = current_database() "
                "AND comment IS NOT NULL "
                "UNION ALL SELECT view_name, NULL, comment FROM duckdb_views() "
                "WHERE schema_name = :schema AND database_name = current_database() "
                "AND comment IS NOT NULL AND NOT internal "
                "UNION ALL SELECT table_name, column_name, comment FROM duckdb_columns() "
                "WHERE schema_name = :schema AND database_name = current_database() "
                "AND comment IS NOT NULL"
            ),
            params,
        ).all()
    }
    pks: dict[str, list[str]] = {}
    fks: dict[str, list[ForeignKeyInfo]] = {}
    for table, kind, cols, ref_table, ref_cols in constraints:
        if kind == "PRIMARY KEY":
            pks[table] = list(cols)
        else:
            fks.setdefault(table, []).append(
                ForeignKeyInfo(
                    columns=list(cols), referred_table=ref_table, referred_columns=list(ref_cols)
                )
            )
    out: dict[str, TableInfo] = {}
    for table, table_type, column, data_type, is_nullable in rows:
        if table not in out:
            out[table] = TableInfo(
                name=table,
                kind="view" if table_type == "VIEW" else "table",
                comment=comments.get((table, None)) or None,
                primary_key=pks.get(table, []),
                foreign_keys=fks.get(table, []),
            )
        pk = column in out[table].primary_key
        out[table].columns.append(
            ColumnInfo(
                name=column,
                type=data_type,
                primary_key=pk,
                nullable=is_nullable == "YES" and not pk,
                comment=comments.get((table, column)) or None,
            )
        )
    return out


def _type_text(type_: Any, dialect: sa.Dialect) -> str:
    try:
        return str(type_.compile(dialect=dialect))
    except Exception:  # NullType (SQLite columns declared without a type) and exotic types
        return "" if isinstance(type_, sa.types.NullType) else type(type_).__name__.upper()
