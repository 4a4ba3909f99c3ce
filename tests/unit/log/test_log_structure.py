"""broker/log is split by ownership (issue 24): the Log owns the segment list; durability,
retention, compaction and the producer state are objects it holds, each with its own state,
working on it through its narrow interface. No class spread over mixins of our own classes, no
stubs standing in for another class's methods, no state declared for another class to set, no
reads of another object's private state, no class past ~500 lines or ~8 collaborators.

Each check is a function over parsed modules; the last test runs them over a sample written
the old way (a Log spread over mixins) to show each one catches what it is for."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / "broker" / "log"

# handles.py: the descriptor cache and the handles it lends are one unit (one module, one lock
# the handles take through the cache); nothing else reaches into another object.
PRIVATE_ACCESS_ALLOWED = {"handles.py"}

Trees = dict[str, ast.Module]


def _log_trees() -> Trees:
    return {path.name: ast.parse(path.read_text()) for path in sorted(LOG.glob("*.py"))}


def _classes(tree: ast.AST) -> list[ast.ClassDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def _own_classes(extra: Trees | None = None) -> dict[str, list[str]]:
    """Every class defined under broker/ (and in `extra`), with its bases as written."""
    trees = [ast.parse(p.read_text()) for p in (ROOT / "broker").rglob("*.py")]
    return {
        c.name: [ast.unparse(b) for b in c.bases]
        for tree in [*trees, *(extra or {}).values()]
        for c in _classes(tree)
    }


def _base_name(base: ast.expr) -> str:
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else ""


def _class_constants(c: ast.ClassDef) -> set[str]:
    """Names given a value in the class body itself."""
    names: set[str] = set()
    for stmt in c.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets = [stmt.target]
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def mixed_classes(trees: Trees, own: dict[str, list[str]]) -> dict[str, list[str]]:
    return {
        f"{name}:{c.name}": bases
        for name, tree in trees.items()
        for c in _classes(tree)
        if len(bases := [b for b in map(_base_name, c.bases) if b in own]) >= 2
    }


def stubs(trees: Trees) -> list[str]:
    return [
        f"{name}:{node.lineno}"
        for name, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise)
        and node.exc is not None
        and "NotImplementedError" in ast.unparse(node.exc)
    ]


def state_declared_for_others(trees: Trees) -> set[str]:
    """A mixin's tell: attributes annotated in a class body with no value, for another class
    to set. An abstract class constant (given a value by each subclass's body), a NamedTuple's
    or a dataclass's fields are fine."""
    declared = set()
    for name, tree in trees.items():
        classes = _classes(tree)
        for c in classes:
            if any(_base_name(b) in ("NamedTuple", "Protocol") for b in c.bases) or any(
                "dataclass" in ast.unparse(d) for d in c.decorator_list
            ):
                continue
            subs = [_class_constants(s) for s in classes if c.name in map(_base_name, s.bases)]
            declared |= {
                f"{name}:{c.name}.{stmt.target.id}"
                for stmt in c.body
                if isinstance(stmt, ast.AnnAssign)
                and stmt.value is None
                and isinstance(stmt.target, ast.Name)
                and not (subs and all(stmt.target.id in given for given in subs))
            }
    return declared


def private_reads(trees: Trees) -> list[str]:
    return [
        f"{name}:{node.lineno} {ast.unparse(node)}"
        for name, tree in trees.items()
        if name not in PRIVATE_ACCESS_ALLOWED
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]


def long_classes(trees: Trees, limit: int = 500) -> dict[str, int]:
    return {
        f"{name}:{c.name}": n
        for name, tree in trees.items()
        for c in _classes(tree)
        if (n := (c.end_lineno or c.lineno) - c.lineno + 1) > limit
    }


def crowded_classes(trees: Trees, own: dict[str, list[str]], limit: int = 8) -> dict:
    """Collaborators: the other classes of broker/ a class names (in code or in a string
    annotation), values (NamedTuples) and exceptions left out."""
    values = {
        name
        for name, bases in own.items()
        if any(b == "NamedTuple" or b.endswith(("Error", "Exception")) for b in bases)
    }
    crowded = {}
    for name, tree in trees.items():
        for c in _classes(tree):
            named = {n.id for n in ast.walk(c) if isinstance(n, ast.Name)} | {
                n.value for n in ast.walk(c) if isinstance(n, ast.Constant)
            }
            peers = {n for n in named if isinstance(n, str) and n in own} - values - {c.name}
            if len(peers) > limit:
                crowded[f"{name}:{c.name}"] = sorted(peers)
    return crowded


def test_no_class_has_our_classes_as_mixins():
    assert mixed_classes(_log_trees(), _own_classes()) == {}


def test_no_method_stubs():
    assert stubs(_log_trees()) == []


def test_no_class_declares_state_for_another_to_set():
    assert state_declared_for_others(_log_trees()) == set()


def test_no_reads_of_another_objects_private_state():
    assert private_reads(_log_trees()) == []


def test_no_class_past_500_lines():
    assert long_classes(_log_trees()) == {}


def test_no_class_past_8_collaborators():
    assert crowded_classes(_log_trees(), _own_classes()) == {}


def test_the_log_holds_its_parts():
    log = next(c for c in _classes(_log_trees()["log.py"]) if c.name == "Log")
    assert log.bases == []
    held = {
        target.attr
        for node in ast.walk(log)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }
    assert {"durability", "retention", "compaction", "producers"} <= held


OLD_WAY = """
class SampleRetention:
    _lock: object
    _segments: list

    def _end(self) -> int:
        raise NotImplementedError


class SampleDurability:
    _flushed: int


class SampleLog(SampleRetention, SampleDurability):
    def __init__(self, other) -> None:
        self._lock = None
        self._segments = []
        self._flushed = other._flushed
        self._peers = (A1, A2, A3, A4, A5, A6, A7, A8, A9)
"""


def test_each_check_catches_the_old_way():
    trees = {"sample.py": ast.parse(OLD_WAY + "\n" * 500 + "        pass\n")}
    own = _own_classes(trees) | {f"A{i}": [] for i in range(1, 10)}
    assert mixed_classes(trees, own) == {
        "sample.py:SampleLog": ["SampleRetention", "SampleDurability"]
    }
    assert stubs(trees) == ["sample.py:7"]
    assert state_declared_for_others(trees) == {
        "sample.py:SampleRetention._lock",
        "sample.py:SampleRetention._segments",
        "sample.py:SampleDurability._flushed",
    }
    assert private_reads(trees) == ["sample.py:18 other._flushed"]
    assert list(long_classes(trees)) == ["sample.py:SampleLog"]
    assert list(crowded_classes(trees, own)) == ["sample.py:SampleLog"]
