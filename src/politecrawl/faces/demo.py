"""``politecrawl demo``: a sandbox web on loopback, crawled with progress, then searched."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from politecrawl.config import load_settings
from politecrawl.crawl.crawler import Crawler
from politecrawl.crawl.indexing import index_dir_for
from politecrawl.index import Searcher
from politecrawl.store import open_store

from .demo_web import DemoWeb, demo_sites, js_site
from .progress import Progress
from .words import human_duration, plural

__all__ = ["run_demo"]


def run_demo(
    *, db: str | None = None, n_hosts: int = 4, query: str = "compost telescope", render: str = "never"
) -> None:
    hosts = demo_sites(n_hosts=n_hosts, pages_per_host=10, crawl_delay_host=1, crawl_delay=1.0)
    if render != "never":
        # A site built in JavaScript, linked from host 0's home page: read only when rendered.
        hosts.append(js_site(f"127.0.0.{2 + n_hosts}"))
        hosts[0].pages["/"] = (
            hosts[0].pages["/"].replace("</ul></nav>", f'<li><a href="{{host:{n_hosts}}}/">birds</a></li></ul></nav>')
        )
    with tempfile.TemporaryDirectory(prefix="politecrawl-demo-") as tmp, DemoWeb(hosts, max_seconds=300) as web:
        db_path = db or str(Path(tmp) / "demo.db")
        click.echo(f"sandbox web: {len(hosts)} hosts on loopback — " + ", ".join(h.base for h in hosts))
        click.echo("  host 1 asks for Crawl-delay: 1; host 0 disallows /private/")
        if render != "never":
            click.echo(f"  host {n_hosts} builds its pages in JavaScript (rendered: --render {render})")
        click.echo("")
        settings = load_settings(
            {
                "db": db_path,
                "min_delay": 0.25,
                "workers": 2,
                "max_time": 55,
                "scope": "any",
                "max_depth": 5,
                "render": render,
            }
        )
        with Progress(enabled=True, max_time=settings.max_time) as progress:
            report = Crawler(settings).run([hosts[0].url("/")], on_progress=progress.update, on_start=progress.start)
        s = report.status
        click.echo(
            f"\ncrawled {plural(s.pages_fetched, 'page')} from {plural(s.hosts, 'host')} with "
            f"{plural(report.requests, 'request')} in {human_duration(report.seconds)}; {s.disallowed} "
            f"disallowed by robots.txt, {report.indexed or 0} indexed"
        )
        private = [path for path in web.paths if path.startswith("/private/")]
        click.echo(f"requests to disallowed paths seen by the servers: {len(private)}")
        queries = [query]
        if render != "never":
            store = open_store(db_path)
            try:
                outcomes = [o or "" for _, o in store.url_states().values()]
            finally:
                store.close()
            rendered = sum("rendered (" in o and "not rendered" not in o for o in outcomes)
            click.echo(f"pages rendered in the browser: {rendered} (their words and links exist only in JavaScript)")
            queries.append("heron kingfisher")  # words only the JavaScript site's JSON has
        searcher = Searcher(index_dir_for(settings))
        for q in queries:
            click.echo(f"\nsearch: {q!r}")
            for i, hit in enumerate(searcher.search(q, limit=5 if q == query else 3), 1):
                click.echo(click.style(f"{i}. {hit.title}", bold=True) + f"  ({hit.score:.3f})")
                click.echo(click.style(f"   {hit.url}", fg="green"))
                click.echo(f"   {hit.snippet[:160]}")
        click.echo("\nnext: politecrawl crawl https://your.site/ --contact https://you.example/bot")
