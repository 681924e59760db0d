"""Text a stranger wrote, made safe to show a person: one sanitizer for every face.

Titles, snippets, URLs and robots.txt lines come from crawled pages, and a page's author
chooses them. Written raw to a terminal, an escape sequence in a title is a command to the
terminal: OSC 52 sets the clipboard, OSC 0 the window title, OSC 8 makes a link, CSI clears
the screen, and the single-byte C1 introducers (U+009B is CSI) do the same on terminals that
honour them. Unicode's bidirectional controls reorder what is shown (U+202E makes
``gnp.exe`` read ``exe.png``). None of them is text a person needs, so:

- ``for_terminal``: every control character (C0 but tab, DEL, C1), the bidi controls and the
  line and paragraph separators become a visible ``\\x1b``-style escape, so the reader sees
  that something was there without the terminal acting on it. Newlines too: one field, one line.
- ``json_text``: JSON as ``json.dumps(ensure_ascii=False)`` writes it, with those same
  characters written as ``\\uXXXX`` escapes: the data are unchanged (a JSON reader gets the
  very same strings), and the bytes carry no control a terminal or a viewer would obey.
- ``spreadsheet_cell``: a CSV cell that a spreadsheet would run as a formula (``=``, ``+``,
  ``-``, ``@``, tab, carriage return first) gets a leading apostrophe (OWASP's advice for CSV
  injection), and its controls but newlines (data in a quoted cell) are shown as in ``for_terminal``.

- ``for_page``: for the web UI's HTML, each of those characters but the newline becomes U+FFFD,
  one for one (a snippet's highlight offsets still hold). A browser obeys no terminal escape,
  but it does obey the bidi controls, and the page's bytes reach a terminal too (``curl`` of a
  result page); a person sees the mark of something there.

Pure: no I/O. HTML has its own escaping (the templates autoescape, after ``for_page``); the web
UI shows URLs through ``for_terminal``, so that a URL's bytes are visible.
"""

from __future__ import annotations

import json
import re
from typing import Any

from markupsafe import Markup

__all__ = ["for_page", "for_terminal", "json_text", "lines_for_terminal", "spreadsheet_cell"]

# C0 controls but tab, DEL and the C1 block; the bidi embeddings, overrides, isolates and marks
# (Unicode's UAX #9: LRE RLE PDF LRO RLO, LRI RLI FSI PDI, LRM RLM ALM); the line and paragraph
# separators, which some terminals and viewers break lines at.
_UNSAFE = "\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE_RE = re.compile(f"[{_UNSAFE}]")
# The same characters in JSON text: json.dumps escapes C0 already; these it writes raw.
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# In a CSV cell a newline is data (the cell is quoted): the rest is shown as in for_terminal.
_UNSAFE_IN_CELL = re.compile(f"[{_UNSAFE.replace(chr(0x0A) + '-', chr(0x0B) + '-', 1)}]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: str) -> str:
    """``text`` with every character a terminal or a bidi renderer would act on shown as an escape."""
    return _UNSAFE_RE.sub(_visible, text)


def for_page(text: str) -> str:
    """``text`` for an HTML page: each character of ``for_terminal`` but the newline as U+FFFD
    (a ``Markup`` stays ``Markup``: the mark is no markup)."""
    shown = _UNSAFE_IN_CELL.sub("\ufffd", text)
    return Markup(shown) if isinstance(text, Markup) else shown


def lines_for_terminal(text: str) -> str:
    """A report of several lines: each line through ``for_terminal``, the line breaks kept."""
    return "\n".join(for_terminal(line) for line in text.split("\n"))


def json_text(value: Any, **dumps_args: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **dumps_args)`` with the unsafe characters escaped."""
    return _UNSAFE_IN_JSON.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False, **dumps_args)
    )


def spreadsheet_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs as a formula, its controls shown."""
    text = _UNSAFE_IN_CELL.sub(_visible, text)
    return "'" + text if text.startswith(_FORMULA_START) else text
