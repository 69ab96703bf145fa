"""The book's prose, page by page: no words of the project's history, and no paragraph
of numbers (issue 50 and 51's Done-when: at most 30 glued values in a chapter's prose,
tables aside, which carry the rest)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
PAGES = sorted(BOOK.glob("*.md"))
#: Words of project history or template slips that no page may carry.
HISTORY = (
    "earlier run", "earlier version", "earlier saved set", "earlier stand-in",
    "reference notes", "not written yet", "once offered", "first judged", "nbval",
    "Exercise Exercise", "a possible reason the summary names",
)  # fmt: skip
MAX_GLUED = 30
GLUE = re.compile(r"\{glue(:\w+)?\}`")


def _markdown(path: Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text()]
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def glued_in_prose(texts: list[str]) -> int:
    """Glued values outside Markdown tables (a table row starts with ``|``)."""
    return sum(
        len(GLUE.findall(line))
        for text in texts
        for line in text.splitlines()
        if not line.lstrip().startswith("|")
    )


def test_the_book_has_its_sixteen_chapters() -> None:
    assert len(CHAPTERS) == 16 and PAGES


@pytest.mark.parametrize("path", CHAPTERS + PAGES, ids=lambda p: p.name)
def test_no_page_speaks_of_the_projects_history(path: Path) -> None:
    text = "\n".join(_markdown(path)).lower()
    assert not [w for w in HISTORY if w.lower() in text]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_chapters_prose_carries_more_than_thirty_glued_values(path: Path) -> None:
    assert glued_in_prose(_markdown(path)) <= MAX_GLUED


def test_the_count_skips_tables_and_reads_every_glue_role() -> None:
    prose = "A {glue:text}`a` and {glue}`b`.\n| {glue:md}`c` | {glue:text}`d` |\n"
    assert glued_in_prose([prose]) == 2
    assert glued_in_prose([prose * 16]) == 32
