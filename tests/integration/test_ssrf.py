"""Server-side request forgery: a site the crawl reaches cannot bring a private service into it.

Everything here lives on loopback, so the "public" sites are made public by the one honest knob
there is: ``--allow-networks`` naming exactly the seeds' own addresses (each a /32). The hostile
sites point the crawl, by every route a crawler takes, at a "metadata service" on 127.0.0.99
(and at one on 127.0.0.1 by the name ``localhost``) that logs every request. Guarded, those
services receive nothing, the crawl ends by itself, and ``why`` / ``status --hosts`` say the
address was refused. The negative control runs the same crawls without ``--allow-networks``:
seeds on loopback allow loopback (their network's class), every route then reaches the
services and their secret is searchable, so the empty logs above are not a test that could
not see.

Routes: robots.txt redirecting there; a seed redirecting there; a robots.txt ``Sitemap:`` line;
``/sitemap.xml`` redirecting there (these with ``--scope host`` and an ``--exclude`` matching
the target: robots.txt hops and sitemaps do not pass the URL filters); links with the address
respelled (decimal, hex, octal, short form, IPv4-mapped IPv6) and a DNS name resolving to a
loopback address, with ``--scope any``; and, with ``--scope domain``, a link and a redirect to a
name of the seed's own domain that its DNS points at a loopback address (the names resolved by
``tests/servers/fake_hosts.c``, preloaded into the crawl).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from servers.sandbox import Reply, SandboxHost

SECRET = "metadatasecrettoken"
META_IP = "127.0.0.99"  # 0x7f000063
# Each route's seed site, on its own address.
ROBOTS_REDIRECT, SEED_REDIRECT, SITEMAP_LINE, SITEMAP_REDIRECT, LINKS = (f"127.0.0.{n}" for n in range(11, 16))


def _meta(path: str) -> Reply:
    if path == "/robots.txt":
        return Reply(body="User-agent: *\nAllow: /\n", content_type="text/plain")
    if "sitemap" in path:
        return Reply(
            body='<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"></urlset>',
            content_type="application/xml",
        )
    return Reply(body=f"<html><title>instance metadata</title><body>{SECRET} credentials</body></html>")


def _web(sandbox_factory):
    meta = SandboxHost(META_IP, handler=_meta)
    local = SandboxHost("127.0.0.1", handler=_meta)  # reached by the name "localhost"

    def at(path: str) -> str:
        return f"{meta.base}{path}"

    hosts = {
        ROBOTS_REDIRECT: SandboxHost(
            ROBOTS_REDIRECT,
            handler=lambda p: (
                Reply(301, headers={"Location": at("/robots-redirect.txt")}) if p == "/robots.txt" else None
            ),
            pages={"/": "<html><title>a</title><body>robots redirect site</body></html>"},
        ),
        SEED_REDIRECT: SandboxHost(
            SEED_REDIRECT,
            handler=lambda p: Reply(302, headers={"Location": at("/seed-redirect")}) if p == "/" else None,
        ),
        SITEMAP_LINE: SandboxHost(
            SITEMAP_LINE,
            handler=lambda p: (
                Reply(body=f"User-agent: *\nAllow: /\nSitemap: {at('/sitemap-line.xml')}\n", content_type="text/plain")
                if p == "/robots.txt"
                else None
            ),
            pages={"/": "<html><title>c</title><body>sitemap line site</body></html>"},
        ),
        SITEMAP_REDIRECT: SandboxHost(
            SITEMAP_REDIRECT,
            handler=lambda p: (
                Reply(301, headers={"Location": at("/sitemap-redirect.xml")}) if p == "/sitemap.xml" else None
            ),
            pages={"/": "<html><title>d</title><body>sitemap redirect site</body></html>"},
        ),
        LINKS: SandboxHost(
            LINKS,
            handler=lambda p: (
                Reply(
                    body="<html><title>e</title><body>"
                    + "".join(
                        f'<a href="http://{spelling}:{meta.port}/{name}">{name}</a> '
                        for spelling, name in (
                            ("2130706531", "decimal"),
                            ("0x7f000063", "hex"),
                            ("0177.0.0.0143", "octal"),
                            ("127.99", "short"),
                            ("[::ffff:7f00:63]", "mapped"),
                        )
                    )
                    + f'<a href="http://localhost:{local.port}/dns-name">by name</a></body></html>'
                )
                if p == "/"
                else None
            ),
        ),
    }
    sb = sandbox_factory([meta, local, *hosts.values()])
    return sb, meta, local, hosts


def _crawl(db, seeds, allow, *extra):
    allowing = ("--allow-networks", allow) if allow else ()
    return run_cli(
        "crawl", *seeds, "--db", db, *allowing, "--workers", "1",
        "--min-delay", "0.05", "--max-time", "60", "-q", *extra,
        env={"POLITECRAWL_GUESS_SITEMAP": "true"},
    )  # fmt: skip


@pytest.mark.parametrize("guarded", [True, False], ids=["seeds-only", "negative-control-default-seeds-class"])
def test_private_addresses_are_refused_on_every_route(sandbox_factory, tmp_path, guarded):
    sb, meta, local, hosts = _web(sandbox_factory)
    seeds_ips = list(hosts)
    # The control gives no --allow-networks: seeds on loopback allow loopback (their class).
    allow = ",".join(f"{ip}/32" for ip in seeds_ips) if guarded else None
    db_host, db_any = str(tmp_path / "host.db"), str(tmp_path / "any.db")
    # Routes a crawl confined to its hosts still takes, with the target excluded by --exclude.
    first = _crawl(
        db_host,
        [hosts[ip].url("/") for ip in (ROBOTS_REDIRECT, SITEMAP_LINE, SITEMAP_REDIRECT)],
        allow,
        "--scope", "host", "--exclude", r"127\.0\.0\.99",
    )  # fmt: skip
    second = _crawl(db_any, [hosts[ip].url("/") for ip in (SEED_REDIRECT, LINKS)], allow, "--scope", "any")
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr

    to_meta = sorted(r.path for r in sb.log if r.host in (meta.netloc, local.netloc))
    # The seeds' own sites were crawled either way.
    assert {r.host for r in sb.log} >= {h.netloc for h in hosts.values() if h.ip != SEED_REDIRECT}
    routes = [
        "/robots-redirect.txt",
        "/sitemap-line.xml",
        "/sitemap-redirect.xml",
        "/seed-redirect",
        "/decimal",
        "/hex",
        "/octal",
        "/short",
        "/mapped",
        "/dns-name",
    ]
    found = run_cli("search", SECRET, "--db", db_any)
    if not guarded:
        # Every route reaches the private services when their network is allowed.
        assert set(routes) <= set(to_meta), to_meta
        assert "instance metadata" in found.stdout
        return
    assert to_meta == []
    assert "instance metadata" not in found.stdout
    why = run_cli("why", f"{meta.base}/seed-redirect", "--db", db_any)
    assert why.returncode == 0, why.stderr
    assert f"refused: {META_IP} is loopback" in why.stdout, why.stdout
    status = run_cli("status", "--hosts", "--db", db_host)
    assert f"refused: {META_IP} is loopback" in status.stdout, status.stdout
    status = run_cli("status", "--hosts", "--db", db_any)
    assert "refused: 127.0.0.1 is loopback" in status.stdout, status.stdout
    # The crawl's end names the cause and the fix, not a server that is down.
    said = [line for line in (second.stdout + second.stderr).splitlines() if line.startswith(meta.base)]
    assert said and "may not connect to" in said[0] and "--allow-networks" in said[0], said
    # And the fix given (the store keeps the networks allowed until one is), the host is tried
    # again at once, not after its 6 h park: the networks allowed are part of the set-up a rerun
    # compares.
    before = len(sb.requests(meta))
    third = _crawl(db_any, [], None, "--allow-private", "--scope", "any", "--max-time", "20")
    assert third.returncode == 0, third.stderr
    assert len(sb.requests(meta)) > before, third.stdout + third.stderr


# --------------------------------------------------------------------------- a name of the site's own

#: The site's names as its DNS answers them (tests/servers/fake_hosts.c, preloaded into the
#: crawl's processes): www is the public site, metadata a name of the same domain that its DNS
#: points at an address inside the crawler's network.
SITE, METADATA = "www.corp.test", "metadata.corp.test"
SITE_IP, METADATA_IP = "127.0.0.21", "127.0.0.98"


@pytest.fixture(scope="session")
def fake_hosts(tmp_path_factory) -> str:
    """The getaddrinfo shim, built for this run (a C compiler is needed, as for the kernels)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        if os.environ.get("CI"):
            pytest.fail("no C compiler: tests/servers/fake_hosts.c cannot be built")
        pytest.skip("no C compiler: tests/servers/fake_hosts.c cannot be built")
    out = tmp_path_factory.mktemp("fake_hosts") / "fake_hosts.so"
    source = Path(__file__).parents[1] / "servers" / "fake_hosts.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(source), "-ldl"], check=True)
    return str(out)


@pytest.mark.parametrize("guarded", [True, False], ids=["public-seed", "negative-control-allow-private"])
def test_a_name_of_the_seeds_domain_resolving_to_a_private_address_is_refused(
    sandbox_factory, tmp_path, fake_hosts, guarded
):
    """``--scope domain`` follows a link and a redirect from www.corp.test (the public seed: the
    crawl allows its address only) to metadata.corp.test, whose DNS answer is a loopback address
    where a "metadata service" logs every request. The resolver drops that answer: the service
    receives nothing, and ``why`` and ``status --hosts`` say the address was refused. The
    negative control (``--allow-private``) follows the same name to the same service."""
    meta = SandboxHost(METADATA_IP, handler=_meta)
    sb_meta = sandbox_factory([meta])
    target = f"http://{METADATA}:{meta.port}/latest/meta-data/"
    site = SandboxHost(
        SITE_IP,
        handler=lambda p: Reply(302, headers={"Location": target + "moved"}) if p == "/moved" else None,
        pages={
            "/": f'<html><title>corp</title><body>corp home <a href="{target}">status</a> '
            '<a href="/about">about</a> <a href="/moved">moved</a></body></html>',
            "/about": "<html><title>about</title><body>about the corp</body></html>",
        },
    )
    sb_site = sandbox_factory([site])
    db = str(tmp_path / "crawl.db")
    allowing = ("--allow-networks", f"{SITE_IP}/32") if guarded else ("--allow-private",)
    done = run_cli(
        "crawl", f"http://{SITE}:{site.port}/", "--db", db, *allowing, "--scope", "domain",
        "--contact", "https://example.org/bot", "--workers", "1", "--min-delay", "0.05", "--max-time", "60", "-q",
        env={"LD_PRELOAD": fake_hosts, "FAKE_HOSTS": f"{SITE}={SITE_IP},{METADATA}={METADATA_IP}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The site itself was crawled, by its name, either way.
    assert {"/", "/about", "/moved"} <= {r.path for r in sb_site.requests(site)}
    to_meta = sorted(r.path for r in sb_meta.requests(meta))
    found = run_cli("search", SECRET, "--db", db)
    if not guarded:
        assert {"/latest/meta-data/", "/latest/meta-data/moved"} <= set(to_meta), to_meta
        assert "instance metadata" in found.stdout
        return
    assert to_meta == []
    assert "instance metadata" not in found.stdout
    for url in (target, target + "moved"):
        why = run_cli("why", url, "--db", db)
        assert why.returncode == 0, why.stderr
        assert f"refused: {METADATA_IP} is loopback" in why.stdout, why.stdout
    status = run_cli("status", "--hosts", "--db", db)
    assert f"refused: {METADATA_IP} is loopback" in status.stdout, status.stdout
