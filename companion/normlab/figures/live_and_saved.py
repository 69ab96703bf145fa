"""A live run drawn above a saved set, in one figure that fits the text column."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from .column import COLUMN_INCHES, MIN_FONT_PT, new_figure, style

__all__ = ["beside"]

#: Characters per line of a panel's title (its data's label) at the style's smallest font.
TITLE_WIDTH = 90


def beside(
    live: pd.DataFrame,
    live_label: str,
    draw: Callable[[pd.DataFrame, Any], None],
    *,
    saved: pd.DataFrame | None = None,
    saved_label: str = "",
    missing: str = "",
    title: str | None = None,
) -> Figure:
    """``draw(results, ax)`` for the live results and, below them, for the saved ones.

    Each panel is titled with its label (profile, data, seeds, hardware), so the two differ
    only in their data. Without ``saved`` the figure has one panel and ``missing`` says why.
    The panels are stacked, each the width of the text column.
    """
    panels = [(live, live_label)] + (
        [(saved, saved_label)] if saved is not None else []
    )
    with style():
        figure, axes = new_figure(nrows=len(panels), size=(COLUMN_INCHES, 3.4))
        for ax, (results, text) in zip(axes[:, 0], panels):
            draw(results, ax)
            ax.set_title(
                "\n".join(textwrap.wrap(text, TITLE_WIDTH)), fontsize=MIN_FONT_PT
            )
        if saved is None and missing:
            figure.supxlabel(
                "\n".join(textwrap.wrap(missing, TITLE_WIDTH)), fontsize=MIN_FONT_PT
            )
        if title:
            figure.suptitle(title)
    return figure
