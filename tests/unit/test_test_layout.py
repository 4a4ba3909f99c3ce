"""Test modules have unique basenames: pytest imports them by basename (rootdir-relative
`rootdir` import mode, no __init__.py), so a second tests/**/test_x.py stops collection of the
whole run ("import file mismatch"). Narrow runs of one directory never see the clash, so this
test looks at the whole tree."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_module_basenames_are_unique() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name.startswith("test_") or path.name.endswith("_test.py"):
            seen[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
