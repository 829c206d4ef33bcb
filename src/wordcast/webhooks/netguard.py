"""Callback URLs must not turn wordcast into a proxy into private networks (SSRF guard, issue 5).

A callback URL is accepted only if it is http(s) and every address its host resolves to is a public
unicast address: loopback, private, link-local (169.254.169.254, the cloud metadata service),
multicast, reserved and unspecified addresses are refused, unless an explicit allow-list of networks
(``WORDCAST_CALLBACK_ALLOW``, for development and tests) contains them. The check runs when a
subscription is registered and again before every delivery, and the dispatcher connects to the very
address it checked (with the original host name for the ``Host`` header and TLS), so a name that
resolves to a public address at registration and to a private one later (DNS rebinding) is refused
at delivery.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from wordcast.errors import UnresolvableCallback, UnsafeCallback

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# IPv6 ranges whose last 32 bits are an IPv4 address the traffic ends up at: NAT64's well-known
# prefix (RFC 6052), IPv4-translated (RFC 2765) and the deprecated IPv4-compatible form (RFC 4291).
_LAST_32_BITS_IPV4 = (
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("::/96"),
)
# NAT64 passes traffic on to its IPv4 address: that address alone decides.
_TRANSLATED_TO_IPV4 = (
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("::ffff:0:0/96"),
)


# IANA's special-purpose address registries (IPv4: RFC 6890 and its updates; IPv6 likewise), the
# blocks that are not globally reachable, written out rather than left to the ``ipaddress``
# module's flags alone, which differ across Python versions (3.11 counts fec0::/10 as global).
_NOT_GLOBAL_IPV4 = tuple(
    ipaddress.IPv4Network(block)
    for block in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private use
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local (cloud metadata services)
        "172.16.0.0/12",  # private use
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",  # private use
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the limited broadcast address
    )
)
_NOT_GLOBAL_IPV6 = tuple(
    ipaddress.IPv6Network(block)
    for block in (
        "::/128",  # unspecified
        "::1/128",  # loopback
        "64:ff9b:1::/48",  # local-use IPv4/IPv6 translation
        "100::/64",  # discard-only
        "100:0:0:1::/64",  # dummy prefix
        "2001::/23",  # IETF protocol assignments (Teredo's 2001::/32 among them)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
        "5f00::/16",  # segment routing (SRv6) SIDs
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated, RFC 3879)
        "ff00::/8",  # multicast
    )
)
_GLOBAL_UNICAST_IPV6 = ipaddress.IPv6Network("2000::/3")  # the only IPv6 space allocated for it


def special_purpose(address: IPAddress) -> bool:
    """Whether ``address`` is in a block IANA's registries say is not globally reachable (or,
    for IPv6, outside the global unicast space altogether)."""
    if isinstance(address, ipaddress.IPv4Address):
        return any(address in block for block in _NOT_GLOBAL_IPV4)
    if address not in _GLOBAL_UNICAST_IPV6:
        return True
    return any(address in block for block in _NOT_GLOBAL_IPV6)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, in every form that reaches them: IPv4-mapped,
    6to4 (2002::/16), Teredo (2001::/32: its server and client), NAT64 (64:ff9b::/96),
    IPv4-translated and IPv4-compatible. ``2002:a9fe:a9fe::1`` carries 169.254.169.254."""
    found = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found += address.teredo
    if any(address in network for network in _LAST_32_BITS_IPV4) and int(address) > 1:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF))
    return found


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    allow: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> AddressPolicy:
        networks = []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError as exc:
                raise ValueError(f"callback allow-list entry {entry!r} is not a network") from exc
        return cls(tuple(networks))

    def permits(self, address: IPAddress) -> bool:
        if any(address in network for network in self.allow):
            return True
        if isinstance(address, ipaddress.IPv6Address):
            embedded = embedded_ipv4(address)
            if not all(self.permits(inner) for inner in embedded):
                return False  # a private IPv4 address wrapped in IPv6 is still private
            if embedded and any(address in network for network in _TRANSLATED_TO_IPV4):
                return True
        if special_purpose(address):
            return False
        return not (
            address.is_loopback
            or address.is_private
            or address.is_link_local
            or address.is_multicast
            or address.is_reserved
            or address.is_unspecified
            or not address.is_global
        )


@dataclass(frozen=True, slots=True)
class Target:
    """Where to connect for a callback URL: a checked address, and the URL rewritten to it."""

    url: httpx.URL
    host: str
    address: str

    @property
    def connect_url(self) -> httpx.URL:
        return self.url.copy_with(host=self.address)

    @property
    def host_header(self) -> str:
        """The original authority, so virtual hosts and TLS see the name, not the address."""
        port = self.url.port
        host = self.url.raw_host.decode("ascii")
        if ":" in host:
            host = f"[{host}]"  # an IPv6 literal, bracketed as in the URL (RFC 9110 §7.2)
        return f"{host}:{port}" if port else host


async def resolve(url: str, policy: AddressPolicy) -> Target:
    """Resolve and check a callback URL; raises UnsafeCallback (or UnresolvableCallback)."""
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https"):
        raise UnsafeCallback(f"callback URL scheme must be http or https, not {parsed.scheme!r}")
    host = parsed.host
    if not host:
        raise UnsafeCallback("callback URL has no host")
    if parsed.userinfo:
        raise UnsafeCallback(
            "callback URL carries credentials (user:password@): they would be sent to the "
            "receiver as HTTP Basic auth with every delivery and shown wherever the URL is; "
            "verify the webhook signature instead, or put a token in the path"
        )
    if parsed.port == 0:
        raise UnsafeCallback("callback URL port 0 cannot be connected to")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise UnresolvableCallback(f"callback host {host!r} does not resolve: {exc}") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
        if not addresses:
            raise UnresolvableCallback(f"callback host {host!r} does not resolve")
    refused = [a for a in addresses if not policy.permits(a)]
    if refused:
        raise UnsafeCallback(
            f"callback host {host!r} is or resolves to {refused[0]}, a loopback, private, "
            "link-local, multicast or reserved address; wordcast does not call those "
            "(an operator can allow networks with WORDCAST_CALLBACK_ALLOW)"
        )
    return Target(parsed, host, str(addresses[0]))
