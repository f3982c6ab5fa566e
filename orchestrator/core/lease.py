"""Leases: the process advancing a run says so in the state database, and keeps saying it.

While a process runs a stage, resumes or executes, it holds the run's lease (``owner`` and an
expiry in ``sqlgate_runs``) and a heartbeat thread renews it every third of its length. A process
that dies (kill -9, power loss) or freezes stops renewing; once the lease has expired any process
may take the run over (``Pipeline.recover``). A holder whose renewal fails has lost the run: it
checks ``Lease.check()`` before anything with an effect (executing a statement, writing the
result) and stops with ``LeaseLost``.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Mapping
from types import TracebackType

from orchestrator.core.errors import ConfigurationError, RunConflict
from orchestrator.core.runs import RunStore

__all__ = [
    "DEFAULT_LEASE_S",
    "LEASE_ENV",
    "Lease",
    "LeaseLost",
    "hand_back_all",
    "lease_from_env",
    "process_owner",
]

#: How long a lease lasts without renewal: a stopped process's runs are taken over after this.
DEFAULT_LEASE_S = 30.0
LEASE_ENV = "SQLGATE_LEASE"


def lease_from_env(environ: Mapping[str, str] | None = None) -> float:
    """``$SQLGATE_LEASE`` (seconds), else ``DEFAULT_LEASE_S``; every command that advances a
    recorded run (ask --defer, resume, runs recover, serve, worker) holds leases this long."""
    env = os.environ if environ is None else environ
    text = env.get(LEASE_ENV) or str(DEFAULT_LEASE_S)
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigurationError(f"{LEASE_ENV} must be a positive number of seconds, not {text!r}")
    return seconds


class LeaseLost(RunConflict):
    """Another process took the run over (this one's lease expired): stop advancing it."""

    code = "lease_lost"


#: The leases this process holds now (a stopping worker hands them back).
_held: set[Lease] = set()
_held_lock = threading.Lock()


def process_owner() -> str:
    """An owner id unique to this process: host, pid and a random suffix (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Lease:
    """Holds a run's lease while the ``with`` block advances it; renews it in the background.

    Example:
        with Lease(run_store, run_id, owner, lease_s=30.0) as lease:
            ...              # a stage
            lease.check()    # before executing anything
    """

    def __init__(self, store: RunStore, run_id: str, owner: str, *, lease_s: float) -> None:
        self.store = store
        self.run_id = run_id
        self.owner = owner
        self.lease_s = lease_s
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        with _held_lock:
            _held.add(self)
        self._thread = threading.Thread(
            target=self._beat, name=f"sqlgate-lease-{self.run_id}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with _held_lock:
            _held.discard(self)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.lease_s)

    def hand_back(self) -> bool:
        """Give the run up now: this process stops advancing it (``check`` raises from here on)
        and the lease ends at once, so another process takes the run over without waiting for
        it to expire. True when the lease was still this process's."""
        self._lost.set()
        self._stop.set()
        return self.store.release(self.run_id, owner=self.owner)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                if not self.store.renew(self.run_id, owner=self.owner, lease_s=self.lease_s):
                    self._lost.set()
                    return
            except Exception:  # the state database is unreachable: try again next beat
                continue

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def check(self) -> None:
        """Raise ``LeaseLost`` if another process has taken the run over."""
        if self._lost.is_set():
            raise LeaseLost(
                f"run {self.run_id} was taken over by another process (this one's lease expired)"
            )


def hand_back_all() -> list[str]:
    """Hand back every lease this process holds (a worker stopping); the runs given up."""
    with _held_lock:
        leases = list(_held)
    return [lease.run_id for lease in leases if lease.hand_back()]
