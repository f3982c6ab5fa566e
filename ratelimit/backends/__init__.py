"""Storage backends for the sliding-window limiter."""

from ratelimit.backends.base import Backend
from ratelimit.backends.memory import MemoryBackend

__all__ = ["Backend", "MemoryBackend"]
