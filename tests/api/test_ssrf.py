"""Webhook destinations: private, loopback and link-local addresses are
refused (every resolved address checked, before any connection), redirects
are never followed and one to a refused address is reported as such; the
setting allows them explicitly."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from dashboard.api.exceptions import DestinationRefused
from dashboard.api.webhooks import sender, ssrf
from tests.api.helpers import Receiver

STRICT = ssrf.Policy()
LOOPBACK_OK = ssrf.Policy(allow_private=True)

REFUSED = [
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.254",
    "192.168.1.1",
    "127.0.0.1",
    "127.5.5.5",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "2002:7f00:1::",
    "64:ff9b::a00:1",
]
PUBLIC = ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001::1"]


@pytest.mark.parametrize("address", REFUSED)
def test_non_public_addresses_are_refused(address: str) -> None:
    """Private, loopback, link-local, shared, multicast, unspecified, and IPv6
    forms carrying such IPv4 addresses."""
    assert not STRICT.allows(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert STRICT.allows(ipaddress.ip_address(address))


def test_settings_allow_private_or_named_networks() -> None:
    """allow_private lets private/loopback through (never multicast); allowed
    networks let through just themselves."""
    assert LOOPBACK_OK.allows(ipaddress.ip_address("127.0.0.1"))
    assert LOOPBACK_OK.allows(ipaddress.ip_address("10.0.0.1"))
    assert not LOOPBACK_OK.allows(ipaddress.ip_address("224.0.0.1"))
    named = ssrf.Policy(allowed_networks=(ipaddress.ip_network("10.9.0.0/16"),))
    assert named.allows(ipaddress.ip_address("10.9.1.1"))
    assert not named.allows(ipaddress.ip_address("10.8.1.1"))


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",
        "http://127.1/",
        "http://0x7f000001/",
        "http://017700000001/",
        "http://[::1]:8080/",
        "http://localhost/",
        "http://api.localhost/",
        "https://169.254.169.254/latest/meta-data",
    ],
)
def test_literal_and_local_hosts_are_refused_without_dns(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Numeric shorthands and local names are refused without asking DNS."""

    def no_dns(*args: Any) -> Any:
        raise AssertionError("DNS was asked")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(DestinationRefused):
        ssrf.resolve_allowed(ssrf.parse_url(url), STRICT, no_dns)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/",
        "https://u:p@example.com/",
        "http:///path",
        "http://exa mple.com/",
        "file:///etc/passwd",
    ],
)
def test_malformed_urls_are_refused(url: str) -> None:
    with pytest.raises(DestinationRefused):
        ssrf.parse_url(url)


@pytest.fixture
def no_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything tries to connect."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket, "create_connection", refuse)


def test_a_name_resolving_to_loopback_is_refused_before_connecting(
    no_connections: None,
) -> None:
    """A host name whose DNS answer is 127.0.0.1 is refused, and so is one
    with a public *and* a private address (every address is checked)."""
    answers = {
        "rebind.example.com": ["127.0.0.1"],
        "mixed.example.com": ["93.184.216.34", "10.0.0.5"],
    }

    def resolver(host: str, port: int) -> list[str]:
        return answers[host]

    for host in answers:
        with pytest.raises(DestinationRefused, match="not a public address"):
            sender.post(f"http://{host}/hook", b"{}", {}, STRICT, 2.0, resolver)


def test_real_dns_name_of_this_host_resolving_to_loopback_is_refused(
    no_connections: None,
) -> None:
    """With the system resolver: a name that resolves to a loopback address
    (this machine's own name, when its hosts file maps it so) is refused."""
    name = socket.gethostname()
    try:
        addresses = ssrf.system_resolver(name, 80)
    except OSError:
        pytest.skip("this host's name does not resolve")
    if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        pytest.skip("this host's name does not resolve to loopback")
    with pytest.raises(DestinationRefused, match="resolves to"):
        sender.post(f"http://{name}/hook", b"{}", {}, STRICT, 2.0)


@pytest.fixture
def loopback_target() -> Iterator[Receiver]:
    target = Receiver(host="127.0.0.1")
    yield target
    target.close()


def test_redirect_to_loopback_is_refused_and_not_followed(
    loopback_target: Receiver,
) -> None:
    """A receiver on an allowed address (127.0.0.2, allowed by network) that
    redirects to 127.0.0.1 gets the POST; the redirect is refused as a private
    destination and nothing reaches 127.0.0.1."""
    redirector = Receiver(
        host="127.0.0.2",
        behaviour=lambda i, r: (302, {"Location": loopback_target.url("/internal")}),
    )
    policy = ssrf.Policy(allowed_networks=(ipaddress.ip_network("127.0.0.2/32"),))
    try:
        with pytest.raises(sender.RedirectRefused, match="refused") as info:
            sender.post(redirector.url(), b"{}", {}, policy, 2.0)
        assert info.value.status == 302
        assert len(redirector.requests) == 1
        assert loopback_target.requests == []
    finally:
        redirector.close()


def test_redirect_to_an_allowed_address_is_not_followed_either(
    loopback_target: Receiver,
) -> None:
    """Redirects are never followed, even to allowed addresses."""
    redirector = Receiver(
        behaviour=lambda i, r: (307, {"Location": loopback_target.url()})
    )
    try:
        with pytest.raises(sender.RedirectRefused, match="not followed"):
            sender.post(redirector.url(), b"{}", {}, LOOPBACK_OK, 2.0)
        assert loopback_target.requests == []
    finally:
        redirector.close()


def test_connection_goes_to_the_checked_address(loopback_target: Receiver) -> None:
    """The sender connects to the address it checked (a second DNS answer
    cannot swap one in) and sends the URL's Host header."""
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.0.0.1"]

    url = f"http://hooks.example.test:{loopback_target.port}/in"
    response = sender.post(url, b'{"a":1}', {"X-Test": "1"}, LOOPBACK_OK, 2.0, resolver)
    assert response.status == 200 and calls == ["hooks.example.test"]
    got = loopback_target.requests[0]
    assert got.path == "/in" and got.body == b'{"a":1}'
    assert got.headers["Host"] == f"hooks.example.test:{loopback_target.port}"
    assert got.headers["X-Test"] == "1"


def test_slow_receiver_times_out() -> None:
    """A receiver that does not answer within the timeout is an error
    (retried): the post gives up while the receiver is still holding its
    answer back (an order, not a duration: a busy machine may take longer
    than the timeout to get there, but never waits for the answer)."""
    import threading

    answer = threading.Event()

    def hold(index: int, request: Any) -> tuple[int, dict[str, str]]:
        answer.wait(30)
        return 200, {}

    slow = Receiver(behaviour=hold)
    try:
        with pytest.raises(OSError):
            sender.post(slow.url(), b"{}", {}, LOOPBACK_OK, 0.3)
        assert len(slow.requests) == 1  # it arrived; its answer never did
    finally:
        answer.set()
        slow.close()


@pytest.mark.django_db
def test_enqueue_allows_loopback_only_when_the_setting_says_so(
    api: Any, settings: Any, qname: str
) -> None:
    """The API refuses a loopback webhook URL unless
    BULLPEN_WEBHOOK_ALLOW_PRIVATE is on (or the network is allowed)."""
    body = {"name": "a", "options": {"webhook_url": "http://127.0.0.1:9/h"}}
    path = f"/api/v1/queues/{qname}/jobs"
    settings.BULLPEN_WEBHOOK_ALLOW_PRIVATE = False
    assert api.post_json(path, body).json()["error"]["code"] == "webhook_url_refused"
    settings.BULLPEN_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    assert api.post_json(path, body).status_code == 201
    settings.BULLPEN_WEBHOOK_ALLOWED_NETWORKS = []
    settings.BULLPEN_WEBHOOK_ALLOW_PRIVATE = True
    assert api.post_json(path, body).status_code == 201
