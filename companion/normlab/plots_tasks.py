"""Figures of chapters 13-15 (language, tabular regression, corruption); each returns a ``Figure``.

- :func:`entropy_curves`: mean gate entropy over layers against training progress, per task.
- :func:`gate_heatmaps`: a gate probability per layer and epoch, one panel per task.
- :func:`severity_curves`: accuracy against corruption severity, one line per normaliser.
- :func:`interval_bars`: one mean with its 95 % CI per row, with optional reference lines.
- :func:`corruption_gallery`: one image under every corruption and several severities.
- :func:`draw_by_normaliser`: a metric per normaliser on a given axis (for ``results.beside``).

Lines are means across seeds and bands or bars their 95 % t-intervals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure

from .paper import EPS_H
from .plots import colours, finish, label, new_figure, style
from .stats import mean_ci

__all__ = [
    "corruption_gallery",
    "draw_by_normaliser",
    "entropy_curves",
    "gate_heatmaps",
    "interval_bars",
    "severity_curves",
]


LEGEND_SIZE = 8  # points, one below the style's legend size: these panels are small


def _mean_ci(values: np.ndarray) -> tuple[float, float]:
    """:func:`normlab.stats.mean_ci` of the finite values, with a zero band below two."""
    mean, half, n = mean_ci(values[np.isfinite(values)])
    return mean, half if n >= 2 else 0.0


class _Line(NamedTuple):
    """One ``hue`` value's line: its number of runs, and at each ``x`` the mean and 95 %
    t-interval half-width across runs of each run's own mean."""

    key: Any
    runs: int
    x: np.ndarray
    mean: np.ndarray
    half: np.ndarray


def _across_runs(
    table: pd.DataFrame, hue: str, x: str, value: str, *, sort: bool
) -> list[_Line]:
    """``value`` averaged within each run at each ``x``, then across runs: one :class:`_Line`
    per ``hue`` value (sorted with ``sort``, else in order of appearance). Seeds are the runs,
    so a run's many rows at one ``x`` (layers, corruptions) count once."""
    per_run = table.groupby([hue, "run_id", x], sort=sort)[value].mean().reset_index()
    lines = []
    for key, part in per_run.groupby(hue, sort=False):
        points = part.groupby(x)[value].apply(lambda v: _mean_ci(v.to_numpy()))
        lines.append(
            _Line(
                key,
                part["run_id"].nunique(),
                points.index.to_numpy(),
                np.array([m for m, _ in points]),
                np.array([h for _, h in points]),
            )
        )
    return lines


def _figure(
    ncols: int = 1, size: tuple[float, float] = (5.0, 3.6)
) -> tuple[Figure, np.ndarray]:
    figure, axes = new_figure(ncols=ncols, size=size)
    return figure, axes[0]


def entropy_curves(
    gates: pd.DataFrame,
    *,
    hue: str = "data",
    eps_h: float | None = EPS_H,
    names: Mapping[str, str] | None = None,
    title: str | None = None,
) -> Figure:
    """Mean gate entropy (over layers) per epoch, one line per ``hue`` value, x = epoch / last epoch.

    ``gates`` is a :func:`normlab.experiments.part2_tasks.gate_table`; seeds are the runs of
    each ``hue`` value. ``eps_h`` draws AutoNorm-S's threshold; ln 2 (the maximum) is drawn too.
    """
    lines = _across_runs(gates, hue, "epoch", "entropy", sort=True)
    palette = colours(line.key for line in lines)
    with style():
        figure, (ax,) = _figure()
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
        figure, axes = _figure(ncols=len(keys), size=(4.0, 3.4))
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
                [str(names_by_position[p]) for p in table.index],
                fontsize=7,
            )
            ax.set_xticks(
                range(len(table.columns)), [str(c) for c in table.columns], fontsize=7
            )
            ax.set_xlabel("epoch")
            ax.set_title(
                f"{(names or {}).get(key, label(key))} (n={part['run_id'].nunique()})"
            )
        figure.colorbar(image, ax=list(axes), label=f"{label(value)} (mean over seeds)")
        if title:
            figure.suptitle(title)
    return figure


def severity_curves(
    table: pd.DataFrame,
    *,
    value: str = "accuracy",
    hue: str = "normaliser",
    title: str | None = None,
) -> Figure:
    """``value`` against severity (0 = clean), averaged over corruptions within each run, then
    mean and 95 % CI across runs (seeds), one line per ``hue`` value."""
    lines = _across_runs(table, hue, "severity", value, sort=False)
    palette = colours(line.key for line in lines)
    with style():
        figure, (ax,) = _figure()
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
        figure, (ax,) = _figure(size=(6.0, 0.9 + 0.35 * len(rows)))
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


def corruption_gallery(
    image: torch.Tensor,
    *,
    severities: tuple[int, ...] = (1, 3, 5),
    title: str | None = None,
) -> Figure:
    """One image (``(C, H, W)`` in [0, 1]) under every corruption of :func:`normlab.data.corrupt`
    (rows) at each of ``severities`` (columns), the clean image in the first column."""
    from .data.corruptions import CORRUPTIONS, corrupt

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
                label(name), fontsize=7, rotation=0, ha="right", va="center"
            )
        if title:
            figure.suptitle(title)
    return figure


def draw_by_normaliser(
    results: pd.DataFrame,
    ax: Any,
    *,
    value: str = "test_metric",
    ylabel: str | None = None,
) -> None:
    """On ``ax``: ``value`` per normaliser (x) at the learning rate chosen on validation, mean and
    95 % CI across seeds, one marker per dataset. For :func:`normlab.results.beside`."""
    from .experiments.part2_tasks import at_chosen_lr

    chosen = at_chosen_lr(results)
    names = list(dict.fromkeys(results["normaliser"]))
    palette = colours(names)
    markers = ("o", "s", "^", "D")
    for i, (task, part) in enumerate(chosen.groupby("data", sort=True)):
        for x, name in enumerate(names):
            values = part[part["normaliser"] == name][value].to_numpy(dtype=float)
            if len(values) == 0:
                continue
            mean, half = _mean_ci(values)
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
    ax.legend(fontsize=7, title="task", title_fontsize=7)
