"""A worker's parsed robots.txt (``RulesMemo``): what it keeps is bounded by hosts and bytes,
whatever the number of hosts the crawl knows, and the hosts used lately (those in flight among
them) are kept; a refreshed file is parsed again, never served stale."""

from __future__ import annotations

from politecrawl.crawl.robots_gate import RulesMemo

AGENT = "politecrawl"


def _body(i: int) -> bytes:
    return f"User-agent: *\nDisallow: /private-{i}/\n".encode()


def test_a_wide_crawl_keeps_at_most_the_hosts_and_bytes_it_is_given():
    memo = RulesMemo(hosts=64, max_bytes=1 << 20)
    for i in range(10_000):
        memo.get(f"http://h{i}.test", 1.0, _body(i))
        assert len(memo) <= 64
    assert len(memo) == 64
    assert memo.bytes == sum(len(_body(i)) for i in range(10_000 - 64, 10_000))


def test_bytes_bound_the_memo_as_well_as_hosts():
    big = b"User-agent: *\n" + b"Disallow: /x\n" * 10_000  # ~130 KB
    memo = RulesMemo(hosts=1_000, max_bytes=len(big) * 3)
    for i in range(10):
        memo.get(f"http://h{i}.test", 1.0, big)
    assert len(memo) == 3 and memo.bytes <= len(big) * 3


def test_hosts_in_flight_are_kept_while_others_come_and_go():
    memo = RulesMemo(hosts=32, max_bytes=1 << 20)
    in_flight = [f"http://busy{i}.test" for i in range(8)]
    first = {h: memo.get(h, 1.0, _body(i)) for i, h in enumerate(in_flight)}
    for i in range(1_000):
        memo.get(f"http://h{i}.test", 1.0, _body(i))
        if i % 8 == 0:  # each host in flight is asked again (its page, its links) as others pass
            for j, h in enumerate(in_flight):
                assert memo.get(h, 1.0, _body(j)) is first[h]  # the same parse: not read again


def test_negative_control_a_host_not_asked_for_is_forgotten_and_parsed_again():
    memo = RulesMemo(hosts=32, max_bytes=1 << 20)
    kept = memo.get("http://once.test", 1.0, _body(0))
    for i in range(100):
        memo.get(f"http://h{i}.test", 1.0, _body(i))
    assert memo.get("http://once.test", 1.0, _body(0)) is not kept


def test_a_refreshed_robots_txt_is_parsed_again_never_served_stale():
    memo = RulesMemo()
    old = memo.get("http://a.test", 1.0, b"User-agent: *\nDisallow: /old/\n")
    assert not old.is_allowed(AGENT, "http://a.test/old/page")
    new = memo.get("http://a.test", 2.0, b"User-agent: *\nDisallow: /new/\n")
    assert new.is_allowed(AGENT, "http://a.test/old/page")
    assert not new.is_allowed(AGENT, "http://a.test/new/page")
    assert len(memo) == 1  # one entry per host: the old version's bytes are not kept
    assert memo.bytes == len(b"User-agent: *\nDisallow: /new/\n")
