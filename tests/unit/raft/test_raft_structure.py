"""controller/raft is split by ownership (issue 24): the leader's state is a Leader object that
exists while the node leads, the driver hand-over an Outbox; no class built on a mixin of the
package, no attributes declared for another class to set, no stub standing in for another
class's method, no read of another object's private state."""

from __future__ import annotations

import ast
from pathlib import Path

RAFT = Path(__file__).resolve().parents[3] / "controller" / "raft"
Trees = dict[str, ast.Module]


def _trees() -> Trees:
    return {p.name: ast.parse(p.read_text()) for p in sorted(RAFT.glob("*.py"))}


def _classes(tree: ast.AST) -> list[ast.ClassDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def mixins(trees: Trees) -> list[str]:
    """Classes whose bases include a class of the package that is not a plain base type (an
    error, or the Message every message extends) but a part of another class."""
    own = {c.name: c for tree in trees.values() for c in _classes(tree)}
    return [
        f"{name}:{c.name}({ast.unparse(b)})"
        for name, tree in trees.items()
        for c in _classes(tree)
        for b in c.bases
        if ast.unparse(b) in own
        and ast.unparse(b) not in ("Message",)
        and not ast.unparse(b).endswith("Error")
    ]


def declared_for_others(trees: Trees) -> list[str]:
    """Attributes annotated in a class body with no value (records' fields excepted)."""

    def record(c: ast.ClassDef) -> bool:
        return any(ast.unparse(b) in ("NamedTuple", "Protocol", "Message") for b in c.bases) or any(
            "dataclass" in ast.unparse(d) for d in c.decorator_list
        )

    return [
        f"{name}:{c.name}.{ast.unparse(s.target)}"
        for name, tree in trees.items()
        for c in _classes(tree)
        if not record(c)
        for s in c.body
        if isinstance(s, ast.AnnAssign) and s.value is None
    ]


def stubs(trees: Trees) -> list[str]:
    return [
        f"{name}:{n.lineno}"
        for name, tree in trees.items()
        for n in ast.walk(tree)
        if isinstance(n, ast.Raise)
        and n.exc is not None
        and "NotImplementedError" in ast.unparse(n.exc)
    ]


def private_reads(trees: Trees) -> list[str]:
    return [
        f"{name}:{n.lineno} {ast.unparse(n)}"
        for name, tree in trees.items()
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and n.attr.startswith("_")
        and not n.attr.startswith("__")
        and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
    ]


def test_the_package_has_no_mixin_stub_or_private_read():
    trees = _trees()
    assert mixins(trees) == []
    assert declared_for_others(trees) == []
    assert stubs(trees) == []
    assert private_reads(trees) == []


def test_the_checks_catch_the_old_leader_mixin():
    """The shape LeaderMixin had: RaftNode's attributes re-declared, its methods stubbed."""
    bad = {
        "bad.py": ast.parse(
            "class LeaderMixin:\n"
            "    term: int\n"
            "    def _send(self, m):\n"
            "        raise NotImplementedError\n"
            "class RaftNode(LeaderMixin):\n"
            "    def f(self, other):\n"
            "        return other._secret\n"
        )
    }
    assert mixins(bad) == ["bad.py:RaftNode(LeaderMixin)"]
    assert declared_for_others(bad) == ["bad.py:LeaderMixin.term"]
    assert stubs(bad) == ["bad.py:4"]
    assert private_reads(bad) == ["bad.py:7 other._secret"]
