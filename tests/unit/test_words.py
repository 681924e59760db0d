"""Counts and durations in words (faces.words): what the crawl's lines and ``status`` print."""

from __future__ import annotations

import pytest

from politecrawl.faces.words import human_duration, plural


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "0.0 s"),
        (0.43, "0.4 s"),
        (42.4, "42 s"),
        (59.6, "1 min"),
        (359, "5 min 59 s"),
        (3599.6, "1 h"),
        (7500, "2 h 5 min"),
        (21599.6, "6 h"),  # a parked host's wait: '21599.6s' before
        (86399, "1 d"),
        (3 * 86400 + 4 * 3600 + 100, "3 d 4 h"),
        (-5, "0.0 s"),
    ],
)
def test_durations_in_at_most_two_units(seconds, said):
    assert human_duration(seconds) == said


def test_one_is_singular_and_every_other_count_plural():
    assert [plural(n, "host") for n in (0, 1, 2)] == ["0 hosts", "1 host", "2 hosts"]
    assert plural(1, "page is", "pages are") == "1 page is" and plural(3, "page is", "pages are") == "3 pages are"
