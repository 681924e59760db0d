"""The address policy (policy.addresses): which IP addresses a crawl may connect to."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from politecrawl.config import load_settings
from politecrawl.errors import ConfigError
from politecrawl.policy.addresses import AddressPolicy, networks_allowed, parse_address

PUBLIC_ONLY = AddressPolicy()
ANY = AddressPolicy(any_address=True)

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("::1", "loopback"),
    ("10.1.2.3", "private (RFC 1918)"),
    ("172.16.0.1", "private (RFC 1918)"),
    ("172.31.255.255", "private (RFC 1918)"),
    ("192.168.1.1", "private (RFC 1918)"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "shared address space"),
    ("0.0.0.0", "'this network'"),
    ("fd00::1", "unique local"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("::ffff:7f00:4a", "loopback"),  # IPv4-mapped 127.0.0.74
    ("[::ffff:169.254.169.254]", "link-local"),
    ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
    ("224.0.0.1", "not a global address"),  # multicast
    ("2130706506", "loopback"),
    ("0x7f00004a", "loopback"),
    ("0177.0.0.0112", "loopback"),
    ("127.74", "loopback"),
]
GLOBAL = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "172.32.0.1", "::ffff:5db8:d822"]


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_addresses_that_are_not_global_are_refused_by_default(address, kind):
    why = PUBLIC_ONLY.refusal(address)
    assert why is not None and why.startswith("refused: ") and kind in why
    # The control: allowing any address lets each through (the refusal above is the policy's).
    assert ANY.refusal(address) is None


@pytest.mark.parametrize("address", GLOBAL)
def test_global_addresses_are_allowed(address):
    assert PUBLIC_ONLY.refusal(address) is None


def test_respelled_ipv4_is_one_address():
    for spelling in ("2130706506", "0x7f00004a", "0177.0.0.0112", "127.74", "127.0.0.74", "[::ffff:7f00:4a]"):
        assert parse_address(spelling) == ipaddress.IPv4Address("127.0.0.74"), spelling
    for name in ("example.org", "localhost", "1.2.3.4.5", "08.1.1.1", "256.1.1.1", "1..2", ""):
        assert parse_address(name) is None, name


@st.composite
def _spelling(draw) -> tuple[int, str]:
    """An IPv4 address written as inet_aton reads it: 1 to 4 parts, each decimal, octal or hex."""
    value = draw(st.integers(0, 2**32 - 1))
    parts = draw(st.integers(1, 4))
    octets = value.to_bytes(4, "big")
    numbers = [*octets[: parts - 1], int.from_bytes(octets[parts - 1 :], "big")]
    styles = draw(st.lists(st.sampled_from(["dec", "oct", "hex", "HEX"]), min_size=parts, max_size=parts))
    text = ".".join(
        str(n) if s == "dec" else f"0{n:o}" if s == "oct" else f"0x{n:x}" if s == "hex" else f"0X{n:X}"
        for n, s in zip(numbers, styles)
    )
    return value, text


@given(_spelling())
def test_every_inet_aton_spelling_is_read_as_the_c_library_reads_it(case):
    value, text = case
    assert socket.inet_aton(text) == value.to_bytes(4, "big")  # what getaddrinfo would connect to
    assert parse_address(text) == ipaddress.IPv4Address(value)


def test_private_seeds_allow_their_class_and_public_seeds_nothing():
    loopback = networks_allowed(allow_private=False, allow_networks=(), seed_addresses=["127.0.0.10"])
    assert loopback.refusal("127.0.0.99") is None and loopback.refusal("::1") is None
    assert loopback.refusal("10.0.0.1") is not None and loopback.refusal("169.254.169.254") is not None
    intranet = networks_allowed(allow_private=False, allow_networks=(), seed_addresses=["10.1.2.3"])
    assert intranet.refusal("10.200.0.1") is None and intranet.refusal("127.0.0.1") is not None
    public = networks_allowed(allow_private=False, allow_networks=(), seed_addresses=["93.184.216.34"])
    assert public == AddressPolicy()


def test_allow_networks_is_the_whole_list_and_allow_private_everything():
    only = networks_allowed(allow_private=False, allow_networks=["127.0.0.10/32"], seed_addresses=["127.0.0.10"])
    assert only.refusal("127.0.0.10") is None
    assert only.refusal("127.0.0.99") is not None  # the seed's class is not added to a given list
    anything = networks_allowed(allow_private=True, allow_networks=["127.0.0.10/32"], seed_addresses=())
    assert anything.refusal("169.254.169.254") is None


def test_the_settings_read_networks_and_refuse_what_is_not_one():
    settings = load_settings({"allow_networks": "10.0.0.0/8, 192.168.1.7 fd00::/8"}, env={})
    assert settings.allow_networks == ("10.0.0.0/8", "192.168.1.7/32", "fd00::/8")
    assert AddressPolicy.from_settings(settings).refusal("192.168.1.7") is None
    assert AddressPolicy.from_settings(settings).refusal("192.168.1.8") is not None
    with pytest.raises(ConfigError, match="'10.0.0.0/33' is not a network"):
        load_settings({"allow_networks": "10.0.0.0/33"}, env={})
    assert load_settings({}, env={"POLITECRAWL_ALLOW_PRIVATE": "true"}).allow_private is True


def test_a_host_in_a_url_is_judged_only_when_it_is_an_address():
    assert PUBLIC_ONLY.refusal_of_host("example.org") is None  # a name: judged once resolved
    assert PUBLIC_ONLY.refusal_of_host("[::ffff:7f00:4a]") is not None
    assert PUBLIC_ONLY.refusal_of_host("8.8.8.8") is None
