"""What binding a run to its database costs each resume.

Run: .venv/bin/python benchmarks/run_identity.py [--repeat N] [--postgres URL]

Every resume (and recovery) of a run first compares the run's recorded database identity with
its own (``orchestrator.core.run_identity``: the URL normalised, without credentials), then reads the
schema again and fingerprints it, so approved statements are validated again when the schema
changed since approval. This prints, in milliseconds (median and 95th percentile over
``--repeat`` runs, default 200):

- the identity of a URL and the comparison (no I/O);
- reading the schema again and fingerprinting it (``TargetDatabase.schema_fingerprint(refresh=
  True)``) on the demo database (8 tables), on a 300-table SQLite schema (the ERP fixture,
  2,519 columns) and, with ``--postgres``, on a PostgreSQL database with those 300 tables.

The schema read is the whole cost; it is paid once per resume, not per statement.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator.core.database import TargetDatabase  # noqa: E402
from orchestrator.core.run_identity import check_run_database, database_identity  # noqa: E402
from orchestrator.features.demo.database import build_demo_database  # noqa: E402
from tests.fixtures.erp_db import build_erp_database  # noqa: E402


def _timed(work: Callable[[], object], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.95) - 1)]


def _copy_to_postgres(sqlite_path: Path, url: str) -> str:
    """A fresh PostgreSQL database holding the ERP tables (columns as text; no rows needed)."""
    import sqlalchemy as sa

    name = "sqlgate_bench_identity"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    target = sa.make_url(url).set(database=name).render_as_string(hide_password=False)
    source = sa.create_engine(f"sqlite:///{sqlite_path}")
    tables = sa.MetaData()
    tables.reflect(source)
    engine = sa.create_engine(target)
    with engine.begin() as conn:
        for table in tables.tables.values():
            columns = ", ".join(f'"{c.name}" TEXT' for c in table.columns)
            conn.exec_driver_sql(f'CREATE TABLE "{table.name}" ({columns})')
    engine.dispose()
    source.dispose()
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--postgres", help="a PostgreSQL server URL to create a test database on")
    args = parser.parse_args()
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        demo = build_demo_database(Path(folder) / "demo.sqlite")
        erp = build_erp_database(Path(folder) / "erp.sqlite")
        url = "postgresql+psycopg://analyst:secret@DB.example:5432/sales?sslmode=require"
        mine = database_identity(url)
        rows.append(("identity of a URL", *_timed(lambda: database_identity(url), args.repeat)))
        rows.append(
            (
                "identity and comparison",
                *_timed(
                    lambda: check_run_database("run", mine, database_identity(url)), args.repeat
                ),
            )
        )
        targets = [("demo, 8 tables (SQLite)", f"sqlite:///{demo}")]
        targets.append(("ERP, 300 tables (SQLite)", f"sqlite:///{erp}"))
        if args.postgres:
            targets.append(("ERP, 300 tables (PostgreSQL)", _copy_to_postgres(erp, args.postgres)))
        for label, target in targets:
            database = TargetDatabase(target, value_limits=None)
            rows.append(
                (
                    f"schema read + fingerprint: {label}",
                    *_timed(lambda d=database: d.schema_fingerprint(refresh=True), args.repeat),
                )
            )
            database.dispose()
    if args.postgres:
        import sqlalchemy as sa

        admin = sa.create_engine(args.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql("DROP DATABASE IF EXISTS sqlgate_bench_identity WITH (FORCE)")
        admin.dispose()
    print(f"{'per resume':<52} {'median ms':>10} {'p95 ms':>10}   ({args.repeat} runs)")
    for label, median, p95 in rows:
        print(f"{label:<52} {median:>10.3f} {p95:>10.3f}")


if __name__ == "__main__":
    main()
