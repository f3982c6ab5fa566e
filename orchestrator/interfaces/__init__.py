"""Who drives a run: the command line, the HTTP server, the MCP server and the Celery worker.
They import ``orchestrator.core`` and ``orchestrator.features``; nothing imports them back."""
