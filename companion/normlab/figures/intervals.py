"""Means with their 95 % intervals, one per row or per normaliser.

- :func:`interval_bars`: one mean with its 95 % CI per row, with optional reference lines.
- :func:`draw_by_normaliser`: a metric per normaliser on a given axis (for
  :func:`normlab.figures.beside`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._runs import LEGEND_SIZE, mean_ci_finite, one_row
from .column import MIN_FONT_PT, colours, finish, label, style

__all__ = ["draw_by_normaliser", "interval_bars"]


def interval_bars(
    rows: pd.DataFrame,
    *,
    name: str = "normaliser",
    mean: str = "mean",
    half: str = "ci95",
    references: Mapping[str, float] | None = None,
    xlabel: str = "",
    title: str | None = None,
) -> Figure:
    """A horizontal error bar per row (``name``, ``mean`` +- ``half``) and vertical reference lines."""
    palette = colours(rows[name])
    with style():
        figure, (ax,) = one_row(size=(6.0, 0.9 + 0.35 * len(rows)))
        for i, row in enumerate(rows.itertuples(index=False)):
            key = getattr(row, name)
            ax.errorbar(
                getattr(row, mean),
                i,
                xerr=np.nan_to_num(getattr(row, half)),
                fmt="o",
                capsize=3,
                color=palette[key],
            )
        ax.set_yticks(range(len(rows)), [label(k) for k in rows[name]])
        ax.invert_yaxis()
        for i, (text, value) in enumerate((references or {}).items()):
            ax.axvline(
                value,
                color="grey",
                ls=["--", ":", "-."][i % 3],
                lw=1,
                label=f"{text}: {value:.4g}",
            )
        finish(
            ax,
            xlabel=xlabel,
            title=title,
            legend=bool(references),
            legend_size=LEGEND_SIZE,
        )
    return figure


def draw_by_normaliser(
    results: pd.DataFrame,
    ax: Any,
    *,
    value: str = "test_metric",
    ylabel: str | None = None,
) -> None:
    """On ``ax``: ``value`` per normaliser (x) at the learning rate chosen on validation, mean and
    95 % CI across seeds, one marker per dataset. For :func:`normlab.figures.beside`."""
    from ..run_tables import at_chosen_lr

    chosen = at_chosen_lr(results)
    names = list(dict.fromkeys(results["normaliser"]))
    palette = colours(names)
    markers = ("o", "s", "^", "D")
    for i, (task, part) in enumerate(chosen.groupby("data", sort=True)):
        for x, name in enumerate(names):
            values = part[part["normaliser"] == name][value].to_numpy(dtype=float)
            if len(values) == 0:
                continue
            mean, half = mean_ci_finite(values)
            ax.errorbar(
                x + 0.12 * (i - 0.5),
                mean,
                yerr=half,
                marker=markers[i % len(markers)],
                capsize=3,
                color=palette[name],
                label=label(task) if x == 0 else None,
                linestyle="none",
            )
    ax.set_xticks(range(len(names)), [label(n) for n in names], rotation=30, ha="right")
    ax.set_ylabel(ylabel or label(value))
    ax.legend(fontsize=MIN_FONT_PT, title="task", title_fontsize=MIN_FONT_PT)
