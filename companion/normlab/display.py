"""Show the package's own source in a chapter, so the book and the package cannot drift.

A chapter shows what its text is about, like a textbook listing: for a class, its maths (the
``.. math::`` block of its docstring) and its ``forward`` (or the methods named); the input
checks at the top of a function are elided. The full source is one click away, folded behind
a toggle. Long lines wrap inside the column instead of scrolling sideways.
"""

from __future__ import annotations

import ast
import html
import inspect
import re
import textwrap
from collections.abc import Mapping
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

__all__ = [
    "DEFAULT_MEMBERS",
    "CHECK_PREFIXES",
    "ELIDED",
    "GATHERED",
    "HANGING",
    "GLUE_PREFIX",
    "SourceView",
    "show_source",
    "glue",
    "NAMED_COLUMNS",
    "reader_names",
    "data_sources",
    "table",
]

#: What a listing of a class shows when no member is named.
DEFAULT_MEMBERS = ("forward",)
#: A leading call of a function named so is an input check, elided from the listing (as is a
#: leading ``if ...: raise``).
CHECK_PREFIXES = ("_check", "check_")
ELIDED = "# (input checks elided: see the full source)"
GATHERED = r"\begin{{gathered}}{}\end{{gathered}}"
#: How many columns right of its line's indentation a wrapped listing line continues.
HANGING = 4
#: What a glued value's MIME types start with when it is not shown (myst-nb's ``GLUE_PREFIX``).
GLUE_PREFIX = "application/papermill.record/"


class SourceView:
    """The source of one normlab object, as a listing with the full source folded away.

    Args:
        obj: a normlab class, function, method or module.
        members: for a class, the methods to list (default: ``forward`` when the class defines
            it, else the whole class).

    ``repr`` gives the listing as plain text; ``_repr_html_`` gives the highlighted listing,
    the docstring's maths and a ``<details>`` toggle with the full source.
    """

    def __init__(self, obj: Any, members: tuple[str, ...] = ()) -> None:
        module = inspect.getmodule(obj)
        if module is None or not module.__name__.split(".")[0] == "normlab":
            raise TypeError(
                f"obj must be a normlab module, class or function, got {obj!r}"
            )
        if members and not inspect.isclass(obj):
            raise TypeError(f"members can only be named for a class, got {obj!r}")
        missing = [m for m in members if not inspect.isfunction(getattr(obj, m, None))]
        if missing:
            raise ValueError(
                f"members must be methods of {obj.__qualname__}, got {missing}"
            )
        self.name = getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))
        self.module = module.__name__
        self.code = textwrap.dedent(inspect.getsource(obj))
        self.path = inspect.getsourcefile(obj)
        _, self.first_line = inspect.getsourcelines(obj)
        self.maths = _docstring_maths(obj.__doc__ or "") if inspect.isclass(obj) else []
        self.listing = _listing(obj, members)

    @property
    def folded(self) -> bool:
        """Whether the listing leaves anything out of the full source."""
        return self.listing.strip() != self.code.strip()

    def __repr__(self) -> str:
        if not self.folded:
            return self.code
        return f"{self.listing}\n# full source: {len(self.code.splitlines())} lines (SourceView.code)\n"

    def _repr_html_(self) -> str:
        caption = (
            f"<div style='font-size:0.85em;color:#555'>source: <code>{self.module}</code>"
            f" ({html.escape(self.name)}, line {self.first_line})</div>"
        )
        # MathJax typesets the docstring's maths in the book and in Jupyter.
        maths = "".join(
            f"<div class='mathjax_process' style='overflow-x:auto'>\\[{html.escape(m)}\\]</div>"
            for m in self.maths
        )
        parts = [caption, maths, _highlight(self.listing)]
        if self.folded:
            lines = len(self.code.splitlines())
            parts.append(
                f"<details><summary>Full source of <code>{html.escape(self.name)}</code>"
                f" ({lines} lines)</summary>{_highlight(self.code)}</details>"
            )
        return "<div class='normlab-source'>" + "".join(parts) + "</div>"


def _highlight(code: str) -> str:
    """Highlighted HTML whose long lines wrap in the column rather than scroll, each wrapped
    line continuing :data:`HANGING` columns right of its own indentation."""
    out = highlight(
        code, PythonLexer(), HtmlFormatter(noclasses=True, style="friendly")
    )
    start = out.index(">", out.index("<pre")) + 1
    end = out.rindex("</pre>")
    body = out[start:end].removeprefix("<span></span>")
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    raw = code.splitlines()
    spans = []
    for i, line in enumerate(lines):
        text = raw[i] if i < len(raw) else ""
        hang = len(text) - len(text.lstrip(" ")) + HANGING
        spans.append(
            f'<span style="display:block;padding-left:{hang}ch;text-indent:-{hang}ch">'
            f"{line}\n</span>"
        )
    pre = out[:start].replace(
        '<pre style="', '<pre style="white-space:pre-wrap;overflow-wrap:anywhere;', 1
    )
    return pre + "".join(spans) + out[end:]


def _docstring_maths(doc: str) -> list[str]:
    """The bodies of the ``.. math::`` blocks of a docstring, one LaTeX string each."""
    doc = inspect.cleandoc(doc)
    blocks = re.findall(r"^\.\. math::\n((?:[ \t]+.*\n?|\n)+)", doc + "\n", flags=re.M)
    maths = [
        " ".join(line.strip() for line in block.strip().splitlines())
        for block in blocks
    ]
    # Equations set side by side with \qquad go one per line, so they fit a narrow column.
    return [
        GATHERED.format(m.replace(r"\qquad", "\\\\")) if r"\qquad" in m else m
        for m in maths
    ]


def _is_check(stmt: ast.stmt) -> bool:
    """``_check_x(...)``, or ``if ...: raise ...`` with no else: a statement that only validates."""
    if isinstance(stmt, ast.If):
        return not stmt.orelse and all(isinstance(s, ast.Raise) for s in stmt.body)
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    name = (
        getattr(getattr(call, "func", None), "id", "")
        if isinstance(call, ast.Call)
        else ""
    )
    return name.startswith(CHECK_PREFIXES)


def _elide_checks(code: str) -> str:
    """A function's source with its leading input-check statements replaced by one comment."""
    tree = ast.parse(code)
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return code
    body = list(func.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    ):
        body = body[1:]  # the docstring stays
    checks = []
    for stmt in body:
        if not _is_check(stmt):
            break
        checks.append(stmt)
    if not checks or len(checks) == len(body):
        return code
    lines = code.splitlines()
    first, last = checks[0].lineno - 1, checks[-1].end_lineno
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    return "\n".join(lines[:first] + [indent + ELIDED] + lines[last:]) + "\n"


def _listing(obj: Any, members: tuple[str, ...]) -> str:
    """What the chapter shows: the named methods of a class under its header, or a function."""
    if inspect.isroutine(obj):
        return _elide_checks(textwrap.dedent(inspect.getsource(obj)))
    if not inspect.isclass(obj):
        return textwrap.dedent(inspect.getsource(obj))
    if not members:
        members = tuple(m for m in DEFAULT_MEMBERS if m in vars(obj))
    if not members:
        return textwrap.dedent(inspect.getsource(obj))
    source = textwrap.dedent(inspect.getsource(obj))
    header = source[: source.index(":\n", source.index("class ")) + 2]
    methods = [
        textwrap.indent(
            _elide_checks(textwrap.dedent(inspect.getsource(getattr(obj, m)))), "    "
        )
        for m in members
    ]
    return header + "    ...\n\n" + "\n".join(methods)


def show_source(obj: Any, *members: str) -> SourceView:
    """A listing of a normlab class, function or module, with the full source folded away.

    For a class it shows the maths of its docstring and its ``forward``, or the methods named;
    for a function, the function with its input checks elided. In a notebook, make it the last
    expression of a cell (or pass it to ``display``)::

        from normlab import show_source
        from normlab.layers import FiLMNorm
        show_source(FiLMNorm)                      # the maths and forward
        show_source(FiLMNorm, "reset_parameters")  # one named method

    Raises:
        TypeError: ``obj`` is not from normlab, or members are named for a non-class.
        ValueError: a named member is not a method of the class.
    """
    return SourceView(obj, members)


def glue(name: str, value: Any, display: bool = False) -> None:
    """Record ``value`` under ``name`` for the chapter's prose, as myst-nb's ``glue`` does,
    but without needing myst-nb: the same call works in the book's build, Jupyter and Colab.

    The text cites it as ``{glue:text}`name:.3f``` (a number, formatted) or ``{glue}`name```;
    the build reads it back from the cell's output. Nothing is shown in the output unless
    ``display`` is true (myst-nb's default), when Jupyter shows the value as it shows any
    object. In a plain Python script, where no cell output records it, a value shown is
    printed and one not shown is dropped.
    """
    from IPython.core.formatters import format_display_data
    from IPython.display import display as show

    bundle, metadata = format_display_data(value)
    # myst-nb finds a glued value by the output's "scrapbook" metadata and strips the prefix
    # from its MIME types; the prefix hides the output from Jupyter, which renders no such type.
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    show({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)


#: Columns (and index levels) whose values :func:`table` shows by their reader-facing names.
NAMED_COLUMNS = (
    "normaliser",
    "arm",
    "a",  # the two arms of a paired table (normlab.claims.tables.paired_table)
    "b",
    "data",
    "task",
    "minus",
    "init",
    "readout",
    "layer",
)


def reader_names(
    frame: Any, profile: str | None = None, sources: Mapping[str, str] | None = None
) -> Any:
    """``frame`` (a DataFrame) with the keys in its :data:`NAMED_COLUMNS` columns, its
    row labels and its column labels (every level, read as the column its level is named
    after) replaced by their reader-facing names (:func:`normlab.names.display_name`);
    ``sources`` maps a task to the dataset its set chose to serve it (:func:`data_sources`)."""
    import pandas as pd

    from .names import display_name

    chosen = dict(sources or {})

    def named(values: Any, column: str | None) -> Any:
        return [display_name(v, column, profile, chosen.get(v)) for v in values]

    frame = frame.assign(
        **{str(c): named(frame[c], str(c)) for c in frame.columns if c in NAMED_COLUMNS}
    )

    def relabel(axis: Any) -> Any:
        if isinstance(axis, pd.MultiIndex):
            return pd.MultiIndex.from_arrays(
                [named(axis.get_level_values(i), n) for i, n in enumerate(axis.names)],
                names=axis.names,
            )
        return pd.Index(named(axis, axis.name), name=axis.name)

    return frame.set_axis(relabel(frame.index), axis=0).set_axis(
        relabel(frame.columns), axis=1
    )


def data_sources(results: Any) -> dict[str, str]:
    """Each task of a results table and the dataset its grid chose to serve it (its
    ``source`` column), for :func:`table`'s ``sources``; empty without that column. A task
    served by more than one dataset is left out (its name says nothing more)."""
    if "source" not in results or "data" not in results:
        return {}
    pairs = results[["data", "source"]].dropna().drop_duplicates()
    single = pairs.groupby("data")["source"].transform("nunique") == 1
    return dict(zip(pairs.loc[single, "data"], pairs.loc[single, "source"]))


def table(
    frame: Any,
    *,
    digits: int = 3,
    caption: str | None = None,
    index: bool = False,
    profile: str | None = None,
    sources: Mapping[str, str] | None = None,
) -> Any:
    """A results table as an HTML table that wraps to the page (a pandas ``Styler``).

    Floats show ``digits`` decimals; NaN shows as an empty cell; ``caption`` names what the
    table holds (its data, its profile). Every key the package records shows by its
    reader-facing name (:func:`normlab.names.display_name`), as in the figures: a
    normaliser, an arm or a dataset in the columns of :data:`NAMED_COLUMNS`, in the row
    labels and in the column labels (:func:`reader_names`); ``profile`` is the profile whose
    data the dataset keys name (None: the active one), ``sources`` the dataset a saved
    set's grid chose per task (:func:`data_sources`). Make it the last expression of a
    cell; in plain text (``repr``) it falls back to the frame's own text form.

    Raises:
        TypeError: ``frame`` is not a pandas DataFrame.
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    frame = reader_names(frame, profile, sources)
    styler = frame.style.format(precision=digits, na_rep="").set_table_attributes(
        'class="normlab-table"'
    )
    if not index:
        styler = styler.hide(axis="index")
    if caption:
        styler = styler.set_caption(html.escape(caption))
    return styler
