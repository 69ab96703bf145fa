"""Part I's results on one axis or figure (chapters 6-8): a normaliser's mean with its 95 %
band against a swept variable, and the corrections' lead over their rivals.

- :func:`draw_band`: one normaliser's line and band, in its registered colour;
- :func:`draw_lr_sensitivity`: the validation metric against the learning rate;
- :func:`draw_batch_curves`: the test metric against the batch size, per budget convention;
- :func:`draw_coupling`: the update kernel's cross-sample coupling against the batch size;
- :func:`lead_figure`: each correction's lead over the strongest rival, by width and depth.

The ``draw_*`` functions draw on a matplotlib axis, as :func:`normlab.figures.beside` asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from .. import run_tables as runs
from ..analysis.part1 import batch_slopes, lr_sensitivity
from ..claims.pairing import at_chosen_lr, paired
from ..experiments.part1 import CORRECTIONS, LEAD_RIVALS, verdict_rows
from ..names import data_label
from ..normalisers import colour, linestyle
from ..stats import interval
from .column import label, new_figure, style

__all__ = [
    "draw_band",
    "draw_batch_curves",
    "draw_coupling",
    "draw_lr_sensitivity",
    "correction_leads",
    "lead_figure",
]


def _only(results: pd.DataFrame, where: Mapping[str, Any]) -> pd.DataFrame:
    for key, value in where.items():
        results = results[results[key] == value]
    if results.empty:
        raise ValueError(f"no runs with {dict(where)}")
    return results


def draw_band(ax: Any, table: pd.DataFrame, x: str, name: str) -> None:
    """One normaliser's mean line and 95 % CI band, in its registered colour and line style."""
    rows = table.sort_values(x)
    low, high = (
        rows["mean"] - rows["ci95"].fillna(0.0),
        rows["mean"] + rows["ci95"].fillna(0.0),
    )
    shade = colour(name)
    ax.plot(
        rows[x],
        rows["mean"],
        marker="o",
        markersize=3,
        color=shade,
        linestyle=linestyle(name),
        label=label(name),
    )
    ax.fill_between(rows[x], low, high, color=shade, alpha=0.15, linewidth=0)


def _metric_axis(ax: Any, results: pd.DataFrame, split: str) -> None:
    metric = results["metric"].iloc[0]
    ax.set_ylabel(f"{split} {metric}")
    if metric == "accuracy":
        ax.set_ylim(0.0, 1.0)
    ax.legend(fontsize=7)


def draw_lr_sensitivity(results: pd.DataFrame, ax: Any, **where: Any) -> None:
    """Mean validation metric against the learning rate, one line (95 % CI band) per normaliser.

    ``where`` selects the runs (e.g. ``optimizer="sgd", width=64``); pin every configuration
    axis, since the runs of what is left are pooled. Draws on the matplotlib axis ``ax``.
    """
    curves = lr_sensitivity(_only(results, where), ["normaliser"])
    for name in curves["normaliser"].unique():
        draw_band(ax, curves[curves["normaliser"] == name], "lr", name)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    _metric_axis(ax, results, "val")


def draw_batch_curves(results: pd.DataFrame, ax: Any, budget: str) -> None:
    """Test metric at the learning rate of ``budget``'s convention against the batch size
    (log axis), one line with its 95 % CI band per normaliser (see
    ``normlab.analysis.part1.batch_slopes``)."""
    _, scores = batch_slopes(_only(results, {"budget": budget}))
    table = runs.summarise(scores, ["normaliser", "batch_size"])
    for name in table["normaliser"].unique():
        draw_band(ax, table[table["normaliser"] == name], "batch_size", name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_title(budget.replace("_", " "))
    _metric_axis(ax, results, "test")


def draw_coupling(results: pd.DataFrame, ax: Any, value: str = "gram_offdiag") -> None:
    """A kernel measurement of ``normlab.divergence.kernel_coupling``
    (``value``) against the batch size, one line (95 % band across seeds) per normaliser,
    from the runs of the first budget at the learning rate chosen on val per normaliser and
    batch size."""
    rows = runs.at_chosen_lr(
        results[results["budget"] == results["budget"].iloc[0]],
        ["normaliser", "batch_size"],
    )
    curves = runs.summarise(rows, ["normaliser", "batch_size"], value=value)
    for name in curves["normaliser"].unique():
        draw_band(ax, curves[curves["normaliser"] == name], "batch_size", name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel(
        {
            "gram_offdiag": "off-diagonal share of |K|",
            "gram_cosine": "pair coupling |K_ij| / sqrt(K_ii K_jj)",
        }.get(value, value)
    )
    ax.legend(fontsize=7)


def correction_leads(results: pd.DataFrame) -> pd.DataFrame:
    """Each correction's test-metric lead over the strongest of
    ``normlab.experiments.part1.LEAD_RIVALS`` (chosen on val), per depth and width:
    :func:`normlab.claims.paired` in each (depth, width), each arm at its rate chosen on
    val. Columns ``depth``, ``width``, ``normaliser``, ``mean``, ``ci95``, ``n``."""
    best = at_chosen_lr(results)
    rows = []
    for depth, width in sorted(set(zip(best["depth"], best["width"]))):
        for name in CORRECTIONS:
            where = {"depth": depth, "width": width}
            lead = interval(paired(best, name, LEAD_RIVALS, within=where).samples)
            rows.append(
                {
                    **where,
                    "normaliser": name,
                    "mean": lead.mean,
                    "ci95": lead.half,
                    "n": lead.n,
                }
            )
    return pd.DataFrame(rows)


def lead_figure(
    results: pd.DataFrame,
    optimizer: str = "sgd",
    activation: str = "tanh",
) -> Figure:
    """:func:`correction_leads` against width (at the smallest depth) and depth (at the
    largest width), on the ``normlab.experiments.part1.verdict_rows`` (the primary
    specification: its data, initialisation and optimiser)."""
    rows = verdict_rows(results)
    part = _only(rows, {"optimizer": optimizer, "activation": activation})
    leads = correction_leads(part)
    shallow, wide = leads["depth"].min(), leads["width"].max()
    panels = {
        f"width (depth {shallow})": (leads[leads["depth"] == shallow], "width"),
        f"depth (width {wide})": (leads[leads["width"] == wide], "depth"),
    }
    with style():
        figure, axes = new_figure(ncols=2, size=(5.0, 3.8))
        for ax, (title, (sub, x)) in zip(axes[0], panels.items()):
            for name in CORRECTIONS:
                draw_band(ax, sub[sub["normaliser"] == name], x, name)
            ax.axhline(0.0, color="black", linewidth=0.8)
            if x == "width":
                ax.set_xscale("log", base=2)
            ax.set_xticks(
                sorted(sub[x].unique()), [str(v) for v in sorted(sub[x].unique())]
            )
            ax.set_xlabel(title)
            ax.set_ylabel("lead in test accuracy")
            ax.legend(fontsize=8)
        init = "/".join(map(str, sorted(set(part.get("init", ["default"])))))
        figure.suptitle(
            f"The corrections' lead over the strongest rival ({optimizer}, {activation}, "
            f"{init} init;\n{data_label(part)})"
        )
    return figure
