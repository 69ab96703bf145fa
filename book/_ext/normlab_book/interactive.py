"""The Sphinx extension of the interactive figures (:mod:`normlab.interactive`).

The charts themselves are library code that the chapters import; only the build's part lives
here, in the book's tooling: it writes the shared Vega bundle into the build's ``_static``
folder and loads it, once, on each page that embeds a chart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normlab import interactive
from normlab._io import write_text_atomic


def _load_on_page(
    app: Any, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    if f'class="{interactive.MARKER}"' in context.get("body", ""):
        app.add_js_file(interactive.BUNDLE)


def _write_bundle(app: Any, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        path = Path(app.outdir) / "_static" / interactive.BUNDLE
        write_text_atomic(path, interactive.bundle())


def setup(app: Any) -> dict[str, Any]:
    """Sphinx entry point: the bundle is written at the end of each HTML build, from the
    installed ``vl-convert-python``, and loaded by the pages that embed a chart."""
    app.connect("html-page-context", _load_on_page)
    app.connect("build-finished", _write_bundle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
