"""Entry point of ``sqlgate`` and ``python -m orchestrator.cli``: the CLI is in ``orchestrator.interfaces.cli``."""

from orchestrator.interfaces.cli.main import app, main

__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
