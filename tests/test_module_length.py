"""No module of the package runs past 700 lines: a longer one is split, one idea a module.

A module's length is its number of lines, docstring and comments included.
"""

from __future__ import annotations

from pathlib import Path

MAX_LINES = 700
COMPANION = Path(__file__).resolve().parents[1] / "companion"


def module_lengths(root: Path, package: str = "normlab") -> dict[str, int]:
    """Path under ``root`` -> lines, for every module of ``package``."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for path in sorted((root / package).rglob("*.py"))
    }


def test_no_module_is_longer_than_700_lines() -> None:
    too_long = {
        path: n for path, n in module_lengths(COMPANION).items() if n > MAX_LINES
    }
    assert not too_long, f"split these (at most {MAX_LINES} lines): {too_long}"


def test_the_guard_counts_every_module(tmp_path: Path) -> None:
    package = tmp_path / "normlab"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('"""A package."""\n')
    (package / "sub" / "m.py").write_text("x = 1\n\n# a comment\n")
    assert module_lengths(tmp_path) == {
        "normlab/__init__.py": 1,
        "normlab/sub/m.py": 3,
    }
