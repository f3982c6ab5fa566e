"""The asker's attributes: what a policy's row filters (``[rows]``) are bound to.

A run is asked with the attributes of the identity that proved itself (a token's claims or its
entry's ``attributes``), records them with its state, and is validated with them from whichever
process advances it; an approval batch records them too, so an edit by any reviewer is checked
with the ASKER's attributes. Never anything a caller may set freely.

Example:
    >>> checked_identity({"region": "EU", "limit": 500})
    {'region': 'EU', 'limit': 500}
    >>> identity_key({"b": 1, "a": "x"}) == identity_key({"a": "x", "b": 1})
    True
    >>> checked_identity({"region": ["EU"]})
    Traceback (most recent call last):
    ...
    ValueError: attribute region must be text, a number or true/false
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

__all__ = ["Identity", "IdentityValue", "checked_identity", "identity_key", "needed_identity"]

IdentityValue = str | int | float | bool
Identity = Mapping[str, IdentityValue]


def checked_identity(value: object) -> dict[str, IdentityValue] | None:
    """``value`` as attributes (None for none); ``ValueError`` naming the first attribute that
    is not text, a number or a boolean (a list or an object binds to no single literal)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError("attributes must be an object of names to values")
    found: dict[str, IdentityValue] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise ValueError("attribute names must be non-empty text")
        if not isinstance(item, (str, int, float, bool)):
            raise ValueError(f"attribute {name} must be text, a number or true/false")
        found[name] = item
    return found or None


def identity_key(identity: Identity | None) -> str:
    """The attributes as one text, the same for equal attributes (a cache key)."""
    return json.dumps(dict(identity or {}), sort_keys=True, separators=(",", ":"))


def needed_identity(identity: object, names: Iterable[str]) -> dict[str, IdentityValue] | None:
    """Of the asker's attributes, only those the policy's row filters name (``names``): what a
    run records and its batch shows the reviewer, and what its validators are cached by (a
    provider token's other claims, its times and ids, are neither kept nor shown).

    Example:
        >>> needed_identity({"region": "EU", "sub": "u-1", "exp": "1767225600"}, ["region"])
        {'region': 'EU'}
        >>> needed_identity({"sub": "u-1"}, ["region"]) is None
        True
    """
    found = checked_identity(identity) or {}
    wanted = set(names)
    return {k: v for k, v in found.items() if k in wanted} or None
