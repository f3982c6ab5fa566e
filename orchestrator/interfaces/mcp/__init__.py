"""sqlgate as a Model Context Protocol server (``sqlgate mcp``): AI agents may ask, only people
approve.

    from orchestrator.interfaces.mcp import McpConfig, build_server
    build_server(McpConfig(database_url="sqlite:///shop.db", state_url=...)).run("stdio")

Over HTTP (``create_http_app``) the same bearer tokens as ``sqlgate serve`` identify the caller.
"""

from orchestrator.interfaces.mcp.config import McpConfig
from orchestrator.interfaces.mcp.errors import DECISION_ARGUMENTS, ToolRefusal, refuse_arguments
from orchestrator.interfaces.mcp.http import BearerAuth, create_http_app, serve_http
from orchestrator.interfaces.mcp.server import SqlgateMCPServer, build_server, run_stdio
from orchestrator.interfaces.mcp.service import McpService
from orchestrator.interfaces.mcp.tools import GUARANTEE, SqlgateTools
from orchestrator.interfaces.mcp.views import RunReport

__all__ = [
    "BearerAuth",
    "DECISION_ARGUMENTS",
    "GUARANTEE",
    "McpConfig",
    "McpService",
    "RunReport",
    "SqlgateMCPServer",
    "SqlgateTools",
    "ToolRefusal",
    "build_server",
    "create_http_app",
    "refuse_arguments",
    "run_stdio",
    "serve_http",
]
