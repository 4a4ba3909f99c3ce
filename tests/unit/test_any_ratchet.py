"""The `Any` ratchet (scripts/any_count.py): the count of `Any` uses in client/, controller/ and
broker/ equals the committed ceiling, and the check fails both above and below it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("any_count", ROOT / "scripts" / "any_count.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["any_count"] = module
    spec.loader.exec_module(module)
    return module


any_count = _load()


def test_counts_names_and_attributes_not_imports_comments_or_strings() -> None:
    source = (
        "from __future__ import annotations\n"
        "import typing\n"
        "from typing import Any\n"
        "# Any in a comment\n"
        "def f(a: Any, b: dict[str, Any]) -> typing.Any:\n"
        "    '''Any in a docstring'''\n"
        "    x: list[Any] = ['Any']\n"
        "    return x\n"
    )
    assert any_count.count_source(source) == 4


def test_count_tree_skips_excluded_paths(tmp_path: Path) -> None:
    for rel in ("client/a.py", "broker/kafka/b.py", "broker/c.py", "controller/d.py"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("from typing import Any\nx: Any = 1\n")
    counts = any_count.count_tree(tmp_path, excluded=("broker/kafka",))
    assert counts == {"client/a.py": 1, "broker/c.py": 1, "controller/d.py": 1}


@pytest.mark.parametrize(
    ("count", "ceiling", "says"),
    [(11, 10, "above the ceiling"), (9, 10, "--update"), (10, 10, None)],
)
def test_check_fails_above_and_below_the_ceiling(
    count: int, ceiling: int, says: str | None
) -> None:
    problem = any_count.check(count, ceiling)
    if says is None:
        assert problem is None
    else:
        assert problem is not None and says in problem


def test_the_tree_is_at_its_ceiling() -> None:
    count = sum(any_count.count_tree(ROOT).values())
    ceiling = any_count.read_ceiling()
    assert any_count.check(count, ceiling) is None, any_count.check(count, ceiling)
