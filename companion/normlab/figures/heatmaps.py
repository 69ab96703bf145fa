"""Annotated tables of numbers as heat maps.

- :func:`heatmap`: an annotated table of numbers;
- :func:`normaliser_heatmap`: a summary's mean per normaliser and swept value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import normalisers
from .column import label, new_figure, style

__all__ = ["heatmap", "normaliser_heatmap"]


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
    """A :func:`heatmap` of a summary's ``mean`` (e.g. from :func:`normlab.run_tables.summarise`):
    one row per normaliser, in registry order, one column per value of ``columns``."""
    present = set(summary["normaliser"])
    table = summary.pivot_table(
        index="normaliser", columns=columns, values="mean"
    ).reindex([n for n in normalisers.NORMALISERS if n in present])
    return heatmap(table, fmt=".3f", title=title, colorbar_label=f"test {metric}")
