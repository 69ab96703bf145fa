"""The scorecard's forest plot: every judged effect with its 95 % interval, at the column's
width, its labels wrapped so that the plot keeps most of the width."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from .column import COLUMN_INCHES, MIN_FONT_PT, new_figure, style

__all__ = ["VERDICT_COLOURS", "forest"]

#: The colour of each verdict an effect can have (:mod:`normlab.claims.rules`' words): the
#: palette's green, blue, vermilion, grey and pink.
VERDICT_COLOURS = {
    "supported": "#009E73",
    "consistent with": "#0072B2",
    "contradicted": "#D55E00",
    "inconclusive": "#7F7F7F",
    "did not train": "#CC79A7",
}
#: Characters per line of an effect's label, and lines at most.
LABEL_WIDTH, LABEL_LINES = 34, 2


def _label(text: str) -> str:
    return "\n".join(
        textwrap.wrap(text, LABEL_WIDTH, max_lines=LABEL_LINES, placeholder=" ...")
    )


def forest(outcomes: Sequence[Any]) -> Figure:
    """Effect sizes with 95 % CIs, one row per effect of every judged empirical claim.

    ``outcomes`` are :class:`normlab.claims.Outcome` objects, each effect coloured by its
    verdict (:data:`VERDICT_COLOURS`). With nothing judged yet the figure says so instead of
    drawing an empty axis.
    """
    rows = [
        (f"{o.claim.id}: {label}", ci, verdict)
        for o in outcomes
        for label, ci, verdict in o.effects
    ]
    with style():
        figure, axes = new_figure(
            size=(COLUMN_INCHES, max(2.0, 0.42 * len(rows) + 1.2))
        )
        ax = axes[0, 0]
        if not rows:
            ax.text(
                0.5,
                0.5,
                "No empirical claim has a saved result set yet:\nevery one is "
                "'not yet tested' or needs a larger profile.",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
            ax.set_axis_off()
            return figure
        for y, (_, ci, verdict) in enumerate(rows):
            half = ci.half if math.isfinite(ci.half) else 0.0
            colour = VERDICT_COLOURS[verdict]
            ax.errorbar(ci.mean, y, xerr=half, fmt="o", color=colour, capsize=3)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(
            range(len(rows)), [_label(r[0]) for r in rows], fontsize=MIN_FONT_PT
        )
        ax.invert_yaxis()
        ax.set_xlabel("effect: mean and 95 % CI across seeds\n(units of each claim)")
        for verdict, colour in VERDICT_COLOURS.items():
            ax.plot([], [], "o", color=colour, label=verdict)
        ax.legend(loc="best")
    return figure
