"""A PostgreSQL cluster of the test's own (``initdb`` + ``pg_ctl`` on a free port), so it can be
restarted under running processes. Never the shared server.

As root, the server runs as the ``postgres`` user (``runuser``); its folder is one of its own
under the system's temporary folder. Skips with a reason when ``initdb`` is not installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import sqlalchemy as sa


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


class OwnPostgres:
    """``start``, ``stop``, ``restart`` (fast shutdown: every connection is ended, as a restart
    or failover does) and ``url`` of a private cluster."""

    def __init__(self) -> None:
        initdb, self.pg_ctl = _bin("initdb"), _bin("pg_ctl")
        if initdb is None or self.pg_ctl is None:
            pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        self.as_user: list[str] = []
        self.folder = tempfile.mkdtemp(prefix="sqlgate-own-pg-")
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            if shutil.which("runuser") is None:
                pytest.skip("running as root without runuser: cannot start a private PostgreSQL")
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, "postgres")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.data = os.path.join(self.folder, "data")
        self._run([initdb, "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync"])
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(self.as_user + command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stderr[-2000:]}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = os.path.join(self.folder, "server.log")
        self._run([self.pg_ctl, "-D", self.data, "-l", log, "-o", options, "-w", "start"])

    def stop(self) -> None:
        self._run([self.pg_ctl, "-D", self.data, "-m", "fast", "-w", "stop"])

    def restart(self, down_s: float = 0.0) -> float:
        """Stop (ending every connection), stay down ``down_s`` seconds, start; the seconds the
        server was unreachable."""
        began = time.monotonic()
        self.stop()
        time.sleep(down_s)
        self.start()
        return time.monotonic() - began

    def database(self) -> str:
        """A new database on the cluster; its URL."""
        name = f"sqlgate_state_{os.urandom(5).hex()}"
        admin = sa.create_engine(self.url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        admin.dispose()
        return sa.make_url(self.url).set(database=name).render_as_string(hide_password=False)

    def destroy(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
