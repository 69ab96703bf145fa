"""Chapter 7's figures: steps to a target accuracy against the batch size, and what moves
them (:mod:`normlab.experiments.part1_batch`).

- :func:`draw_steps`: the steps to the target against the batch size, per normaliser, with
  the perfect-scaling slope beside them;
- :func:`draw_kernel`: the update kernel's cross-sample coupling against the batch size;
- :func:`scaling_figure`: each normaliser's scaling slope under every specification;
- :func:`fixed_epochs_figure`: test accuracy against the batch size under fixed epochs.

The ``draw_*`` functions draw on a matplotlib axis, as :func:`normlab.figures.beside` asks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import run_tables as runs
from ..analysis.batch import CELL, scaling_summary, steps_scores
from ..experiments.part1_batch import PRIMARY
from ..normalisers import colour, linestyle
from .column import MIN_FONT_PT, label, new_figure, style
from .part1 import draw_band, draw_batch_curves

__all__ = ["draw_kernel", "draw_steps", "fixed_epochs_figure", "scaling_figure"]

#: How each specification of the set is named in a legend.
SPECIFICATIONS: dict[tuple[str, str], str] = {
    ("sgd", PRIMARY["init"]): "SGD, Xavier-normal (primary)",
    ("sgd", "default"): "SGD, PyTorch default init",
    ("adam", PRIMARY["init"]): "Adam, Xavier-normal",
}


def _primary(results: pd.DataFrame, budget: str = "to_target") -> pd.DataFrame:
    """The runs of the primary optimiser and initialisation under ``budget`` (a table that
    does not sweep an axis keeps all its rows)."""
    rows = results
    for key, value in {**PRIMARY, "budget": budget}.items():
        if key in rows and rows[key].nunique() > 1:
            rows = rows[rows[key] == value]
    if rows.empty:
        raise ValueError(f"no runs of the primary specification under {budget}")
    return rows


def _log2_axis(ax: Any, values: Any) -> None:
    ticks = sorted({int(v) for v in values})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("batch size")


def draw_steps(results: pd.DataFrame, ax: Any) -> None:
    """Steps to the target (log axis) against the batch size (log axis), each normaliser
    at each batch size's rate with the fewest steps, under the primary specification: the
    geometric mean across seeds with its 95 % band (the interval of the mean of log2
    steps); the dashed line halves the steps per doubling from the fastest normaliser's
    smallest batch: perfect scaling."""
    scores = steps_scores(_primary(results)).dropna(subset=["steps_to_target"])
    logged = scores.assign(log2_steps=np.log2(scores["steps_to_target"]))
    table = runs.summarise(logged, ["normaliser", "batch_size"], value="log2_steps")
    for name in table["normaliser"].unique():
        rows = table[table["normaliser"] == name].sort_values("batch_size")
        half = rows["ci95"].fillna(0.0)
        shade = colour(name)
        ax.plot(
            rows["batch_size"],
            2 ** rows["mean"],
            marker="o",
            markersize=3,
            color=shade,
            linestyle=linestyle(name),
            label=label(name),
        )
        ax.fill_between(
            rows["batch_size"],
            2 ** (rows["mean"] - half),
            2 ** (rows["mean"] + half),
            color=shade,
            alpha=0.15,
            linewidth=0,
        )
    sizes = np.array(sorted(results["batch_size"].unique()), dtype=float)
    if not table.empty:  # every cell censored leaves no curve to start the guide from
        first = table[table["batch_size"] == table["batch_size"].min()]
        start, smallest = 2 ** first["mean"].min(), first["batch_size"].iloc[0]
        guide = start * smallest / sizes
        keep = guide >= 2 ** table["mean"].min() / 2  # within the data's range
        ax.plot(
            sizes[keep],
            guide[keep],
            color="grey",
            linestyle="--",
            linewidth=1,
            label="perfect scaling",
        )
    ax.set_yscale("log", base=2)
    _log2_axis(ax, sizes)
    target = float(results["target"].iloc[0]) if "target" in results else None
    words = f" to {target:g} val accuracy" if target is not None else ""
    ax.set_ylabel(f"steps{words}")
    ax.legend(fontsize=MIN_FONT_PT, ncols=2)


def draw_kernel(results: pd.DataFrame, ax: Any, value: str = "gram_offdiag") -> None:
    """A kernel measurement of :func:`normlab.divergence.kernel_coupling`
    (``value``) against the batch size, one line (95 % band across seeds) per normaliser,
    of the primary specification's runs at each cell's chosen rate."""
    rows = _primary(results)
    scores = steps_scores(rows)
    by = [c for c in CELL if c in rows]
    chosen = rows.merge(scores[[*by, "lr", "seed"]], on=[*by, "lr", "seed"])
    curves = runs.summarise(chosen, ["normaliser", "batch_size"], value=value)
    for name in curves["normaliser"].unique():
        draw_band(ax, curves[curves["normaliser"] == name], "batch_size", name)
    _log2_axis(ax, curves["batch_size"])
    ax.set_ylabel(
        {
            "gram_offdiag": "off-diagonal share of |K|",
            "gram_cosine": "pair coupling |K_ij| / sqrt(K_ii K_jj)",
        }.get(value, value)
    )
    ax.legend(fontsize=MIN_FONT_PT, ncols=2)


def scaling_figure(results: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Each normaliser's scaling slope (log2 epochs to the target per doubling of the batch,
    mean and 95 % CI across seeds) under every specification the set holds, the primary
    first: 0 is perfect scaling, 1 a doubling that saves no step."""
    summary = scaling_summary(steps_scores(results))
    names = list(dict.fromkeys(summary["normaliser"]))
    specs = [
        s
        for s in SPECIFICATIONS
        if s in set(zip(summary["optimizer"], summary["init"]))
    ]
    markers = ("o", "s", "^")
    with style():
        figure, axes = new_figure(size=(6.0, 3.6))
        ax = axes[0, 0]
        for i, spec in enumerate(specs):
            rows = summary[
                (summary["optimizer"] == spec[0]) & (summary["init"] == spec[1])
            ]
            offset = 0.2 * (i - (len(specs) - 1) / 2)
            for x, name in enumerate(names):
                row = rows[rows["normaliser"] == name]
                if row.empty:
                    continue
                ax.errorbar(
                    x + offset,
                    float(row["mean"].iloc[0]),
                    yerr=np.nan_to_num(float(row["ci95"].iloc[0])),
                    marker=markers[i % len(markers)],
                    capsize=3,
                    color=colour(name),
                    linestyle="none",
                )
            # the legend names the specification by its marker, in no normaliser's colour
            ax.plot(
                [],
                [],
                marker=markers[i % len(markers)],
                color="grey",
                linestyle="none",
                label=SPECIFICATIONS[spec],
            )
        for level, text in (
            (0.0, "perfect scaling"),
            (1.0, "no gain from a larger batch"),
        ):
            ax.axhline(level, color="grey", linewidth=0.8, linestyle=":")
            ax.text(
                len(names) - 0.5,
                level,
                text,
                fontsize=MIN_FONT_PT,
                ha="right",
                va="bottom",
            )
        ax.set_xticks(
            range(len(names)), [label(n) for n in names], rotation=30, ha="right"
        )
        ax.set_ylabel("log2(epochs to target) per doubling")
        ax.legend(fontsize=MIN_FONT_PT)
        if title:
            ax.set_title(title)
    return figure


def fixed_epochs_figure(results: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Test accuracy against the batch size under the fixed-epochs convention (the primary
    optimiser and initialisation), each cell at its rate chosen on validation accuracy."""
    rows = _primary(results, budget="fixed_epochs")
    with style():
        figure, axes = new_figure(size=(6.0, 3.6))
        draw_batch_curves(rows, axes[0, 0], "fixed_epochs")
        epochs = int(rows["epochs"].iloc[0])
        axes[0, 0].set_title(title or f"fixed epochs ({epochs} passes over the data)")
    return figure
