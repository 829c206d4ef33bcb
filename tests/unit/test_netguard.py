"""The SSRF guard's address rules (the e2e suite checks them at registration and delivery)."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from wordcast.errors import UnresolvableCallback, UnsafeCallback
from wordcast.webhooks.netguard import AddressPolicy, resolve

LOOPBACK = AddressPolicy.from_entries(["127.0.0.0/8", "::1"])


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "100.64.0.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        # IPv6 forms that carry a private IPv4 address are as private as it is.
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "64:ff9b::a9fe:a9fe",  # NAT64
        "64:ff9b::7f00:1",
        "::ffff:0:a9fe:a9fe",  # IPv4-translated
        "::a9fe:a9fe",  # IPv4-compatible
        "2001:0:a9fe:a9fe::1",  # Teredo, server 169.254.169.254
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        # IANA's special-purpose blocks, which Python 3.11's flags miss or may miss:
        "fec0::1",  # site-local (deprecated): global to Python 3.11
        "fef0::1",
        "2001:db8::1",  # documentation
        "3fff::1",  # documentation (RFC 9637)
        "5f00::1",  # SRv6 SIDs
        "100::1",  # discard-only
        "64:ff9b:1::a00:1",  # local-use translation
        "2001:2::1",  # benchmarking
        "4000::1",  # outside the global unicast space
        "192.0.0.8",  # IETF protocol assignments
        "192.88.99.1",  # 6to4 relay anycast
        "198.18.0.1",  # benchmarking
        "203.0.113.9",  # documentation
        "255.255.255.255",
    ],
)
def test_forbidden_addresses(address: str) -> None:
    assert not AddressPolicy().permits(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "2606:4700:4700::1111",
        "2002:808:808::1",  # 6to4 of a public address
        "64:ff9b::808:808",  # NAT64 of a public address: DNS64 gives these on IPv6-only networks
        "::ffff:8.8.8.8",
        "2a00:1450:4001:81c::200e",
        "2001:4860:4860::8888",  # in 2001::/16, outside IETF's 2001::/23
    ],
)
def test_public_addresses(address: str) -> None:
    assert AddressPolicy().permits(ipaddress.ip_address(address))


def test_allow_list_admits_exactly_its_networks() -> None:
    assert LOOPBACK.permits(ipaddress.ip_address("127.0.0.1"))
    assert LOOPBACK.permits(ipaddress.ip_address("::1"))
    assert not LOOPBACK.permits(ipaddress.ip_address("10.0.0.1"))
    with pytest.raises(ValueError, match="not a network"):
        AddressPolicy.from_entries(["localhost"])


def test_credentials_in_a_callback_url_are_refused() -> None:
    """They would go to the receiver as HTTP Basic auth with every delivery."""
    for url in ("http://user:secret@example.com/hook", "https://token@example.com/hook"):
        with pytest.raises(UnsafeCallback, match="carries credentials"):
            asyncio.run(resolve(url, LOOPBACK))


def test_names_are_resolved_and_checked() -> None:
    async def scenario() -> None:
        with pytest.raises(UnsafeCallback, match=r"127\.0\.0\.1|::1"):
            await resolve("http://localhost:8080/hook", AddressPolicy())
        target = await resolve("http://localhost:8080/hook?x=1", LOOPBACK)
        assert target.address in ("127.0.0.1", "::1")
        assert target.connect_url.host == target.address
        assert target.connect_url.path == "/hook"
        assert target.host_header == "localhost:8080"
        with pytest.raises(UnresolvableCallback):
            await resolve("http://no-such-host.invalid/hook", LOOPBACK)

    asyncio.run(scenario())


def test_an_ipv6_literal_callback_gets_a_bracketed_host_header() -> None:
    target = asyncio.run(resolve("http://[::1]:18101/hook", LOOPBACK))
    assert target.host_header == "[::1]:18101"
    assert asyncio.run(resolve("http://[::1]/hook", LOOPBACK)).host_header == "[::1]"
    assert asyncio.run(resolve("http://127.0.0.1:9/hook", LOOPBACK)).host_header == "127.0.0.1:9"
