"""Show the package's own source in a chapter, so the book and the package cannot drift."""
from __future__ import annotations

import inspect
import textwrap
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer


class SourceView:
    """The source of one normlab object, rendered with highlighting in notebooks.

    ``repr`` gives plain text (terminals, doctests); ``_repr_html_`` gives highlighted HTML
    that Jupyter and the HTML book display.
    """

    def __init__(self, obj: Any) -> None:
        module = inspect.getmodule(obj)
        if module is None or not module.__name__.split(".")[0] == "normlab":
            raise TypeError(f"obj must be a normlab module, class or function, got {obj!r}")
        self.name = getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))
        self.module = module.__name__
        self.code = textwrap.dedent(inspect.getsource(obj))
        self.path = inspect.getsourcefile(obj)
        _, self.first_line = inspect.getsourcelines(obj)

    def __repr__(self) -> str:
        return self.code

    def _repr_html_(self) -> str:
        formatter = HtmlFormatter(noclasses=True, style="friendly")
        caption = (
            f"<div style='font-size:0.85em;color:#555'>source: <code>{self.module}</code>"
            f" ({self.name}, line {self.first_line})</div>"
        )
        return caption + highlight(self.code, PythonLexer(), formatter)


def show_source(obj: Any) -> SourceView:
    """Return a displayable view of the source of a normlab class, function or module.

    In a notebook, make it the last expression of a cell (or pass it to ``display``)::

        from normlab import show_source
        from normlab.layers import AffineLikeLinear
        show_source(AffineLikeLinear)
    """
    return SourceView(obj)
