"""Text that came from inputs, made safe to show (docs/security.md).

Run folders, study files, stores and captures may be somebody else's: a
flow's role, a variant's name, a hostname, a path can hold terminal escapes
(ESC ] 0 ; ... BEL retitles a terminal, ESC [ 2 J clears it) or characters
that make a line read otherwise than it is. Everything report/ prints that
an input could have written goes through printable(); Rich's markup is off
on tcpvar's consoles (terminal.py), so `[bold]` is printed as it is.
"""
from __future__ import annotations

import re

# C0 and C1 controls and DEL; the bidirectional overrides and isolates and
# the marks (text that reads in another order than it is stored); lone
# surrogates (the undecodable bytes of a file name: printing them fails)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(value) -> str:
    """@value as one line of plain text: every control character escaped
    (ESC as \\x1b, a newline as \\n)."""
    return _UNSAFE.sub(_escape, str(value))


def printable_lines(text: str) -> str:
    """@text with its line breaks kept and every other control character
    escaped."""
    return "\n".join(printable(line) for line in str(text).split("\n"))
