"""net.codings: which content codings the client left on a body, and undoing them within a cap."""

from __future__ import annotations

import gzip
import zlib

import pytest

from politecrawl.net.codings import UndecodableBody, decode, left_on_body


@pytest.mark.parametrize(
    ("values", "left"),
    [
        ([], []),
        (["identity"], []),
        (["gzip"], []),  # the client undid it
        (["GZIP"], []),
        (["x-gzip"], ["x-gzip"]),
        (["gzip, gzip"], ["gzip", "gzip"]),
        (["gzip, deflate"], ["gzip", "deflate"]),
        (["gzip", "gzip"], ["gzip"]),  # two headers: the client undid the first one's, the outermost
        (["identity, gzip"], ["gzip"]),
        (["compress"], ["compress"]),
    ],
)
def test_the_codings_left_on_the_body(values, left):
    assert left_on_body(values) == left


def test_two_headers_the_client_undid_in_the_wrong_order_are_undecodable():
    with pytest.raises(UndecodableBody):
        left_on_body(["gzip", "br"])


def test_stacked_codings_are_undone_last_first():
    body = b"<html>hello</html>"
    assert decode(zlib.compress(gzip.compress(body)), ["gzip", "deflate"], 1000) == (body, False)
    assert decode(gzip.compress(gzip.compress(body)), ["gzip", "x-gzip"], 1000) == (body, False)


def test_raw_deflate_members_and_trailing_bytes():
    body = b"abc" * 100
    raw = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert decode(raw.compress(body) + raw.flush(), ["deflate"], 10_000) == (body, False)
    assert decode(gzip.compress(b"one ") + gzip.compress(b"two"), ["gzip"], 100) == (b"one two", False)
    assert decode(gzip.compress(b"one") + b"\x00\x00junk", ["gzip"], 100) == (b"one", False)


def test_the_cap_cuts_a_bomb_and_a_cut_stream_keeps_what_came():
    bomb = gzip.compress(b"A" * 5_000_000)
    out, cut = decode(bomb, ["gzip"], 1000)
    assert (len(out), cut) == (1000, True)
    whole = gzip.compress(bytes(range(256)) * 400)
    out, cut = decode(whole[: len(whole) // 2], ["gzip"], 10**6)
    assert not cut and 0 < len(out) < 256 * 400


@pytest.mark.parametrize(("body", "codings"), [(b"not gzip at all", ["gzip"]), (b"x", ["compress"]), (b"x", ["br2"])])
def test_what_cannot_be_undone_says_so(body, codings):
    with pytest.raises(UndecodableBody, match="Content-Encoding"):
        decode(body, codings, 100)
