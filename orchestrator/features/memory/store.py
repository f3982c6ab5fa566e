"""The memory tables in sqlgate's state database: reviewed examples, business notes, revocations.

Schema is the ``memory`` component of the one migration runner (``approvals.migrations``). The
question text of examples and the text of notes are indexed for full-text search: an FTS5 table
kept in step by triggers on SQLite, a generated ``tsvector`` column with a GIN index on
PostgreSQL. Searching is a store method (``search_examples``, ``search_notes``) so that retrievers
never touch the tables themselves.

It is over 400 lines because it is the one owner of three tables on two engines: each query is
written once here for SQLite and PostgreSQL, and splitting it would spread the SQL of one
schema over several modules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from approvals.migrations import migrate, write_transaction
from orchestrator.core.runs import utc
from orchestrator.features.memory.errors import MemoryNotFound
from orchestrator.features.memory.fingerprint import StatementShape
from orchestrator.features.memory.models import (
    BusinessNote,
    ExampleStatus,
    MemoryExample,
    Revocation,
    ScoredExample,
)

__all__ = ["ANY_DATABASE", "MemoryStore", "search_terms"]

#: A note or revocation that applies to every database.
ANY_DATABASE = "*"

_metadata = sa.MetaData()
examples = sa.Table(
    "sqlgate_memory_examples",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("database", sa.Text, nullable=False),
    sa.Column("dialect", sa.String(32), nullable=False),
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("clarifications", sa.Text, nullable=False),
    sa.Column("sql", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("template_id", sa.String(32), nullable=False),
    sa.Column("template_text", sa.Text, nullable=False),
    sa.Column("schema_fp", sa.String(32), nullable=False),
    sa.Column("policy_fp", sa.String(32), nullable=False),
    sa.Column("tables", sa.Text, nullable=False),
    sa.Column("columns", sa.Text, nullable=True),
    sa.Column("reviewers", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("call_id", sa.String(64), nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("batch_id", sa.String(64), nullable=True),
    sa.Column("hint", sa.Text, nullable=True),
)
notes = sa.Table(
    "sqlgate_memory_notes",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("database", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("tables", sa.Text, nullable=False),
    sa.Column("author", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
revocations = sa.Table(
    "sqlgate_memory_revocations",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("database", sa.Text, nullable=False),
    sa.Column("template_id", sa.String(32), nullable=False),
    sa.Column("actor", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
)


def _v1(conn: Connection) -> None:
    """Examples, notes and revocations, with a full-text index on questions and notes."""
    postgres = conn.dialect.name == "postgresql"
    key = "BIGSERIAL PRIMARY KEY" if postgres else "INTEGER PRIMARY KEY AUTOINCREMENT"
    ts = "TIMESTAMPTZ" if postgres else "DATETIME"
    conn.exec_driver_sql(
        f"CREATE TABLE sqlgate_memory_examples (id {key}, database TEXT NOT NULL, "
        "dialect VARCHAR(32) NOT NULL, question TEXT NOT NULL, clarifications TEXT NOT NULL, "
        "sql TEXT NOT NULL, kind VARCHAR(16) NOT NULL, status VARCHAR(16) NOT NULL, "
        "template_id VARCHAR(32) NOT NULL, template_text TEXT NOT NULL, "
        "schema_fp VARCHAR(32) NOT NULL, policy_fp VARCHAR(32) NOT NULL, tables TEXT NOT NULL, "
        "columns TEXT, reviewers TEXT NOT NULL, reason TEXT, call_id VARCHAR(64), "
        f"created_at {ts} NOT NULL)"
    )
    conn.exec_driver_sql(
        "CREATE INDEX ix_sqlgate_memory_examples_template "
        "ON sqlgate_memory_examples (database, template_id)"
    )
    conn.exec_driver_sql(
        f"CREATE TABLE sqlgate_memory_notes (id {key}, database TEXT NOT NULL, text TEXT NOT NULL, "
        f"tables TEXT NOT NULL, author TEXT NOT NULL, created_at {ts} NOT NULL)"
    )
    conn.exec_driver_sql(
        f"CREATE TABLE sqlgate_memory_revocations (id {key}, database TEXT NOT NULL, "
        "template_id VARCHAR(32) NOT NULL, actor TEXT NOT NULL, reason TEXT, "
        f"revoked_at {ts} NOT NULL)"
    )
    if postgres:
        conn.exec_driver_sql(
            "ALTER TABLE sqlgate_memory_examples ADD COLUMN question_tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', question)) STORED"
        )
        conn.exec_driver_sql(
            "CREATE INDEX ix_sqlgate_memory_examples_fts ON sqlgate_memory_examples "
            "USING GIN (question_tsv)"
        )
        conn.exec_driver_sql(
            "ALTER TABLE sqlgate_memory_notes ADD COLUMN text_tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', text || ' ' || tables)) STORED"
        )
        return
    # Examples: only positives are indexed (negatives are never searched), with their database
    # as a second column so a search is narrowed to one database inside the index; ranking
    # weighs the question alone.
    for table, body, when in (
        ("examples", "question, database", "{}.kind = 'positive'"),
        ("notes", "text, tables", "1 = 1"),
    ):
        columns = body.split(", ")
        new = ", ".join(f"new.{c}" for c in columns)
        old = ", ".join(f"old.{c}" for c in columns)
        fts = f"sqlgate_memory_{table}_fts"
        conn.exec_driver_sql(
            f"CREATE VIRTUAL TABLE {fts} USING fts5({body}, "
            f"content='sqlgate_memory_{table}', content_rowid='id', tokenize='porter unicode61')"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER sqlgate_memory_{table}_ai AFTER INSERT ON sqlgate_memory_{table} "
            f"WHEN {when.format('new')} "
            f"BEGIN INSERT INTO {fts}(rowid, {body}) VALUES (new.id, {new}); END"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER sqlgate_memory_{table}_ad AFTER DELETE ON sqlgate_memory_{table} "
            f"WHEN {when.format('old')} "
            f"BEGIN INSERT INTO {fts}({fts}, rowid, {body}) VALUES ('delete', old.id, {old}); END"
        )
    conn.exec_driver_sql(
        "INSERT INTO sqlgate_memory_examples_fts(sqlgate_memory_examples_fts, rank) "
        "VALUES ('rank', 'bm25(1.0, 0.0)')"
    )


def _v2(conn: Connection) -> None:
    """The approval batch each example was decided in: earned auto-approval counts review
    events (batches), not statements (examples recorded before have none: each counts alone)."""
    conn.exec_driver_sql("ALTER TABLE sqlgate_memory_examples ADD COLUMN batch_id VARCHAR(64)")


def _v3(conn: Connection) -> None:
    """What the asker added to each question (``--hint``, MCP ``evidence``): its words feed the
    tables' vocabulary with the question's (examples recorded before have none)."""
    conn.exec_driver_sql("ALTER TABLE sqlgate_memory_examples ADD COLUMN hint TEXT")


MIGRATIONS = (_v1, _v2, _v3)

#: Words too common to say anything about which example fits (English function words only).
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have how i in is it its list me "
    "many much of on or show the their there these this those to was were what when where which "
    "who whom whose why with give find tell all each every".split()
)


def search_terms(text: str, limit: int = 24) -> list[str]:
    """The distinct words of ``text`` worth searching for (lower case, no function words)."""
    seen: list[str] = []
    for word in re.findall(r"[^\W_]+", text.lower()):
        if word not in _STOPWORDS and word not in seen and len(seen) < limit:
            seen.append(word)
    return seen


def _now() -> datetime:
    return datetime.now(UTC)


class MemoryStore:
    """Reviewed examples, notes and revocations on the state database's engine.

    ``clock`` returns aware UTC datetimes (tests pass a fixed one).
    """

    def __init__(self, engine: Engine, clock: Callable[[], datetime] = _now) -> None:
        self.engine = engine
        self.clock = clock
        self._ready = False

    def setup(self) -> None:
        """Create or migrate the tables (the ``memory`` component); safe to call again."""
        if not self._ready:
            migrate(self.engine, "memory", MIGRATIONS)
            self._ready = True

    @property
    def postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    # -- examples ------------------------------------------------------------------------------

    def add_example(
        self,
        *,
        database: str,
        dialect: str,
        question: str,
        sql: str,
        status: ExampleStatus,
        shape: StatementShape,
        schema_fp: str,
        policy_fp: str,
        reviewers: Sequence[str],
        reason: str | None = None,
        call_id: str | None = None,
        clarifications: Sequence[str] = (),
        batch_id: str | None = None,
        hint: str = "",
    ) -> MemoryExample:
        """Record one reviewed pair; ``status="rejected"`` makes it a negative; ``hint`` is what
        the asker added to the question."""
        self.setup()
        values: dict[str, Any] = {
            "database": database,
            "dialect": dialect,
            "question": " ".join(question.split()),
            "clarifications": json.dumps(list(clarifications)),
            "sql": sql,
            "kind": "negative" if status == "rejected" else "positive",
            "status": status,
            "template_id": shape.template.template_id,
            "template_text": shape.template.text,
            "schema_fp": schema_fp,
            "policy_fp": policy_fp,
            "tables": json.dumps(sorted(shape.tables)),
            "columns": None if shape.columns is None else json.dumps(sorted(shape.columns)),
            "reviewers": json.dumps(sorted(set(reviewers))),
            "reason": reason,
            "call_id": call_id,
            "batch_id": batch_id,
            "hint": " ".join(hint.split()) or None,
            "created_at": self.clock(),
        }
        with write_transaction(self.engine) as conn:
            key = conn.execute(examples.insert().values(**values)).inserted_primary_key
        assert key is not None
        return self.example(int(key[0]))

    def example(self, example_id: int) -> MemoryExample:
        self.setup()
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(examples).where(examples.c.id == example_id)).first()
        if row is None:
            raise MemoryNotFound(f"no example {example_id} in memory")
        return _example(row._mapping)

    def examples(
        self,
        *,
        database: str | None = None,
        kind: Literal["positive", "negative"] | None = None,
        template_id: str | None = None,
        limit: int | None = None,
    ) -> list[MemoryExample]:
        """Examples, newest first, filtered by database, kind and template (id prefix)."""
        self.setup()
        query = sa.select(examples)
        if database is not None:
            query = query.where(examples.c.database == database)
        if kind is not None:
            query = query.where(examples.c.kind == kind)
        if template_id:
            query = query.where(examples.c.template_id.startswith(template_id, autoescape=True))
        query = query.order_by(examples.c.created_at.desc(), examples.c.id.desc())
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_example(r._mapping) for r in conn.execute(query)]

    def remove_example(self, example_id: int) -> None:
        self.setup()
        with write_transaction(self.engine) as conn:
            gone = conn.execute(examples.delete().where(examples.c.id == example_id)).rowcount
        if gone != 1:
            raise MemoryNotFound(f"no example {example_id} in memory")

    def export(self) -> Iterator[dict[str, Any]]:
        """Every example and note as JSON-ready dicts (``{"type": "example" | "note", ...}``)."""
        for example in reversed(self.examples()):
            yield {"type": "example", **example.model_dump(mode="json")}
        for note in self.notes():
            yield {"type": "note", **note.model_dump(mode="json")}

    def search_examples(self, database: str, question: str, limit: int) -> list[ScoredExample]:
        """Positive examples of ``database`` whose question shares words with ``question``, best
        first. A positive whose template was rejected later on the same database is left out."""
        self.setup()
        terms = search_terms(question)
        if not terms or limit < 1:
            return []
        shadowed = (
            "NOT EXISTS (SELECT 1 FROM sqlgate_memory_examples n WHERE n.database = e.database "
            "AND n.template_id = e.template_id AND n.kind = 'negative' "
            "AND n.created_at >= e.created_at)"
        )
        if self.postgres:
            sql = (
                "SELECT e.*, ts_rank(e.question_tsv, q) AS relevance FROM sqlgate_memory_examples e, "
                "to_tsquery('english', :q) q WHERE e.question_tsv @@ q AND e.database = :db "
                f"AND e.kind = 'positive' AND {shadowed} ORDER BY relevance DESC, e.id DESC LIMIT :n"
            )
            query = " | ".join(terms)
        else:
            # Filtered to this database (exactly, by the table's column) before ranking and
            # cutting: a database whose URL extends this one's (shop.db, shop.db.bak) matches the
            # same FTS phrase, and must never crowd this one's examples out of the short list.
            sql = (
                "SELECT e.*, -f.rank AS relevance FROM sqlgate_memory_examples_fts f "
                "JOIN sqlgate_memory_examples e ON e.id = f.rowid "
                "WHERE sqlgate_memory_examples_fts MATCH :q "
                f"AND e.database = :db AND e.kind = 'positive' AND {shadowed} "
                "ORDER BY f.rank, e.id DESC LIMIT :n"
            )
            words = " OR ".join(f'"{t}"' for t in terms)
            phrase = database.replace('"', '""')
            query = f'database : "{phrase}" AND question : ({words})'
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(sql), {"q": query, "db": database, "n": limit}).all()
        return [
            ScoredExample(example=_example(r._mapping), relevance=float(r.relevance)) for r in rows
        ]

    # -- evidence for earned auto-approval -----------------------------------------------------

    def approvals_of(
        self, database: str, template_id: str, schema_fp: str, policy_fp: str, since: datetime
    ) -> list[MemoryExample]:
        """Reviewer approvals (approved or edited, not seeded) of a template on this schema and
        policy since ``since``, after its latest rejection and latest revocation; oldest first."""
        self.setup()
        with self.engine.connect() as conn:
            cutoff = since
            rejected = conn.execute(
                sa.select(sa.func.max(examples.c.created_at)).where(
                    examples.c.database == database,
                    examples.c.template_id == template_id,
                    examples.c.kind == "negative",
                )
            ).scalar()
            revoked = conn.execute(
                sa.select(sa.func.max(revocations.c.revoked_at)).where(
                    revocations.c.database.in_([database, ANY_DATABASE]),
                    revocations.c.template_id == template_id,
                )
            ).scalar()
            for moment in (rejected, revoked):
                if moment is not None and utc(moment) >= cutoff:
                    cutoff = utc(moment)
            rows = conn.execute(
                sa.select(examples)
                .where(
                    examples.c.database == database,
                    examples.c.template_id == template_id,
                    examples.c.schema_fp == schema_fp,
                    examples.c.policy_fp == policy_fp,
                    examples.c.status.in_(["approved", "edited"]),
                    examples.c.created_at > cutoff,
                )
                .order_by(examples.c.created_at, examples.c.id)
            ).all()
        return [_example(r._mapping) for r in rows]

    def revoke(
        self,
        template_id: str,
        *,
        actor: str,
        database: str = ANY_DATABASE,
        reason: str | None = None,
    ) -> Revocation:
        """Take a template back: its earlier approvals no longer earn auto-approval.

        ``template_id`` may be a prefix of one known template (as ``memory list`` shows it).
        """
        self.setup()
        full = self._template(template_id, database)
        at = self.clock()
        with write_transaction(self.engine) as conn:
            conn.execute(
                revocations.insert().values(
                    database=database, template_id=full, actor=actor, reason=reason, revoked_at=at
                )
            )
        return Revocation(
            database=database, template_id=full, actor=actor, reason=reason, revoked_at=at
        )

    def revocations(self, template_id: str | None = None) -> list[Revocation]:
        self.setup()
        query = sa.select(revocations).order_by(revocations.c.revoked_at)
        if template_id:
            query = query.where(revocations.c.template_id == template_id)
        with self.engine.connect() as conn:
            return [
                Revocation(
                    database=r.database,
                    template_id=r.template_id,
                    actor=r.actor,
                    reason=r.reason,
                    revoked_at=utc(r.revoked_at),
                )
                for r in conn.execute(query)
            ]

    def _template(self, prefix: str, database: str) -> str:
        query = sa.select(examples.c.template_id).distinct()
        query = query.where(examples.c.template_id.startswith(prefix, autoescape=True))
        if database != ANY_DATABASE:
            query = query.where(examples.c.database == database)
        with self.engine.connect() as conn:
            found = [r.template_id for r in conn.execute(query.limit(2))]
        if len(found) != 1:
            what = "no" if not found else "more than one"
            raise MemoryNotFound(f"{what} template in memory starts with {prefix!r}")
        return found[0]

    # -- business notes ------------------------------------------------------------------------

    def add_note(
        self, text: str, *, author: str, tables: Iterable[str] = (), database: str = ANY_DATABASE
    ) -> BusinessNote:
        self.setup()
        values = {
            "database": database,
            "text": " ".join(text.split()),
            "tables": " ".join(sorted({t.strip().lower() for t in tables if t.strip()})),
            "author": author,
            "created_at": self.clock(),
        }
        with write_transaction(self.engine) as conn:
            key = conn.execute(notes.insert().values(**values)).inserted_primary_key
        assert key is not None
        return self.note(int(key[0]))

    def note(self, note_id: int) -> BusinessNote:
        self.setup()
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(notes).where(notes.c.id == note_id)).first()
        if row is None:
            raise MemoryNotFound(f"no note {note_id} in memory")
        return _note(row._mapping)

    def notes(self, database: str | None = None) -> list[BusinessNote]:
        self.setup()
        query = sa.select(notes).order_by(notes.c.id)
        if database is not None:
            query = query.where(notes.c.database.in_([database, ANY_DATABASE]))
        with self.engine.connect() as conn:
            return [_note(r._mapping) for r in conn.execute(query)]

    def remove_note(self, note_id: int) -> None:
        self.setup()
        with write_transaction(self.engine) as conn:
            gone = conn.execute(notes.delete().where(notes.c.id == note_id)).rowcount
        if gone != 1:
            raise MemoryNotFound(f"no note {note_id} in memory")

    def search_notes(self, database: str, text: str, limit: int) -> list[BusinessNote]:
        """Notes of ``database`` (or of every database) sharing words or tables with ``text``."""
        self.setup()
        terms = search_terms(text, limit=64)
        if not terms or limit < 1:
            return []
        if self.postgres:
            sql = (
                "SELECT n.* FROM sqlgate_memory_notes n, to_tsquery('english', :q) q "
                "WHERE n.text_tsv @@ q AND n.database IN (:db, '*') "
                "ORDER BY ts_rank(n.text_tsv, q) DESC, n.id LIMIT :n"
            )
            query = " | ".join(terms)
        else:
            sql = (
                "SELECT n.* FROM sqlgate_memory_notes_fts JOIN sqlgate_memory_notes n "
                "ON n.id = sqlgate_memory_notes_fts.rowid WHERE sqlgate_memory_notes_fts MATCH :q "
                "AND n.database IN (:db, '*') ORDER BY bm25(sqlgate_memory_notes_fts), n.id LIMIT :n"
            )
            query = " OR ".join(f'"{t}"' for t in terms)
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(sql), {"q": query, "db": database, "n": limit}).all()
        return [_note(r._mapping) for r in rows]

    def is_empty(self, database: str) -> bool:
        """True when nothing (no example, no note) could reach a prompt for ``database``."""
        self.setup()
        with self.engine.connect() as conn:
            example = conn.execute(
                sa.select(examples.c.id).where(examples.c.database == database).limit(1)
            ).first()
            note = conn.execute(
                sa.select(notes.c.id).where(notes.c.database.in_([database, ANY_DATABASE])).limit(1)
            ).first()
        return example is None and note is None


def _moment(value: datetime | str) -> datetime:
    """A timestamp column read back (raw-text queries on SQLite give the stored string)."""
    return utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def _example(row: Any) -> MemoryExample:
    return MemoryExample(
        id=row["id"],
        database=row["database"],
        dialect=row["dialect"],
        question=row["question"],
        clarifications=json.loads(row["clarifications"]),
        sql=row["sql"],
        kind=row["kind"],
        status=row["status"],
        template_id=row["template_id"],
        template_text=row["template_text"],
        schema_fp=row["schema_fp"],
        policy_fp=row["policy_fp"],
        tables=json.loads(row["tables"]),
        columns=None if row["columns"] is None else json.loads(row["columns"]),
        reviewers=json.loads(row["reviewers"]),
        reason=row["reason"],
        call_id=row["call_id"],
        batch_id=row.get("batch_id"),
        hint=row.get("hint") or "",
        created_at=_moment(row["created_at"]),
    )


def _note(row: Any) -> BusinessNote:
    return BusinessNote(
        id=row["id"],
        database=row["database"],
        text=row["text"],
        tables=row["tables"].split(),
        author=row["author"],
        created_at=_moment(row["created_at"]),
    )
