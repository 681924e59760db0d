"""Where the fetcher's sockets may go, and through which proxy: the I/O side of
:mod:`politecrawl.policy.addresses`.

Three checks, so that no URL, name or respelling reaches a refused address:

- ``GuardedResolver`` (aiohttp's resolver for the connector) drops every answer the crawl's
  policy refuses; a name with nothing left fails with ``AddressRefused`` — a name that resolves
  to 169.254.169.254 is never connected to;
- ``socket_factory`` judges the very address each socket is about to connect to (aiohttp skips
  the resolver for an IP-literal host, ``http://127.0.0.1/``, ``http://[::ffff:7f00:1]/``): no
  packet leaves for a refused address;
- ``middleware`` picks the proxy for each request, and refuses an IP-literal target before it is
  handed to a proxy (which would otherwise connect to it for us).

A name sent through a proxy is resolved by the proxy, not here: the proxy's own egress rules
must refuse private networks (docs/security.md).

Proxies are read from the environment here (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
``NO_PROXY``, as curl reads them), not by aiohttp: with ``trust_env`` aiohttp also reads
``~/.netrc`` and sends the operator's passwords to the hosts named there — to any crawled site
that is such a host, and to every host with a ``default`` entry.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.request
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

__all__ = [
    "ANY_ADDRESS",
    "AddressRefused",
    "AddressRule",
    "Egress",
    "GuardedResolver",
    "refusal_of",
]


class AddressRule(Protocol):
    """What the egress asks of the crawl's address policy (``policy.addresses.AddressPolicy``)."""

    def refusal(self, address: str) -> str | None:
        """Why the crawl may not connect to this resolved address, or None."""

    def refusal_of_host(self, host: str) -> str | None:
        """Why an IP address written as a URL's host is refused, or None (also for a name)."""


class _AnyAddress:
    def refusal(self, address: str) -> str | None:
        return None

    def refusal_of_host(self, host: str) -> str | None:
        return None


#: No address is refused (a fetcher made without the crawl's policy: a test's own).
ANY_ADDRESS: AddressRule = _AnyAddress()


class AddressRefused(OSError):
    """The crawl's address policy refuses this destination; ``str()`` says why (one line)."""


def refusal_of(exc: BaseException) -> str | None:
    """The refusal behind a connection error aiohttp raised, if that is what it was."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        inner: BaseException | None = exc.os_error
    else:
        inner = exc
    if isinstance(inner, AddressRefused):
        return str(inner)
    # Several addresses all refused: aiohappyeyeballs joins their messages in one OSError.
    text = str(inner) if inner is not None else ""
    if "refused: " in text and "not allowed for this crawl" in text:
        return text[text.index("refused: ") :].split(", refused: ")[0]
    return None


class GuardedResolver(aiohttp.abc.AbstractResolver):
    """aiohttp's resolver with the answers the policy refuses dropped.

    ``exempt`` names the proxies' hosts: the proxy itself may live on a private address (a local
    Squid); every address it resolves to is let through by ``Egress.socket_factory`` too (for its
    port only)."""

    def __init__(self, egress: Egress, inner: aiohttp.abc.AbstractResolver | None = None) -> None:
        self._egress = egress
        self._inner = inner or aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        answers = await self._inner.resolve(host, port, family)
        if (host.lower().rstrip("."), port) in self._egress.exempt_names:
            for answer in answers:
                self._egress.exempt_addresses.add((_canonical(answer["host"]), port))
            return answers
        kept = [a for a in answers if self._egress.policy.refusal(a["host"]) is None]
        if not kept:
            reasons = {self._egress.policy.refusal(a["host"]) for a in answers}
            raise AddressRefused(" / ".join(sorted(r for r in reasons if r)) or f"refused: {host} has no address")
        return kept

    async def close(self) -> None:
        await self._inner.close()


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _canonical(address: str) -> str:
    """One spelling per address (what getaddrinfo and a URL may spell apart: ::ffff:7f00:1)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


class Egress:
    """The crawl's address policy and its proxies, as the fetcher's session applies them."""

    def __init__(self, policy: AddressRule, proxies: Mapping[str, str] | None = None) -> None:
        self.policy = policy
        #: scheme -> proxy URL, and "no" -> the NO_PROXY list (urllib.request.getproxies_environment)
        self.proxies = dict(urllib.request.getproxies_environment() if proxies is None else proxies)
        #: (host name, port) of each proxy: resolved without the policy (the proxy is the operator's)
        self.exempt_names: set[tuple[str, int]] = set()
        #: (address, port) the sockets may connect to whatever the policy says: the proxies
        self.exempt_addresses: set[tuple[str, int]] = set()
        self._resolver = GuardedResolver(self)
        for scheme, proxy in self.proxies.items():
            if scheme == "no":
                continue
            parts = urlsplit(proxy if "://" in proxy else "http://" + proxy)
            if not parts.hostname:
                continue
            port = parts.port or (443 if parts.scheme == "https" else 80)
            if _is_literal(parts.hostname):
                self.exempt_addresses.add((_canonical(parts.hostname), port))
            else:
                self.exempt_names.add((parts.hostname.lower().rstrip("."), port))

    async def refusal_for(self, url: str) -> str | None:
        """Why the crawl would refuse to connect for ``url`` (its host's every address refused),
        or None: asked before a robots.txt redirect is followed, so that the hosts waiting for
        its answer are not held for a host that will never be asked. (Through a proxy: None,
        the proxy resolves.)"""
        parsed = URL(url, encoded=True)
        host = parsed.raw_host
        if not host or self.proxy_for(parsed) is not None:
            return None
        why = self.policy.refusal_of_host(host)
        if why is not None:
            return why
        try:
            answers = await self._resolver.resolve(host, parsed.port or 0, socket.AF_UNSPEC)
        except AddressRefused as exc:
            return str(exc)
        except OSError:
            return None  # the request will fail by itself, and say why
        return None if answers else f"refused: {host} has no address"

    def connector_kw(self) -> dict[str, Any]:
        """What ``aiohttp.TCPConnector`` takes from this: the resolver and the socket factory."""
        return {"resolver": self._resolver, "socket_factory": self.socket_factory}

    def session_kw(self) -> dict[str, Any]:
        """What ``aiohttp.ClientSession`` takes from this: never the environment (no ~/.netrc), and
        the middleware that picks each request's proxy."""
        return {"trust_env": False, "middlewares": (self.middleware,)}

    def socket_factory(self, addr_info: tuple) -> socket.socket:
        """A socket for ``addr_info``, if the policy allows the address it is about to connect to."""
        family, type_, proto, _, sockaddr = addr_info
        address, port = _canonical(str(sockaddr[0])), int(sockaddr[1])
        if (address, port) not in self.exempt_addresses:
            why = self.policy.refusal(address)
            if why is not None:
                raise AddressRefused(why)
        return socket.socket(family=family, type=type_, proto=proto)

    def proxy_for(self, url: URL) -> str | None:
        """The proxy ``url`` goes through, or None (direct): by its scheme, ALL_PROXY, NO_PROXY."""
        proxy = self.proxies.get(url.scheme) or self.proxies.get("all")
        if not proxy or not url.host:
            return None
        if "no" in self.proxies and urllib.request.proxy_bypass_environment(url.host, self.proxies):  # type: ignore[attr-defined]
            return None
        return proxy if "://" in proxy else "http://" + proxy

    async def middleware(self, req: aiohttp.ClientRequest, handler: Any) -> aiohttp.ClientResponse:
        proxy = self.proxy_for(req.url)
        if proxy is not None:
            # The proxy connects to the target, so no socket here judges it: an address in the
            # URL is judged now. (A name is the proxy's to resolve and to refuse.)
            why = self.policy.refusal_of_host(req.url.raw_host or "")
            if why is not None:
                raise aiohttp.ClientConnectorError(req.connection_key, AddressRefused(why))
            proxy_url = URL(proxy)
            headers = None
            if proxy_url.user is not None:
                # Credentials in the proxy's URL are the proxy's (Proxy-Authorization), never a site's.
                auth = aiohttp.BasicAuth(proxy_url.user, proxy_url.password or "")
                headers = {"Proxy-Authorization": auth.encode()}
                proxy_url = proxy_url.with_user(None)
            req.update_proxy(proxy_url, None, headers)
        # No credentials of the operator's ever go to a site: aiohttp adds none with trust_env off
        # and the crawler sets none; a header that got here anyway (a URL's userinfo) is dropped.
        req.headers.pop(aiohttp.hdrs.AUTHORIZATION, None)
        return await handler(req)
