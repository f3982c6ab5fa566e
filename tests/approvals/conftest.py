"""Backends for the approval store conformance suite: memory, SQLite file, PostgreSQL when set.

``backend.open()`` gives a store on the same state, as another process would open it.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from approval_fakes import Backend

from approvals import ApprovalStore, MemoryApprovalStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request, tmp_path):
    if request.param == "memory":
        yield Backend("memory", memory=MemoryApprovalStore())
        return
    if request.param == "sqlite":
        b = Backend("sqlite", url=f"sqlite:///{tmp_path / 'approvals.sqlite3'}")
        yield b
        b.close()
        return
    url = request.getfixturevalue("postgres_url")
    schema = f"approvals_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    b = Backend("postgres", url=url, schema=schema)
    try:
        yield b
    finally:
        b.close()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def store(backend) -> ApprovalStore:
    return backend.open()
