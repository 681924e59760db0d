"""What the web UI's pages are made of: the templates, escaped snippets with their highlights,
result links, and the /bot page (``bot_page_html`` also writes it as a standalone file).

Templates and the stylesheet are found beside this module (``templates/``, ``static/``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2
from markupsafe import Markup, escape

from politecrawl._version import __version__
from politecrawl.config import Settings, apply_stored_settings, user_agent_string
from politecrawl.index.snippet import mark_highlights
from politecrawl.policy.politeness import SLOW_DOWN_STATUSES, DelayPolicy
from politecrawl.policy.robots_fetch import product_token

from .safe_text import for_page
from .web_openapi import MAX_QUERY_CHARS

__all__ = ["bot_page_html", "highlight_snippet"]

_HERE = Path(__file__).resolve().parent
_TEMPLATES = _HERE / "templates"
_STATIC = _HERE / "static"


# -- rendering helpers ----------------------------------------------------------


#: Characters pages use as heading anchors (Sphinx's ``¶``, others' ``#`` link text is a word):
#: text of the page, not of its content, left out of snippets as they are shown.
_ANCHOR_MARKS = str.maketrans({"\u00b6": None, "\U0001f517": None})
_SPACES = re.compile(r"  +")


def _shown(text: str) -> str:
    return str(escape(for_page(text.translate(_ANCHOR_MARKS))))


def highlight_snippet(snippet: str, highlights) -> Markup:
    """Escaped snippet with each ``(start, end)`` range wrapped in ``<mark>`` (bad offsets cost a
    highlight, never the page: ``mark_highlights``), without heading anchor marks (``¶``)."""
    marked = mark_highlights(snippet, highlights, lambda s: f"<mark>{_shown(s)}</mark>", _shown)
    return Markup(_SPACES.sub(" ", marked))


def _safe_href(url: str) -> str | None:
    """Only http(s) URLs become links: a ``javascript:`` URL in the index stays text."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return None
    return url if scheme in ("http", "https") else None


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        h = int(seconds // 3600)
        return f"{h} hour{'s' if h != 1 else ''}"
    if seconds >= 60 and seconds % 60 == 0:
        m = int(seconds // 60)
        return f"{m} minute{'s' if m != 1 else ''}"
    s = f"{seconds:g}"
    return f"{s} second{'s' if s != '1' else ''}"


def _contact_href(contact: str | None) -> str | None:
    if not contact:
        return None
    if contact.lower().startswith(("http://", "https://")):
        return contact
    if contact.lower().startswith("mailto:"):
        return contact
    if "@" in contact and " " not in contact and ":" not in contact:
        return "mailto:" + contact
    return None


def _jinja_env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=True,  # every template, whatever its extension
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_for_page,  # every value a template shows: a crawled page wrote most of them
    )


def _for_page(value: Any) -> Any:
    return for_page(value) if isinstance(value, str) else value


def _bot_context(
    settings: Settings, *, from_store: bool = False, sent: str | None = None, stored: str | None = None
) -> dict[str, Any]:
    """What the /bot page says. From the store (``from_store``, the web's /bot): what the crawl
    recorded at its start, the User-Agent it ``sent`` (meta ``user_agent``) and its fleet-wide
    settings (``stored``: meta ``fleet_settings``: contact, delays, caps), over ``settings``;
    ``sent`` None there is a store no crawl ran on. Otherwise (``bot-page``): ``settings``."""
    if stored:
        settings = apply_stored_settings(settings, stored)
    recorded = not from_store or sent is not None
    user_agent = sent or user_agent_string(settings)
    contact = settings.contact if recorded else None
    token = product_token(user_agent) or settings.user_agent
    policy = DelayPolicy.from_settings(settings)
    mb = settings.max_page_bytes / (1024 * 1024)
    return {
        "bot_name": token,
        "user_agent": user_agent,
        "from_store": from_store,
        "recorded": recorded,
        "contact": contact,
        "contact_href": _contact_href(contact),
        "slow_down_statuses": " and ".join(str(code) for code in sorted(SLOW_DOWN_STATUSES)),
        "retry_after_cap": _duration(policy.retry_after_cap),
        "version": __version__,
        "max_page_mb": f"{mb:g} MB",
        "host_budget": f"{settings.host_page_budget:,}" if settings.host_page_budget else "a configured number of",
        "max_depth": settings.max_depth,
        "per_ip": settings.per_ip_limit if settings.per_ip_limit else "(no limit set)",
        "min_delay": _duration(policy.min_delay),
        "adaptive": f"{policy.adaptive_factor:g}",
        "max_adaptive": _duration(policy.max_adaptive_delay),
        "max_crawl_delay": _duration(policy.max_crawl_delay),
        "backoff_base": _duration(policy.backoff_base),
        "backoff_cap": _duration(policy.backoff_cap),
        "park_after": policy.park_after,
        "park": _duration(policy.park_seconds),
        "robots_ttl": _duration(settings.robots_ttl),
        "follow_nofollow": settings.follow_nofollow,
        "sitemaps": settings.sitemaps,
        "guess_sitemap": settings.sitemaps and settings.guess_sitemap,
        "robots_slow": f"User-agent: {token}\nCrawl-delay: 10",
        "robots_partial": f"User-agent: {token}\nDisallow: /private/",
        "robots_block": f"User-agent: {token}\nDisallow: /",
    }


def bot_page_html(settings: Settings) -> str:
    """The /bot page as a standalone HTML document (CSS inlined), e.g. to publish at the contact URL."""
    env = _jinja_env()
    css = Markup((_STATIC / "style.css").read_text(encoding="utf-8"))
    return env.get_template("bot.html").render(
        **_bot_context(settings), standalone=True, inline_css=css, query="", max_query=MAX_QUERY_CHARS
    )
