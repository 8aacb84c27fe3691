"""ApiVersions (API 18, v0-4): what this broker serves. An unsupported version is answered
as Kafka does (ApiVersionsRequest.getErrorResponse): a v0 body with UNSUPPORTED_VERSION that
lists only ApiVersions, so the client retries with a version both sides know."""

from __future__ import annotations

import re
from typing import Any

from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import SUPPORTED, ApiKey
from kraft.errors import Errors

# Kafka's ApiVersionsRequest.isValid pattern for client_software_name/version (KIP-511).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def handle_api_versions(version: int, request: Any) -> Reply:
    module = response_module(ApiKey.API_VERSIONS, version)
    error = Errors.NONE
    if version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name or "")
        and _SOFTWARE.fullmatch(request.client_software_version or "")
    ):
        error = Errors.INVALID_REQUEST
    keys = tuple(
        build(module, "ApiVersion", api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(SUPPORTED.items())
    )
    return Reply(build(
        module, "ApiVersionsResponse", error_code=error_code(error), api_keys=keys,
        throttle_time=NO_THROTTLE,
    ))


def unsupported_version_response() -> Any:
    module = response_module(ApiKey.API_VERSIONS, 0)
    low, high = SUPPORTED[ApiKey.API_VERSIONS]
    return build(
        module, "ApiVersionsResponse", error_code=error_code(Errors.UNSUPPORTED_VERSION),
        api_keys=(build(module, "ApiVersion", api_key=ApiKey.API_VERSIONS,
                        min_version=low, max_version=high),),
    )
