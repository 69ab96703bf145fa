"""A live run drawn above a saved set, in one figure that fits the text column."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from .. import results as saved_results
from .column import COLUMN_INCHES, MIN_FONT_PT, new_figure, style

__all__ = ["Beside", "beside", "draw_beside"]

#: Characters per line of a panel's title (its data's label) at the style's smallest font.
TITLE_WIDTH = 90


def draw_beside(
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


@dataclass
class Beside:
    """What :func:`beside` showed: the figure, and the live and saved tables with their labels."""

    figure: Any
    live_label: str
    saved: saved_results.SavedSet | None


def beside(
    experiment: str,
    live: pd.DataFrame,
    draw: Callable[[pd.DataFrame, Any], None],
    *,
    root: str | Path | None = None,
    title: str | None = None,
) -> Beside:
    """Draw the live run and, below it, the largest saved set of ``experiment``.

    ``draw(results, ax)`` draws one results table on one matplotlib axis; it is called for the
    live table and for the saved set's, so the two panels differ only in their data. Each
    panel is titled with its label (profile, data, seeds, hardware); the drawing is
    :func:`draw_beside`. Without a saved set the figure has one panel and says so.
    """
    if not isinstance(live, pd.DataFrame) or live.empty:
        raise ValueError(
            "live must be a non-empty results table (experiments.load_results or report().results)"
        )
    saved = saved_results.largest(experiment, root)
    label = saved_results.live_label(live)
    figure = draw_beside(
        live,
        label,
        draw,
        saved=saved.results if saved is not None else None,
        saved_label=saved.label() if saved is not None else "",
        missing=f"No saved set of {experiment} yet: "
        f"`python -m normlab save {experiment} --profile cpu`",
        title=title,
    )
    return Beside(figure=figure, live_label=label, saved=saved)
