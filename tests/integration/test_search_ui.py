"""What a person meets on the search page, tested from the outside on a real ``serve`` process.

The index (built with ``IndexWriter``, as the indexer writes it: kind, language and date per page)
holds one large site whose titles all end in the same suffix and five small ones; the filters,
the grouping, the facets, the suggestions and the OpenSearch description are asked for over
HTTP and the answers compared with what the corpus below says they must be. Each check has its
control: the same request without the filter (or with ``group=0``, or a word spelled right)
shows what the check would catch. A real Chromium (``browser``) loads the page at a desktop and
a phone width through the DevTools protocol (which the page's CSP does not govern) and measures
it; the control of the overflow check is the same measure on the page made wider on purpose.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import threading
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import quote

import pytest

from politecrawl.index import IndexWriter
from politecrawl.store import open_store

from conftest import crawl, run_cli, start_cli

SUFFIX = " — Big Docs 3.1 manual"


def _corpus() -> list[dict]:
    """The pages: url, title, body, kind, lang, date."""
    docs = []
    for i in range(12):  # the large site: every title ends in SUFFIX
        docs.append(
            {
                "url": f"https://www.big.example/guide/part-{i:02d}/page.html",
                "title": f"Compost topic {i}{SUFFIX}",
                "body": f"Installing ¶ compost heaps of compost, chapter {i}. "
                + ("The telescope sees the heap. " if i < 4 else "")
                + ("marmalade or jam. " if i == 5 else ""),
                "kind": "pdf" if i < 3 else "html",
                "lang": "en",
                "date": f"{2020 + i % 4}-0{1 + i % 9}-15",
            }
        )
    small = [
        ("s1.example", "html", "en", "2023-05-01"),
        ("s2.example", "html", "de", "2024-02-10"),
        ("s3.example", "pdf", "en", "2025-01-15"),
        ("s4.example", "txt", "fr", "2019-11-30"),
        ("s5.example", "html", "", ""),  # nothing known: as a page indexed before format 8
    ]
    for host, kind, lang, date in small:
        for j in range(2):
            docs.append(
                {
                    "url": f"https://{host}/p{j}",
                    "title": f"{host} note {j}",
                    "body": "A short note on compost" + (" with a telescope" if host == "s1.example" else "") + ".",
                    "kind": kind,
                    "lang": lang,
                    "date": date,
                }
            )
    return docs


DOCS = _corpus()
HOST = re.compile(r"https://(?:www\.)?([^/]+)/")


def _host(url: str) -> str:
    m = HOST.match(url)
    assert m
    return m.group(1)


def _get(base: str, path: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(base + path, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _json(base: str, path: str):
    code, headers, body = _get(base, path)
    assert code == 200, body[:500]
    return json.loads(body)


def _urls(base: str, query: str, **params: str) -> list[str]:
    extra = "".join(f"&{k}={v}" for k, v in params.items())
    data = _json(base, f"/api/search?q={quote(query)}&limit=100{extra}")
    return [h["url"] for h in data["hits"]]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp: Path = tmp_path_factory.mktemp("ui")
    db = tmp / "x.db"
    open_store(str(db)).close()
    with IndexWriter(tmp / "x.db.index") as writer:
        for d in DOCS:
            writer.add_document(d["url"], d["title"], d["body"], kind=d["kind"], lang=d["lang"], date=d["date"])
    proc = start_cli("serve", "--db", str(db), "--port", "0")
    try:
        timer = threading.Timer(30, proc.kill)
        timer.start()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        timer.cancel()
        assert m
        yield m.group(0).rstrip("/"), db
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=20)
        except Exception:
            proc.kill()
            proc.wait(10)


# -- filters ------------------------------------------------------------------------------


FILTERS = [
    ("filetype:pdf", lambda d: d["kind"] == "pdf"),
    ("type:html", lambda d: d["kind"] == "html"),
    ("filetype:pdf type:txt", lambda d: d["kind"] in ("pdf", "txt")),
    ("lang:de", lambda d: d["lang"] == "de"),
    ("lang:en-GB", lambda d: d["lang"] == "en"),
    ("after:2023", lambda d: d["date"] >= "2023-01-01"),
    ("before:2021-06", lambda d: d["date"] and d["date"] < "2021-06-01"),
    ("after:2022-01-01 before:2024", lambda d: "2022-01-01" <= d["date"] < "2024-01-01"),
    ("site:big.example", lambda d: "big.example" in d["url"]),
    ("lang:en filetype:html after:2021", lambda d: d["lang"] == "en" and d["kind"] == "html" and d["date"] >= "2021"),
]


@pytest.mark.parametrize("operators, keep", FILTERS, ids=[f for f, _ in FILTERS])
def test_each_filter_keeps_exactly_its_pages(server, operators, keep):
    base, _ = server
    everything = set(_urls(base, "compost", group="0"))
    assert everything == {d["url"] for d in DOCS}  # control: without the filter, every page
    expected = {d["url"] for d in DOCS if keep(d)}
    assert expected and expected < everything  # the filter has something to keep and to drop
    assert set(_urls(base, f"compost {operators}", group="0")) == expected
    assert _json(base, f"/api/search?q={quote('compost ' + operators)}")["total"] == len(expected)


def test_or_between_words_is_no_word(server):
    base, _ = server
    telescope = {d["url"] for d in DOCS if "telescope" in d["body"]}
    marmalade = {d["url"] for d in DOCS if "marmalade" in d["body"]}
    assert set(_urls(base, "telescope OR marmalade", group="0")) == telescope | marmalade
    assert set(_urls(base, "telescope OR", group="0")) == telescope  # OR alone adds nothing
    # control: lower-case "or" is a word, and a page holds it
    assert set(_urls(base, "telescope or", group="0")) == telescope | {d["url"] for d in DOCS if " or " in d["body"]}


def test_an_invalid_filter_value_is_read_as_words(server):
    base, _ = server
    assert _json(base, "/api/search?q=" + quote("compost lang:!!"))["total"] == len(DOCS)
    assert _json(base, "/api/search?q=" + quote("after:yesterday"))["total"] == 0  # words no page holds


def test_the_command_line_takes_the_same_filters(server):
    _, db = server
    out = run_cli("search", "compost filetype:pdf", "--db", str(db), "--json", "--limit", "100")
    assert out.returncode == 0, out.stderr
    assert {h["url"] for h in json.loads(out.stdout)} == {d["url"] for d in DOCS if d["kind"] == "pdf"}
    out = run_cli("search", "compost", "--db", str(db), "--json", "--limit", "10", "--per-site", "2")
    hosts = [_host(h["url"]) for h in json.loads(out.stdout)]
    assert max(hosts.count(h) for h in hosts) == 2
    out = run_cli("search", "compost", "--db", str(db), "--json", "--limit", "10")  # control: not grouped
    hosts = [_host(h["url"]) for h in json.loads(out.stdout)]
    assert max(hosts.count(h) for h in hosts) > 2
    out = run_cli("search", "telescpe", "--db", str(db))
    assert out.returncode == 0 and "did you mean: telescope" in out.stdout


# -- grouping -----------------------------------------------------------------------------


def test_a_page_holds_two_results_of_a_site_while_others_can_fill_it(server):
    base, _ = server
    pages = [_json(base, f"/api/search?q=compost&page={p}") for p in (1, 2, 3)]
    first = [_host(h["url"]) for h in pages[0]["hits"]]
    assert len(first) == 10 and max(first.count(h) for h in first) == 2
    assert all(h["more_from_site"] for h in pages[0]["hits"] if _host(h["url"]) == "big.example")
    assert not any(h["more_from_site"] for h in pages[0]["hits"] if _host(h["url"]) != "big.example")
    # every match on exactly one page
    shown = [h["url"] for p in pages for h in p["hits"]]
    assert len(shown) == len(set(shown)) == len(DOCS) == pages[0]["total"]
    # control: not grouped, the large site fills the first page
    ranked = [_host(h["url"]) for h in _json(base, "/api/search?q=compost&group=0")["hits"]]
    assert ranked.count("big.example") > 2
    # the results page links to the rest of the site
    html = _get(base, "/search?q=compost")[2].decode()
    assert html.count('class="more"') == 1  # under the site's last hit on the page
    assert '<a class="more" href="/search?q=compost+site%3Abig.example">More from big.example' in html


def test_one_sites_matches_are_not_grouped(server):
    base, _ = server
    grouped = _urls(base, "compost site:big.example")
    assert len(grouped) == 12 and grouped == _urls(base, "compost site:big.example", group="0")


# -- facets -------------------------------------------------------------------------------


def test_facet_counts_are_the_counts_of_the_narrowed_queries(server):
    base, _ = server
    facets = _json(base, "/api/facets?q=compost")
    assert facets["total"] == len(DOCS) and sum(facets["site"].values()) == len(DOCS)
    assert facets["site"]["big.example"] == 12 and len(set(facets["site"].values())) > 1
    assert facets["type"] == {"html": 15, "pdf": 5, "txt": 2}
    assert facets["lang"] == {"en": 16, "de": 2, "fr": 2}  # s5.example's language is unknown: no value
    for key in ("site", "type", "lang"):
        for value, n in facets[key].items():
            assert _json(base, f"/api/search?q={quote(f'compost {key}:{value}')}&limit=1")["total"] == n, (key, value)
    # the page shows them as links narrowing the query, with the same counts
    html = _get(base, "/search?q=compost")[2].decode()
    links = re.findall(r'<a href="(/search\?q=[^"]+)" data-count="(\d+)">', html)
    assert ("/search?q=compost+site%3As3.example", "2") in links
    assert ("/search?q=compost+type%3Apdf", "5") in links
    assert ("/search?q=compost+lang%3Ade", "2") in links
    for href, n in links:
        page = _get(base, href.replace("&amp;", "&"))[2].decode()
        assert re.search(rf"(?<![\d,]){n} results?\b", re.sub(r"<[^>]+>", " ", page)), href
    # control: a query matching one site's pages shows no site facet (nothing to narrow)
    assert "facet-site" not in _get(base, "/search?q=compost+site%3Abig.example")[2].decode()


# -- suggestions --------------------------------------------------------------------------


def test_a_misspelled_word_gets_the_indexed_word(server):
    base, _ = server
    html = _get(base, "/search?q=telescpe")[2].decode()
    assert 'Did you mean <a href="/search?q=telescope">telescope</a>?' in html
    assert _json(base, "/api/facets?q=" + quote("telescpe filetype:pdf"))["suggestion"] == "telescope filetype:pdf"
    # control: spelled right, no suggestion
    assert "Did you mean" not in _get(base, "/search?q=telescope")[2].decode()
    assert _json(base, "/api/facets?q=telescope")["suggestion"] is None


def test_completion_of_the_last_word(server):
    base, _ = server
    assert _json(base, "/api/suggest?q=tele") == ["tele", ["telescope"]]
    assert _json(base, "/api/suggest?q=" + quote("heap tele")) == ["heap tele", ["heap telescope"]]
    assert _json(base, "/api/suggest?q=co")[1][0] == "compost"  # the most frequent first
    assert _json(base, "/api/suggest?q=zzqx") == ["zzqx", []]  # control: nothing begins so


def test_opensearch_description(server):
    base, _ = server
    code, headers, body = _get(base, "/opensearch.xml")
    assert code == 200 and headers["Content-Type"].startswith("application/opensearchdescription+xml")
    root = ET.fromstring(body)
    ns = {"os": "http://a9.com/-/spec/opensearch/1.1/"}
    assert root.tag == "{http://a9.com/-/spec/opensearch/1.1/}OpenSearchDescription"
    urls = {u.get("type"): u.get("template") for u in root.findall("os:Url", ns)}
    assert urls["text/html"] == f"{base}/search?q={{searchTerms}}"
    assert urls["application/x-suggestions+json"] == f"{base}/api/suggest?q={{searchTerms}}"
    # the templates work as a browser fills them
    assert "compost" in _get(base, urls["text/html"].replace(base, "").replace("{searchTerms}", "compost"))[2].decode()
    assert _json(base, urls["application/x-suggestions+json"].replace(base, "").replace("{searchTerms}", "tele"))[1]
    for path in ("/", "/search?q=compost", "/help", "/bot"):
        page = _get(base, path)[2].decode()
        assert '<link rel="search" type="application/opensearchdescription+xml"' in page, path
        assert 'href="/opensearch.xml"' in page


# -- the page -----------------------------------------------------------------------------


def test_titles_snippets_breadcrumbs_favicon_and_help(server):
    base, _ = server
    html = _get(base, "/search?q=" + quote("compost site:big.example"))[2].decode()
    # the suffix every page of the site repeats is gone; the whole title is on hover
    assert re.search(r'title="Compost topic 0 — Big Docs 3\.1 manual">Compost topic 0</a>', html)
    assert ">Compost topic 0 — Big" not in html
    # control: the suffix is in the index (the API gives the title whole)
    assert _json(base, "/api/search?q=" + quote("topic 0 site:big.example"))["hits"][0]["title"].endswith(SUFFIX)
    # snippets without the heading anchor mark; control: the stored text has it
    assert "¶" not in html
    assert "¶" in _json(base, "/api/search?q=installing")["hits"][0]["snippet"]
    # the URL as breadcrumbs
    assert (
        '<span class="crumb">big.example</span><span class="sep"> › </span><span class="crumb">guide</span>'
        '<span class="sep"> › </span><span class="crumb">part-00</span>' in html
    )
    code, headers, icon = _get(base, "/favicon.ico")
    assert code == 200 and headers["Content-Type"] == "image/x-icon" and icon[:4] == b"\x00\x00\x01\x00"
    text = re.sub(r"<[^>]+>", " ", _get(base, "/help")[2].decode())
    for op in ("filetype:KIND", "lang:CODE", "after:DATE", "before:DATE", "a OR b", "More from this site"):
        assert op in text, op


# -- a real browser (DevTools protocol) --------------------------------------------------------


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install -y chromium) and CI is set")
        pytest.skip("chromium is not installed (apt-get install -y chromium); the browser test needs it")
    return path


async def _devtools(profile: Path, url: str, width: int, height: int, shot: Path, steps) -> dict:
    """Load ``url`` in headless Chromium at ``width`` x ``height``, run each ``(name, js)`` of
    ``steps`` (DevTools' Runtime.evaluate, awaited) and keep a screenshot in ``shot``."""
    import aiohttp

    proc = await asyncio.create_subprocess_exec(
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and port_file.read_text().count("\n") >= 1:
                break
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split("\n")[0])
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                target = next(t for t in await r.json() if t["type"] == "page")
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                seq = 0

                async def call(method: str, **params):
                    nonlocal seq
                    seq += 1
                    await ws.send_json({"id": seq, "method": method, "params": params})
                    while True:
                        msg = await ws.receive_json(timeout=60)
                        if msg.get("id") == seq:
                            assert "error" not in msg, msg
                            return msg["result"]
                        if msg.get("method") == "Page.loadEventFired":
                            loaded.set()

                loaded = asyncio.Event()
                await call("Page.enable")
                await call(
                    "Emulation.setDeviceMetricsOverride",
                    width=width,
                    height=height,
                    deviceScaleFactor=1,
                    mobile=width < 600,
                )
                await call("Page.navigate", url=url)
                while not loaded.is_set():
                    msg = await ws.receive_json(timeout=60)
                    if msg.get("method") == "Page.loadEventFired":
                        loaded.set()
                out = {}
                for name, js in steps:
                    res = await call("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
                    out[name] = res["result"].get("value")
                    if name == "before-wider":
                        shot.write_bytes(base64.b64decode((await call("Page.captureScreenshot"))["data"]))
                return out
    finally:
        proc.kill()
        await proc.wait()


#: What the page is measured for (each a JS expression; DevTools' evaluation is not the page's
#: script, so the CSP allows it).
_MEASURE = [
    ("overflow", "document.documentElement.scrollWidth - window.innerWidth"),
    ("facets", "document.querySelectorAll('nav.facets .facet a').length"),
    ("crumbs", "document.querySelectorAll('.crumbs .crumb').length"),
    ("results", "document.querySelectorAll('ol.results > li').length"),
    ("mark_weight", "getComputedStyle(document.querySelector('mark')).fontWeight"),
    (
        "completions",
        """new Promise(done => {
             const box = document.querySelector('input[data-suggest]');
             box.value = 'tele';
             box.dispatchEvent(new Event('input'));
             setTimeout(() => done(Array.from(document.getElementById(box.getAttribute('list')).options)
                                   .map(o => o.value)), 1500);
           })""",
    ),
    ("before-wider", "1"),
    # control of the overflow check: the page made wider than the window on purpose
    (
        "overflow_control",
        "document.body.insertAdjacentHTML('beforeend', '<div style=\"width:3000px\">x</div>');"
        " document.documentElement.scrollWidth - window.innerWidth",
    ),
]


@pytest.mark.browser
@pytest.mark.parametrize("width, height", [(1280, 900), (412, 900)], ids=["desktop", "phone"])
def test_the_page_in_a_real_browser(server, tmp_path, width, height):
    base, _ = server
    shot = tmp_path / f"results-{width}.png"
    profile = tmp_path / "profile"
    profile.mkdir()
    url = f"{base}/search?q=" + quote("compost heaps")
    got = asyncio.run(asyncio.wait_for(_devtools(profile, url, width, height, shot, _MEASURE), 120))
    assert got["overflow"] <= 0, got
    assert got["overflow_control"] > 0, got  # the check sees an overflow where there is one
    assert got["facets"] >= 6 and got["results"] == 10, got
    assert got["crumbs"] >= 20, got  # host and path parts of each of the 10
    assert got["mark_weight"] in ("600", "bold"), got
    assert got["completions"] == ["telescope"], got
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == width
    keep = os.environ.get("POLITECRAWL_SCREENSHOT_DIR")
    if keep:  # for a person to look at
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


# -- from a real crawl ------------------------------------------------------------------------


def test_a_crawl_gives_the_index_each_pages_type_language_and_date(sandbox_factory, db_path, tmp_path):
    """The indexer takes kind, language and date from what the crawl stored: the content type,
    ``<html lang>``, and ``Last-Modified`` (else the day of the fetch)."""
    from servers.documents import tiny_pdf
    from servers.sandbox import Reply, SandboxHost

    def page(title: str, lang: str, links=()) -> str:
        anchors = "".join(f'<a href="{u}">{u}</a>' for u in links)
        return (
            f'<html lang="{lang}"><title>{title}</title><body><p>{title}: marmalade recipes</p>{anchors}</body></html>'
        )

    host = SandboxHost(
        "127.0.0.183",
        pages={
            "/": page("Home", "en", ["/de", "/report.pdf", "/notes.txt", "/old"]),
            "/de": page("Startseite", "de-AT"),
            "/old": Reply(body=page("Old page", "en"), headers={"Last-Modified": "Tue, 03 Mar 2015 10:00:00 GMT"}),
            "/report.pdf": Reply(
                body=tiny_pdf("Marmalade annual report", "Annual Report"), content_type="application/pdf"
            ),
            "/notes.txt": Reply(body="Field notes\nthe marmalade inventory", content_type="text/plain; charset=utf-8"),
        },
    )
    sandbox_factory([host])
    crawl(db_path, [host.url("/")], min_delay=0.05, workers=1)

    def urls(q: str) -> set[str]:
        out = run_cli("search", q, "--db", db_path, "--json", "--limit", "50", cwd=str(tmp_path))
        assert out.returncode == 0, out.stderr
        return {h["url"] for h in json.loads(out.stdout)}

    everything = {host.url(p) for p in ("/", "/de", "/old", "/report.pdf", "/notes.txt")}
    assert urls("marmalade") == everything  # control: the filters' pages and the others
    assert urls("marmalade filetype:pdf") == {host.url("/report.pdf")}
    assert urls("marmalade type:txt") == {host.url("/notes.txt")}
    assert urls("marmalade type:html") == {host.url(p) for p in ("/", "/de", "/old")}
    assert urls("marmalade lang:de") == {host.url("/de")}
    assert urls("marmalade before:2016") == {host.url("/old")}  # its Last-Modified
    assert urls("marmalade after:2016") == everything - {host.url("/old")}  # the others: fetched today
