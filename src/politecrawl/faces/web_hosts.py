"""Which ``Host`` a request may name to be answered (``web``'s guard against DNS rebinding)."""

from __future__ import annotations

import ipaddress

__all__ = ["host_header_allowed"]

#: Names every machine gives itself: a browser on the operator's machine may use any of them.
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def host_header_allowed(host_header: str | None, bound: str, allowed: tuple[str, ...]) -> bool:
    """Whether a request naming ``host_header`` (``Host``, port included) is for this server.

    DNS rebinding makes an attacker's name resolve to this server: the operator's browser then
    sends the attacker's page's requests here with ``Host: attacker.example``, and same-origin
    lets that page read the answers. A name is accepted only if it is the bound address, a
    localhost name, or one the operator gave (``--allowed-host``, for a reverse proxy). Address
    literals are safe (a page cannot rebind an address): the bound one always, any one when the
    server listens on every interface. No ``Host`` at all (HTTP/1.0 tools) names nobody."""
    if not host_header:
        return True
    name = host_header.strip().lower()
    if name.startswith("["):  # [v6]:port
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:  # name:port (a bare v6 literal has more colons)
        name = name.rsplit(":", 1)[0]
    name = name.rstrip(".")
    if name in _LOCAL_NAMES or name.endswith(".localhost") or name in allowed:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return name == bound.lower().strip("[]")
    bound_name = bound.strip("[]")
    return address.is_loopback or bound_name in ("", "0.0.0.0", "::") or str(address) == bound_name
