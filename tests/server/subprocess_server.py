"""A sqlgate server in its own process, for measuring it from outside (memory, connections).

    python -m tests.server.subprocess_server DEMO_DB STATE_URL PORT [MAX_BODY_BYTES]

No model is reachable (nothing here asks a question); the tokens are the test tokens.
"""

from __future__ import annotations

import json
import sys

import uvicorn

from orchestrator.core.llm import LLMSettings
from orchestrator.interfaces.server import ServerConfig, TokenRegistry, create_app
from ratelimit import SlidingWindowLimiter
from tests.server.conftest import TOKENS


def main(argv: list[str]) -> None:
    demo_db, state_url, port = argv[0], argv[1], int(argv[2])
    extra = {"max_body_bytes": int(argv[3])} if len(argv) > 3 else {}
    config = ServerConfig(
        database_url=f"sqlite:///{demo_db}",
        state_url=state_url,
        tokens=TokenRegistry.from_json(json.dumps(TOKENS)),
        llm=LLMSettings(model="none", base_url="http://127.0.0.1:9/v1"),
        limiter=SlidingWindowLimiter(limit=100, window=60.0, mode="wait"),
        **extra,
    )
    uvicorn.run(create_app(config), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
