"""Spend nobody's bandwidth twice: duplicates, canonicals, traps, conditional GET, limits."""

from __future__ import annotations

import gzip
import json
import random
import re
import sqlite3
import time

import pytest

from politecrawl.index import Searcher
from politecrawl.policy.hosts import host_key
from politecrawl.store import open_store

from conftest import crawl, run_cli
from servers.sandbox import Reply, SandboxHost

WORDS = (
    "river mountain forest valley meadow harbour lantern orchard quarry meadowlark thistle "
    "granite saffron copper willow ember falcon juniper marble cedar"
).split()


def article(seed: int, n: int = 3000) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def page(title: str, body: str = "", links=(), head: str = "") -> str:
    a = "".join(f'<a href="{l}">{l}</a> ' for l in links)
    return f"<html><head><title>{title}</title>{head}</head><body><p>{body}</p><nav>{a}</nav></body></html>"


def states(db_path: str) -> dict[str, tuple[str, str | None]]:
    store = open_store(db_path)
    try:
        return store.url_states()
    finally:
        store.close()


def test_same_article_under_many_urls_counts_once(sandbox_factory, tmp_path):
    text = article(1)
    copies = {f"/story/{i}": page("Zanzibar story", text + " zanzibar") for i in range(30)}
    others = {f"/other/{i}": page(f"Other {i}", article(100 + i, 300)) for i in range(3)}
    home = page("Home", "welcome", [*copies, *others])
    many = SandboxHost("127.0.0.2", pages={"/": home} | copies | others)
    single = SandboxHost(
        "127.0.0.3",
        pages={"/": page("Home", "welcome", ["/story/0", *others])} | {"/story/0": copies["/story/0"]} | others,
    )
    sandbox_factory([many, single])
    # Yield monitoring off here: 30 copies would (rightly) pause the host before it is all seen.
    crawl(str(tmp_path / "many.db"), [many.url("/")], max_depth=2, yield_min_pages=0)
    crawl(str(tmp_path / "single.db"), [single.url("/")], max_depth=2, yield_min_pages=0)
    s_many = Searcher(tmp_path / "many.db.index")
    s_single = Searcher(tmp_path / "single.db.index")
    assert s_many.stats()["N"] == s_single.stats()["N"] == 5
    hit_many = s_many.search("zanzibar", explain=True)
    hit_single = s_single.search("zanzibar", explain=True)
    assert len(hit_many) == len(hit_single) == 1
    assert hit_many[0].score == pytest.approx(hit_single[0].score)  # same N, same df, same IDF
    db = sqlite3.connect(tmp_path / "many.db")
    exact = db.execute("SELECT COUNT(*) FROM pages WHERE duplicate_kind = 'exact'").fetchone()[0]
    # After a few copies the /story/{num} template stops yielding new text: the rest are not fetched.
    skipped = db.execute(
        "SELECT COUNT(*) FROM frontier WHERE url LIKE '%/story/%' AND state = 'skipped'"
        " AND outcome LIKE 'URL pattern:%'"
    ).fetchone()[0]
    assert 3 <= exact < 29 and exact + skipped == 29, (exact, skipped)


def test_near_duplicates_are_kept_out(sandbox_factory, db_path):
    text = article(2)
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page("Home", "welcome", ["/a", "/b", "/c"]),
            "/a": page("Original", text + " printed on monday"),
            "/b": page("Reprint", text + " printed on tuesday"),  # one word differs in 3,000
            "/c": page("Different", article(3)),
        },
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    db = sqlite3.connect(db_path)
    kinds = dict(db.execute("SELECT url, duplicate_kind FROM pages"))
    assert kinds[host.url("/b")] == "near" and kinds[host.url("/c")] is None and kinds[host.url("/a")] is None
    assert Searcher(db_path + ".index").stats()["N"] == 3


def test_canonical_link_and_header_make_aliases(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page("Home", "welcome", ["/print?id=1", "/amp/1"]),
            "/print?id=1": page("Print view", "quokka facts", head='<link rel="canonical" href="/article/1">'),
            "/amp/1": Reply(body=page("AMP", "quokka facts amp"), headers={"Link": '</article/1>; rel="canonical"'}),
            "/article/1": page("Article", "quokka facts"),
        },
    )
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    assert sorted(r.path for r in sb.requests(host)) == ["/", "/amp/1", "/article/1", "/print?id=1", "/robots.txt"]
    hits = Searcher(db_path + ".index").search("quokka")
    assert [h.url for h in hits] == [host.url("/article/1")]  # only the canonical is indexed
    db = sqlite3.connect(db_path)
    aliases = dict(db.execute("SELECT url, alias_of FROM pages WHERE alias_of IS NOT NULL"))
    assert aliases == {host.url("/print?id=1"): host.url("/article/1"), host.url("/amp/1"): host.url("/article/1")}


def test_redirect_target_queued_source_alias_and_loops_end(sandbox_factory, db_path):
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page("Home", "welcome", ["/old", "/loop-a"]),
            "/old": Reply(status=301, headers={"Location": "/new"}),
            "/new": page("New home of the wombat", "wombat"),
            "/loop-a": Reply(status=302, headers={"Location": "/loop-b"}),
            "/loop-b": Reply(status=302, headers={"Location": "/loop-a"}),
        },
    )
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    paths = [r.path for r in sb.requests(host)]
    assert sorted(paths) == ["/", "/loop-a", "/loop-b", "/new", "/old", "/robots.txt"]  # each once
    assert [h.url for h in Searcher(db_path + ".index").search("wombat")] == [host.url("/new")]
    assert states(db_path)[host.url("/old")] == ("done", f"http-301 -> {host.url('/new')}")


def _calendar(path: str):
    if path.startswith("/cal/"):
        y, m = map(int, path.split("/")[2:4])
        nxt = (y + (m == 12), m % 12 + 1)
        return Reply(body=page(f"{y}-{m}", "nothing happens", [f"/cal/{nxt[0]}/{nxt[1]}", f"/cal/{y - 1}/{m}"]))
    return None


def test_infinite_calendar_stays_within_budget(sandbox_factory, db_path):
    host = SandboxHost("127.0.0.2", pages={"/": page("Home", "", ["/cal/2024/1"])}, handler=_calendar)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], host_page_budget=25, min_delay=0.01, yield_min_pages=0)
    pages = [r for r in sb.requests(host) if r.path != "/robots.txt"]
    # The second month repeats the first and links the next: the learned template budget ends
    # the calendar there, long before the host's page budget (25) would.
    assert 2 <= len(pages) <= 4, len(pages)
    status = open_store(db_path).status(0)
    assert status.links_not_queued.get("url-pattern", 0) + status.skipped >= 1


def test_faceted_navigation_too_many_params_not_queued(sandbox_factory, db_path):
    filters = {f"f{i}": [f"o{j}" for j in range(6)] for i in range(5)}

    def facets(path: str):
        if not path.startswith("/shop"):
            return None
        params = dict(p.split("=") for p in path.partition("?")[2].split("&") if "=" in p)
        links = []
        for name, options in filters.items():
            for opt in options:
                q = dict(params, **{name: opt}, sort="price", page="1", view="grid")
                links.append("/shop?" + "&".join(f"{k}={v}" for k, v in sorted(q.items())))
        return Reply(body=page("Shop", article(hash(path) % 10_000, 200), links))  # distinct listings

    host = SandboxHost("127.0.0.2", pages={"/": page("Home", "", ["/shop"])}, handler=facets)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.01, max_depth=6, host_page_budget=100)
    reqs = [r for r in sb.requests(host) if r.path != "/robots.txt"]
    assert all(r.path.count("=") <= 5 for r in reqs)  # never more than 5 query parameters
    assert len(reqs) == 100  # the host's page budget holds against 6^5 filter combinations
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT n FROM link_stats WHERE reason = 'too-many-query-params'").fetchone()[0] > 0


def test_session_ids_and_symlink_loops(sandbox_factory, db_path):
    def loops(path: str):
        if path.startswith("/a/"):
            return Reply(body=page("Loop", "again", [path + "b/a/"]))  # /a/b/a/b/a/ …
        if path.startswith("/s/"):
            return Reply(body=page("Session", "sticky", ["/s/;jsessionid=ABC123/next", "/s/page?PHPSESSID=77&x=1"]))
        return None

    host = SandboxHost("127.0.0.2", pages={"/": page("Home", "", ["/a/", "/s/"])}, handler=loops)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.01)
    paths = [r.path for r in sb.requests(host)]
    assert max(p.count("/a/") for p in paths) <= 3  # the loop is cut at the repeated segment
    assert not any("jsessionid" in p.lower() or "phpsessid" in p.lower() for p in paths)
    assert len(paths) < 12


def test_conditional_get_and_compression_on_recrawl(sandbox_factory, db_path):
    pages = {"/": page("Home", "welcome", [f"/p{i}" for i in range(5)])}
    pages |= {f"/p{i}": page(f"Page {i}", article(10 + i, 2000)) for i in range(5)}
    host = SandboxHost("127.0.0.2", pages=pages, conditional=True, compress=True)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], recrawl_after=1, recrawl_min=1)
    first = [r for r in sb.requests(host) if r.path != "/robots.txt"]
    assert all(r.headers.get("Accept-Encoding", "").startswith("gzip") for r in first)
    seq_before = sqlite3.connect(db_path).execute("SELECT MAX(seq) FROM pages").fetchone()[0]
    time.sleep(1.2)
    sb.log.clear()
    crawl(db_path, [], recrawl_after=1, recrawl_min=1)
    second = [r for r in sb.requests(host) if r.path != "/robots.txt"]
    assert sorted(r.path for r in second) == sorted(pages)
    assert all("If-None-Match" in r.headers and r.status == 304 for r in second)
    assert sum(r.bytes for r in second) == 0 < sum(r.bytes for r in first)
    # 304: no re-parse, no re-index — the stored versions did not change.
    assert sqlite3.connect(db_path).execute("SELECT MAX(seq) FROM pages").fetchone()[0] == seq_before


def test_recrawl_replaces_a_changed_page_in_the_index(sandbox_factory, db_path):
    content = {"text": "aardvark"}
    host = SandboxHost(
        "127.0.0.2",
        pages={"/": page("Home", "", ["/news"])},
        handler=lambda p: Reply(body=page("News", content["text"])) if p == "/news" else None,
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/")], recrawl_after=1, recrawl_min=1)
    assert [h.url for h in Searcher(db_path + ".index").search("aardvark")] == [host.url("/news")]
    content["text"] = "platypus"
    time.sleep(1.2)
    crawl(db_path, [], recrawl_after=1, recrawl_min=1)
    searcher = Searcher(db_path + ".index")
    assert searcher.search("aardvark") == []
    assert [h.url for h in searcher.search("platypus")] == [host.url("/news")]
    db = sqlite3.connect(db_path)
    changes, interval = db.execute(
        "SELECT changes, revisit_interval FROM frontier WHERE url = ?", (host.url("/news"),)
    ).fetchone()
    assert changes == 1 and interval == 1.0  # changed: the interval halves (bounded below by recrawl_min)


def test_gzip_bomb_is_cut_off_and_the_crawl_goes_on(sandbox_factory, db_path):
    bomb = gzip.compress(b"<html><body>" + b"A" * (60 * 1024 * 1024) + b"</body></html>", compresslevel=9)
    host = SandboxHost(
        "127.0.0.2",
        pages={
            "/": page("Home", "", ["/bomb", "/fine"]),
            "/bomb": Reply(body=bomb, headers={"Content-Encoding": "gzip"}),
            "/fine": page("Fine", "still crawling"),
        },
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/")], max_page_bytes=1_000_000)
    st = states(db_path)
    assert st[host.url("/bomb")][0] == "done" and "truncated" in st[host.url("/bomb")][1]
    assert st[host.url("/fine")][0] == "done"
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT bytes FROM pages WHERE url = ?", (host.url("/bomb"),)).fetchone()[0] == 1_000_000


def test_yield_monitoring_pauses_a_host_of_duplicates(sandbox_factory, db_path):
    same = page("Same", article(5, 500))
    host = SandboxHost(
        "127.0.0.2",
        handler=lambda p: (
            Reply(
                body=same.replace(
                    "</nav>",
                    "".join(f'<a href="/d/{p.strip("/").replace("/", "-")}-{i}">x</a>' for i in range(3)) + "</nav>",
                )
            )
            if p != "/robots.txt"
            else None
        ),
    )
    sb = sandbox_factory([host])
    # Learned URL patterns off: their template budget (family /d/**) would stop these pages
    # before the yield window fills; this test is about the yield monitoring behind them.
    crawl(db_path, [host.url("/")], min_delay=0.01, yield_min_pages=10, max_time=20, url_patterns=False)
    pages = [r for r in sb.requests(host) if r.path != "/robots.txt"]
    assert 10 <= len(pages) <= 15  # paused soon after the window filled with duplicates
    store = open_store(db_path)
    row = store.hosts()[0]
    store.close()
    assert row.wait_reason == "low-yield" and row.pending > 0  # its URLs are kept


def test_printer_views_stop_being_fetched_once_their_rule_is_learned(sandbox_factory, db_path):
    """/print/article-N (rel=canonical to /article-N) is an alias shape: after a few confirming
    pairs the rule rewrites the remaining print links before they are fetched."""
    n = 16
    pages = {"/": page("Home", "", [link for i in range(n) for link in (f"/article-{i}", f"/print/article-{i}")])}
    for i in range(n):
        body = article(500 + i, 300)
        pages[f"/article-{i}"] = page(f"Article {i}", body)
        pages[f"/print/article-{i}"] = (
            f'<html><head><title>Article {i}</title><link rel="canonical" '
            f'href="/article-{i}"></head><body><p>{body}</p></body></html>'
        )
    host = SandboxHost("127.0.0.2", pages=pages)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.01, workers=1, yield_min_pages=0)
    paths = [r.path for r in sb.requests(host)]
    prints = [p for p in paths if p.startswith("/print/")]
    assert all(f"/article-{i}" in paths for i in range(n))  # every article, once
    assert len(prints) <= 6, prints  # not all 16: the rule took over
    assert len(set(paths)) == len(paths)  # nothing fetched twice
    # `why` shows the rule and its evidence for a print link never fetched.
    last = next(f"/print/article-{i}" for i in reversed(range(n)) if f"/print/article-{i}" not in prints)
    out = run_cli("why", host.url(last), "--db", db_path, "--json")
    assert out.returncode == 0, out.stderr
    learned = json.loads(out.stdout)["url_patterns"]
    assert learned["a link to it now"].startswith(f"rewritten to {host.url(last.replace('/print', ''))}"), learned
    assert learned["alias rules"] >= 1


def _trap_site(path: str):
    """Articles (distinct, long) with an endless events calendar and a faceted shop linked from
    every page; the calendar's months and the shop's filter sets are thin pages that repeat."""
    base, _, query = path.partition("?")
    common = ["/", "/cal/2026/12", "/shop"]
    if base.startswith("/a/") and base[3:].isdigit() and int(base[3:]) < 12:
        n = int(base[3:])
        return Reply(body=page(f"Article {n}", article(700 + n, 400), [f"/a/{(n + 1) % 12}", *common]))
    if base.startswith("/cal/"):
        y, m = map(int, base.split("/")[2:4])
        nxt, prev = (y + (m == 12), m % 12 + 1), (y - (m == 1), (m - 2) % 12 + 1)
        grid = " ".join(["Mon Tue Wed Thu Fri Sat Sun", *map(str, range(1, 31))])
        body = f"Events in {y}-{m}: none scheduled. {grid}. Subscribe to the calendar."
        return Reply(body=page("Events", body, [f"/cal/{nxt[0]}/{nxt[1]}", f"/cal/{prev[0]}/{prev[1]}"]))
    if base == "/shop":
        chosen = [pair for pair in query.split("&") if pair]
        more = [
            f"/shop?{'&'.join([*chosen, f'{f}={v}'])}"
            for f in ("color", "size", "fit")
            for v in "abcdef"
            if not any(c.startswith(f + "=") for c in chosen)
        ]
        listing = " ".join(f"Product {k} in stock" for k in range(8))  # the same few products
        body = f"Shop, filtered by {' '.join(chosen) or 'nothing'}. {listing}. Free delivery over 50."
        return Reply(body=page("Shop", body, more))
    return None


def _control_site(path: str):
    """URLs that look like the traps (a month archive linking the next month, a listing with
    filter-like parameters linking its next page) but every page is distinct and finite."""
    base, _, query = path.partition("?")
    if base == "/":
        return Reply(body=page("Control", "welcome", ["/archive/2025/1", "/list?cat=x&page=1&sort=new"]))
    if base.startswith("/archive/2025/"):
        m = int(base.rsplit("/", 1)[1])
        if 1 <= m <= 10:
            nxt = [f"/archive/2025/{m + 1}"] if m < 10 else []
            return Reply(body=page(f"Archive {m}", article(800 + m, 400), ["/", *nxt]))
    if base == "/list":
        n = int(dict(p.split("=") for p in query.split("&")).get("page", "0"))
        if 1 <= n <= 8:
            nxt = [f"/list?cat=x&page={n + 1}&sort=new"] if n < 8 else []
            return Reply(body=page(f"List {n}", article(900 + n, 400), ["/", *nxt]))
    return None


def test_learned_patterns_stop_traps_before_the_fetch_and_lose_no_real_page(sandbox_factory, db_path):
    """From the servers' logs: a calendar and a faceted shop each stop after their first pages
    repeat, every article is fetched, and the control host loses nothing; `status --hosts`
    shows the budgets that stopped them."""
    traps = SandboxHost(
        "127.0.0.2",
        pages={"/": page("Home", "welcome", [*(f"/a/{n}" for n in range(0, 12, 3)), "/cal/2026/12", "/shop"])},
        handler=_trap_site,
    )
    control = SandboxHost("127.0.0.3", handler=_control_site)
    sb = sandbox_factory([traps, control])
    crawl(db_path, [traps.url("/"), control.url("/")], min_delay=0.01, yield_min_pages=0)
    paths = [r.path for r in sb.requests(traps) if r.path != "/robots.txt"]
    months = [p for p in paths if p.startswith("/cal/")]
    filtered = [p for p in paths if p.startswith("/shop?")]
    assert len(months) <= 2, months  # the second month repeats the first and links the next
    assert len(filtered) <= 3, filtered
    assert {f"/a/{n}" for n in range(12)} <= set(paths)
    assert len(set(paths)) == len(paths)
    control_paths = {r.path for r in sb.requests(control) if r.path != "/robots.txt"}
    expected = (
        {"/"} | {f"/archive/2025/{m}" for m in range(1, 11)} | {f"/list?cat=x&page={n}&sort=new" for n in range(1, 9)}
    )
    assert control_paths == expected

    out = run_cli("status", "--db", db_path, "--hosts", "--rules")
    assert out.returncode == 0, out.stderr
    assert "template /cal/{num}/{num} exhausted" in out.stdout, out.stdout
    assert "family /shop?* exhausted" in out.stdout, out.stdout
    out = run_cli("status", "--db", db_path, "--hosts", "--rules", "--json")
    learned = {h["host"]: h["url_patterns"] for h in json.loads(out.stdout)["host_list"]}
    assert not any("exhausted" in line for line in learned[host_key(control.url("/"))]), learned
    assert any(line.startswith("template /archive/") for line in learned[host_key(control.url("/"))]), learned
    # Without --rules: a count per host, not the rules.
    out = run_cli("status", "--db", db_path, "--hosts")
    assert "template /cal/{num}/{num}" not in out.stdout and "family /shop?*" not in out.stdout, out.stdout
    assert re.search(r"url patterns: .*templates \d+ \(2 exhausted\)", out.stdout) or re.search(
        r"url patterns: .*families \d+ \(\d exhausted\)", out.stdout
    ), out.stdout

    # `why` shows only the rules that apply to its URL: none of the other host's, none of another
    # path's of its own host (the status above lists them all), its own template's.
    def why(url: str) -> str:
        result = run_cli("why", url, "--db", db_path)
        assert result.returncode == 0, result.stderr
        return result.stdout

    control_why = why(control.url("/archive/2025/3"))
    assert "/cal/" not in control_why and "/shop" not in control_why, control_why
    assert "template /archive/{num}/{num}" in control_why, control_why
    article_why = why(traps.url("/a/3"))
    assert "template /cal/{num}/{num}" not in article_why and "family /shop?*" not in article_why, article_why
    assert "/archive/" not in article_why
    month_why = why(traps.url("/cal/2031/5"))
    assert "template /cal/{num}/{num} exhausted" in month_why, month_why
    assert "family /shop?*" not in month_why and "/archive/" not in month_why
    shop_why = why(traps.url("/shop?color=z&size=q"))
    assert "family /shop?* exhausted" in shop_why and "/cal/" not in shop_why, shop_why


def test_session_token_in_the_path_costs_no_duplicate_fetch(sandbox_factory, db_path):
    """Every answer mints a new token into its links (/s/<token>/a/N), and the server serves a
    page with or without it: the crawl learns the token from two pages, fetches each article
    once, and the one it fetched under a token is not fetched again without it."""
    counter = iter(range(10_000))

    def site(path: str):
        token = f"k{next(counter):04d}x9z{random.Random(path).randrange(10**6):06d}"  # digits and letters
        parts = path.strip("/").split("/")
        if len(parts) >= 2 and parts[0] == "s":
            parts = parts[2:]  # the token is ignored
        n = int(parts[1]) if len(parts) == 2 and parts[0] == "a" and parts[1].isdigit() else None
        links = [f"/s/{token}/", *(f"/s/{token}/a/{m}" for m in range(10) if m != n)]
        if parts in ([], [""]):
            return Reply(body=page("Home", "welcome", links))
        if n is not None and n < 10:
            return Reply(body=page(f"Article {n}", article(1000 + n, 400), links))
        return None

    host = SandboxHost("127.0.0.2", handler=site)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.01, yield_min_pages=0)
    paths = [r.path for r in sb.requests(host) if r.path != "/robots.txt"]
    articles = [p.rsplit("/a/", 1)[1] for p in paths if "/a/" in p]
    assert sorted(articles) == [str(n) for n in range(10)], paths  # each article once
    assert len(paths) <= 12, paths  # the home page once or twice, nothing else


def test_pages_crawled_without_revisits_are_revisited_once_a_crawl_asks_for_them(sandbox_factory, db_path):
    """A crawl without --recrawl-after, then one with it (what the README says to do): every page
    is due recrawl_after after its fetch. They had no revisit time, and were never asked for again."""
    pages = {"/": page("Home", "welcome", ["/a", "/b"]), "/a": page("A", "alpha"), "/b": page("B", "beta")}
    host = SandboxHost("127.0.0.5", pages=pages)
    sb = sandbox_factory([host])
    crawl(db_path, [host.url("/")])
    time.sleep(1.2)
    sb.log.clear()
    crawl(db_path, [], recrawl_after=1, recrawl_min=1)
    assert sorted(r.path for r in sb.requests(host) if r.path != "/robots.txt") == ["/", "/a", "/b"]


def test_a_dead_link_is_revisited_less_and_less_often(sandbox_factory, db_path):
    """A 404 is asked for at twice the interval each time, like a page that did not change; a 410
    ("gone", likely for good) at the longest interval. They were asked for at the base interval for
    ever: a request a day, per dead link, with --recrawl-after 1d."""
    pages = {"/": page("Home", "welcome", ["/missing", "/gone"]), "/gone": Reply(status=410, body="gone")}
    host = SandboxHost("127.0.0.6", pages=pages)
    sb = sandbox_factory([host])
    flags = {"recrawl_after": 1, "recrawl_min": 1, "recrawl_max": 3600}
    crawl(db_path, [host.url("/")], **flags)
    time.sleep(1.2)
    crawl(db_path, [], **flags)
    fetched = sorted(r.path for r in sb.requests(host) if r.path != "/robots.txt")
    assert fetched == ["/", "/", "/gone", "/missing", "/missing"]  # /gone not again within the hour
    db = sqlite3.connect(db_path)
    interval = dict(db.execute("SELECT url, revisit_interval FROM frontier"))
    assert interval[host.url("/missing")] == 2.0  # a revisit that found nothing new: doubled
    assert interval[host.url("/gone")] == 3600.0  # the longest, from its first answer


def test_an_index_left_by_an_earlier_store_is_rebuilt_not_searched(sandbox_factory, tmp_path):
    """``rm politecrawl.db`` leaves ``politecrawl.db.index`` behind: the next crawl's index is this
    store's alone. Kept, a search found the old crawl's pages, which this store never fetched."""
    old = SandboxHost("127.0.0.7", pages={"/": page("Old", "wombat")})
    new = SandboxHost("127.0.0.8", pages={"/": page("New", "numbat")})
    sandbox_factory([old, new])
    db = tmp_path / "crawl.db"
    crawl(str(db), [old.url("/")])
    assert [h.url for h in Searcher(str(db) + ".index").search("wombat")] == [old.url("/")]
    for leftover in tmp_path.glob("crawl.db*"):
        if leftover.is_file():
            leftover.unlink()  # the store goes; its index folder stays
    crawl(str(db), [new.url("/")])
    searcher = Searcher(str(db) + ".index")
    assert searcher.search("wombat") == []
    assert [h.url for h in searcher.search("numbat")] == [new.url("/")]


def test_a_page_robots_txt_disallows_later_leaves_the_index(sandbox_factory, db_path):
    """A revisit finds the page disallowed now: it is not asked for, and it leaves the search (the
    site owner wants it out). It stayed searchable, and exported, for ever."""
    rules = {"robots": "User-agent: *\nAllow: /\n"}
    pages = {"/": page("Home", "welcome", ["/p2"]), "/p2": page("Two", "quokka")}

    def robots(path: str) -> Reply | None:
        return Reply(body=rules["robots"], content_type="text/plain") if path == "/robots.txt" else None

    host = SandboxHost("127.0.0.9", pages=pages, handler=robots)
    sb = sandbox_factory([host])
    flags = {"recrawl_after": 1, "recrawl_min": 1, "robots_ttl": 1}
    crawl(db_path, [host.url("/")], **flags)
    assert [h.url for h in Searcher(db_path + ".index").search("quokka")] == [host.url("/p2")]
    rules["robots"] = "User-agent: *\nDisallow: /p2\n"
    time.sleep(1.2)
    sb.log.clear()
    crawl(db_path, [], **flags)
    assert "/p2" not in [r.path for r in sb.requests(host)]
    assert Searcher(db_path + ".index").search("quokka") == []
    assert states(db_path)[host.url("/p2")][0] == "disallowed"
