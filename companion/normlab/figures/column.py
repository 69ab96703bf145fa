"""The book's one figure style, sized to the page's text column.

A figure is drawn at most :data:`COLUMN_INCHES` wide at :data:`DPI`, so that the HTML book
(whose text column is :data:`COLUMN_PX` CSS pixels wide from a 1280 px window up) shows it at
its natural size, and the smallest text of the style, :data:`MIN_FONT_PT` points, is at least
``MIN_FONT_PT * DPI / 72`` (12) CSS pixels. :func:`new_figure` keeps every figure to that width:
a row of panels too wide for the column is wrapped onto more rows, each panel at least
:data:`MIN_PANEL_INCHES` wide.

Every normaliser keeps its registered colour and display name in every chapter (:func:`colours`,
:func:`label`). Importing this module loads matplotlib's configured backend, which under
IPython's inline backend (Jupyter, Colab) registers the PNG display of ``Figure``: a figure
returned as a cell's last expression is shown, once, even in a notebook that never touches
pyplot.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends import backend_registry
from matplotlib.figure import Figure

from .. import normalisers
from ..names import display_name
from ..normalisers import PALETTE

__all__ = [
    "COLUMN_INCHES",
    "COLUMN_PX",
    "DPI",
    "MIN_FONT_PT",
    "MIN_PANEL_INCHES",
    "STYLE",
    "colours",
    "finish",
    "label",
    "new_figure",
    "style",
]

_BACKEND = matplotlib.get_backend(auto_select=False)
if _BACKEND is not None:  # None: nothing chose a backend (a plain script)
    backend_registry.load_backend_module(_BACKEND)

#: The HTML book's text column, in CSS pixels, from a 1280 px wide window up.
COLUMN_PX = 688
#: Dots per inch of every figure: one figure pixel is one CSS pixel of the page.
DPI = 110
#: The widest figure, in inches: the text column at :data:`DPI`.
COLUMN_INCHES = COLUMN_PX / DPI
#: The narrowest panel :func:`new_figure` sets side by side, in inches.
MIN_PANEL_INCHES = 2.9
#: The smallest font of the style, in points (12 CSS px at :data:`DPI`).
MIN_FONT_PT = 8.0

#: matplotlib settings of every figure (:func:`style`).
STYLE: dict[str, Any] = {
    "figure.dpi": DPI,
    "savefig.dpi": "figure",
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "figure.titlesize": 11,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
}


def colours(names: Iterable[Any]) -> dict[Any, str]:
    """A colour for each of ``names``, all distinct when the palette allows.

    Registered normalisers get their registered colour; any other name (an optimiser, a
    budget) gets the next palette colour that no name of this figure has, in order.
    """
    names = list(dict.fromkeys(names))
    fixed = {
        n: normalisers.colour(n)
        for n in names
        if isinstance(n, str) and n in normalisers.NORMALISERS
    }
    spare = [c for c in PALETTE if c not in fixed.values()] or list(PALETTE)
    others = [n for n in names if n not in fixed]
    return {
        n: fixed[n] if n in fixed else spare[others.index(n) % len(spare)]
        for n in names
    }


def label(name: Any, column: str | None = None) -> str:
    """A display name, the one tables show (:func:`normlab.names.display_name`): a
    normaliser's registered label (``affine_like`` -> ``affine-like``, ``layernorm`` ->
    ``LayerNorm``), an arm's, a dataset's or a layer's name (``column``: the column it comes
    from); any other name with ``_`` shown as ``-``."""
    shown = display_name(name, column)
    if shown is not name:
        return str(shown)
    return str(name).replace("_", "-")


@contextmanager
def style() -> Iterator[None]:
    """The shared matplotlib style, as a context."""
    with matplotlib.rc_context(STYLE):
        yield


def new_figure(
    ncols: int = 1,
    nrows: int = 1,
    size: tuple[float, float] = (5.0, 3.6),
    **subplots: Any,
) -> tuple[Figure, np.ndarray]:
    """A pyplot-free figure with an ``(nrows, ncols)`` array of axes, each panel about ``size``
    inches, no wider than the text column.

    Panels that do not fit the column side by side are narrowed, down to
    :data:`MIN_PANEL_INCHES`; below that, each row of panels is wrapped onto several rows
    (a panel keeps its aspect ratio), and ``axes[i, j]`` is still the ``j``-th panel of
    logical row ``i``. Call it inside :func:`style`; ``subplots`` go to ``Figure.subplots``
    (e.g. ``sharey``).

    Raises:
        ValueError: ``ncols`` or ``nrows`` is below 1.
    """
    if ncols < 1 or nrows < 1:
        raise ValueError(
            f"ncols and nrows must be at least 1, got ncols={ncols}, nrows={nrows}"
        )
    width, height = size
    per_row = ncols
    if width * ncols > COLUMN_INCHES:
        fit = max(1, math.floor(COLUMN_INCHES / MIN_PANEL_INCHES))
        per_row = min(ncols, fit)
        narrowed = min(width, COLUMN_INCHES / per_row)
        width, height = narrowed, height * max(narrowed / width, 0.7)
    wraps = math.ceil(ncols / per_row)
    rows, cols = nrows * wraps, per_row
    figure = Figure(figsize=(width * cols, height * rows), layout="constrained")
    grid = figure.subplots(rows, cols, squeeze=False, **subplots)
    axes = np.empty((nrows, ncols), dtype=object)
    for i in range(nrows):
        for j in range(ncols):
            axes[i, j] = grid[i * wraps + j // per_row, j % per_row]
    used = set(axes.flat)
    for ax in grid.flat:
        if ax not in used:
            ax.remove()
    return figure, axes


def finish(
    ax: Any,
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str | None = None,
    legend: bool = True,
    legend_size: float | None = None,
) -> None:
    """The last touches of a one-panel figure: axis labels, the legend (``legend_size`` points;
    None: the style's) and the title, when there is one."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if legend:
        ax.legend(fontsize=legend_size)
    if title:
        ax.set_title(title)
