"""Gate figures of chapters 13-15: how AutoNorm's gates move during training.

- :func:`entropy_curves`: mean gate entropy over layers against training progress, per task.
- :func:`gate_heatmaps`: a gate probability per layer and epoch, one panel per task.

Lines are means across seeds and bands their 95 % t-intervals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
from matplotlib.figure import Figure

from ..names import layer_name
from ..paper import EPS_H
from ._runs import LEGEND_SIZE, across_runs, one_row
from .column import MIN_FONT_PT, colours, finish, label, style

__all__ = ["entropy_curves", "gate_heatmaps"]


def entropy_curves(
    gates: pd.DataFrame,
    *,
    hue: str = "data",
    eps_h: float | None = EPS_H,
    names: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """Mean gate entropy (over layers) per epoch, one line per ``hue`` value, x = epoch / last epoch.

    ``gates`` is a :func:`normlab.gate_tables.gate_table`; seeds are the runs of
    each ``hue`` value. ``eps_h`` draws AutoNorm-S's threshold; ln 2 (the maximum) is drawn too.
    """
    lines = across_runs(gates, hue, "epoch", "entropy", sort=True)
    palette = colours(line.key for line in lines)
    with style():
        figure, (ax,) = one_row()
        for line in lines:
            x = line.x / line.x.max()
            text = (names or {}).get(line.key, label(line.key))
            colour = palette[line.key]
            ax.plot(
                x,
                line.mean,
                marker="o",
                markersize=3,
                color=colour,
                label=f"{text} (n={line.runs})",
            )
            low, high = line.mean - line.half, line.mean + line.half
            ax.fill_between(x, low, high, color=colour, alpha=0.2, linewidth=0)
        ax.axhline(math.log(2), color="grey", lw=0.8, ls=":", label="ln 2 (undecided)")
        if eps_h is not None:
            ax.axhline(
                eps_h, color="black", lw=0.8, ls="--", label=rf"$\epsilon_H$ = {eps_h}"
            )
        ax.set_ylim(0, 0.75)
        finish(
            ax,
            xlabel="training progress (epoch / last epoch)",
            ylabel="gate entropy, mean over layers (nats)",
            title=title,
            legend_size=LEGEND_SIZE,
        )
    return figure


def gate_heatmaps(
    gates: pd.DataFrame,
    *,
    panel: str = "data",
    value: str = "p_dyt",
    names: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """``value`` (default the weight on DyT) per layer (rows, first layer at the top) and epoch
    (columns), mean over seeds, one panel per ``panel`` value, colour scale 0..1."""
    keys = list(dict.fromkeys(gates[panel]))
    with style():
        figure, axes = one_row(ncols=len(keys), size=(4.0, 3.4))
        image = None
        for ax, key in zip(axes, keys):
            part = gates[gates[panel] == key]
            table = part.pivot_table(
                index="position", columns="epoch", values=value, aggfunc="mean"
            )
            ax.grid(False)
            image = ax.imshow(
                table.to_numpy(), vmin=0.0, vmax=1.0, cmap="coolwarm", aspect="auto"
            )
            names_by_position = part.drop_duplicates("position").set_index("position")[
                "layer"
            ]
            ax.set_yticks(
                range(len(table.index)),
                [layer_name(str(names_by_position[p])) for p in table.index],
                fontsize=MIN_FONT_PT,
            )
            ax.set_xticks(
                range(len(table.columns)),
                [str(c) for c in table.columns],
                fontsize=MIN_FONT_PT,
            )
            ax.set_xlabel("epoch")
            ax.set_title(
                f"{(names or {}).get(key, label(key))} (n={part['run_id'].nunique()})"
            )
        figure.colorbar(image, ax=list(axes), label=f"{label(value)} (mean over seeds)")
        if title:
            figure.suptitle(title)
    return figure
