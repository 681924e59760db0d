"""Traps spelled otherwise than on the webs the heuristics were tuned on, crawled as a user would.

The first eight hosts of ``tests/servers/varied_trap_web.py``: two control sites whose URLs only
look like traps (dated paths, ``/page/2/``, ``/docs/a/b/c/d/e/``, a finite calendar by
``?month=``, filter combinations that are each a real page, stable tokens in paths), and six
ordinary sites with one or two mistakes each -- a calendar by ``?month=`` with facets that
combine, ``;jsessionid=`` after every path, a knowledge base whose relative links nest
``/kb/start/usage/start/usage/``, a lamp catalog with query facets, a blog pager whose relative
"next" grows ``/blog/page/2/page/3/``, ``/s/<hex>/`` session ids, a ``/calendar/2026/11/``
calendar linking every day, a gallery linking ``gallery/`` relatively, facets as path segments
and ASP.NET's ``/(S(…))/`` cookieless session ids. The real command line crawls it for 60 s on
the shipped defaults; the servers' request logs judge: every real page fetched (the first
request for a page's content, under whatever URL), at most ``TRAP_BOUND`` other requests. The
negative control crawls a copy with the learned URL patterns off: it must fetch far more traps
and leave real pages unfetched.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from servers.varied_trap_web import VariedTrapWeb

HOSTS = 8
TRAP_BOUND = 18


def _crawl(tmp_path, prefix: str, max_time: int, env: dict | None = None) -> list[dict]:
    web = VariedTrapWeb(prefix, hosts=HOSTS, max_seconds=max_time + 60).start()
    try:
        # Shipped defaults: no setting is eased for the test but the time limit.
        result = run_cli(
            "crawl", "--db", str(tmp_path / "crawl.db"), "--max-time", str(max_time), "-q", *web.seeds(),
            timeout=max_time + 60, env=env, cwd=str(tmp_path),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        web.stop()
    return web.tally(examples=12)


def _report(tally: list[dict]) -> str:
    return "\n".join(json.dumps(row) for row in tally)


@pytest.fixture(scope="module")
def defaults_tally(tmp_path_factory) -> list[dict]:
    return _crawl(tmp_path_factory.mktemp("varied-traps"), "127.0.81.", 60)


# One crawl for the test that reads it (a fixture, so that a second check can share it).
@pytest.mark.xdist_group("varied-traps")
def test_varied_traps_cost_at_most_the_bound_and_every_real_page_is_fetched(defaults_tally):
    tally = defaults_tally
    unfetched = {row["host"]: row["unfetched"] for row in tally if row["unfetched"]}
    assert unfetched == {}, _report(tally)
    traps = sum(row["trap"] for row in tally)
    assert traps <= TRAP_BOUND, _report(tally)
    # The controls: not one request wasted, every page fetched.
    assert [row["trap"] for row in tally[:2]] == [0, 0], _report(tally)
    print(f"trap fetches {traps}\n{_report(tally)}")


def test_negative_control_without_learned_patterns_the_same_web_costs_far_more(tmp_path):
    # Two thirds of the time of the crawl above show it (174 trap fetches in 60 s, 69 in 30 s).
    tally = _crawl(tmp_path, "127.0.82.", 40, env={"POLITECRAWL_URL_PATTERNS": "false"})
    traps = sum(row["trap"] for row in tally)
    assert traps > 3 * TRAP_BOUND, _report(tally)
    # and the traps take the time of real pages: the check that every one is fetched can fail
    assert any(row["unfetched"] for row in tally), _report(tally)
    print(f"trap fetches {traps}\n{_report(tally)}")
