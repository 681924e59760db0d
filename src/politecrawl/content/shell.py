"""Whether a page's static HTML is a JavaScript shell: a page whose words and links only a
browser running its scripts would see (``crawl --render auto``; docs/render.md).

Pure. A shell has all three of:

* **little text**: fewer than :data:`SHELL_MAX_WORDS` words in the body, counted without the
  contents of ``<script>``, ``<style>``, ``<noscript>`` ("You need to enable JavaScript"),
  ``<template>`` and ``<svg>``;
* **a script bundle**: a ``<script src>`` (of any host) or an inline ``<script type=module>``;
* **a root element**: an element of the body that the scripts mount the page on, named by an
  ``id`` (``<div id="root">``, ``id="__next"``) or a custom element's tag (``<app-root>``),
  holding nothing but a placeholder (up to :data:`PLACEHOLDER_WORDS` words in up to
  :data:`PLACEHOLDER_ELEMENTS` elements: "Loading…", a spinner).

A page with its text in the HTML is not a shell, however many scripts it runs (analytics,
hydration of a server-rendered page: what a browser would add is already there). The rule is
measured on hand-written pages of both kinds (tests/data/pages/, tests/unit/test_shell.py).

The markup is hostile: a page of more than :data:`SHELL_MAX_TAGS` tags is not a shell (a
shell has a few dozen) and is not parsed here at all; attribute-crowded tags are cut first, as
``content.parse`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

from .charsets import decode_text
from .crowded_tags import cut_crowded_tags
from .nesting import may_copy_too_much, scan
from .parse import rough_word_count

__all__ = [
    "SHELL_MAX_TAGS",
    "SHELL_MAX_WORDS",
    "ShellVerdict",
    "shell_verdict",
    "PLACEHOLDER_ELEMENTS",
    "PLACEHOLDER_WORDS",
]

#: A body with fewer visible words than this may be a shell ...
SHELL_MAX_WORDS = 60
#: ... and a page with more tags than this is not one (nor parsed to find out).
SHELL_MAX_TAGS = 3_000

#: Elements whose contents are not the page's visible text.
_HIDDEN = ("script", "style", "noscript", "template", "svg")
#: The elements scripts mount a page on (and custom elements, whose tag has a hyphen).
_MOUNTS = frozenset(("div", "main", "section", "article"))


@dataclass(frozen=True)
class ShellVerdict:
    """The decision and the evidence for it, in words (``politecrawl why`` shows ``reason``)."""

    shell: bool
    reason: str
    words: int = 0
    bundles: int = 0
    root: str | None = None


def _describe(node: LexborNode) -> str:
    ident = node.attributes.get("id")
    return f"<{node.tag} id={ident}>" if ident else f"<{node.tag}>"


#: A mount point may hold a placeholder ("Loading…", a spinner's few elements) ...
PLACEHOLDER_WORDS = 3
#: ... of at most this many elements.
PLACEHOLDER_ELEMENTS = 4


def _placeholder_only(node: LexborNode) -> bool:
    """Nothing in ``node`` but a placeholder: a few words, a few elements (comments are nothing)."""
    elements = 0
    for inner in node.traverse(include_text=False):
        if inner is not node and not (inner.tag or "").startswith("-"):
            elements += 1
            if elements > PLACEHOLDER_ELEMENTS:
                return False
    return len((node.text() or "").split()) <= PLACEHOLDER_WORDS


def _mount_point(body: LexborNode) -> str | None:
    """The first element of the body that names itself (an id, or a custom element's tag) and
    holds nothing but a placeholder."""
    for node in body.traverse(include_text=False):
        tag = node.tag or ""
        if not (tag in _MOUNTS or ("-" in tag and not tag.startswith("-"))):
            continue
        if (node.attributes.get("id") or "-" in tag) and _placeholder_only(node):
            return _describe(node)
    return None


def shell_verdict(body: bytes | str, header_charset: str | None = None) -> ShellVerdict:
    """Whether the static HTML ``body`` is a JavaScript shell (see the module's docstring)."""
    text = body if isinstance(body, str) else decode_text(body, header_charset, html=True)
    tags = text.count("<")
    if tags > SHELL_MAX_TAGS:
        return ShellVerdict(False, f"static HTML: {tags} tags of markup")
    text = cut_crowded_tags(text)
    if may_copy_too_much(text, tags):
        text = scan(text).text
    try:
        tree = LexborHTMLParser(text)
    except Exception:  # pragma: no cover - lexbor accepts anything; defensive at the boundary
        return ShellVerdict(False, "static HTML: not parsed")
    bundles = 0
    for script in tree.css("script"):
        attributes = script.attributes
        if attributes.get("src") or (attributes.get("type") or "").strip().lower() == "module":
            bundles += 1
    root_node = tree.body
    if root_node is None:
        return ShellVerdict(False, "static HTML: no body", bundles=bundles)
    tree.strip_tags(list(_HIDDEN))
    root_node = tree.body
    assert root_node is not None
    words = rough_word_count(" ".join(root_node.text(separator=" ").split())) if root_node.text().strip() else 0
    root = _mount_point(root_node)
    evidence = f"{words} word{'s' if words != 1 else ''} of text, {bundles} script bundle{'s' if bundles != 1 else ''}"
    evidence += f", root {root}" if root else ", no root element"
    if words >= SHELL_MAX_WORDS:
        return ShellVerdict(False, f"static HTML: {evidence}", words, bundles, root)
    if bundles == 0 or root is None:
        return ShellVerdict(False, f"static HTML: {evidence}", words, bundles, root)
    return ShellVerdict(True, f"JS shell: {evidence}", words, bundles, root)
