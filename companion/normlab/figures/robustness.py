"""Robustness figures of chapter 15: accuracy under corruption.

- :func:`severity_curves`: accuracy against corruption severity, one line per normaliser.
- :func:`corruption_gallery`: one image under every corruption and several severities.
"""

from __future__ import annotations

import pandas as pd
import torch
from matplotlib.figure import Figure

from ._runs import LEGEND_SIZE, across_runs, one_row
from .column import MIN_FONT_PT, colours, finish, label, new_figure, style

__all__ = ["corruption_gallery", "severity_curves"]


def severity_curves(
    table: pd.DataFrame,
    *,
    value: str = "accuracy",
    hue: str = "normaliser",
    title: str | None = None,
) -> Figure:
    """``value`` against severity (0 = clean), averaged over corruptions within each run, then
    mean and 95 % CI across runs (seeds), one line per ``hue`` value."""
    lines = across_runs(table, hue, "severity", value, sort=False)
    palette = colours(line.key for line in lines)
    with style():
        figure, (ax,) = one_row()
        for line in lines:
            ax.errorbar(
                line.x,
                line.mean,
                yerr=line.half,
                marker="o",
                markersize=4,
                capsize=3,
                color=palette[line.key],
                label=f"{label(line.key)} (n={line.runs})",
            )
        finish(
            ax,
            xlabel="severity (0 = clean test set)",
            ylabel=f"{label(value)}, mean over corruptions",
            title=title,
            legend_size=LEGEND_SIZE,
        )
    return figure


def corruption_gallery(
    image: torch.Tensor,
    *,
    severities: tuple[int, ...] = (1, 3, 5),
    title: str | None = None,
) -> Figure:
    """One image (``(C, H, W)`` in [0, 1]) under every corruption of :func:`normlab.data.corrupt`
    (rows) at each of ``severities`` (columns), the clean image in the first column."""
    from ..data.corruptions import CORRUPTIONS, corrupt

    batch = image.unsqueeze(0)
    with style():
        figure, axes = new_figure(
            ncols=len(severities) + 1, nrows=len(CORRUPTIONS), size=(1.3, 1.3)
        )
        for row, name in enumerate(CORRUPTIONS):
            panels = [batch] + [
                corrupt(batch, name, s, generator=torch.Generator().manual_seed(0))
                for s in severities
            ]
            for col, panel in enumerate(panels):
                ax = axes[row, col]
                picture = panel[0].permute(1, 2, 0).numpy()
                ax.imshow(
                    picture[..., 0] if picture.shape[-1] == 1 else picture,
                    cmap="gray",
                    vmin=0,
                    vmax=1,
                )
                ax.set_xticks([])
                ax.set_yticks([])
                if row == 0:
                    ax.set_title(
                        "clean" if col == 0 else f"severity {severities[col - 1]}",
                        fontsize=8,
                    )
            axes[row, 0].set_ylabel(
                label(name), fontsize=MIN_FONT_PT, rotation=0, ha="right", va="center"
            )
        if title:
            figure.suptitle(title)
    return figure
