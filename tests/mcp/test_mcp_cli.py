"""``sqlgate mcp``'s own checks, before any server starts."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from orchestrator.interfaces.cli.main import app


def test_the_http_transport_refuses_to_start_without_tokens(demo_db: Path) -> None:
    env = {
        "SQLGATE_DB": f"sqlite:///{demo_db}",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "SQLGATE_TOKENS_FILE": "",
        "SQLGATE_TOKENS": "",
    }
    result = CliRunner().invoke(app, ["mcp", "--transport", "http"], env=env)
    assert result.exit_code == 2
    assert "needs bearer tokens" in result.output


def test_an_unknown_transport_is_refused(demo_db: Path) -> None:
    result = CliRunner().invoke(app, ["mcp", "--transport", "sse", "--db", f"sqlite:///{demo_db}"])
    assert result.exit_code == 2
    assert "stdio or http" in result.output


def test_no_database_no_server() -> None:
    result = CliRunner().invoke(
        app, ["mcp"], env={"SQLGATE_DB": "", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    )
    assert result.exit_code == 2
    assert "no database" in result.output
