"""content/crowded_tags.py: a start tag of many attributes costs parse_html bounded time.

One tag of 100,000 attributes (889 KB) took lexbor 27.5 s. The tag is now cut to MAX_ATTRIBUTES
attributes before the parse. Asserted by what the cut did (the attributes left, the text and the
link after the tag still read), with the unguarded parse's quadratic cost measured on small
inputs as the negative control; ordinary pages and hostile shapes of markup come out of the cut
as they went in, and the cut itself costs linear time (a bound far above its cost, with the
quadratic shapes a naive search of such tags would pay for).
"""

from __future__ import annotations

import time

import pytest
from selectolax.lexbor import LexborHTMLParser
from test_nesting import _ordinary_pages

from politecrawl.content import crowded_tags
from politecrawl.content.crowded_tags import MAX_ATTRIBUTES, cut_crowded_tags
from politecrawl.content.parse import parse_html

N = 100_000
#: Generous: the cut and the parse take ~0.05 s on a 2-core machine; unguarded, 27 s.
BOUND_SECONDS = 5.0


def crowded(n: int, tag: str = "p", attribute=lambda i: f'a{i}="v"') -> str:
    return f"<{tag} " + " ".join(attribute(i) for i in range(n)) + ">"


HOSTILE = {
    "quoted": crowded(N),
    "bare": crowded(N, attribute=lambda i: f"a{i}"),
    "slashes": "<p " + "/".join(f"a{i}" for i in range(N)) + ">",
    "quoted-gt": crowded(N, attribute=lambda i: f'a{i}=">"'),  # ">" in a value does not end the tag
    # (names repeat: lexbor's cost also grows with the distinct attribute names of the whole
    # document, which the cut does not bound; README, "How sites are treated")
    "lt-in-names": "<p " + " ".join(f"a{i % 1000}" + ("<q" if i % 200 == 0 else "") for i in range(N)) + ">",
    "many-tags": crowded(300, "i") * 1_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_crowded_tag_is_cut_and_the_page_read_in_bounded_time(name: str) -> None:
    html = "<html><body>" + HOSTILE[name] + "quokka words <a href=/next>next</a></body></html>"
    start = time.perf_counter()
    page = parse_html(html, "http://h/")
    assert time.perf_counter() - start < BOUND_SECONDS
    assert "quokka" in page.text and [l.href for l in page.links] == ["/next"]
    tree = LexborHTMLParser(cut_crowded_tags(html))
    most = max(len(node.attributes) for node in tree.css("*"))
    assert most <= MAX_ATTRIBUTES


def test_the_first_attributes_are_kept_and_the_tag_still_closes() -> None:
    html = '<a href="/x" ' + " ".join(f"d{i}" for i in range(1_000)) + ">link</a><p>after</p>"
    cut = cut_crowded_tags(html)
    node = LexborHTMLParser(cut).css_first("a")
    assert node is not None and node.attributes["href"] == "/x" and node.text() == "link"
    assert len(node.attributes) == MAX_ATTRIBUTES
    assert cut.endswith(">link</a><p>after</p>")
    selfclosing = "<svg><g " + " ".join(f"d{i}" for i in range(1_000)) + "/><text>t</text></svg>"
    assert cut_crowded_tags(selfclosing).endswith("/><text>t</text></svg>")


def test_a_tag_read_in_a_script_keeps_the_script_end() -> None:
    """Inside a script the tokenizer sees text; the cut sees a tag, and stops at the next "<"."""
    script = "<script>if (a <b " + " ".join(f"x{i}" for i in range(1_000)) + ") {}</script><p>visible words</p>"
    cut = cut_crowded_tags(script)
    assert cut.endswith("</script><p>visible words</p>")
    assert "visible words" in parse_html(cut, "http://h/").text


@pytest.mark.parametrize(
    "html",
    [
        crowded(MAX_ATTRIBUTES),
        crowded(MAX_ATTRIBUTES, attribute=lambda i: f"a{i}='{'x' * 100}'"),
        '<div data-props="' + "k v " * 100_000 + '">long values are one attribute</div>',
        "<a<a<a" * 10_000,
        "a < b and c<d e>f " * 10_000,
    ],
    ids=["at-the-limit", "long-values", "one-long-value", "a<a", "text-with-lt"],
)
def test_tags_within_the_limit_and_odd_markup_are_left_alone(html: str) -> None:
    assert cut_crowded_tags(html) is html


def test_ordinary_pages_are_left_alone() -> None:
    for html in _ordinary_pages():
        assert cut_crowded_tags(html) is html


@pytest.mark.parametrize(
    "shape",
    [
        lambda k: ("<a x=" + "<y" * 200 + ">") * (k // 200),
        lambda k: ("<a x=" + ("<" + "y" * 50) * 200 + ">") * (k // 200),
        lambda k: "<a" * k,
        lambda k: '<a x="' * k,
        lambda k: ("<i " + "a " * (MAX_ATTRIBUTES - 1) + ">") * (k // 100),
    ],
    ids=["lt-runs", "long-lt-runs", "a<a", "unclosed-quotes", "just-under"],
)
def test_the_cut_costs_linear_time_on_shapes_a_search_per_tag_pays_quadratic_for(shape) -> None:
    """Each shape at ~2-8 MB is cut in well under BOUND_SECONDS (a search that started again at
    every "<" of the first shape took 11.7 s for 8 MB)."""
    html = shape(160_000)
    start = time.perf_counter()
    cut_crowded_tags(html)
    assert time.perf_counter() - start < BOUND_SECONDS


def _seconds(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def test_without_the_cut_attributes_cost_quadratic_time() -> None:
    """The negative control: lexbor on tags of 4,000 and 16,000 attributes. Quadratic, so 100,000
    would take ~(100,000/16,000)² = 39 times the larger: far over BOUND_SECONDS."""
    small = min(_seconds(LexborHTMLParser, crowded(4_000)) for _ in range(3))
    large = min(_seconds(LexborHTMLParser, crowded(16_000)) for _ in range(3))
    assert large / small > 6  # linear: 4; quadratic: 16
    assert large * (N / 16_000) ** 2 > BOUND_SECONDS
    assert crowded_tags.MAX_ATTRIBUTES < 4_000  # the cut keeps far fewer than the small case
