"""The network guard: which IP addresses the crawler may connect to (its SSRF defence).

A crawler fetches URLs chosen by strangers, so by default it must never reach the machine it
runs on or its private network: loopback, private, link-local (including the cloud metadata
address 169.254.169.254), carrier-grade NAT, multicast, reserved and unspecified addresses are
refused unless an operator lists their network in ``allowed_networks``. The decision is made on
an IP address, never a name: :mod:`crawl_platform.fetch.transport` resolves a host once, connects to
an address this guard accepted, and checks the peer of the connected socket again, so DNS
rebinding and redirects to internal hosts meet the same rule.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class BlockedAddressError(Exception):
    """A connection would reach an address the guard refuses; ``str(err)`` names host and address.

    Deliberately not an ``OSError``: urllib3 wraps and retries those, and a refusal must reach
    the fetcher unchanged, without a second attempt.
    """


class NetworkGuard:
    """Accepts public unicast addresses plus the explicitly allowed networks."""

    def __init__(self, allowed_networks: Iterable[str] = ()) -> None:
        """``allowed_networks``: CIDRs such as ``"127.0.0.0/8"`` or ``"10.1.2.3/32"``; raises
        ValueError for one that does not parse."""
        self.allowed: tuple[IPNetwork, ...] = tuple(
            ipaddress.ip_network(cidr.strip(), strict=False) for cidr in allowed_networks
        )

    def refusal(self, address: str) -> str | None:
        """Why connecting to ``address`` (an IP literal) is refused, e.g. ``"a loopback address"``,
        or None when it is allowed."""
        try:
            ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
        except ValueError:
            return "not an IP address"
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
        if any(ip in net for net in self.allowed if net.version == ip.version):
            return None
        kind = _non_public_kind(ip)
        return f"a {kind} address" if kind else None

    def check(self, host: str, address: str) -> None:
        """Raise :class:`BlockedAddressError` when ``address`` (that ``host`` resolved to) is refused."""
        reason = self.refusal(address)
        if reason is not None:
            shown = address if host.strip("[]") == address else f"{host} resolves to {address}"
            raise BlockedAddressError(f"{shown}, {reason}")


# Most specific name first: it is only the message that differs.
_KINDS = (("loopback", "is_loopback"), ("link-local", "is_link_local"), ("multicast", "is_multicast"),
          ("unspecified", "is_unspecified"), ("reserved", "is_reserved"), ("private", "is_private"))


def _non_public_kind(ip: IPAddress) -> str | None:
    for kind, attribute in _KINDS:
        if getattr(ip, attribute):
            return kind
    return None if ip.is_global else "non-public"  # e.g. 100.64.0.0/10, carrier-grade NAT
