"""Figures reach the reader: the book's kernels draw inline, each figure is shown once as a cell
output, and the check that `make book` runs after building catches a page without its figures.

The one way to show a figure: a package figure function (``normlab.figures``) returns a
``Figure`` not registered with pyplot, and the chapter makes it the cell's last expression,
without ``;``. A figure a chapter draws itself with pyplot ends with ``plt.show()``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.figure import Figure

sys.path.insert(0, str(Path(__file__).parent))
import book_figures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "figures.ipynb"
NOTEBOOKS = [
    p
    for p in sorted((ROOT / "book").rglob("*.ipynb"))
    if ".ipynb_checkpoints" not in p.parts
]
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")


def book_env() -> list[str]:
    """The command prefix that sets the environment of the book's kernels, read from the Makefile."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(ROOT), "book-env"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return shlex.split(out.stdout.strip())


def test_fixture_shows_each_figure_and_widget_once(tmp_path: Path) -> None:
    """Executed exactly as `make book` executes a chapter, the fixture's pyplot figure and bare
    ``Figure`` each give one ``image/png`` output, and its widget a widget view."""
    out = tmp_path / FIXTURE.name
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    subprocess.run(
        [
            *book_env(),
            sys.executable,
            str(Path(book_figures.__file__)),
            "--execute",
            str(FIXTURE),
            str(out),
        ],
        env=env,
        check=True,
        timeout=180,
    )
    cells = [
        c for c in json.loads(out.read_text())["cells"] if c["cell_type"] == "code"
    ]
    shown = {
        "expect-png": "image/png",
        "expect-widget": "application/vnd.jupyter.widget-view+json",
    }
    for index, cell in enumerate(cells):
        tags = set(cell["metadata"].get("tags", []))
        for tag, mime in shown.items():
            found = sum(mime in o.get("data", {}) for o in cell["outputs"])
            assert found == (1 if tag in tags else 0), (
                f"code cell {index}: {found} {mime} output(s), tags {sorted(tags)}"
            )


def test_the_package_has_figure_functions() -> None:
    assert {"plot_kernels", "training_curves"} <= book_figures.figure_functions()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_hides_its_result(path: Path) -> None:
    """A trailing ``;`` hides a cell's returned figure."""
    cells = [
        c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"
    ]
    hidden = [
        i for i, c in enumerate(cells) if "".join(c["source"]).rstrip().endswith(";")
    ]
    assert hidden == [], f"code cells {hidden} end with ';'"


def write_chapter(
    book: Path, html: Path, source: str, images: dict[str, bytes]
) -> None:
    """A one-cell chapter ``book/ch.ipynb`` and its page, showing ``images`` (file name -> bytes)."""
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": [source]}
    (book / "ch.ipynb").write_text(json.dumps({"cells": [cell]}))
    (html / "book").mkdir(parents=True, exist_ok=True)
    (html / "_images").mkdir(exist_ok=True)
    for name, data in images.items():
        (html / "_images" / name).write_bytes(data)
    (html / "_static").mkdir(exist_ok=True)
    (html / "_static" / "logo.png").write_bytes(
        png_bytes()
    )  # the theme's: not a figure
    tags = '<img src="../_static/logo.png" />' + "".join(
        f'<img src="../_images/{name}" />' for name in images
    )
    (html / "book" / "ch.html").write_text(f"<html><body>{tags}</body></html>")


def png_bytes() -> bytes:
    import io

    buffer = io.BytesIO()
    Figure(figsize=(1, 1)).savefig(buffer, format="png")
    return buffer.getvalue()


@pytest.mark.parametrize(
    "source, images, problem",
    [
        ("plot_kernels(k)", {"a.png": png_bytes()}, None),
        (
            "fig, ax = plt.subplots()\nplt.show()",
            {},
            "1 cell(s) draw a figure but the page shows 0",
        ),
        (
            "plot_kernels(k)",
            {"a.png": b"\x89PNG\r\n\x1a\nnot really"},
            "a.png is not a readable image",
        ),
        ("print(1)", {}, None),
    ],
)
def test_book_check_finds_missing_and_broken_images(
    tmp_path: Path, source: str, images: dict, problem: str | None
) -> None:
    book, html = tmp_path / "book", tmp_path / "html"
    book.mkdir()
    write_chapter(book, html, source, images)
    _, problems = book_figures.check(html, book, functions={"plot_kernels"})
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0], problems


def test_book_check_finds_a_missing_image_file(tmp_path: Path) -> None:
    book, html = tmp_path / "book", tmp_path / "html"
    book.mkdir()
    write_chapter(book, html, "plot_kernels(k)", {"a.png": png_bytes()})
    (html / "_images" / "a.png").unlink()
    _, problems = book_figures.check(html, book, functions={"plot_kernels"})
    assert problems == ["book/ch: ../_images/a.png does not exist"]
