"""Start tags with too many attributes, cut down before lexbor parses them.

Why: lexbor checks each new attribute of a tag against those before it (HTML drops a repeated
name), so one tag of n attributes costs O(n²): a single tag of 100,000 attributes (889 KB) took
27.5 s to parse (25,000: 1.1 s, 50,000: 4.3 s), and the worker's other hosts waited all that
time. A tag is cut after its first :data:`MAX_ATTRIBUTES` attributes: an ordinary tag has a
handful, and at this many the check costs ~0.1 ms. The rest of the tag is dropped up to its ``>``,
or up to the next ``<`` (kept, and read again as markup): a "tag" found where the tokenizer sees
text (a script's ``a <b && …``) then loses no ``</script>``.

The markup is read as the HTML tokenizer reads a tag (attribute names end at whitespace, ``/``,
``>`` or ``=``; a value is quoted or runs to whitespace or ``>``; a ``>`` inside a quoted value
does not end the tag), left to right, once, by one regular expression with atomic groups and
possessive loops: it runs in C, never backtracks and never starts again inside a tag it read,
so it costs linear time on any input (measured in docs/security-content.md). Pure.
"""

from __future__ import annotations

import re

__all__ = ["MAX_ATTRIBUTES", "cut_crowded_tags"]

#: Attributes kept of one start tag; the rest are dropped.
MAX_ATTRIBUTES = 256

# A start tag's "<" and name, and one attribute from the "before attribute name" state:
# separators ("/" is ignored there), a name (its first character may be "="), an optional value.
# Atomic: read once, as the tokenizer does, never backtracked into.
_START = r"<[A-Za-z][^\s/>]*+"
_ATTRIBUTE = r"""(?>[\s/]*+[^\s/>][^\s/>=]*+(?>\s*+=\s*+(?>"[^"]*+"|'[^']*+'|[^\s>]++)?)?)"""
#: From a position, everything up to the next crowded start tag (or the end): text, tags of at
#: most MAX_ATTRIBUTES attributes, and a "<" that starts no tag.
_UNTIL_CROWDED = re.compile(rf"(?>[^<]++|{_START}{_ATTRIBUTE}{{0,{MAX_ATTRIBUTES}}}+(?!{_ATTRIBUTE})|<(?![A-Za-z]))*+")
#: A crowded start tag up to the end of its last attribute kept.
_CROWDED = re.compile(rf"{_START}{_ATTRIBUTE}{{{MAX_ATTRIBUTES}}}")
#: The rest of its attributes, and its end.
_REST = re.compile(rf"{_ATTRIBUTE}*+[\s/]*+>?")


def cut_crowded_tags(text: str) -> str:
    """``text`` with every start tag of more than MAX_ATTRIBUTES attributes cut to its first
    MAX_ATTRIBUTES (and its ``>`` or ``/>``); ``text`` itself when it has none."""
    at = 0
    parts: list[str] = []
    while True:
        scanned = _UNTIL_CROWDED.match(text, at)
        stop = scanned.end() if scanned is not None else at
        if stop >= len(text):
            break
        crowded = _CROWDED.match(text, stop)
        if crowded is None:  # pragma: no cover - the scan stops only at a crowded tag
            break
        kept = crowded.end()
        lt = text.find("<", kept)
        rest = _REST.match(text, kept, lt if lt >= 0 else len(text))
        end = rest.end() if rest is not None else kept
        if text.endswith(">", 0, end):  # the tag ended before any other "<"
            close = "/>" if text.endswith("/>", 0, end) else ">"
        else:  # it reaches the next "<" (or the end): the "<" stays, read again from there
            close, end = ">", (lt if lt >= 0 else len(text))
        parts.append(text[at:kept])
        parts.append(close)
        at = end
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)
