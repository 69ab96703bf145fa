"""The book's figures, in one style: every function returns a matplotlib ``Figure``.

- :func:`training_curves`: a metric per epoch, mean and 95 % CI band across seeds.
- :func:`metric_vs`: a summary metric against a swept variable, 95 % CI error bars.
- :func:`heatmap`: an annotated table of numbers; :func:`normaliser_heatmap`: a summary's
  mean per normaliser and swept value.

Every figure of the book, these and :mod:`normlab.plots_theory`'s, is drawn in one style
(:func:`style`, :func:`new_figure`, :func:`finish` for a panel's labels, legend and title)
with one colour-blind-safe palette (:data:`normlab.normalisers.PALETTE`): each normaliser
keeps its registered colour and label in every chapter (:func:`colours`, :func:`label`). Figures are built without pyplot, so
nothing here calls ``plt.show`` or leaves a figure open; notebooks display the returned figure.
Importing this module loads matplotlib's configured backend, which under IPython's inline
backend (Jupyter, Colab) registers the PNG display of ``Figure``: a figure returned as a cell's
last expression is shown, once, even in a notebook that never touches pyplot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends import backend_registry
from matplotlib.figure import Figure
from scipy import stats

from . import normalisers
from .normalisers import PALETTE

_BACKEND = matplotlib.get_backend(auto_select=False)
if (
    _BACKEND is not None
):  # None: nothing chose a backend (a plain script); nothing to display
    backend_registry.load_backend_module(_BACKEND)

STYLE: dict[str, Any] = {
    "figure.dpi": 110,
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 9,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
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


def label(name: Any) -> str:
    """A display name: a normaliser's registered label (``affine_like`` -> ``affine-like``,
    ``layernorm`` -> ``LayerNorm``); any other name with ``_`` shown as ``-``."""
    if isinstance(name, str) and name in normalisers.NORMALISERS:
        return normalisers.label(name)
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
    """A pyplot-free figure with an ``(nrows, ncols)`` array of axes, each panel ``size`` inches.

    Call it inside :func:`style`; ``subplots`` go to ``Figure.subplots`` (e.g. ``sharey``).
    """
    figure = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    axes = figure.subplots(nrows, ncols, squeeze=False, **subplots)
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

    ``table`` is a summary (e.g. from :func:`normlab.experiments.select_best`): one row per
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


def heatmap(
    table: pd.DataFrame,
    *,
    fmt: str = ".2f",
    cmap: str = "viridis",
    annotate: bool = True,
    title: str | None = None,
    colorbar_label: str | None = None,
) -> Figure:
    """An annotated heatmap of a numeric table (rows x columns as in ``table``)."""
    values = table.to_numpy(dtype=float)
    with style():
        figure, axes = new_figure(
            size=(
                1.0 + 0.9 * max(values.shape[1], 3),
                0.8 + 0.5 * max(values.shape[0], 3),
            )
        )
        ax = axes[0, 0]
        ax.grid(False)
        image = ax.imshow(values, cmap=cmap, aspect="auto")
        ax.set_xticks(
            range(values.shape[1]),
            [label(c) for c in table.columns],
            rotation=30,
            ha="right",
        )
        ax.set_yticks(range(values.shape[0]), [label(r) for r in table.index])
        if table.columns.name:
            ax.set_xlabel(label(table.columns.name))
        if table.index.name:
            ax.set_ylabel(label(table.index.name))
        if annotate:
            finite = values[np.isfinite(values)]
            middle = (finite.min() + finite.max()) / 2 if finite.size else 0.0
            for i in range(values.shape[0]):
                for j in range(values.shape[1]):
                    v = values[i, j]
                    ax.text(
                        j,
                        i,
                        "nan" if not np.isfinite(v) else format(v, fmt),
                        ha="center",
                        va="center",
                        fontsize=9,
                        color="white" if np.isfinite(v) and v < middle else "black",
                    )
        figure.colorbar(image, ax=ax, label=colorbar_label or "")
        if title:
            ax.set_title(title)
    return figure


def normaliser_heatmap(
    summary: pd.DataFrame, columns: str, *, metric: str, title: str
) -> Figure:
    """A :func:`heatmap` of a summary's ``mean`` (e.g. from :func:`normlab.experiments.summarise`):
    one row per normaliser, in registry order, one column per value of ``columns``."""
    present = set(summary["normaliser"])
    table = summary.pivot_table(
        index="normaliser", columns=columns, values="mean"
    ).reindex([n for n in normalisers.NORMALISERS if n in present])
    return heatmap(table, fmt=".3f", title=title, colorbar_label=f"test {metric}")
