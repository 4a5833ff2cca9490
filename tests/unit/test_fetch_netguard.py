"""The SSRF guard (crawl_platform.fetch.netguard, enforced at connect time by crawl_platform.fetch.transport):
refused by default, checked on the address actually connected, opened only by an explicit list."""

from __future__ import annotations

import socket

import pytest

from crawl_platform.fetch.fetcher import Fetcher
from crawl_platform.fetch.netguard import NetworkGuard
from tests.sites.hostile import HostileSite
from tests.sites.proxy import LoopbackProxy
from tests.unit.conftest import AGENT


@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", "loopback"),
    ("::1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped IPv6 is the IPv4 address
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("fe80::1", "link-local"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("100.64.0.1", "non-public"),  # carrier-grade NAT
    ("224.0.0.251", "multicast"),
    ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("240.0.0.1", "reserved"),
])
def test_non_public_addresses_are_refused_by_default(address, kind):
    assert NetworkGuard().refusal(address) == f"a {kind} address"


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address):
    assert NetworkGuard().refusal(address) is None  # a decision on a string: nothing is sent


def test_an_allow_list_opens_exactly_its_networks():
    guard = NetworkGuard(["127.0.0.1/32", "10.0.0.0/8"])
    assert guard.refusal("127.0.0.1") is None
    assert guard.refusal("10.200.0.1") is None
    assert guard.refusal("127.0.0.2") == "a loopback address"
    assert guard.refusal("169.254.169.254") == "a link-local address"


def test_a_bad_network_in_the_allow_list_is_rejected_up_front():
    with pytest.raises(ValueError, match="not-a-network"):
        NetworkGuard(["not-a-network"])


def test_by_default_the_fetcher_refuses_loopback_and_sends_nothing(hostile):
    result = Fetcher(AGENT, host_delay_s=0.0).fetch(hostile.url("/page/1"))
    assert result.status is None
    assert result.error == "blocked address: 127.0.0.1, a loopback address"
    assert not result.disallowed  # the guard spoke, not robots.txt
    hostile.settle()
    assert hostile.requests == []  # not even robots.txt


def test_a_name_is_judged_by_the_address_it_resolves_to(hostile):
    result = Fetcher(AGENT, host_delay_s=0.0, obey_robots=False).fetch(f"http://localhost:{hostile.port}/page/1")
    # Every address of the name is refused: the error names the name and the last address tried.
    addresses = [str(sockaddr[0]) for *_, sockaddr in socket.getaddrinfo("localhost", hostile.port,
                                                                         type=socket.SOCK_STREAM)]
    assert result.status is None
    assert result.error == f"blocked address: localhost resolves to {addresses[-1]}, a loopback address"
    hostile.settle()
    assert hostile.requests == []


def test_the_allow_list_permits_its_network_and_nothing_else(hostile):
    with HostileSite("127.0.0.2") as other:
        fetcher = Fetcher(AGENT, host_delay_s=0.0, allowed_networks=["127.0.0.2/32"])
        refused = fetcher.fetch(hostile.url("/page/1"))
        served = fetcher.fetch(other.url("/page/1"))
        assert refused.error == "blocked address: 127.0.0.1, a loopback address"
        assert served.status == 200
        other.settle()
        assert other.request_count("/page/1") == 1
    hostile.settle()
    assert hostile.requests == []


def test_through_a_proxy_the_target_is_still_checked(hostile):
    with LoopbackProxy() as proxy:
        # The proxy itself is trusted operator configuration; the target it would reach is not.
        fetcher = Fetcher(AGENT, host_delay_s=0.0, obey_robots=False, proxies=[proxy.url()])
        result = fetcher.fetch(hostile.url("/page/1"))
        assert result.error == "blocked address: 127.0.0.1, a loopback address"
        assert proxy.requests == []
    hostile.settle()
    assert hostile.requests == []
