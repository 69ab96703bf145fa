"""Means across runs (seeds) with their 95 % t-intervals, for the figures that draw them."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..stats import mean_ci
from .column import new_figure

#: Legend size of the small one-panel figures, in points.
LEGEND_SIZE = 8


def mean_ci_finite(values: np.ndarray) -> tuple[float, float]:
    """:func:`normlab.stats.mean_ci` of the finite values, with a zero band below two."""
    mean, half, n = mean_ci(values[np.isfinite(values)])
    return mean, half if n >= 2 else 0.0


class Line(NamedTuple):
    """One ``hue`` value's line: its number of runs, and at each ``x`` the mean and 95 %
    t-interval half-width across runs of each run's own mean."""

    key: Any
    runs: int
    x: np.ndarray
    mean: np.ndarray
    half: np.ndarray


def across_runs(
    table: pd.DataFrame, hue: str, x: str, value: str, *, sort: bool
) -> list[Line]:
    """``value`` averaged within each run at each ``x``, then across runs: one :class:`Line`
    per ``hue`` value (sorted with ``sort``, else in order of appearance). Seeds are the runs,
    so a run's many rows at one ``x`` (layers, corruptions) count once."""
    per_run = table.groupby([hue, "run_id", x], sort=sort)[value].mean().reset_index()
    lines = []
    for key, part in per_run.groupby(hue, sort=False):
        points = part.groupby(x)[value].apply(lambda v: mean_ci_finite(v.to_numpy()))
        lines.append(
            Line(
                key,
                part["run_id"].nunique(),
                points.index.to_numpy(),
                np.array([m for m, _ in points]),
                np.array([h for _, h in points]),
            )
        )
    return lines


def one_row(
    ncols: int = 1, size: tuple[float, float] = (5.0, 3.6)
) -> tuple[Figure, np.ndarray]:
    """A figure of ``ncols`` panels in one logical row, and that row of axes."""
    figure, axes = new_figure(ncols=ncols, size=size)
    return figure, axes[0]
