"""Text for MyST markdown cells: word-internal hyphens that a narrow table cell cannot break."""

from __future__ import annotations

import re

#: A hyphen between two letters or digits, outside code and maths: in a narrow table cell the browser may break a line
#: after it ("population-" / "optimal"), splitting a word; the non-breaking hyphen U+2011 keeps it whole.
_HYPHEN = re.compile(r"(?:(?<=[\w^])|^)-(?=[^\W\d])|(?<=[\w^])-(?=\d)")
_DASH = re.compile(r"(?<=\w)\u2013(?=\w)")


def nobreak(text: str) -> str:
    """``text`` with its word-internal hyphens made non-breaking, except inside ``code`` spans and ``$maths$``."""
    parts = re.split(r"(`[^`]*`|\$[^$]*\$)", str(text))
    return "".join(p if p[:1] in "`$" else _DASH.sub("\u2013\u2060", _HYPHEN.sub("\u2011", p)) for p in parts)
