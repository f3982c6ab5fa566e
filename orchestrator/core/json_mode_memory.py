"""Which endpoints refuse ``response_format`` json_schema, remembered across processes.

A server without json_schema support refuses the first request of every process with a 400, and
the client falls back to JSON mode. Remembering that per endpoint and model (a small JSON file in
sqlgate's state folder) saves each later ``sqlgate ask`` that refused request. An entry is
forgotten after ``max_age_s`` (a server may learn json_schema later); a file that cannot be read
or written only costs the one refused request again, never a failed command.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from orchestrator.core.state_folder import state_dir

FILE_NAME = "json_mode_endpoints.json"
#: A week: a server that gained json_schema support is asked with it again after this.
MAX_AGE_S = 7 * 24 * 3600.0


class JsonModeMemory:
    """Endpoints (base URL + model) known to refuse json_schema, kept in ``path``.

    Example:
        >>> import tempfile, pathlib
        >>> memory = JsonModeMemory(pathlib.Path(tempfile.mkdtemp()) / "endpoints.json")
        >>> memory.refuses_json_schema("http://127.0.0.1:8080/v1/", "m")
        False
        >>> memory.remember_refusal("http://127.0.0.1:8080/v1/", "m")
        >>> JsonModeMemory(memory.path).refuses_json_schema("http://127.0.0.1:8080/v1", "m")
        True
    """

    def __init__(
        self,
        path: Path,
        *,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.max_age_s = max_age_s
        self._clock = clock

    @classmethod
    def in_state_dir(cls) -> JsonModeMemory:
        """The memory every command shares: a file in sqlgate's state folder."""
        return cls(state_dir() / FILE_NAME)

    def refuses_json_schema(self, base_url: str, model: str) -> bool:
        """True when this endpoint refused json_schema for ``model`` within ``max_age_s``."""
        learned = self._read().get(_key(base_url, model))
        return isinstance(learned, (int, float)) and self._clock() - learned < self.max_age_s

    def remember_refusal(self, base_url: str, model: str) -> None:
        """Note that the endpoint refused json_schema; later processes start in JSON mode."""
        entries = self._read()
        entries[_key(base_url, model)] = self._clock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".json-mode-")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"version": 1, "json_mode_only": entries}, out, sort_keys=True)
            os.replace(temporary, self.path)  # whole or not at all, for concurrent readers
        except OSError:
            pass  # an unwritable state folder costs one refused request next time, no more

    def _read(self) -> dict[str, float]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        entries = data.get("json_mode_only") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            return {}
        return {str(k): v for k, v in entries.items() if isinstance(v, (int, float))}


def _key(base_url: str, model: str) -> str:
    """One spelling per endpoint: a trailing slash does not make another endpoint, and no
    credential in the URL (user info, query) is written to the file."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path.rstrip('/')} {model}"


__all__ = ["FILE_NAME", "JsonModeMemory"]
