"""Through a proxy, the crawler sends none of the operator's credentials, and refuses addresses.

``HOME`` points at a folder whose ``.netrc`` has an entry for the crawled host and a ``default``
entry; ``HTTP_PROXY`` names a sandbox host that plays the forwarding proxy (it receives the
absolute-form requests and answers them itself, logging each with its headers). The crawl must
go through the proxy (its log has the site's requests, the site's own log none) and no request
may carry ``Authorization``. The negative control is aiohttp left to read the environment
(``trust_env=True``, what the fetcher did whenever a proxy was set): in the same setup it sends
``Authorization: Basic`` from ``.netrc``.

Through a proxy no socket here connects to the site, so an address in a URL is judged before
the request is handed over: with ``--allow-networks`` naming only the seed, a link to
127.0.0.99 never reaches the proxy (the control: without it, loopback seeds allow loopback and
the proxy is asked for 127.0.0.99).
"""

from __future__ import annotations

import asyncio
import base64
import os

import aiohttp
import pytest

from conftest import run_cli
from servers.sandbox import Reply, SandboxHost

SITE_IP, PROXY_IP, META_IP = "127.0.0.51", "127.0.0.52", "127.0.0.99"


def _setup(sandbox_factory, tmp_path):
    site = SandboxHost(SITE_IP, pages={"/": "<html><title>site</title><body>the real site</body></html>"})
    meta = SandboxHost(META_IP, pages={"/": "<html><title>meta</title><body>secret</body></html>"})

    def as_proxy(path: str) -> Reply | None:
        # The proxy answers for every host: a page linking to the site's other page and to meta.
        if path == "/robots.txt":
            return None
        return Reply(
            body=f'<html><title>via proxy</title><body>proxied <a href="/a">a</a>'
            f' <a href="{meta.base}/private">meta</a></body></html>'
        )

    proxy = SandboxHost(PROXY_IP, handler=as_proxy)
    sb = sandbox_factory([site, proxy, meta])
    home = tmp_path / "home"
    home.mkdir()
    netrc = home / ".netrc"
    netrc.write_text(f"machine {SITE_IP} login alice password s3cret\ndefault login bob password hunter2\n")
    netrc.chmod(0o600)
    env = {"HOME": str(home), "NETRC": str(netrc)}
    for name in ("HTTP_PROXY", "http_proxy"):
        env[name] = proxy.base
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        env[name] = ""
    return sb, site, proxy, meta, env


def _through_proxy(sb, proxy, host_ip):
    return [r for r in sb.log if r.host == proxy.netloc and r.headers.get("Host", "").startswith(host_ip + ":")]


def test_no_netrc_credentials_go_through_a_proxy(sandbox_factory, tmp_path, monkeypatch):
    sb, site, proxy, meta, env = _setup(sandbox_factory, tmp_path)
    db = str(tmp_path / "crawl.db")
    done = run_cli(
        "crawl", site.url("/"), "--db", db, "--workers", "1", "--min-delay", "0.05", "--max-time", "60",
        "--scope", "any", "-q", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    proxied = _through_proxy(sb, proxy, SITE_IP)
    # The crawl went through the proxy (else the check below would pass for nothing) …
    assert {r.path for r in proxied} >= {"/robots.txt", "/", "/a"}, sb.log
    assert not [r for r in sb.log if r.host == site.netloc]
    # … and sent no credentials, to the site or to anyone.
    assert [r for r in sb.log if "Authorization" in r.headers] == []
    # Loopback seeds allow loopback: the proxy was asked for 127.0.0.99 (the control of the next test).
    assert _through_proxy(sb, proxy, META_IP)

    # The negative control: aiohttp reading the environment sends .netrc's password for the site.
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    async def trusting() -> None:
        async with aiohttp.ClientSession(trust_env=True) as session:
            async with session.get(site.url("/trusting")) as resp:
                await resp.read()

    asyncio.run(trusting())
    sent = [r for r in sb.log if r.path == "/trusting"]
    assert sent and sent[0].host == proxy.netloc
    assert sent[0].headers.get("Authorization") == "Basic " + base64.b64encode(b"alice:s3cret").decode()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX")
def test_an_address_in_a_url_is_refused_before_the_proxy(sandbox_factory, tmp_path):
    sb, site, proxy, meta, env = _setup(sandbox_factory, tmp_path)
    db = str(tmp_path / "crawl.db")
    done = run_cli(
        "crawl", site.url("/"), "--db", db, "--workers", "1", "--min-delay", "0.05", "--max-time", "60",
        "--scope", "any", "--allow-networks", f"{SITE_IP}/32", "-q", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The proxy itself (on 127.0.0.52, not an allowed network) is the operator's: it is used …
    assert {r.path for r in _through_proxy(sb, proxy, SITE_IP)} >= {"/robots.txt", "/", "/a"}
    # … but never asked for the private address a page linked to.
    assert _through_proxy(sb, proxy, META_IP) == []
    assert not [r for r in sb.log if r.host == meta.netloc]
    status = run_cli("status", "--hosts", "--db", db)
    assert f"refused: {META_IP} is loopback" in status.stdout, status.stdout
