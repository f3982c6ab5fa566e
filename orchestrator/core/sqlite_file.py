"""Write a generated SQLite database atomically: built beside the target, renamed when complete."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_sqlite_atomically(
    path: str | os.PathLike[str], fill: Callable[[sqlite3.Connection], None], *, what: str
) -> Path:
    """Create ``path`` with ``fill(connection)``, check its foreign keys, compact it, rename it in.

    ``fill`` creates the schema and the rows (in its own transaction). Readers never see a
    half-written file, and a failure leaves nothing behind.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        tmp.unlink()  # sqlite3 must create the file itself
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")
            fill(con)
            problems = con.execute("PRAGMA foreign_key_check").fetchall()
            if problems:  # a generator bug, never expected
                raise RuntimeError(f"{what} violates foreign keys: {problems[:3]}")
            con.execute("VACUUM")
        finally:
            con.close()
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target
