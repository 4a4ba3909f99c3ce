"""docs/protocol.md is generated from the schemas; it must match the code."""

from __future__ import annotations

from client.errors import ErrorCode
from client.protocol import API_SPECS
from client.protocol.docs import DOC_PATH, render


def test_protocol_doc_is_fresh() -> None:
    assert DOC_PATH.exists(), "run python -m client.protocol.docs"
    assert DOC_PATH.read_text(encoding="utf-8") == render(), (
        "docs/protocol.md is stale: run python -m client.protocol.docs"
    )


def test_doc_names_every_api_and_error_code() -> None:
    text = render()
    for spec in API_SPECS.values():
        assert f"### {spec.name} (key {int(spec.key)}" in text
    for code in ErrorCode:
        assert f"| {int(code)} | {code.name} |" in text
