"""What reading a page's text by one walk in C (``content/treetext.py``) saves ``parse_html``
against reading it by unwrapping the inline elements (``maintext.join_inline``, what runs
without the C module), in the same process.

Corpus: the first N pages of the crawl benchmark's web (``sandbox.RealisticPages``, 10–30 KB),
and with ``--html-dir`` up to ``--files`` HTML files found under a directory (documentation
pages, say). Each round times one pass over the corpus with the unwrap path and one with the
walk, in turn (CPU time of the process: a shared machine slows both alike within a round);
printed: the median of the rounds for each, and the median of the rounds' ratios. Every
page's ``Page`` is compared between the two first: the walk must not change a word.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_treetext.py [--realistic 300] [--rounds 9] [--html-dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_extract import realistic_pages  # noqa: E402

from politecrawl.content import compiled, maintext  # noqa: E402
from politecrawl.content.parse import parse_html  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--realistic", type=int, default=300, metavar="N", help="the crawl benchmark's pages (N)")
    ap.add_argument("--html-dir", type=Path, help="also the HTML files under this directory")
    ap.add_argument("--files", type=int, default=100, help="of which this many, spread over the sorted list")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args(argv)

    walk = compiled.tree_text
    if walk is None or maintext._INLINE_IDS is None:
        sys.exit("the compiled walk does not run here (_dedup not built, turned off, or lexbor's layout not matched)")
    pages = realistic_pages(args.realistic)
    if args.html_dir:
        files = sorted(p for p in args.html_dir.rglob("*.html") if p.stat().st_size > 2000)
        step = max(1, len(files) // max(1, args.files))
        pages += [(p.read_bytes(), f"https://docs.example/{p.relative_to(args.html_dir)}") for p in files[::step]]

    def run(tree_text: object) -> float:
        compiled.tree_text = tree_text  # type: ignore[assignment]
        start = time.process_time()
        for raw, url in pages:
            parse_html(raw, url)
        return (time.process_time() - start) / len(pages) * 1000

    for raw, url in pages:
        compiled.tree_text = None
        reference = parse_html(raw, url)
        compiled.tree_text = walk
        if parse_html(raw, url) != reference:
            sys.exit(f"{url}: the walk's Page differs from the unwrap path's")
    unwrap: list[float] = []
    walked: list[float] = []
    for _ in range(args.rounds):
        unwrap.append(run(None))
        walked.append(run(walk))
    compiled.tree_text = walk
    ratios = sorted(w / u for u, w in zip(unwrap, walked, strict=True))
    print(
        f"{len(pages)} pages, {sum(len(r) for r, _ in pages) / len(pages) / 1000:.1f} KB of HTML each on average; "
        f"{args.rounds} rounds; every Page identical on both paths"
    )
    print(f"parse_html, text by unwrapping: {statistics.median(unwrap):.3f} ms/page (median of rounds)")
    print(f"parse_html, text by the walk:   {statistics.median(walked):.3f} ms/page")
    print(f"walk/unwrap: median {statistics.median(ratios):.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)})")


if __name__ == "__main__":
    main()
