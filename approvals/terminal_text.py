"""Untrusted text made safe for a terminal: the one place every command-line screen goes through.

Questions, SQL, purposes, assumptions, reasons, names and error messages come from the asker or
the model. Printed raw, an ANSI sequence could move the cursor up and overwrite the statement a
reviewer is about to approve, clear the screen, or set the window title; a bidi override could
show text in another order than it runs. Here every such character is made visible instead:

- C0 controls (except newline and tab) and DEL in caret notation: ``\\x1b`` is ``^[``, ``\\r`` is
  ``^M``, DEL is ``^?``; so an ANSI CSI or OSC sequence prints as harmless text (``^[[2J``);
- C1 controls (U+0080-U+009F, the single-byte CSI U+009B among them), bidi embeddings, overrides
  and isolates (U+202A-U+202E, U+2066-U+2069), the marks U+200E, U+200F, U+061C and the line and
  paragraph separators U+2028, U+2029 as ``<U+XXXX>``.

``visible(text)`` does it to one string. ``terminal_console()`` is the rich ``Console`` every CLI
display prints through: it applies ``visible`` to every piece of text it writes (rich's own
styling and cursor control are not text, and pass), so a field a screen forgets cannot slip by.
``json_text(payload)`` is the JSON the commands print: the same characters written as ``\\u``
escapes (the same JSON, parsed).

Example:
    >>> visible("SELECT 1\\x1b[1A\\x1b[2K-- fine")
    'SELECT 1^[[1A^[[2K-- fine'
    >>> visible("total \\u202edesrever\\u202c ok\\r")
    'total <U+202E>desrever<U+202C> ok^M'
    >>> visible("two\\nlines\\tand a tab")
    'two\\nlines\\tand a tab'
    >>> json_text({"q": "a\\u202eb\\x9b"})
    '{"q": "a\\\\u202eb\\\\u009b"}'
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

__all__ = ["UNSAFE_CHARACTERS", "json_text", "terminal_console", "visible"]

_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
#: Every character ``visible`` rewrites (code points).
UNSAFE_CHARACTERS = frozenset(
    [*(c for c in range(0x20) if c not in (0x09, 0x0A)), 0x7F, *range(0x80, 0xA0), *_BIDI]
    + [0x2028, 0x2029]
)


def _shown(code: int) -> str:
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


_VISIBLE = {code: _shown(code) for code in UNSAFE_CHARACTERS}
_JSON_ESCAPED = {code: f"\\u{code:04x}" for code in UNSAFE_CHARACTERS}


def visible(text: str) -> str:
    """``text`` with every control character, C1 code and bidi control made visible."""
    return text.translate(_VISIBLE)


def json_text(payload: Any, *, indent: int | None = None) -> str:
    """``payload`` as JSON whose text holds no raw control, C1 or bidi character (each is a
    ``\\u`` escape; other non-ASCII text stays as it is)."""
    text = json.dumps(payload, indent=indent, ensure_ascii=False, default=str)
    return text.translate(_JSON_ESCAPED)


class _TerminalConsole(Console):
    """A rich console that makes every written piece of text ``visible``."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(visible(segment.text), segment.style)
            for segment in buffer
        )


def terminal_console(**options: Any) -> Console:
    """A rich ``Console`` (same options) that never writes a raw control or bidi character
    taken from text: the only console command-line screens print through."""
    return _TerminalConsole(**options)
