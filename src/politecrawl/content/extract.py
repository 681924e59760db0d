"""Text of the non-HTML responses worth indexing: plain text and PDF -> ``Page``.

Pure: bytes in, a :class:`politecrawl.parse.Page` out (the type ``parse_html``
returns, so indexing does not care where a page came from), never raises. These
pages have no links and no robots directives of their own: ``links`` is empty and
``directives`` the default (an ``X-Robots-Tag`` header still applies, combined by
the caller as for HTML).

PDF text comes from ``pypdf`` (pure Python, maintained). A PDF it cannot read --
truncated, not a PDF at all, or encrypted with a password we do not have -- gives
a page with empty text and one warning line, so the fetch is still recorded.
"""

from __future__ import annotations

import io
import logging

from .charsets import decode_text
from .parse import MAX_TEXT_CHARS, Page

__all__ = [
    "EXTRACTABLE_TYPES",
    "MAX_PDF_PAGES",
    "extract",
    "extract_pdf",
    "extract_text_plain",
    "is_extractable",
    "media_type",
]

log = logging.getLogger(__name__)

#: Media types whose text is extracted (``application/x-pdf`` is an old alias still served).
EXTRACTABLE_TYPES = frozenset({"text/plain", "application/pdf", "application/x-pdf"})

#: Pages of a PDF read at most: the body is already size-capped, but a small file can
#: declare many pages, and the text index needs no more.
MAX_PDF_PAGES = 1000

#: Longest title kept, in characters.
MAX_TITLE_CHARS = 200


def media_type(content_type: str | None) -> str:
    """``Text/Plain; charset=UTF-8`` -> ``text/plain`` (lower-case, no parameters)."""
    if not content_type:
        return ""
    return content_type.partition(";")[0].strip().lower()


def _charset_param(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def is_extractable(content_type: str | None) -> bool:
    """Whether a response of this ``Content-Type`` has text :func:`extract` can index."""
    return media_type(content_type) in EXTRACTABLE_TYPES


def extract(body: bytes, url: str, content_type: str | None) -> Page:
    """Dispatch on the ``Content-Type`` header value (its ``charset`` parameter included).

    Raises ``ValueError`` only for a type :func:`is_extractable` refuses: asking is the
    caller's job, before the body is downloaded.
    """
    kind = media_type(content_type)
    if kind == "text/plain":
        return extract_text_plain(body, url, _charset_param(content_type))
    if kind in ("application/pdf", "application/x-pdf"):
        return extract_pdf(body, url)
    raise ValueError(f"no text extractor for {kind or 'a missing content type'!r}")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            return line[:MAX_TITLE_CHARS]
    return ""


def _collapse(text: str) -> str:
    # The same shape as parse_html's text: words separated by single spaces, capped.
    return " ".join(text.split())[:MAX_TEXT_CHARS]


def extract_text_plain(body: bytes, url: str, charset: str | None = None) -> Page:
    """A ``text/plain`` body: title = its first non-empty line (200 characters at most)."""
    if not isinstance(body, (bytes, bytearray, memoryview)):
        body = str(body).encode("utf-8", "replace")
    text = decode_text(bytes(body), charset, html=False)
    return Page(title=_first_line(text), text=_collapse(text), base=url)


def extract_pdf(body: bytes, url: str) -> Page:
    """A PDF body: title from its metadata (``/Title``), else its first line of text.

    Never raises: a PDF that cannot be read gives empty text and one warning line.
    An encrypted PDF is read when it opens with the empty user password (as any
    viewer opens it: only its permissions are restricted), else it has no text.
    """
    try:
        title, text = _read_pdf(bytes(body))
    except Exception as exc:  # pypdf raises many types on hostile input; none may escape
        log.warning("pdf not indexed: %s: %s", url, _one_line(exc))
        return Page(title="", text="", base=url)
    return Page(title=title or _first_line(text), text=_collapse(text), base=url)


def _read_pdf(body: bytes) -> tuple[str, str]:
    if b"%PDF-" not in body[:1024]:
        # Readers look for the header in the first 1024 bytes; without one, pypdf would
        # spend seconds searching a large body for objects before giving up.
        raise ValueError("not a PDF (no %PDF- header)")
    # Imported on first use: pypdf is only needed when a crawl meets a PDF.
    from pypdf import PdfReader

    _quiet_pypdf()
    reader = PdfReader(io.BytesIO(body))
    if reader.is_encrypted and not reader.decrypt(""):
        raise ValueError("encrypted, needs a password")
    title = ""
    try:
        meta = reader.metadata
        if meta is not None and meta.title:
            title = " ".join(str(meta.title).split())[:MAX_TITLE_CHARS]
    except Exception:  # a broken /Info dictionary: the text may still be readable
        title = ""
    parts: list[str] = []
    size = 0
    for number, page in enumerate(reader.pages):
        if number >= MAX_PDF_PAGES or size > MAX_TEXT_CHARS:
            break
        chunk = page.extract_text() or ""
        parts.append(chunk)
        size += len(chunk)
    return title, "\n".join(parts)


def _quiet_pypdf() -> None:
    # pypdf logs several warnings per broken file; the crawler's one line above says what
    # matters. Only when nobody configured pypdf's logger: an explicit setting wins.
    pypdf_log = logging.getLogger("pypdf")
    if pypdf_log.level == logging.NOTSET:
        pypdf_log.setLevel(logging.ERROR)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
