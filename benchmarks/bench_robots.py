"""Benchmark politecrawl.policy.robots against protego on a large, realistic robots.txt.

    .venv/bin/python benchmarks/bench_robots.py [--calls 1000000] [--seed 7]

Builds a robots.txt shaped like the big real ones (a long '*' group with
hundreds of prefix and wildcard rules, dozens of named bot groups, comments,
sitemaps; a few hundred KiB), then times, for each library in the same run:
parsing it, and `--calls` allow/deny questions for a mix of 1,000 URLs. It
also reports how many of the 545 conformance cases each library answers as
RFC 9309 does, and how many of the benchmark URLs the two disagree on.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # run from a checkout without installing

from politecrawl.policy.robots import RobotsTxt  # noqa: E402
from politecrawl.policy.robots_match import _normalize, _normalize_path, _path_params_query  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "robots"  # vendored, see PROVENANCE.md there
USER_AGENT = "politecrawl/0.1 (+https://example.org/bot)"

_WORDS = (
    "account admin api archive article blog cart category checkout cgi-bin comments "
    "compare download edit en export feed forum gallery help images includes js "
    "login logout media member news order page print private product profile "
    "register report search share shop static tag tmp user video wiki wp-admin"
).split()
_BOTS = (
    "AhrefsBot SemrushBot MJ12bot DotBot BLEXBot PetalBot Bytespider GPTBot CCBot "
    "ClaudeBot anthropic-ai Google-Extended Amazonbot YandexBot Baiduspider "
    "DataForSeoBot serpstatbot MegaIndex SeznamBot Exabot Sogou ia_archiver "
    "magpie-crawler omgili FacebookBot Applebot ImagesiftBot Diffbot Timpibot "
    "Scrapy HTTrack wget curl python-requests Go-http-client Nutch linkdexbot "
    "BUbiNG Mail_RU_Bot Qwantify Yeti coccocbot Slurp DuckDuckBot"
).split()


def _segment(rng: random.Random) -> str:
    word = rng.choice(_WORDS)
    return word if rng.random() < 0.7 else f"{word}-{rng.randint(1, 999)}"


def _rule_pattern(rng: random.Random) -> str:
    """One Allow/Disallow value, in the proportions big sites use."""
    depth = rng.randint(1, 3)
    path = "/" + "/".join(_segment(rng) for _ in range(depth))
    kind = rng.random()
    if kind < 0.45:
        return path + ("/" if rng.random() < 0.6 else "")
    if kind < 0.60:
        return f"/*?{rng.choice(_WORDS)}="
    if kind < 0.70:
        return f"/*{rng.choice(['.pdf', '.php', '.json', '.xml'])}$"
    if kind < 0.80:
        return f"{path}/*/{_segment(rng)}"
    if kind < 0.87:
        return f"/*/{_segment(rng)}/*{rng.choice(['sort', 'filter', 'page'])}="
    if kind < 0.93:
        return f"{path}$"
    return f"{path}/%E6%97%A5%E6%9C%AC/{_segment(rng)}"  # encoded non-ASCII


def build_robots(rng: random.Random) -> tuple[bytes, list[tuple[bool, str]]]:
    """A large robots.txt (big '*' group, many named groups, comments,
    sitemaps) and the rules of its '*' group, which apply to USER_AGENT."""
    lines = ["# robots.txt for www.example.com", "# generated for benchmarking", ""]
    lines += ["User-agent: *", "Crawl-delay: 2"]
    star_rules = []
    for _ in range(600):
        allow = rng.random() < 0.2
        pattern = _rule_pattern(rng)
        star_rules.append((allow, pattern))
        lines.append(f"{'Allow' if allow else 'Disallow'}: {pattern}")
    lines.append("")
    for _ in range(24):  # named groups with many rules, a few agents each
        for bot in rng.sample(_BOTS, 3):
            lines.append(f"User-agent: {bot}")
        for _ in range(400):
            verb = "Allow" if rng.random() < 0.25 else "Disallow"
            comment = f"  # ticket {rng.randint(1000, 99999)}" if rng.random() < 0.3 else ""
            lines.append(f"{verb}: {_rule_pattern(rng)}{comment}")
        lines.append("")
    for bot in _BOTS:  # the blanket bans
        lines += [f"User-agent: {bot}", "Disallow: /", ""]
    for i in range(50):
        lines.append(f"Sitemap: https://www.example.com/sitemaps/sitemap-{i}.xml.gz")
    return ("\n".join(lines) + "\n").encode("utf-8"), star_rules


def _reference_matches(path: str, pattern: str) -> bool:
    """Google's robots.cc `Matches`: the set of reachable path positions."""
    positions = {0}
    for i, char in enumerate(pattern):
        if char == "$" and i == len(pattern) - 1:
            return len(path) in positions
        if char == "*":
            positions = set(range(min(positions), len(path) + 1))
        else:
            positions = {p + 1 for p in positions if p < len(path) and path[p] == char}
            if not positions:
                return False
    return True


def reference_allowed(rules: list[tuple[bool, str]], url: str) -> bool:
    """Brute force over every rule: longest pattern wins, Allow wins ties."""
    path = _normalize_path(_path_params_query(url))
    best = None
    for allow, pattern in rules:
        pattern = _normalize(pattern)
        if _reference_matches(path, pattern):
            key = (len(pattern), allow)
            best = key if best is None or key > best else best
    return best is None or best[1]


def build_urls(rng: random.Random, n: int = 1000) -> list[str]:
    """URLs a crawler would ask about: mostly plain pages, some hitting rules."""
    urls = []
    for _ in range(n):
        path = "/" + "/".join(_segment(rng) for _ in range(rng.randint(1, 5)))
        roll = rng.random()
        if roll < 0.25:
            path += f"?{rng.choice(_WORDS)}={rng.randint(1, 99)}&page={rng.randint(1, 9)}"
        elif roll < 0.35:
            path += rng.choice([".pdf", ".html", ".json", "/"])
        elif roll < 0.40:
            path += "/日本/" + _segment(rng)
        elif roll < 0.45:
            path += "/%7Euser/a%20b"
        urls.append("https://www.example.com" + path)
    return urls


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _conformance(answer) -> tuple[int, int]:
    """Cases answered as RFC 9309 says (conflicts-rfc9309 inverted)."""
    passed = total = 0
    for name in ("google_cases.json", "google_spec_cases.json"):
        path = CORPUS / name
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            if "robots_b64" in case:
                body = base64.b64decode(case["robots_b64"])
            else:
                body = case["robots"].encode("utf-8")
            expected = case["allowed"]
            if "conflicts-rfc9309" in case.get("tags", ()):
                expected = not expected
            try:
                got = answer(body, case["user_agent"], case["url"])
            except Exception:
                got = None
            total += 1
            passed += got is expected
    return passed, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    body, star_rules = build_robots(rng)
    text = body.decode("utf-8")
    urls = build_urls(rng)
    work = (urls * (args.calls // len(urls) + 1))[: args.calls]
    n_lines = body.count(b"\n")
    print(
        f"robots.txt: {len(body) / 1024:.0f} KiB, {n_lines} lines; "
        f"{len(urls)} distinct URLs, {args.calls:,} calls; agent {USER_AGENT!r}"
    )

    results = {}

    # "parse" = parse + the first question, which builds the agent's index.
    parse_s = min(_time(lambda: RobotsTxt.parse(body).is_allowed(USER_AGENT, urls[0])) for _ in range(5))
    ours = RobotsTxt.parse(body)
    ours.is_allowed(USER_AGENT, urls[0])

    def run_ours() -> None:
        is_allowed = ours.is_allowed
        for url in work:
            is_allowed(USER_AGENT, url)

    results["politecrawl"] = (parse_s, _time(run_ours))
    conf = {"politecrawl": _conformance(lambda b, ua, u: RobotsTxt.parse(b).is_allowed(ua, u))}
    answers = {"politecrawl": [ours.is_allowed(USER_AGENT, u) for u in urls]}

    try:
        from protego import Protego
    except ImportError:
        print("protego not installed")
        Protego = None
    if Protego is not None:
        parse_s = min(_time(lambda: Protego.parse(text).can_fetch(urls[0], USER_AGENT)) for _ in range(5))
        theirs = Protego.parse(text)
        theirs.can_fetch(urls[0], USER_AGENT)

        def run_protego() -> None:
            can_fetch = theirs.can_fetch
            for url in work:
                can_fetch(url, USER_AGENT)

        results["protego"] = (parse_s, _time(run_protego))
        conf["protego"] = _conformance(lambda b, ua, u: Protego.parse(b.decode("utf-8", "replace")).can_fetch(u, ua))
        answers["protego"] = [theirs.can_fetch(u, USER_AGENT) for u in urls]

    print()
    print(f"{'library':<12} {'parse ms':>9} {'match s':>8} {'calls/s':>11} {'conformance':>12}")
    for name, (parse_s, match_s) in results.items():
        passed, total = conf[name]
        print(
            f"{name:<12} {parse_s * 1000:>9.1f} {match_s:>8.2f} {args.calls / match_s:>11,.0f} {passed:>6}/{total:<5}"
        )
    if "protego" in results:
        ratio = results["protego"][1] / results["politecrawl"][1]
        parse_ratio = results["protego"][0] / results["politecrawl"][0]
        print(f"\npolitecrawl is_allowed is {ratio:.1f}x protego's speed; parse {parse_ratio:.1f}x")
    reference = [reference_allowed(star_rules, url) for url in urls]
    print(f"benchmark URLs denied by the brute-force reference: {reference.count(False)} of {len(urls)}")
    for name, got in answers.items():
        agree = sum(a == b for a, b in zip(got, reference))
        print(f"{name} agrees with the reference on {agree}/{len(urls)} benchmark URLs")


if __name__ == "__main__":
    main()
