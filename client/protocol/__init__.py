"""Gregor's native wire protocol (docs/architecture.md §3): framing, API keys, schemas, errors.

Importing this package registers every API schema in `API_SPECS`.
"""

from client.errors import ErrorCode
from client.protocol import apis  # noqa: F401  (registers the schemas)
from client.protocol.api_keys import ApiKey
from client.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    VECTORED_MIN_BYTES,
    BinParts,
    FrameDecoder,
    FrameTooLargeError,
    MalformedFrameError,
    decode_request,
    decode_response,
    encode_request,
    encode_request_parts,
    encode_response,
    frame,
)
from client.protocol.schema import API_SPECS, ApiSpec

__all__ = [
    "API_SPECS",
    "DEFAULT_MAX_FRAME_BYTES",
    "VECTORED_MIN_BYTES",
    "ApiKey",
    "ApiSpec",
    "BinParts",
    "ErrorCode",
    "FrameDecoder",
    "FrameTooLargeError",
    "MalformedFrameError",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_request_parts",
    "encode_response",
    "frame",
]
