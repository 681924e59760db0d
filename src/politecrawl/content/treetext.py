"""A parsed page's text read by one walk of its tree in C (``_dedup.c``'s ``tree_text``),
the tree left as it is.

:mod:`.maintext` reads text whose words break only where the page breaks lines: through
selectolax that takes a selector match of every element against the inline elements' names,
a call to unwrap each one found, and a merge of the text nodes that then meet, together some
of ``parse_html``'s largest steps. The walk reads the same text from the tree as parsed: it
puts a space between two text nodes when a node other than an inline element starts or ends
between them, which is where the unwrapped tree's text nodes end. No node is moved, so deep
nesting costs the walk no more than a flat page.

The C code reads lexbor's nodes at the address selectolax gives as ``LexborNode.mem_id``, with
lexbor's struct layout declared in C. That the installed selectolax's lexbor has that layout
is checked once (:func:`tag_ids`), on a probe document, against selectolax's own answers: no
read at a ``mem_id`` that is not a plausible address, and every address the check reads compared
with selectolax's before the C code follows one. When the check fails, or the C module is not
built or is turned off (:mod:`.compiled`), :func:`tag_ids` gives None and the callers unwrap as
before, with the same text (tests/unit/test_treetext.py compares the two).
"""

from __future__ import annotations

from collections.abc import Iterable

from selectolax.lexbor import LexborHTMLParser, LexborNode

from . import compiled

__all__ = ["read", "tag_ids"]

_ELEMENT, _TEXT, _COMMENT = 1, 3, 8
_PROBE_TEXT = "probe, text"
#: Tag ids above this are not an HTML element's (lexbor numbers its known tags from 0, a few
#: hundred of them): a larger one means the layout is not the one declared.
_MAX_TAG_ID = 1 << 16
#: No node lies in the first 64 KiB of the address space (never mapped, on Linux at least).
_MIN_ADDRESS = 1 << 16


def _address(node: LexborNode | None) -> int:
    return node.mem_id if node is not None else 0


def _layout_matches() -> bool:
    """Whether lexbor's nodes, as selectolax built them, are laid out as ``_dedup.c`` declares:
    each field the walk reads, on a probe document, equal to what selectolax says of it."""
    fields, data = compiled.node_fields, compiled.node_data
    if fields is None or data is None:
        return False
    tree = LexborHTMLParser(f"<body><p>{_PROBE_TEXT}<!--c--><b>one</b></p></body>")
    body = tree.body
    p = body.child if body is not None else None
    text = p.child if p is not None else None
    comment = text.next if text is not None else None
    if p is None or text is None or comment is None or comment.next is None:
        return False
    # Before the first read: addresses, or selectolax's mem_id has changed its meaning.
    addresses = [node.mem_id for node in (body, p, text, comment, comment.next) if node is not None]
    if len(set(addresses)) != 5 or any(a < _MIN_ADDRESS or a % 8 for a in addresses):
        return False
    element = fields(p.mem_id)
    if element[0] != _ELEMENT or element[2:] != (_address(p.parent), _address(p.next), text.mem_id, -1):
        return False
    kind, _, parent, following, child, length = fields(text.mem_id)
    if (kind, parent, following, child, length) != (_TEXT, p.mem_id, comment.mem_id, 0, len(_PROBE_TEXT)):
        return False
    if data(text.mem_id) != _PROBE_TEXT.encode():  # followed only once its length was right
        return False
    return fields(comment.mem_id)[0] == _COMMENT and fields(comment.mem_id)[2] == p.mem_id


_layout: bool | None = None


def _ids(names: list[str], before: str) -> list[int] | None:
    """The tag ids of elements ``names``, as lexbor gives them in a document where the markup
    ``before`` comes first; None when one is not a plausible tag id."""
    fields = compiled.node_fields
    assert fields is not None
    tree = LexborHTMLParser(f"<body><p>{before}" + "".join(f"<{name}></{name}>" for name in names) + "</p></body>")
    elements = tree.css("p *")[before.count("<") // 2 :]
    if [node.tag for node in elements] != names:
        return None
    ids = [fields(node.mem_id)[1] for node in elements]
    return ids if max(ids, default=0) < _MAX_TAG_ID else None


def tag_ids(names: Iterable[str]) -> bytes | None:
    """The tag ids of the elements ``names`` as a bitmap for :func:`read` (bit ``id % 8`` of
    byte ``id // 8``), or None when the walk cannot run: then read the text through selectolax."""
    global _layout
    if compiled.tree_text is None or compiled.node_fields is None:
        return None
    if _layout is None:
        try:
            _layout = _layout_matches()
        except (OverflowError, ValueError, TypeError):
            _layout = False
    if not _layout:
        return None
    names = list(names)
    ids = _ids(names, "")
    # A name lexbor does not know gets an id of its document's own, which another page may give
    # to another name: the ids must not change with elements lexbor does not know before them.
    if ids is None or ids != _ids(names, "<x-probe-one></x-probe-one><x-probe-two></x-probe-two>"):
        return None
    bitmap = bytearray(max(ids, default=0) // 8 + 1)
    for tag_id in ids:
        bitmap[tag_id // 8] |= 1 << (tag_id % 8)
    return bytes(bitmap)


def read(node: LexborNode, inline: bytes, merge: bool) -> str:
    """The text under ``node``, whitespace runs made one space. ``merge``: as if the elements
    of ``inline`` (:func:`tag_ids`) were unwrapped and the text nodes that then meet merged,
    the text nodes read with a space between them; without it, a space between every two text
    nodes (selectolax's ``node.text(separator=" ")``). Only when :func:`tag_ids` gave a bitmap."""
    tree_text = compiled.tree_text
    assert tree_text is not None, "tag_ids tells whether the walk can run"
    return tree_text(node.mem_id, inline, merge)
