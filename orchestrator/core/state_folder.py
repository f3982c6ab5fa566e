"""The folder where sqlgate keeps what outlives one command on this machine.

The rate limiter's window file, the state database's default SQLite file and the model
endpoints' JSON-mode memory live here; the module imports nothing of sqlgate's, so each of them
can name it without the others.

Example:
    >>> import os
    >>> os.environ["SQLGATE_STATE_DIR"] = "/srv/sqlgate"
    >>> str(state_dir())
    '/srv/sqlgate'
    >>> del os.environ["SQLGATE_STATE_DIR"]
"""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """``SQLGATE_STATE_DIR``, else ``$XDG_STATE_HOME/sqlgate``, else ``~/.local/state/sqlgate``."""
    explicit = os.environ.get("SQLGATE_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sqlgate"
