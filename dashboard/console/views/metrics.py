"""`/metrics` for Prometheus: a bearer token or an allowed network, no session.

BULLPEN_METRICS_TOKEN (when set) is accepted as `Authorization: Bearer <token>`
from anywhere; BULLPEN_METRICS_ALLOW lists the networks (CIDR) that may scrape
without one. The client address is `dashboard.shared.addresses.client_address`: the
connection's, or behind the trusted proxies (dashboard.shared.addresses) the one they
forwarded (a proxy on the same host would otherwise let every client in).
"""

from __future__ import annotations

import hmac
import ipaddress
from functools import cache

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.exposition import choose_encoder

from dashboard.shared import conf
from dashboard.shared.addresses import client_address

from ..metrics import BullpenCollector


@cache
def collector() -> BullpenCollector:
    """This process's collector (it keeps the fleet's families written)."""
    return BullpenCollector()


def _networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in conf.get().metrics_allow]


def _token_ok(request: HttpRequest) -> bool:
    token = conf.get().metrics_token
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return (
        bool(token)
        and scheme.lower() == "bearer"
        and hmac.compare_digest(given.strip().encode(), token.encode())
    )


def _network_ok(request: HttpRequest) -> bool:
    try:
        address = ipaddress.ip_address(client_address(request))
    except ValueError:
        return False
    return any(address in network for network in _networks())


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """The exposition (text 0.0.4, or OpenMetrics when the scraper asks for it)."""
    if not (_token_ok(request) or _network_ok(request)):
        if conf.get().metrics_token:
            response = HttpResponse("bearer token required\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="bullpen-metrics"'
            return response
        return HttpResponse("not from an allowed network\n", status=403)
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(collector().exposition(encoder), content_type=content_type)
