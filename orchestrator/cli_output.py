"""What every ``sqlgate`` command prints: JSON on stdout for scripts, people's text on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

err = Console(stderr=True)


def fail(message: str, code: int = 2, *, as_json: bool = False, error_code: str = "config_error") -> None:
    """Say what went wrong (as JSON too, for scripts) and exit with ``code``."""
    if as_json:
        print(json.dumps({"status": "error", "error": {"code": error_code, "message": message}}))
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()
