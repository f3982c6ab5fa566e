"""Memory's exceptions, under the orchestrator's ``SqlgateError``, each with a stable ``code``.

SqlgateError
 └── MemoryStoreError         memory_error
      ├── MemoryNotFound      memory_not_found      (no such example, note or template)
      └── SeedRefused         memory_seed_refused   (a seeded pair failed validation or execution)
"""

from __future__ import annotations

from orchestrator.core.errors import SqlgateError

__all__ = ["MemoryNotFound", "MemoryStoreError", "SeedRefused"]


class MemoryStoreError(SqlgateError):
    code = "memory_error"


class MemoryNotFound(MemoryStoreError):
    code = "memory_not_found"


class SeedRefused(MemoryStoreError):
    code = "memory_seed_refused"
