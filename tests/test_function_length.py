"""No function of the package runs past 80 lines: a longer one is split into named helpers.

A function's length counts from its ``def`` (decorators excluded) to its last line, its
docstring included. LONG lists the functions not split yet, each at its length today; the
list may only shrink: a function on it must not grow, and a new one may not join it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

MAX_LINES = 80
COMPANION = Path(__file__).resolve().parents[1] / "companion"

#: ``module:qualified name`` -> its length today, for a function not split yet (none now):
LONG: dict[str, int] = {}


def _lengths(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function under ``node``, nested ones included."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            yield name, child.end_lineno - child.lineno + 1
            yield from _lengths(child, name + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _lengths(child, prefix + child.name + ".")
        else:
            yield from _lengths(child, prefix)


def function_lengths(root: Path, package: str = "normlab") -> dict[str, int]:
    """``module:qualified name`` -> lines, for every function and method under ``root``."""
    found: dict[str, int] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(), filename=str(path))
        found |= {f"{module}:{name}": n for name, n in _lengths(tree)}
    return found


def test_no_function_is_longer_than_80_lines() -> None:
    lengths = function_lengths(COMPANION)
    too_long = {
        name: n
        for name, n in lengths.items()
        if n > MAX_LINES and n > LONG.get(name, 0)
    }
    assert not too_long, (
        f"split these into named helpers (at most {MAX_LINES} lines): {too_long}"
    )


def test_the_allowlist_only_shrinks() -> None:
    """A function split below the limit (or gone) leaves LONG, so it cannot grow back."""
    lengths = function_lengths(COMPANION)
    stale = sorted(name for name in LONG if lengths.get(name, 0) <= MAX_LINES)
    assert not stale, f"remove from LONG: {stale}"


def test_the_guard_measures_nested_functions_and_methods(tmp_path: Path) -> None:
    package = tmp_path / "normlab"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(3))
    (package / "m.py").write_text(
        f"def f():\n{body}\n    def g():\n        return 1\n    return g\n"
        "class C:\n    def h(self):\n        return 2\n"
    )
    assert function_lengths(tmp_path) == {
        "normlab.m:f": 7,
        "normlab.m:f.g": 2,
        "normlab.m:C.h": 2,
    }
