"""What a page's text costs and what it holds: politecrawl's main-content extraction, the
whole page, and the text step as it was before.

Corpus: Debian's python3-doc HTML (``/usr/share/doc/python3*/html``, ``apt-get install -y
python3-doc``: large pages, 96 KB on average), or with ``--realistic N`` the first N pages of
the crawl benchmark's web (``sandbox.RealisticPages``, 10–30 KB: what ``bench_crawl.py``
crawls). For each page, in the same run, alternating the variants page by page (each page
starting with the next one) so that a busy machine slows them alike:

* ``parse_html`` (links, title, robots directives and text: what the crawler calls per
  page), with main-content extraction (the default) and with ``main_content=False`` (every
  visible word);
* ``parse_html`` of ``--before REV`` (default: the last revision before main-content
  extraction), its ``parse.py`` read from git and loaded as a module;
* with ``--libraries``: trafilatura, readability-lxml and jusText where installed (each
  given the page's bytes; none of them extracts links), for their cost per page.

Printed: mean and median ms per page, characters of text per page, how many pages fell back
to their whole text, and the duplicates each text would give the crawler: exact (same
``text_fingerprint``) and near (SimHash Hamming distance <= 3, the store's threshold) pairs.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_extract.py [--rounds 3] [--libraries] [--realistic N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' servers (servers.sites …)

from bench_search import find_python_docs  # noqa: E402

from politecrawl.content.dedup import NEAR_DISTANCE, hamming, simhash, text_fingerprint  # noqa: E402
from politecrawl.content.parse import parse_html  # noqa: E402

from servers.sites import bench_hosts  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: The last revision whose parse.py took the whole page's text (nav, footer, aside left out).
BEFORE = "76ba464"


def load_parse_at(rev: str) -> types.ModuleType:
    """politecrawl/parse.py as it was at ``rev`` (it imports nothing of politecrawl there)."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:src/politecrawl/parse.py"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType(f"parse_at_{rev}")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(source, f"{rev}:parse.py", "exec"), module.__dict__)
    return module


def libraries() -> dict[str, Callable[[bytes], str]]:
    found: dict[str, Callable[[bytes], str]] = {}
    try:
        import trafilatura

        found["trafilatura"] = lambda raw: trafilatura.extract(raw.decode("utf-8", "replace")) or ""
    except ImportError:
        print("  trafilatura: not installed")
    try:
        from readability import Document
        from selectolax.lexbor import LexborHTMLParser

        def readability(raw: bytes) -> str:
            tree = LexborHTMLParser(Document(raw).summary())
            return tree.body.text(separator=" ") if tree.body is not None else ""

        found["readability-lxml"] = readability
    except ImportError:
        print("  readability-lxml: not installed")
    try:
        import justext

        stop = justext.get_stoplist("English")
        found["jusText"] = lambda raw: " ".join(p.text for p in justext.justext(raw, stop) if not p.is_boilerplate)
    except ImportError:
        print("  jusText: not installed")
    return found


def realistic_pages(n: int) -> list[tuple[bytes, str]]:
    """The first ``n`` pages the crawl benchmark's web serves: pages 0, 1, … of 100 hosts."""
    hosts = bench_hosts(100, realistic=True)
    for host in hosts:
        host.port = 8000  # links to other hosts name it; nothing is served
    pages = []
    for k in range(-(-n // len(hosts))):
        for host in hosts:
            assert host.handler is not None
            reply = host.handler(f"/p/{k}")
            assert reply is not None and isinstance(reply.body, str)
            pages.append((reply.body.encode(), host.url(f"/p/{k}")))
    return pages[:n]


def duplicates(texts: list[str]) -> tuple[int, int]:
    """(pairs with the same fingerprint, pairs within NEAR_DISTANCE of each other's SimHash)."""
    prints = [text_fingerprint(t) for t in texts if t]
    hashes = [simhash(t) for t in texts if t]
    exact = sum(prints[i] == prints[j] for i in range(len(prints)) for j in range(i + 1, len(prints)))
    near = sum(
        hamming(hashes[i], hashes[j]) <= NEAR_DISTANCE for i in range(len(hashes)) for j in range(i + 1, len(hashes))
    )
    return exact, near


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="passes over the corpus (timings: the best pass)")
    ap.add_argument("--before", default=BEFORE, help=f"revision whose parse.py is the 'before' row (default {BEFORE})")
    ap.add_argument("--libraries", action="store_true", help="also time trafilatura, readability-lxml, jusText")
    ap.add_argument("--realistic", type=int, metavar="N", help="the crawl benchmark's pages (N of them) instead")
    args = ap.parse_args(argv)

    if args.realistic:
        pages, where = realistic_pages(args.realistic), "the crawl benchmark's web (RealisticPages)"
    else:
        root = find_python_docs()
        if root is None:
            sys.exit("python3-doc HTML not found: apt-get install -y python3-doc")
        files = sorted(root.rglob("*.html"))
        pages = [(p.read_bytes(), "https://docs.python.org/3/" + str(p.relative_to(root))) for p in files]
        where = f"python3-doc at {root}"
    before = load_parse_at(args.before)
    variants: dict[str, Callable[[bytes, str], str]] = {
        "parse_html, main content (default)": lambda raw, url: parse_html(raw, url).text,
        "parse_html, whole page (main_content=False)": lambda raw, url: parse_html(raw, url, main_content=False).text,
        f"parse_html at {args.before} (before)": lambda raw, url: before.parse_html(raw, url).text,
    }
    if args.libraries:
        for name, extract in libraries().items():
            variants[name] = lambda raw, url, extract=extract: extract(raw)
    print(
        f"corpus: {len(pages)} pages of {where}, "
        f"{sum(len(r) for r, _ in pages) / len(pages) / 1000:.1f} KB of HTML each on average; "
        f"{args.rounds} rounds (the best one's times), the variants alternating page by page; "
        f"python {sys.version.split()[0]}"
    )
    best: dict[str, list[float]] = {}
    texts: dict[str, list[str]] = {name: [] for name in variants}
    for round_ in range(args.rounds):
        times: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for i, (raw, url) in enumerate(pages):
            # Each page starts with another variant: the first to touch a page's bytes pays
            # for bringing them into the cache.
            for name in names[i % len(names) :] + names[: i % len(names)]:
                run = variants[name]
                t0 = time.perf_counter()
                text = run(raw, url)
                times[name].append(time.perf_counter() - t0)
                if round_ == 0:
                    texts[name].append(" ".join(text.split()))
        for name, t in times.items():
            if name not in best or sum(t) < sum(best[name]):
                best[name] = t

    whole = texts["parse_html, whole page (main_content=False)"]
    main_ = texts["parse_html, main content (default)"]
    fell_back = sum(m == w for m, w in zip(main_, whole, strict=True))
    print("\n| text | mean ms/page | median ms/page | chars of text/page | exact dup pairs | near dup pairs |")
    print("|---|---|---|---|---|---|")
    for name in variants:
        t = best[name]
        exact, near = duplicates(texts[name])
        chars = sum(map(len, texts[name])) / len(pages)
        print(
            f"| {name} | {1000 * sum(t) / len(t):.3f} | {1000 * statistics.median(t):.3f} | {chars:,.0f} "
            f"| {exact} | {near} |"
        )
    print(f"\npages whose main content is their whole text (no boilerplate found, or none left): {fell_back}")


if __name__ == "__main__":
    main()
