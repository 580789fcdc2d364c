"""The OpenAPI document, generated from `spec`."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from ..handling import Call, json_response
from ..operations import operation
from ..spec import openapi


@operation(
    method="GET",
    path="/openapi.json",
    operation_id="getOpenApi",
    summary="This API's OpenAPI 3.1 document",
    scope=None,
    responses={200: ("The document", None)},
    tags=("meta",),
)
def openapi_document(request: HttpRequest, call: Call) -> HttpResponse:
    """The OpenAPI document of every operation, its server the API's path
    where the dashboard is mounted."""
    server = reverse("bullpen_api:openapi").removesuffix("/openapi.json")
    return json_response(openapi(server))
