"""Figures in the built book: the check `make book` runs after building, and the notebook executor
that tests/test_book_figures.py uses.

A chapter *draws a figure* in each code cell that calls a figure function of the package (a
function of a ``normlab.figures`` module annotated to return a matplotlib ``Figure``) or creates a
figure with matplotlib directly. Its HTML page must then show at least that many images (the
theme's own, under ``_static/``, do not count), and every image on the page must be a valid PNG.

    python tests/book_figures.py _build/html          # after `make book`
    python tests/book_figures.py --execute NB OUT     # run NB as the book build does, save OUT
"""

from __future__ import annotations

import argparse
import base64
import importlib
import io
import json
import pkgutil
import re
import sys
import typing
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
# Cells tagged so are not shown in the HTML, so their figures are not expected there.
HIDDEN_TAGS = {"remove-cell", "remove-output"}
DIRECT = r"\bplt\.(?:subplots|figure|subplot_mosaic)\s*\(|\bFigure\s*\("


def figure_functions() -> set[str]:
    """Names of the package's figure functions: those of ``normlab.figures`` returning a
    Figure."""
    from matplotlib.figure import Figure
    from normlab import figures

    names = set()
    for module_info in pkgutil.iter_modules(figures.__path__):
        module = importlib.import_module(f"normlab.figures.{module_info.name}")
        for name, obj in vars(module).items():
            if callable(obj) and getattr(obj, "__module__", None) == module.__name__:
                try:
                    returns = typing.get_type_hints(obj).get("return")
                except (NameError, TypeError):
                    continue
                if returns is Figure:
                    names.add(name)
    return names


def figure_cells(notebook: Path, functions: set[str]) -> int:
    """How many shown code cells of ``notebook`` draw a figure."""
    pattern = re.compile(
        DIRECT + "".join(rf"|\b{re.escape(f)}\s*\(" for f in sorted(functions))
    )
    count = 0
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code" or HIDDEN_TAGS & set(
            cell.get("metadata", {}).get("tags", [])
        ):
            continue
        if pattern.search("".join(cell["source"])):
            count += 1
    return count


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.sources.append(dict(attrs).get("src") or "")


def page_images(page: Path) -> list[str]:
    """The ``src`` of every ``<img>`` on an HTML page."""
    parser = _Images()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.sources


def png_problem(page: Path, src: str) -> str | None:
    """Why the image ``src`` of ``page`` is not a valid PNG, or None when it is."""
    from PIL import Image

    if src.startswith("data:"):
        header, _, payload = src.partition(",")
        if header != "data:image/png;base64":
            return f"{src[:30]}... is not a base64 PNG"
        data = base64.b64decode(payload)
    else:
        path = (page.parent / src.split("#")[0].split("?")[0]).resolve()
        if not path.is_file():
            return f"{src} does not exist"
        data = path.read_bytes()
    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = image.format
            image.verify()
    except Exception as error:  # PIL raises many types for a damaged file
        return f"{src} is not a readable image ({error})"
    return None if kind == "PNG" else f"{src} is a {kind}, not a PNG"


def check(
    html: Path, book: Path = BOOK, functions: set[str] | None = None
) -> tuple[list[str], list[str]]:
    """One line per chapter (images found, figure cells), and the problems found."""
    functions = figure_functions() if functions is None else functions
    report, problems = [], []
    for notebook in sorted(book.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in notebook.parts:
            continue
        name = notebook.relative_to(book.parent).with_suffix("")
        page = html / name.with_suffix(".html")
        expected = figure_cells(notebook, functions)
        if not page.is_file():
            problems.append(f"{name}: no page {page}")
            continue
        sources = page_images(page)
        figures = [s for s in sources if "_static/" not in s]
        report.append(
            f"{name}: {len(figures)} figure image(s), {expected} cell(s) drawing a figure"
        )
        if len(figures) < expected:
            problems.append(
                f"{name}: {expected} cell(s) draw a figure but the page shows {len(figures)} image(s)"
            )
        problems += [
            f"{name}: {p}" for p in (png_problem(page, s) for s in sources) if p
        ]
    return report, problems


def execute(notebook: Path, out: Path) -> None:
    """Run ``notebook`` as the book build does (its kernel, _config.yml's timeout, in its folder)."""
    import nbformat
    import yaml
    from nbclient import NotebookClient

    settings = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(
        nb,
        timeout=settings["timeout"],
        allow_errors=settings["allow_errors"],
        kernel_name=nb.metadata.kernelspec.name,
        resources={"metadata": {"path": str(notebook.parent)}},
    ).execute()
    nbformat.write(nb, out)


def main(argv: typing.Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "html", nargs="?", type=Path, help="the built book, e.g. _build/html"
    )
    parser.add_argument("--execute", nargs=2, type=Path, metavar=("NOTEBOOK", "OUT"))
    args = parser.parse_args(argv)
    if args.execute:
        execute(*args.execute)
        return 0
    if args.html is None:
        parser.error("give the built book's folder, e.g. _build/html")
    report, problems = check(args.html)
    print("\n".join(report))
    if problems:
        print(
            "Figures missing from the built book:\n  " + "\n  ".join(problems),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
