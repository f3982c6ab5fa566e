"""The masks a policy may name for a column (``masked_columns``, the policy file's ``[masks]``).

Both policy models check their entries against ``MASKS``; ``safety.masking`` applies them.
"""

from __future__ import annotations

__all__ = ["MASKS"]

MASKS = ("email", "last4", "null", "redact")
