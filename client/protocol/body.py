"""`Body`: a request or response body as the codec hands it over, a msgpack map whose keys are
the schema's field names. One alias, so handlers and codecs say what they pass."""

from __future__ import annotations

from typing import Any

Body = dict[str, Any]
