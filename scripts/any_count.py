"""The `Any` ratchet: counts uses of `typing.Any` in client/, controller/ and broker/ and compares
the count with the ceiling committed in scripts/any_ceiling.txt.

What counts: every occurrence of the name `Any` in code, parsed with `ast` — an `ast.Name` whose
id is `Any` (annotations `x: Any`, `-> Any`, `list[Any]`, `dict[str, Any]`, casts,
`TypeVar(bound=Any)`) and an `ast.Attribute` `<something>.Any` (`typing.Any`). Annotations count
the same with or without `from __future__ import annotations`. Imports (`from typing import Any`),
comments, docstrings and other strings do not count.

    python scripts/any_count.py            # print the count and the ten files with most
    python scripts/any_count.py --check    # exit 1 unless count == ceiling (scripts/test.sh)
    python scripts/any_count.py --update   # write the count as the new ceiling

`--check` fails above the ceiling (type what you added) and also below it (lower the ceiling in
the same commit with `--update`), so the ceiling only goes down.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("client", "controller", "broker")
CEILING = ROOT / "scripts" / "any_ceiling.txt"
EXCLUDED: tuple[str, ...] = ()


def count_source(source: str, filename: str = "<source>") -> int:
    """Uses of `Any` in one module's source (see the module docstring for what counts)."""
    n = 0
    for node in ast.walk(ast.parse(source, filename)):
        if (isinstance(node, ast.Name) and node.id == "Any") or (
            isinstance(node, ast.Attribute) and node.attr == "Any"
        ):
            n += 1
    return n


def source_files(root: Path, excluded: Iterable[str] = EXCLUDED) -> list[Path]:
    skip = tuple(root / e for e in excluded)
    files = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if not any(path.is_relative_to(s) for s in skip):
                files.append(path)
    return files


def count_tree(root: Path, excluded: Iterable[str] = EXCLUDED) -> dict[str, int]:
    """{relative path: count} for every file with at least one use."""
    out = {}
    for path in source_files(root, excluded):
        n = count_source(path.read_text(encoding="utf-8"), str(path))
        if n:
            out[str(path.relative_to(root))] = n
    return out


def read_ceiling(path: Path = CEILING) -> int:
    return int(path.read_text(encoding="utf-8").split()[0])


def check(count: int, ceiling: int) -> str | None:
    """None when count == ceiling, else the message saying what to do."""
    if count > ceiling:
        return (
            f"Any count {count} is above the ceiling {ceiling} (scripts/any_ceiling.txt): "
            f"give the {count - ceiling} new use(s) a real type (python scripts/any_count.py "
            "lists the files with most)"
        )
    if count < ceiling:
        return (
            f"Any count {count} is below the ceiling {ceiling}: well done; lower the ceiling "
            "in the same commit with `python scripts/any_count.py --update`"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail unless count == ceiling")
    mode.add_argument("--update", action="store_true", help="write the count as the ceiling")
    args = ap.parse_args(argv)
    per_file = count_tree(ROOT)
    count = sum(per_file.values())
    if args.update:
        CEILING.write_text(f"{count}\n", encoding="utf-8")
        print(f"Any count {count}: written to {CEILING.relative_to(ROOT)}")
        return 0
    ceiling = read_ceiling()
    print(f"Any count {count} (ceiling {ceiling})")
    if args.check:
        problem = check(count, ceiling)
        if problem:
            print(problem, file=sys.stderr)
            return 1
        return 0
    for name, n in sorted(per_file.items(), key=lambda kv: -kv[1])[:10]:
        print(f"{n:6d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
