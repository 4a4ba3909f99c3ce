"""broker/replica is split by ownership (issue 24): no class spread over mixins of our own
classes, no stubs standing in for another class's methods, no class past ~500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
REPLICA = ROOT / "broker" / "replica"


def _classes(path: Path) -> list[ast.ClassDef]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]


def _own_class_names() -> set[str]:
    return {
        c.name
        for path in (ROOT / "broker").rglob("*.py")
        if ".venv" not in path.parts
        for c in _classes(path)
    }


def _base_name(base: ast.expr) -> str:
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else ""


def test_no_class_has_two_of_our_classes_as_bases():
    own = _own_class_names()
    mixed = {
        f"{path.name}:{c.name}": bases
        for path in REPLICA.glob("*.py")
        for c in _classes(path)
        if len(bases := [b for b in map(_base_name, c.bases) if b in own]) >= 2
    }
    assert mixed == {}


def test_no_method_stubs():
    stubs = [
        f"{path.name}:{node.lineno}"
        for path in REPLICA.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Raise)
        and node.exc is not None
        and "NotImplementedError" in ast.unparse(node.exc)
    ]
    assert stubs == []


def test_no_class_past_500_lines():
    long = {
        f"{path.name}:{c.name}": n
        for path in REPLICA.glob("*.py")
        for c in _classes(path)
        if (n := (c.end_lineno or c.lineno) - c.lineno + 1) > 500
    }
    assert long == {}
