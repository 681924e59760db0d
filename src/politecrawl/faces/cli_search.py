"""``politecrawl search``, ``serve``, ``bot-page`` and ``demo``: searching what was crawled, in the
terminal or on the web, and the demo."""

from __future__ import annotations

import time
from typing import Any

import click

from .cli_options import _d, _fail, _settings, db_option
from .safe_text import for_terminal, json_text

__all__ = ["search", "serve", "bot_page", "demo"]


# --------------------------------------------------------------------------- search
@click.command()
@click.argument("query")
@db_option
@click.option("--index-dir", default=None, help="Index folder. [default: DB + .index]")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True, help="Results per page.")
@click.option("--page", type=click.IntRange(1, 1000), default=1, show_default=True, help="Result page.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {url, title, score, snippet}.")
@click.option(
    "--explain", is_flag=True, help="Show each score's BM25 terms (tf, df, idf, length, weight), exact and stemmed."
)
@click.option(
    "--exact", is_flag=True, help="Only the words as typed: no other forms of them (no stemming: 'bins' is not 'bin')."
)
@click.option(
    "--per-site",
    type=click.IntRange(1, 1000),
    default=None,
    help="At most N results of one site (the web page shows 2). [default: no limit]",
)
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    limit: int,
    page: int,
    as_json: bool,
    explain: bool,
    exact: bool,
    per_site: int | None,
    **flags: Any,
) -> None:
    """Search the index built by 'crawl' (BM25: k1=1.2, b=0.75).

    \b
    QUERY is words and operators (the web search and /api/search read it alike):
      compost bins          pages with any of the words, those with more of
                            them first; case is ignored; other forms of the
                            words count too, below the forms typed ("bins"
                            finds "bin", stemmed in the page's language;
                            --exact: not); a run of Chinese, Japanese or
                            Korean letters is the phrase of its two-letter
                            pieces
      "compost bins"        a phrase: only pages with these words next to each
                            other, in this order (in the title, text or links)
      compost -garden       -word: no page with the word "garden"
      compost site:a.org    site:HOST: only pages on a.org and its subdomains
                            (www. ignored; site:https://a.org/x is a.org)
      compost OR mulch      either word: what a space means (OR is not a word)
      compost filetype:pdf  filetype:/type:KIND: only html, pdf, txt, … documents
      compost lang:de       lang:CODE: only pages in that language (declared,
                            else detected in the page's text)
      compost after:2024    after:/before:DATE (YYYY, YYYY-MM, YYYY-MM-DD): dated on
                            or after / strictly before (Last-Modified, else fetched)
    A query of only -words and filters finds nothing: give a word or a phrase too.
    A QUERY that begins with -word goes after --: search -- "-garden compost".
    """
    from politecrawl.crawl.indexing import index_dir_for
    from politecrawl.index import Searcher

    settings = _settings(ctx, **flags)
    index_dir = index_dir_for(settings)
    if not index_dir.exists():
        _fail(f"no index at {index_dir}: run 'politecrawl crawl' (or 'politecrawl index') first")
    searcher = Searcher(index_dir, stemming=not exact)
    t0 = time.perf_counter()
    hits = searcher.search(query, limit=limit, page=page, explain=explain, per_site=per_site)
    took = time.perf_counter() - t0
    if as_json:
        out = []
        for h in hits:
            item = {"url": h.url, "title": h.title, "score": round(h.score, 6), "snippet": h.snippet}
            if explain:
                item["explanation"] = h.explanation
            out.append(item)
        if explain:
            click.echo(json_text({"stats": searcher.stats(), "hits": out}, indent=2))
        else:
            click.echo(json_text(out, indent=2))
        return
    if not hits:
        click.echo(f"no results for {query!r}")
        suggestion = searcher.suggest(query)
        if suggestion:
            click.echo(f"did you mean: {for_terminal(suggestion)}")
        return
    start = (page - 1) * limit
    for i, h in enumerate(hits, start + 1):
        # Titles, URLs and snippets are the crawled pages' words: shown, never obeyed (safe_text).
        click.echo(click.style(f"{i}. {for_terminal(h.title or h.url)}", bold=True) + f"  ({h.score:.3f})")
        click.echo(click.style(f"   {for_terminal(h.url)}", fg="green"))
        if h.snippet:
            click.echo(f"   {_highlight(h.snippet, h.highlights)}")
        if explain and h.explanation:
            e = h.explanation
            for t in e["terms"]:
                if t["tf"]:
                    # a stemmed row: the forms of the stem in the page, for the query word it stems
                    what = f"stem {t['term']!r} of {t['stem_of']!r}" if t["stemmed"] else repr(t["term"])
                    click.echo(
                        f"     {what} in {t['field']}: tf {t['tf']}, df {t['df']}, idf {t['idf']:.3f}, "
                        f"length {t['doc_len']} (avg {t['avgdl']:.1f}), weight {t['weight']}"
                        f" -> {t['contribution']:.3f}"
                    )
            if e["stem_weight"] is not None:
                click.echo(
                    f"     exact {e['exact']:.3f} + stemmed {e['stemmed']:.3f}"
                    f" (the stemmed terms at {e['stem_weight']} of their BM25)"
                )
            prox = h.explanation.get("proximity")
            if prox:  # the words' closeness, added to the reranked top hits of a multi-word query
                for t in prox["terms"]:
                    if t["contribution"]:
                        click.echo(
                            f"     {t['term']!r} near the next or previous query word in {t['field']}"
                            f" -> {t['contribution']:.3f} (proximity)"
                        )
    if explain and hits and hits[0].explanation:
        e = hits[0].explanation
        click.echo(f"\nBM25 ({e['scoring']}): k1 {e['k1']}, b {e['b']}, N {e['N']}; each score is the sum of its lines")
    click.echo(f"\n{len(hits)} results in {took * 1000:.1f} ms")


def _highlight(snippet: str, spans) -> str:
    from politecrawl.index.snippet import mark_highlights

    return mark_highlights(snippet, spans, lambda s: click.style(for_terminal(s), bold=True), for_terminal)


# --------------------------------------------------------------------------- serve
@click.command()
@db_option
@click.option("--index-dir", default=None, help="Index folder. [default: DB + .index]")
@click.option("--host", default=None, help=f"Address to listen on. {_d('host')}")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help=f"Port. {_d('port')}")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="Also answer requests for this host name (repeatable): the name a reverse proxy or your "
    "browser uses for this server. Other names get 421 (a guard against DNS rebinding).",
)
@click.option(
    "--contact", default=None, help="Operator contact on the /bot page until the store records a crawl's own."
)
@click.option(
    "--user-agent",
    default=None,
    help=f"Bot name on the /bot page until the store records a crawl's own. {_d('user_agent')}",
)
@click.pass_context
def serve(ctx: click.Context, **flags: Any) -> None:
    """Serve the search page (/), the JSON API (/api/search, /api/status) and the /bot page."""
    from .web import serve as run_server

    run_server(_settings(ctx, **flags))


@click.command("bot-page")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write the page to FILE instead of standard output.",
)
@click.option("--contact", default=None, help="Operator contact shown on the page.")
@click.option("--user-agent", default=None, help=f"Bot name. {_d('user_agent')}")
@click.option("--min-delay", type=float, default=None, help=f"The delay promised on the page. {_d('min_delay')}")
@click.pass_context
def bot_page(ctx: click.Context, output: str | None, **flags: Any) -> None:
    """Write the page for site owners (what this bot is, how to slow it down or opt out) as static HTML.

    Host it at the URL you give as --contact, so the User-Agent points site owners to it.
    """
    from .web_pages import bot_page_html

    html = bot_page_html(_settings(ctx, **flags))
    if output:
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(html)
        except OSError as exc:
            _fail(f"cannot write {output}: {exc.strerror}")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(html)


# --------------------------------------------------------------------------- demo
@click.command()
@click.option("--db", default=None, help="Store for the demo crawl. [default: a temporary folder]")
@click.option(
    "--hosts",
    "n_hosts",
    type=click.IntRange(2, 50),
    default=4,
    show_default=True,
    help="Sandbox hosts (127.0.0.2, 127.0.0.3, …).",
)
@click.option("--query", default="compost telescope", show_default=True, help="The sample search.")
@click.option(
    "--render",
    type=click.Choice(["never", "auto", "always"]),
    default="never",
    show_default=True,
    help="Add a site built in JavaScript and crawl with --render (needs pip install 'politecrawl[render]' "
    "and the system's Chromium; docs/render.md).",
)
def demo(db: str | None, n_hosts: int, query: str, render: str) -> None:
    """Crawl a sandbox web on loopback (no network needed), then search it."""
    from .demo import run_demo

    run_demo(db=db, n_hosts=n_hosts, query=query, render=render)
