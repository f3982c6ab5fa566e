"""The project's scripted OpenAI-compatible HTTP server, a stand-in for a model in tests."""

from .server import (
    SCRIPTED_HEADER,
    SCRIPTED_HEADER_VALUE,
    ScriptedLLMServer,
    ScriptedQueue,
    ScriptedQueueExhausted,
    ScriptedReply,
)

__all__ = [
    "SCRIPTED_HEADER",
    "SCRIPTED_HEADER_VALUE",
    "ScriptedLLMServer",
    "ScriptedQueue",
    "ScriptedQueueExhausted",
    "ScriptedReply",
]
