"""docs/configuration.md must match the registry."""

from __future__ import annotations

from client.config import REGISTRY
from client.config.docs import DOC_PATH, REGENERATE, main, render


def test_committed_docs_are_current():
    current = DOC_PATH.read_text() if DOC_PATH.exists() else ""
    assert current == render(), f"docs/configuration.md is stale: regenerate it with `{REGENERATE}`"


def test_every_key_is_documented():
    text = render()
    for name in REGISTRY.keys:
        assert f"`{name}`" in text


def test_check_mode_reports_stale_file(tmp_path, capsys):
    out = tmp_path / "c.md"
    out.write_text("old")
    assert main(["--check", "--output", str(out)]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert main(["--output", str(out)]) == 0
    assert main(["--check", "--output", str(out)]) == 0
