"""The target database: URL checks, the read-only engine, the dialect and the schema explorer."""

from __future__ import annotations

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine, make_url

from agents.schema_explorer import SchemaExplorer
from orchestrator.errors import DatabaseUnreachable, DatabaseURLInvalid
from safety import ReadOnlySettings, dialect_for_url, open_readonly_engine


def redact_url(url: str) -> str:
    """The URL with its password hidden, safe for messages, logs and cache keys."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable database URL>"


class TargetDatabase:
    """A database to answer questions from, opened read-only and probed once.

    Example URLs: ``sqlite:///shop.db``, ``postgresql+psycopg://user@host/db``,
    ``mysql+pymysql://user@host/db``, ``duckdb:///warehouse.duckdb``.
    """

    def __init__(self, url: str, *, statement_timeout_s: float = 30.0) -> None:
        if not url or not url.strip():
            raise DatabaseURLInvalid("no database URL given: pass --db URL or set SQLGATE_DB")
        try:
            parsed = make_url(url)
        except sa_exc.ArgumentError as exc:
            raise DatabaseURLInvalid(
                f"{url!r} is not a database URL; expected e.g. sqlite:///path/to/file.db or "
                "postgresql+psycopg://user@host:5432/dbname"
            ) from exc
        except ValueError as exc:  # SQLAlchemy parses the port with int()
            raise DatabaseURLInvalid(
                "the database URL's port is not a number; expected e.g. "
                "postgresql+psycopg://user@host:5432/dbname"
            ) from exc
        self.url = url
        self.safe_url = redact_url(url)
        try:
            self.dialect = dialect_for_url(url)
        except Exception as exc:
            raise DatabaseURLInvalid(
                f"unsupported database {parsed.drivername!r}: sqlgate supports sqlite, postgresql, "
                "mysql/mariadb and duckdb"
            ) from exc
        try:
            self.engine: Engine = open_readonly_engine(
                url, ReadOnlySettings(statement_timeout_s=statement_timeout_s)
            )
            with self.engine.connect() as connection:
                connection.exec_driver_sql("SELECT 1").fetchall()
        except (sa_exc.SQLAlchemyError, OSError, ImportError) as exc:
            raise DatabaseUnreachable(
                f"cannot open {self.safe_url} read-only: {_one_line(exc)}"
            ) from exc
        except Exception as exc:  # drivers raise their own types for bad files and hosts
            raise DatabaseUnreachable(
                f"cannot open {self.safe_url} read-only: {_one_line(exc)}"
            ) from exc
        self.schema = SchemaExplorer(self.engine, cache_key=self.safe_url)

    def dispose(self) -> None:
        self.engine.dispose()


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first[:300]
