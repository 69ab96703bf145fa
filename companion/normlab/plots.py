"""The book's figures, in one style: every function returns a matplotlib ``Figure``.

- :func:`training_curves`: a metric per epoch, mean and 95 % CI band across seeds.
- :func:`metric_vs`: a summary metric against a swept variable, 95 % CI error bars.
- :func:`heatmap`: an annotated table of numbers.

Each normaliser keeps its colour in every chapter (:data:`COLOURS`, :func:`colour`).
Nothing here calls ``plt.show``; notebooks display the returned figure. Importing this module
loads matplotlib's configured backend, which under IPython's inline backend (Jupyter, Colab)
registers the PNG display of ``Figure``: a figure returned as a cell's last expression is shown,
once, even in a notebook that never touches pyplot.
"""
from __future__ import annotations

import hashlib
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends import backend_registry
from matplotlib.figure import Figure
from scipy import stats

_BACKEND = matplotlib.get_backend(auto_select=False)
if _BACKEND is not None:  # None: nothing chose a backend (a plain script); nothing to display
    backend_registry.load_backend_module(_BACKEND)

COLOURS: dict[str, str] = {
    "none": "#7f7f7f",
    "batchnorm": "#1f77b4",
    "layernorm": "#2ca02c",
    "rmsnorm": "#17becf",
    "l2norm": "#bcbd22",
    "norm_like": "#ff7f0e",
    "affine_like": "#d62728",
    "patchnorm": "#9467bd",
    "dyt": "#8c564b",
    "adanorm": "#e377c2",
    "film": "#aec7e8",
    "frozen_ln": "#98df8a",
    "random_selector": "#c5b0d5",
    "autonorm": "#ff9896",
    "autonorm_s": "#9b1b30",
}
_EXTRA = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354")

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
}


def colour(name: str) -> str:
    """The colour of a normaliser (or any label): fixed for known names, stable otherwise."""
    if name in COLOURS:
        return COLOURS[name]
    digest = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    return _EXTRA[digest % len(_EXTRA)]


def label(name: str) -> str:
    """A display name: ``affine_like`` -> ``affine-like``."""
    return str(name).replace("_", "-")


@contextmanager
def style() -> Iterator[None]:
    """The shared matplotlib style, as a context."""
    with matplotlib.rc_context(STYLE):
        yield


def _new_figure(ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (5.0, 3.6)) -> tuple[Figure, np.ndarray]:
    figure = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    axes = figure.subplots(nrows, ncols, squeeze=False)
    return figure, axes


def _mean_band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and 95 % t-interval half-width across rows (zero band for one row)."""
    mean = np.nanmean(curves, axis=0)
    n = curves.shape[0]
    if n < 2:
        return mean, np.zeros_like(mean)
    half = stats.t.ppf(0.975, n - 1) * np.nanstd(curves, axis=0, ddof=1) / np.sqrt(n)
    return mean, half


def training_curves(runs: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], key: str = "val_accuracy", *,
                    ylabel: str | None = None, title: str | None = None, logy: bool = False) -> Figure:
    """``key`` per epoch for each label of ``runs`` (label -> one history per seed).

    A history is a list of per-epoch dicts (a :class:`normlab.training.History`). The
    line is the mean across seeds, the band the 95 % CI; seeds of unequal length are cut
    to the shortest.
    """
    with style():
        figure, axes = _new_figure()
        ax = axes[0, 0]
        for name, histories in runs.items():
            if not histories:
                continue
            length = min(len(h) for h in histories)
            curves = np.array([[float(r[key]) for r in h[:length]] for h in histories])
            epochs = np.array([r["epoch"] for r in histories[0][:length]])
            mean, half = _mean_band(curves)
            ax.plot(epochs, mean, color=colour(name), label=f"{label(name)} (n={len(histories)})")
            ax.fill_between(epochs, mean - half, mean + half, color=colour(name), alpha=0.2, linewidth=0)
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel or label(key))
        if logy:
            ax.set_yscale("log")
        if title:
            ax.set_title(title)
        ax.legend()
    return figure


def metric_vs(table: pd.DataFrame, x: str, *, y: str = "mean", err: str | None = "ci95", hue: str = "normaliser",
              col: str | None = None, logx: bool = False, base: float = 10, logy: bool = False,
              xlabel: str | None = None, ylabel: str | None = None, title: str | None = None) -> Figure:
    """``y`` against ``x`` with one line per ``hue`` value and error bars from ``err``.

    ``table`` is a summary (e.g. from :func:`normlab.experiments.select_best`): one row per
    point. ``col`` makes one panel per value. ``logx`` uses a log axis of ``base``.
    """
    panels = sorted(table[col].unique(), key=str) if col else [None]
    with style():
        figure, axes = _new_figure(ncols=len(panels))
        for ax, panel in zip(axes[0], panels):
            part = table if panel is None else table[table[col] == panel]
            for name, rows in part.groupby(hue, sort=False):
                rows = rows.sort_values(x)
                yerr = rows[err].fillna(0.0).to_numpy() if err else None
                ax.errorbar(rows[x], rows[y], yerr=yerr, marker="o", markersize=4, capsize=3,
                            color=colour(str(name)), label=label(name))
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


def heatmap(table: pd.DataFrame, *, fmt: str = ".2f", cmap: str = "viridis", annotate: bool = True,
            title: str | None = None, colorbar_label: str | None = None) -> Figure:
    """An annotated heatmap of a numeric table (rows x columns as in ``table``)."""
    values = table.to_numpy(dtype=float)
    with style():
        figure, axes = _new_figure(size=(1.0 + 0.9 * max(values.shape[1], 3), 0.8 + 0.5 * max(values.shape[0], 3)))
        ax = axes[0, 0]
        ax.grid(False)
        image = ax.imshow(values, cmap=cmap, aspect="auto")
        ax.set_xticks(range(values.shape[1]), [label(c) for c in table.columns], rotation=30, ha="right")
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
                    ax.text(j, i, "nan" if not np.isfinite(v) else format(v, fmt), ha="center", va="center",
                            fontsize=9, color="white" if np.isfinite(v) and v < middle else "black")
        figure.colorbar(image, ax=ax, label=colorbar_label or "")
        if title:
            ax.set_title(title)
    return figure
