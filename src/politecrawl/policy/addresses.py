"""Which IP addresses a crawl may connect to (pure: addresses in, a verdict out).

A crawler fetches what strangers point it at: a link, a redirect, a robots.txt ``Sitemap:`` line.
Pointed at ``http://169.254.169.254/`` (a cloud's metadata service), ``http://127.0.0.1:6379/``
or a name that resolves to ``10.0.0.5``, it would request the service on its own machine or
network and index its answer for anyone who can search (server-side request forgery). So the
address the socket connects to is judged here, whatever URL or name led to it: a global address
is always allowed; any other (loopback, RFC 1918, link-local, shared, IPv6 unique-local …) only
when the crawl allows its network. The I/O side — the resolver that drops such answers, the
check of the address each socket connects to — is :mod:`politecrawl.net.egress`.

Which networks are allowed (``networks_allowed``):

- ``allow_private``: every address;
- ``allow_networks`` given: exactly those networks (an intranet crawl, or a test that needs
  "only this address");
- neither: the *class* of each seed whose address is not global (a seed on 127.0.0.10 allows
  127.0.0.0/8, one on 10.1.2.3 allows 10.0.0.0/8): the user named that host, so its network
  is the crawl's. A crawl whose seeds are all public allows no private address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from politecrawl.config import Settings
from politecrawl.errors import ConfigError

__all__ = [
    "AddressPolicy",
    "IPAddress",
    "IPNetwork",
    "address_class",
    "networks_allowed",
    "parse_address",
    "parse_networks",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The blocks of addresses that are not global, each with the name a refusal gives it. An address
#: in none of them but still not global (Python's ``is_global``: IANA's special-purpose registries)
#: is its own class (a /32 or /128).
_CLASSES: tuple[tuple[str, str], ...] = (
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private (RFC 1918)"),
    ("172.16.0.0/12", "private (RFC 1918)"),
    ("192.168.0.0/16", "private (RFC 1918)"),
    ("169.254.0.0/16", "link-local (cloud metadata services live here)"),
    ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
    ("0.0.0.0/8", "'this network' (0.0.0.0 reaches the local machine)"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("198.18.0.0/15", "benchmarking"),
    ("240.0.0.0/4", "reserved"),
    ("::1/128", "loopback"),
    ("::/128", "unspecified"),
    ("fc00::/7", "unique local (IPv6 private)"),
    ("fe80::/10", "link-local"),
)
_CLASS_NETWORKS: tuple[tuple[IPNetwork, str], ...] = tuple((ipaddress.ip_network(net), name) for net, name in _CLASSES)
_LOOPBACKS = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
#: NAT64's well-known prefix: the address that matters is the IPv4 one it carries.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def parse_address(text: str) -> IPAddress | None:
    """The address ``text`` names, in its one canonical form, or None for a name.

    IPv4 is read as ``inet_aton`` (and so getaddrinfo, curl and the URL Standard) reads it —
    ``2130706506``, ``0x7f00004a``, ``0177.0.0.0112`` and ``127.74`` are all 127.0.0.74 — so that
    no respelling passes for a name. An IPv4-mapped IPv6 address (``::ffff:7f00:4a``) is its IPv4
    address, and so is a NAT64 one: that is where the packets go.
    """
    text = text.strip().strip("[]").rstrip(".")
    if not text:
        return None
    if "%" in text:  # fe80::1%eth0: the zone does not change the address
        text = text.split("%", 1)[0]
    try:
        address: IPAddress = ipaddress.ip_address(text)
    except ValueError:
        v4 = _inet_aton(text)
        if v4 is None:
            return None
        address = v4
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _inet_aton(text: str) -> ipaddress.IPv4Address | None:
    """IPv4 in the forms ``inet_aton`` takes: 1 to 4 parts, each decimal, octal (0…) or hex (0x…)."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        try:
            if part[:2].lower() == "0x":
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part[1:], 8))
            else:
                if not part.isdigit():
                    return None
                numbers.append(int(part))
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for i, n in enumerate(head):
        value |= n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def address_class(address: IPAddress) -> tuple[IPNetwork, str]:
    """The block a non-global address belongs to, and its name (``127.0.0.0/8``, "loopback")."""
    for network, name in _CLASS_NETWORKS:
        if address.version == network.version and address in network:
            return network, name
    return ipaddress.ip_network(address), "not a global address"


def _is_global(address: IPAddress) -> bool:
    return address.is_global and not address.is_multicast


@dataclass(frozen=True)
class AddressPolicy:
    """The networks beyond the global Internet a crawl may connect to."""

    networks: tuple[IPNetwork, ...] = ()
    #: every address is allowed (``--allow-private``)
    any_address: bool = False

    def refusal(self, address: str | IPAddress) -> str | None:
        """Why the crawl may not connect to ``address``, or None when it may.

        The reason is one line a user reads in ``politecrawl why`` and ``status --hosts``."""
        ip = parse_address(address) if isinstance(address, str) else parse_address(str(address))
        if ip is None:
            return f"refused: {address!r} is not an IP address"
        if self.any_address or _is_global(ip):
            return None
        if any(ip.version == n.version and ip in n for n in self.networks):
            return None
        _, name = address_class(ip)
        return f"refused: {ip} is {name}, not allowed for this crawl (--allow-networks, --allow-private)"

    def refusal_of_host(self, host: str) -> str | None:
        """For a host as a URL has it: why an IP address in it (any spelling) is refused, or None
        — for an allowed address, and for a name (judged by the addresses it resolves to)."""
        ip = parse_address(host)
        return None if ip is None else self.refusal(ip)

    @classmethod
    def from_settings(cls, settings: Settings) -> AddressPolicy:
        """The policy of a crawl whose settings went through ``crawl.seed_networks`` (which put the
        private seeds' networks in ``allow_networks``)."""
        return networks_allowed(
            allow_private=settings.allow_private, allow_networks=settings.allow_networks, seed_addresses=()
        )

    def describe(self) -> str:
        if self.any_address:
            return "any address"
        nets = ", ".join(str(n) for n in self.networks)
        return "global addresses" + (f" and {nets}" if nets else " only")


def parse_networks(items: Iterable[str], source: str = "allow_networks") -> tuple[IPNetwork, ...]:
    """``10.0.0.0/8``, ``192.168.1.7`` (one address), ``fd00::/8`` …; anything else a ConfigError."""
    out = []
    for item in items:
        text = item.strip()
        if not text:
            continue
        try:
            out.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ConfigError(f"{source}: {text!r} is not a network (CIDR, e.g. 10.0.0.0/8) or an address") from None
    return tuple(out)


def networks_allowed(
    *, allow_private: bool, allow_networks: Iterable[str], seed_addresses: Iterable[str]
) -> AddressPolicy:
    """The crawl's policy: every address, the networks given, or the classes of its private seeds."""
    if allow_private:
        return AddressPolicy(any_address=True)
    given = parse_networks(allow_networks)
    if given:
        return AddressPolicy(given)
    classes: dict[IPNetwork, None] = {}
    for text in seed_addresses:
        ip = parse_address(text)
        if ip is not None and not _is_global(ip):
            network, _ = address_class(ip)
            classes[network] = None
            if network in _LOOPBACKS:  # 127.0.0.1 and ::1 are the same machine ("localhost" is both)
                classes.update(dict.fromkeys(_LOOPBACKS))
    return AddressPolicy(tuple(classes))
