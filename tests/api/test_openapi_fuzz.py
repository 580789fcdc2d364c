"""Schemathesis against the OpenAPI document, through the WSGI app: no input
it generates (valid or not) gets a 5xx, and every response matches the
documented status codes, content types and schemas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.helpers import connection_kept

#: The published document, fetched from the app itself (no DB or Redis needed).
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())


@pytest.fixture
def fuzz_token(make_token: Any, settings: Any) -> Iterator[str]:
    """A read/write token on every queue with room for the whole run; short
    SSE connections; Django's connection kept across the WSGI calls (as its
    test client does) so the test transaction holds."""
    settings.BULLPEN_API_SSE_MAX_S = 0.3
    settings.BULLPEN_API_SSE_KEEPALIVE_S = 0.1
    with connection_kept():
        yield make_token(rate=100_000)[1]


@schema.parametrize()
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)
def test_no_server_error_on_any_input(case: Any, fuzz_token: str) -> None:
    """Generated requests never get a 5xx, and responses conform to the doc."""
    response = case.call(headers={"Authorization": f"Bearer {fuzz_token}"})
    case.validate_response(
        response,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
