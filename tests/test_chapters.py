"""Chapters 1-15 as a reader sees them (from the notebooks, without running them): listings
within 88 columns, a caption under every figure, no prose pointing at a printout, and in
Part II (chapters 10-15) no check or glue left in a code cell the HTML shows."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from book_figures import DIRECT, HIDDEN_TAGS, figure_functions

ROOT = Path(__file__).resolve().parents[1]
#: The chapters these rules cover, by number.
CHAPTERS = sorted(
    p for p in (ROOT / "book").glob("*.ipynb") if 1 <= int(p.name[:2]) <= 15
)
PART2 = [p for p in CHAPTERS if int(p.name[:2]) >= 10]
#: The longest code line a listing shows without scrolling (ruff's line length).
LINE = 88
#: A figure's caption: a Markdown cell right under its cell, beginning so.
CAPTION = re.compile(r"^\*\*Figure\.?\*\*")
#: Calls that show figures without returning one (a live run beside a saved set, an
#: experiment's report figures, the widget's static figure, a figure drawn in place).
SHOWING = {"beside", "report_figures", "draw_gates", "new_figure"}
#: Tags that keep a cell's input out of the HTML.
NO_INPUT = {"remove-cell", "remove-input", "hide-input"}


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


@pytest.fixture(scope="module")
def functions() -> set[str]:
    return figure_functions()


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_listings_fit_88_columns(path: Path) -> None:
    long = [
        line
        for cell in cells(path)
        if cell["cell_type"] == "code"  # removed cells too: Colab shows them
        for line in source(cell).splitlines()
        if len(line) > LINE
    ]
    assert long == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_figure_has_a_caption_under_it(path: Path, functions: set[str]) -> None:
    found = cells(path)
    missing = []
    for i, cell in enumerate(found):
        if cell["cell_type"] != "code" or tags(cell) & HIDDEN_TAGS:
            continue
        if not _draws(cell, functions):
            continue
        after = found[i + 1] if i + 1 < len(found) else None
        if (
            after is None
            or after["cell_type"] != "markdown"
            or not CAPTION.match(source(after))
        ):
            missing.append(source(cell)[:60])
    assert missing == []


def _draws(cell: dict, functions: set[str]) -> bool:
    """Whether a code cell draws a figure, as :func:`book_figures.figure_cells` counts:
    it calls a figure function of the package or makes a matplotlib figure itself."""
    calls = "".join(rf"|\b{re.escape(f)}\s*\(" for f in sorted(functions | SHOWING))
    return re.search(DIRECT + calls, source(cell)) is not None


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_prose_points_at_a_printout(path: Path) -> None:
    pointing = re.compile(r"print(ed|out)\s+above|the\s+printed\s+\w+")
    found = [
        source(c)[:60]
        for c in cells(path)
        if c["cell_type"] == "markdown" and pointing.search(source(c))
    ]
    assert found == []


def _solutions(found: list[dict]) -> set[int]:
    """The indices of the code cells inside an exercise's solution."""
    inside, indices = False, set()
    for i, cell in enumerate(found):
        text = source(cell)
        if cell["cell_type"] == "markdown":
            inside = ("solution-start" in text or inside) and "solution-end" not in text
        elif inside:
            indices.add(i)
    return indices


@pytest.mark.parametrize("path", PART2, ids=lambda p: p.name)
def test_checks_and_glue_are_not_shown(path: Path) -> None:
    """A Part II cell that checks (a top-level ``assert``) or glues shows no input in the
    HTML; an exercise's solution may check what it computed."""
    found = cells(path)
    solutions = _solutions(found)
    shown = []
    for i, cell in enumerate(found):
        if cell["cell_type"] != "code" or tags(cell) & NO_INPUT or i in solutions:
            continue
        text = source(cell)
        if "glue(" in text or any(
            isinstance(node, ast.Assert) for node in ast.parse(_python(text)).body
        ):
            shown.append(text[:60])
    assert shown == []


def _python(text: str) -> str:
    """A cell's source without its IPython magics."""
    return "\n".join(
        "pass" if line.lstrip().startswith(("%", "!")) else line
        for line in text.splitlines()
    )
