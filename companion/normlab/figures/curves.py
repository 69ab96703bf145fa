"""Curves of results: a metric per epoch, or a summary against a swept variable.

- :func:`training_curves`: a metric per epoch, mean and 95 % CI band across seeds.
- :func:`metric_vs`: a summary metric against a swept variable, 95 % CI error bars.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from .column import colours, finish, label, new_figure, style

__all__ = ["metric_vs", "training_curves"]


def _mean_band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and 95 % t-interval half-width across rows (zero band for one row)."""
    mean = np.nanmean(curves, axis=0)
    n = curves.shape[0]
    if n < 2:
        return mean, np.zeros_like(mean)
    half = stats.t.ppf(0.975, n - 1) * np.nanstd(curves, axis=0, ddof=1) / np.sqrt(n)
    return mean, half


def training_curves(
    runs: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
    key: str = "val_accuracy",
    *,
    ylabel: str | None = None,
    title: str | None = None,
    logy: bool = False,
) -> Figure:
    """``key`` per epoch for each label of ``runs`` (label -> one history per seed).

    A history is a list of per-epoch dicts (a :class:`normlab.training.History`). The
    line is the mean across seeds, the band the 95 % CI; seeds of unequal length are cut
    to the shortest.
    """
    with style():
        figure, axes = new_figure()
        ax = axes[0, 0]
        palette = colours(runs)
        for name, histories in runs.items():
            if not histories:
                continue
            length = min(len(h) for h in histories)
            curves = np.array([[float(r[key]) for r in h[:length]] for h in histories])
            epochs = np.array([r["epoch"] for r in histories[0][:length]])
            mean, half = _mean_band(curves)
            ax.plot(
                epochs,
                mean,
                color=palette[name],
                label=f"{label(name)} (n={len(histories)})",
            )
            ax.fill_between(
                epochs,
                mean - half,
                mean + half,
                color=palette[name],
                alpha=0.2,
                linewidth=0,
            )
        if logy:
            ax.set_yscale("log")
        finish(ax, xlabel="epoch", ylabel=ylabel or label(key), title=title)
    return figure


def metric_vs(
    table: pd.DataFrame,
    x: str,
    *,
    y: str = "mean",
    err: str | None = "ci95",
    hue: str = "normaliser",
    col: str | None = None,
    logx: bool = False,
    base: float = 10,
    logy: bool = False,
    xlabel: str | None = None,
    ylabel: str | None = None,
    title: str | None = None,
) -> Figure:
    """``y`` against ``x`` with one line per ``hue`` value and error bars from ``err``.

    ``table`` is a summary (e.g. from :func:`normlab.run_tables.select_best`): one row per
    point. ``col`` makes one panel per value. ``logx`` uses a log axis of ``base``.
    """
    panels = sorted(table[col].unique(), key=str) if col else [None]
    palette = colours(table[hue].unique())
    with style():
        figure, axes = new_figure(ncols=len(panels))
        for ax, panel in zip(axes[0], panels):
            part = table if panel is None else table[table[col] == panel]
            for name, rows in part.groupby(hue, sort=False):
                rows = rows.sort_values(x)
                yerr = rows[err].fillna(0.0).to_numpy() if err else None
                ax.errorbar(
                    rows[x],
                    rows[y],
                    yerr=yerr,
                    marker="o",
                    markersize=4,
                    capsize=3,
                    color=palette[name],
                    label=label(name),
                )
            if logx:
                ax.set_xscale("log", base=base)
            if logy:
                ax.set_yscale("log")
            ax.set_xlabel(xlabel or label(x))
            ax.set_ylabel(ylabel or label(y))
            if panel is not None:
                ax.set_title(f"{label(col)} = {label(panel)}")
        handles = {}
        for ax in axes[0]:
            for handle, text in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(text, handle)
        figure.legend(handles.values(), handles.keys(), loc="outside right upper")
        if title:
            figure.suptitle(title)
    return figure
