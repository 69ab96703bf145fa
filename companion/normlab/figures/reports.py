"""The figures ``python -m normlab report <experiment>`` writes, by experiment name.

Each function takes an experiment's merged results and its summary (the best-of table of
``normlab.experiments.runner.summary_table``) and returns ``{file stem: Figure}``;
:func:`report_figures` looks one up by name, and the command passes it to
:func:`normlab.experiments.report`, so the experiments never import a figure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ..analysis.part1 import lr_sensitivity
from ..experiments.part1 import FC_PRIMARY, verdict_rows
from ..names import data_label
from ..run_tables import at_chosen_lr, select_best, summarise
from .curves import metric_vs
from .heatmaps import normaliser_heatmap
from .intervals import interval_bars

__all__ = [
    "REPORTS",
    "autonorm_vision",
    "batch_size",
    "cnn_normalisers",
    "fc_normalisers",
    "report_figures",
]

ReportFigures = Callable[[pd.DataFrame, pd.DataFrame], dict[str, Figure]]


def fc_normalisers(results: pd.DataFrame, summary: pd.DataFrame) -> dict[str, Figure]:
    """Best-of figures per optimiser (every configuration column kept, swept or fixed) and
    the learning-rate sweep at the shallowest depth's largest width, on the
    ``normlab.experiments.part1.verdict_rows``."""
    figures: dict[str, Figure] = {}
    # the primary data and init; one set of figures per optimiser
    primary = {k: v for k, v in FC_PRIMARY.items() if k != "optimizer"}
    results = verdict_rows(results, primary)
    metric = results["metric"].iloc[0]
    data = data_label(results)
    by = ["optimizer", "activation", "depth", "width", "normaliser"]
    best = select_best(
        results, by, "lr", higher_is_better=bool(results["higher_is_better"].iloc[0])
    )
    for optimizer, part in best.groupby("optimizer"):
        figures[f"best_by_width_{optimizer}"] = metric_vs(
            part,
            "width",
            hue="normaliser",
            col="activation",
            logx=True,
            base=2,
            ylabel=f"test {metric} (lr chosen on val)",
            title=f"Fully-connected nets by width ({optimizer}; {data})",
        )
        shapes = [f"{d}x{w}" for d, w in zip(part["depth"], part["width"])]
        shaped = part.assign(**{"depth x width": shapes})
        for activation, rows in shaped.groupby("activation"):
            figures[f"heatmap_{optimizer}_{activation}"] = normaliser_heatmap(
                rows,
                "depth x width",
                metric=metric,
                title=f"test {metric}, {activation}, {optimizer}; {data}",
            )
    shallow = results[results["depth"] == results["depth"].min()]
    sweep = shallow[
        (shallow["width"] == shallow["width"].max())
        & (shallow["activation"] == shallow["activation"].iloc[0])
    ]
    figures["lr_sensitivity"] = metric_vs(
        lr_sensitivity(sweep, ["optimizer", "normaliser"]),
        "lr",
        hue="normaliser",
        col="optimizer",
        logx=True,
        ylabel=f"val {metric}",
        title=f"Learning-rate sweep ({sweep['activation'].iloc[0]}, depth "
        f"{sweep['depth'].iloc[0]}, width {sweep['width'].iloc[0]}; {data})",
    )
    return figures


def batch_size(results: pd.DataFrame, summary: pd.DataFrame) -> dict[str, Figure]:
    """Steps to the target against the batch size, the rate each cell chose and the
    scaling slopes (:mod:`normlab.experiments.part1_batch`), test accuracy under fixed
    epochs where the set has it, and the update kernel's cross-sample coupling."""
    from ..analysis.batch import steps_scores
    from .batch import draw_kernel, draw_steps, fixed_epochs_figure, scaling_figure
    from .column import new_figure, style

    def panel(draw: Callable[[Any], None]) -> Figure:
        with style():
            figure, axes = new_figure(size=(6.0, 3.6))
            draw(axes[0, 0])
        return figure

    chosen = steps_scores(results).drop_duplicates(
        ["optimizer", "init", "normaliser", "batch_size"]
    )
    chosen = chosen.assign(
        specification=chosen["optimizer"] + ", " + chosen["init"]
    ).dropna(subset=["lr"])
    figures = {
        "steps_to_target": panel(lambda ax: draw_steps(results, ax)),
        "chosen_lr": metric_vs(
            chosen,
            "batch_size",
            y="lr",
            err=None,
            hue="normaliser",
            col="specification",
            logx=True,
            base=2,
            logy=True,
            ylabel="rate with the fewest steps to the target",
            title="The chosen learning rate against the batch size",
        ),
        "scaling_slopes": scaling_figure(results),
        "gram_offdiag": panel(lambda ax: draw_kernel(results, ax)),
    }
    if "fixed_epochs" in set(results["budget"]):
        figures["fixed_epochs"] = fixed_epochs_figure(results)
    return figures


def _position_coupling(results: pd.DataFrame) -> Figure:
    """The cross-position coupling at each normaliser's chosen rate: against the channels
    where a grid sweeps them, else one interval per normaliser."""
    title = "Cross-position coupling in one image (lr chosen on val)"
    xlabel = "off-diagonal share of |K| over positions"
    by = [a for a in ("depth", "channels") if a in results and results[a].nunique() > 1]
    chosen = at_chosen_lr(results, [*by, "normaliser"])
    if "channels" in by:
        return metric_vs(
            summarise(chosen, ["normaliser", "channels"], value="position_coupling"),
            "channels",
            hue="normaliser",
            logx=True,
            base=2,
            ylabel=xlabel,
            title=title,
        )
    rows = summarise(chosen, ["normaliser"], value="position_coupling")
    return interval_bars(rows, xlabel=xlabel, title=title)


def cnn_normalisers(results: pd.DataFrame, summary: pd.DataFrame) -> dict[str, Figure]:
    """The CNN's test metric per shape and normaliser, its learning-rate sweep and the
    cross-position coupling at the chosen rates (against the channels where swept)."""
    metric = results["metric"].iloc[0]
    for axis in ("depth", "channels"):  # a grid may fix what another sweeps
        if axis not in summary:
            summary = summary.assign(**{axis: results[axis].iloc[0]})
    shapes = [f"{d}x{c}" for d, c in zip(summary["depth"], summary["channels"])]
    return {
        "heatmap": normaliser_heatmap(
            summary.assign(**{"depth x channels": shapes}),
            "depth x channels",
            metric=metric,
            title=f"CNN test {metric} (lr chosen on val)",
        ),
        "lr_sensitivity": metric_vs(
            lr_sensitivity(results, ["normaliser"]),
            "lr",
            hue="normaliser",
            logx=True,
            ylabel=f"val {metric}",
            title="CNN learning-rate sweep",
        ),
        "position_coupling": _position_coupling(results),
    }


def autonorm_vision(results: pd.DataFrame, summary: pd.DataFrame) -> dict[str, Figure]:
    """The test metric per task and normaliser, each at its rate chosen on val."""
    metric = results["metric"].iloc[0]
    title = f"test {metric}, lr chosen on val"
    return {
        "by_normaliser": normaliser_heatmap(summary, "data", metric=metric, title=title)
    }


#: Experiment name -> the figures its report writes.
REPORTS: dict[str, ReportFigures] = {
    "fc_normalisers": fc_normalisers,
    "batch_size": batch_size,
    "cnn_normalisers": cnn_normalisers,
    "autonorm_vision": autonorm_vision,
}


def report_figures(name: str) -> ReportFigures | None:
    """The figures of experiment ``name``'s report, or None where it draws none."""
    return REPORTS.get(name)
