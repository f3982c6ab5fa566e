"""Where a run paused at the approval gate waits: a checkpoint that any process can resume.

One row per run in ``sqlgate_runs``: its status, a version bumped by every change, and the
checkpoint (typed and versioned, ``orchestrator.core.checkpoint``). Changes are conditional on status
and version, so two processes resuming the same run cannot both win. The table lives in sqlgate's
state database (``orchestrator.core.state_db``: a SQLite file by default, PostgreSQL by URL), beside the
approvals store; its schema is the ``runs`` component of the one migration runner.

Each run is bound to its database: ``target`` is the database's identity (its URL normalised,
without credentials: ``orchestrator.core.run_identity``) and ``schema_fingerprint`` the schema its
statements were validated against; ``login_user``/``login_role`` the database login its
statements execute as (``DatabaseLogin``). Readers compare them (``Pipeline`` and every
background picker), so no process runs another database's run, or runs one as another login.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from approvals.migrations import migrate, state_engine, to_timestamp, write_transaction
from approvals.retried import tried_again
from orchestrator.core.checkpoint import Checkpoint, load_checkpoint
from orchestrator.core.errors import CheckpointError, RunConflict, RunNotFound
from orchestrator.core.run_identity import DatabaseLogin, database_identity

log = logging.getLogger("sqlgate.runs")

#: Run states. ``queued``: accepted, no process on it yet. ``running``: a process advances it
#: before the gate (holding its lease). ``awaiting_approval``: paused at the gate, nobody holds it.
#: ``resuming``: a process carries on after a decision (holding its lease). ``finished``.
RUN_STATES = ("queued", "running", "awaiting_approval", "resuming", "finished")
#: States in which a process holds the run's lease, so an expired lease means it stopped.
LEASED_STATES = ("running", "resuming")

_metadata = sa.MetaData()
runs = sa.Table(
    "sqlgate_runs",
    _metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("database", sa.Text, nullable=False),
    sa.Column("checkpoint", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("owner", sa.String(200), nullable=True),
    sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("takeovers", sa.Integer, nullable=False, server_default="0"),
    sa.Column("follow_up_of", sa.String(64), nullable=True),
    sa.Column("target", sa.Text, nullable=True),
    sa.Column("schema_fingerprint", sa.String(64), nullable=True),
    sa.Column("login_user", sa.Text, nullable=True),
    sa.Column("login_role", sa.Text, nullable=True),
)


def _v1(conn: Connection) -> None:
    """The runs table, timestamps as text."""
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS sqlgate_runs (run_id VARCHAR(64) NOT NULL PRIMARY KEY, "
        "status VARCHAR(32) NOT NULL, version INTEGER NOT NULL, database TEXT NOT NULL, "
        "checkpoint TEXT NOT NULL, updated_at VARCHAR(40) NOT NULL)"
    )


def _v2(conn: Connection) -> None:
    """``updated_at`` a real timestamp (text timestamps of varying width sorted wrongly)."""
    to_timestamp(conn, "sqlgate_runs", "run_id", ["updated_at"])


def _v3(conn: Connection) -> None:
    """Leases: the process advancing a run, until when, and how often the run was taken over."""
    conn.exec_driver_sql("ALTER TABLE sqlgate_runs ADD COLUMN owner VARCHAR(200)")
    timestamp = "TIMESTAMPTZ" if conn.dialect.name == "postgresql" else "DATETIME"
    conn.exec_driver_sql(f"ALTER TABLE sqlgate_runs ADD COLUMN lease_expires_at {timestamp}")
    conn.exec_driver_sql("ALTER TABLE sqlgate_runs ADD COLUMN takeovers INTEGER NOT NULL DEFAULT 0")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_sqlgate_runs_lease ON sqlgate_runs (status, lease_expires_at)"
    )


def _v4(conn: Connection) -> None:
    """The run a follow-up answers the clarifying questions of (its parent), if any."""
    conn.exec_driver_sql("ALTER TABLE sqlgate_runs ADD COLUMN follow_up_of VARCHAR(64)")


def _v5(conn: Connection) -> None:
    """The run's database identity (``target``) and the fingerprint of the schema its statements
    were validated against; runs recorded before get the identity of their stored URL."""
    conn.exec_driver_sql("ALTER TABLE sqlgate_runs ADD COLUMN target TEXT")
    conn.exec_driver_sql("ALTER TABLE sqlgate_runs ADD COLUMN schema_fingerprint VARCHAR(64)")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_sqlgate_runs_target ON sqlgate_runs (target, status)"
    )
    table = sa.table(
        "sqlgate_runs", sa.column("run_id"), sa.column("database"), sa.column("target")
    )
    for run_id, database in conn.execute(sa.select(table.c.run_id, table.c.database)).all():
        try:
            target = database_identity(database)
        except Exception:  # a URL no engine reads: the run stays unbound, and nobody resumes it
            continue
        conn.execute(table.update().where(table.c.run_id == run_id).values(target=target))


def _v6(conn: Connection) -> None:
    """The database login a run executes as (user, and the role it switches to). Runs recorded
    before: a database file has no login; a server URL's user is the login it names; a server
    URL without a user leaves the login unrecorded (refused on resume: it cannot be known)."""
    conn.exec_driver_sql("ALTER TABLE sqlgate_runs ADD COLUMN login_user TEXT")
    conn.exec_driver_sql("ALTER TABLE sqlgate_runs ADD COLUMN login_role TEXT")
    table = sa.table(
        "sqlgate_runs", sa.column("run_id"), sa.column("database"), sa.column("login_user")
    )
    for run_id, database in conn.execute(sa.select(table.c.run_id, table.c.database)).all():
        try:
            login = login_of_url(database)
        except Exception:  # a URL no engine reads: the run stays unbound, and nobody resumes it
            continue
        if login is not None:
            conn.execute(
                table.update().where(table.c.run_id == run_id).values(login_user=login.user)
            )


MIGRATIONS = (_v1, _v2, _v3, _v4, _v5, _v6)


def login_of_url(url: str) -> DatabaseLogin | None:
    """The login a URL names on its own: none for a database file (empty user), the URL's user
    for a server, None when the URL names no user (the driver picks one from its environment).

    Example:
        >>> login_of_url("postgresql+psycopg://ann:***@db/shop"), login_of_url("sqlite:///a.db")
        (DatabaseLogin(user='ann', role=None), DatabaseLogin(user='', role=None))
        >>> login_of_url("postgresql+psycopg://db/shop") is None
        True
    """
    parsed = sa.make_url(url)
    if parsed.get_backend_name() in ("sqlite", "duckdb"):
        return DatabaseLogin("")
    return DatabaseLogin(parsed.username) if parsed.username else None


def _adopt(conn: Connection) -> int:
    """A database from before ``sqlgate_schema``: the table existed at version 1."""
    return 1 if sa.inspect(conn).has_table("sqlgate_runs") else 0


def utc(moment: datetime) -> datetime:
    """A timestamp read back from the state database, as an aware UTC datetime."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class StoredRun:
    """A run as the state database holds it."""

    run_id: str
    status: str
    version: int
    database: str
    checkpoint: Checkpoint
    updated_at: datetime
    owner: str | None = None
    lease_expires_at: datetime | None = None
    takeovers: int = 0
    follow_up_of: str | None = None
    #: The database's identity (``orchestrator.core.run_identity.database_identity``).
    target: str | None = None
    #: The schema the run's statements were validated against, when known.
    schema_fingerprint: str | None = None
    #: The database login the run's statements execute as; None: not recorded (refused).
    login: DatabaseLogin | None = None

    def lease_expired(self, now: datetime | None = None) -> bool:
        """True when a process held the run and its lease ran out (it stopped or froze)."""
        return (
            self.status in LEASED_STATES
            and self.lease_expires_at is not None
            and self.lease_expires_at <= (now or datetime.now(UTC))
        )


def new_run_row(
    run_id: str,
    database: str,
    checkpoint: Checkpoint,
    *,
    now: datetime,
    status: str = "queued",
    owner: str | None = None,
    follow_up_of: str | None = None,
    schema_fingerprint: str | None = None,
    target: str | None = None,
    login: DatabaseLogin,
) -> dict[str, Any]:
    """The row of a new run (version 1, no lease), bound to the identity of ``database`` and to
    the ``login`` its statements will execute as: every writer of ``runs`` rows goes through
    here, so none can record a run bound to nothing. ``target`` passes an identity already
    resolved (many rows for one database)."""
    return {
        "run_id": run_id,
        "status": status,
        "version": 1,
        "database": database,
        "checkpoint": checkpoint.model_dump_json(by_alias=True),
        "updated_at": now,
        "owner": owner,
        "lease_expires_at": None,
        "takeovers": 0,
        "follow_up_of": follow_up_of,
        "target": target or database_identity(database),
        "schema_fingerprint": schema_fingerprint,
        "login_user": login.user,
        "login_role": login.role,
    }


class RunStore:
    """Checkpoints of runs, in a SQLAlchemy database shared by every sqlgate process."""

    def __init__(self, url_or_engine: str | Engine) -> None:
        if isinstance(url_or_engine, Engine):
            self.engine = url_or_engine
        else:
            parsed = sa.make_url(url_or_engine)
            if parsed.get_backend_name() == "sqlite" and parsed.database not in (
                None,
                "",
                ":memory:",
            ):
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            self.engine = state_engine(url_or_engine)
        self._ready = False

    def setup(self) -> None:
        """Create or migrate the table (the ``runs`` component); safe to call any number of times."""
        if not self._ready:
            migrate(self.engine, "runs", MIGRATIONS, adopt=_adopt)
            self._ready = True

    def create(
        self,
        run_id: str,
        database: str,
        checkpoint: Checkpoint,
        *,
        status: str = "awaiting_approval",
        owner: str | None = None,
        lease_s: float | None = None,
        follow_up_of: str | None = None,
        schema_fingerprint: str | None = None,
        login: DatabaseLogin,
    ) -> int:
        """Record a new run (version 1); with ``owner`` and ``lease_s`` it holds the lease;
        ``follow_up_of`` links a follow-up to the run whose clarifying questions it answers.
        The run is bound to the identity of ``database`` (resolved here, in the recording
        process), to the ``login`` it will execute as and, when given, to the fingerprint of
        the schema it is judged on."""
        self.setup()
        now = _now()
        row = new_run_row(
            run_id,
            database,
            checkpoint,
            now=now,
            status=status,
            owner=owner,
            follow_up_of=follow_up_of,
            schema_fingerprint=schema_fingerprint,
            login=login,
        )
        row["lease_expires_at"] = now + timedelta(seconds=lease_s) if lease_s else None
        try:
            with write_transaction(self.engine) as conn:
                conn.execute(runs.insert().values(**row))
        except sa.exc.IntegrityError:
            # Tried again after a lost connection whose commit went through: the row is ours
            # when it is exactly what this call wrote; otherwise another run has this id.
            if not (tried_again() and self._holds(run_id, row)):
                raise RunConflict(f"run {run_id} is already recorded") from None
        return 1

    def _holds(self, run_id: str, values: dict[str, Any]) -> bool:
        """True when the run's row already carries ``values`` (a write applied by an earlier
        try of the same call, whose answer was lost). Timestamps are left out: each try takes
        its own; the owner (unique per process), version, status and checkpoint tell."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).first()
        if row is None:
            return False
        stored = row._mapping
        return all(
            stored[name] == value
            for name, value in values.items()
            if name not in ("updated_at", "lease_expires_at")
            and not isinstance(value, sa.sql.ClauseElement)
        )

    def load(self, run_id: str) -> StoredRun:
        """The run's status, version, lease and checkpoint (upgraded from older versions)."""
        self.setup()
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).first()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in the state database")
        return _stored(row)

    def transition(
        self,
        run_id: str,
        *,
        expected: tuple[str, int],
        status: str,
        checkpoint: Checkpoint | None = None,
        owner: str | None = None,
        lease_s: float | None = None,
        takeover: bool = False,
        schema_fingerprint: str | None = None,
    ) -> int:
        """Move the run to ``status`` if it is still in ``expected`` (status, version); else conflict.

        ``owner``/``lease_s`` give the lease to ``owner`` (a process that will advance the run);
        without them the lease is released (paused or finished: nobody holds the run).
        ``takeover`` counts a transition that took the run from a process whose lease expired.
        ``schema_fingerprint`` records the schema the run's statements were (re)validated on.
        """
        self.setup()
        now = _now()
        values: dict[str, Any] = {
            "status": status,
            "version": expected[1] + 1,
            "updated_at": now,
            "owner": owner,
            "lease_expires_at": now + timedelta(seconds=lease_s) if owner and lease_s else None,
        }
        if takeover:
            values["takeovers"] = runs.c.takeovers + 1
        if schema_fingerprint is not None:
            values["schema_fingerprint"] = schema_fingerprint
        if checkpoint is not None:
            values["checkpoint"] = checkpoint.model_dump_json(by_alias=True)
        with write_transaction(self.engine) as conn:
            changed = conn.execute(
                runs.update()
                .where(
                    runs.c.run_id == run_id,
                    runs.c.status == expected[0],
                    runs.c.version == expected[1],
                )
                .values(**values)
            ).rowcount
        if changed != 1 and not (tried_again() and self._holds(run_id, values)):
            raise RunConflict(
                f"run {run_id} changed meanwhile (another process is advancing it, or it finished)"
            )
        return expected[1] + 1

    def renew(self, run_id: str, *, owner: str, lease_s: float) -> bool:
        """Extend ``owner``'s lease; False when it is no longer the owner (taken over)."""
        now = _now()
        with write_transaction(self.engine) as conn:
            changed = conn.execute(
                runs.update()
                .where(runs.c.run_id == run_id, runs.c.owner == owner)
                .values(lease_expires_at=now + timedelta(seconds=lease_s))
            ).rowcount
        return changed == 1

    def release(self, run_id: str, *, owner: str) -> bool:
        """End ``owner``'s lease now (it gives the run up); False when it no longer held it.
        The version moves on too, so nothing the giver still had in flight can change the run:
        the process that takes it over is the only one that can."""
        with write_transaction(self.engine) as conn:
            changed = conn.execute(
                runs.update()
                .where(
                    runs.c.run_id == run_id,
                    runs.c.owner == owner,
                    runs.c.status.in_(LEASED_STATES),
                )
                .values(lease_expires_at=_now(), version=runs.c.version + 1)
            ).rowcount
        return changed == 1

    def expired(
        self,
        *,
        now: datetime | None = None,
        queued_for_s: float | None = None,
        limit: int = 100,
        target: str | None = None,
    ) -> list[StoredRun]:
        """Runs whose process stopped: leased states with a lease in the past, oldest first;
        with ``queued_for_s``, also runs queued longer than that that nobody started; with
        ``target``, only the runs of that database (a process serving one database picks up
        only its own runs)."""
        ids = self.stopped_ids(now=now, queued_for_s=queued_for_s, limit=limit, target=target)
        found = []
        for run_id in ids:
            try:
                found.append(self.load(run_id))
            except RunNotFound:
                continue
            except CheckpointError as exc:  # one corrupt run does not hide the others
                log.warning("%s", exc.message)
        return found

    def stopped_ids(
        self,
        *,
        now: datetime | None = None,
        queued_for_s: float | None = None,
        limit: int = 100,
        target: str | None = None,
    ) -> list[str]:
        """The ids of ``expired`` runs, without reading their checkpoints (one may be corrupt:
        the others are still listed)."""
        self.setup()
        moment = now or _now()
        stopped = sa.and_(runs.c.status.in_(LEASED_STATES), runs.c.lease_expires_at <= moment)
        if queued_for_s is not None:
            stale = sa.and_(
                runs.c.status == "queued",
                runs.c.updated_at <= moment - timedelta(seconds=queued_for_s),
            )
            stopped = sa.or_(stopped, stale)
        if target is not None:
            stopped = sa.and_(stopped, runs.c.target == target)
        query = sa.select(runs.c.run_id).where(stopped).order_by(runs.c.updated_at).limit(limit)
        with self.engine.connect() as conn:
            return [row.run_id for row in conn.execute(query)]

    def waiting_ids(self, *, target: str, limit: int = 200) -> list[str]:
        """The ids of ``target``'s runs paused at the gate, longest waiting first: a process that
        comes back looks among them for batches decided while no process listened."""
        self.setup()
        query = (
            sa.select(runs.c.run_id)
            .where(runs.c.status == "awaiting_approval", runs.c.target == target)
            .order_by(runs.c.updated_at)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [row.run_id for row in conn.execute(query)]

    def list(self, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Runs, newest change first: id, status, database, the login it executes as
        (``login``), owner, lease expiry, takeovers, and the run a follow-up answers
        (``follow_up_of``)."""
        self.setup()
        query = sa.select(
            runs.c.run_id,
            runs.c.status,
            runs.c.database,
            runs.c.updated_at,
            runs.c.owner,
            runs.c.lease_expires_at,
            runs.c.takeovers,
            runs.c.follow_up_of,
            runs.c.login_user,
            runs.c.login_role,
        )
        if status:
            query = query.where(runs.c.status == status)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(runs.c.updated_at.desc()).limit(limit)).all()
        return [
            {
                **{k: v for k, v in r._mapping.items() if k not in ("login_user", "login_role")},
                "login": str(DatabaseLogin(r.login_user, r.login_role))
                if r.login_user is not None
                else None,
                "updated_at": utc(r.updated_at),
                "lease_expires_at": utc(r.lease_expires_at) if r.lease_expires_at else None,
            }
            for r in rows
        ]


def _stored(row: Any) -> StoredRun:
    try:
        data = json.loads(row.checkpoint)
    except ValueError:
        raise CheckpointError(f"run {row.run_id}: its checkpoint is not valid JSON") from None
    return StoredRun(
        run_id=row.run_id,
        status=row.status,
        version=row.version,
        database=row.database,
        checkpoint=load_checkpoint(data),
        updated_at=utc(row.updated_at),
        owner=row.owner,
        lease_expires_at=utc(row.lease_expires_at) if row.lease_expires_at else None,
        takeovers=row.takeovers or 0,
        follow_up_of=row.follow_up_of,
        target=row.target,
        schema_fingerprint=row.schema_fingerprint,
        login=DatabaseLogin(row.login_user, row.login_role) if row.login_user is not None else None,
    )


def _now() -> datetime:
    return datetime.now(UTC)
