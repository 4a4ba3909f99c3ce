"""ApiVersions: the first request on every connection."""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.schema import INT16, INT32, ApiSpec, Array, Field, Struct, register

API_VERSIONS = register(
    ApiSpec(
        key=ApiKey.API_VERSIONS,
        name="ApiVersions",
        doc="Lists the API keys and version ranges the server supports. "
        "Answered for any version; unknown versions get UNSUPPORTED_VERSION plus the table.",
        request=Struct(),
        response=Struct(
            Field("error_code", INT16),
            Field(
                "api_keys",
                Array(
                    Struct(
                        Field("api_key", INT32),
                        Field("min_version", INT16),
                        Field("max_version", INT16),
                        name="ApiVersion",
                    )
                ),
            ),
            Field("throttle_time_ms", INT32, default=0),
        ),
    )
)
