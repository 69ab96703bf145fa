"""Gate entropy per layer over the gate studies' training (chapters 11 and 12).

- :func:`entropy_figure`: each layer's gate entropy per epoch, a panel per task;
- :func:`freeze_figure`: the learned gate against the gate frozen at one epoch;
- :func:`entropy_twin`: :func:`entropy_figure` as a Vega-Lite chart with controls, for the
  HTML book;
- :func:`entropy_explorer`: live ipywidgets in Jupyter with :func:`entropy_twin` as their
  static twin.

``gates`` is a gate table (:func:`normlab.gate_tables.gate_table`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from .._extras import require
from ..data.sources import served_by
from ..data.sources import title as data_title
from ..experiments.gate_study import FREEZE_PREFIX, TASKS
from ..interactive import Interactive, LiveAndStatic, choice
from ..names import layer_name
from ..normalisers import colour
from ..paper import EPS_H
from .column import COLUMN_INCHES, MIN_FONT_PT, label, new_figure, style

__all__ = [
    "entropy_explorer",
    "entropy_figure",
    "entropy_twin",
    "freeze_figure",
    "task_title",
]


def _task_panels(tasks: list[str]) -> tuple[Figure, np.ndarray]:
    """A figure the width of the text column with a panel per task side by side (wrapped
    onto more rows past two), sharing the y axis; call it inside :func:`style`."""
    width = COLUMN_INCHES / min(len(tasks), 2)
    figure, axes = new_figure(ncols=len(tasks), size=(width, 2.9), sharey=True)
    return figure, axes[0]


def task_title(task: str, table: pd.DataFrame | None = None) -> str:
    """A panel's title: the data a task's runs trained on, and whether its input statistics
    are stationary or diverse (``mnist`` offline: "8×8 digits (stationary)"); ``table``, a
    results or gate table with the runs' ``source``, names the dataset each task chose
    (``mnist`` with ``source`` mnist_5k: "real MNIST, 5,000 digits (stationary)")."""
    kind = TASKS.get(task)
    name = label(task, "data")
    if table is not None and {"data", "source", "data_profile"} <= set(table):
        rows = table.loc[table["data"] == task, ["source", "data_profile"]].dropna()
        if len(rows.drop_duplicates()) == 1:
            source, profile = rows.iloc[0]
            name = data_title(served_by(task, str(profile), str(source)))
    return f"{name} ({kind})" if kind else name


def entropy_figure(gates: pd.DataFrame, title: str, eps_h: float = EPS_H) -> Figure:
    """Gate entropy per layer over training, one panel per task: the mean over seeds and a band of
    one standard deviation (``gates``: a gate table)."""
    tasks = list(dict.fromkeys(gates["data"]))
    with style():
        figure, axes = _task_panels(tasks)
        for ax, task in zip(axes, tasks):
            part = gates[gates["data"] == task]
            positions = sorted(part["position"].unique())
            for shade, position in zip(
                colormaps["viridis"](np.linspace(0, 0.9, len(positions))), positions
            ):
                layer = part[part["position"] == position]
                curve = (
                    layer.groupby("epoch")["entropy"].agg(["mean", "std"]).fillna(0.0)
                )
                ax.plot(
                    curve.index,
                    curve["mean"],
                    "o-",
                    ms=3,
                    color=shade,
                    label=layer_name(layer["layer"].iloc[0]),
                )
                ax.fill_between(
                    curve.index,
                    curve["mean"] - curve["std"],
                    curve["mean"] + curve["std"],
                    color=shade,
                    alpha=0.15,
                    lw=0,
                )
            ax.axhline(math.log(2), color="grey", ls=":")
            ax.axhline(eps_h, color="black", ls="--", lw=1)
            ax.set(
                title=task_title(task, gates),
                xlabel="epoch",
                ylim=(0, math.log(2) + 0.05),
            )
        axes[0].set_ylabel("gate entropy (nats)")
        handles, names = axes[0].get_legend_handles_labels()
        figure.legend(
            handles,
            names,
            loc="outside lower center",
            ncol=min(3, len(names)),
            fontsize=MIN_FONT_PT,
            title="layer",
            title_fontsize=MIN_FONT_PT,
        )
        figure.suptitle(title)
    return figure


def freeze_figure(gates: pd.DataFrame, t_freeze: int) -> Figure:
    """Mean gate entropy over layers and seeds per epoch, the plain learned gate against the
    gate frozen at the end of epoch ``t_freeze`` (``gates``: a gate table), a panel
    per task."""
    frozen = f"{FREEZE_PREFIX}{t_freeze}"
    pair = gates[gates["arm"].isin(["autonorm", frozen])]
    tasks = list(dict.fromkeys(pair["data"]))
    with style():
        figure, axes = _task_panels(tasks)
        for ax, task in zip(axes, tasks):
            part = pair[pair["data"] == task]
            for arm, line, shade in (
                ("autonorm", "-", colour("autonorm")),
                (frozen, "--", colour("autonorm_s")),
            ):
                curve = part[part["arm"] == arm].groupby("epoch")["entropy"].mean()
                ax.plot(
                    curve.index,
                    curve.values,
                    line,
                    marker="o",
                    ms=3,
                    label=label(arm),
                    color=shade,
                )
            ax.axvline(t_freeze, color="#d62728", alpha=0.3, lw=5)
            ax.set(
                title=task_title(task, gates),
                xlabel="epoch",
                ylim=(0, math.log(2) + 0.05),
            )
        axes[0].set_ylabel("mean gate entropy (nats)")
        axes[0].legend(fontsize=MIN_FONT_PT)
    return figure


def entropy_twin(
    gates: pd.DataFrame, by: str, title: str, eps_h: float = EPS_H
) -> Interactive:
    """:func:`entropy_figure` for the HTML book, with controls: the task, the value of the
    column ``by`` (e.g. ``tau``), and one seed or the mean over seeds with a band of one
    standard deviation (``gates``: a gate table; numbers rounded to 3 decimals)."""
    alt = require("altair", "normlab.figures.gate_entropy")

    data = pd.DataFrame(
        {
            "d": gates["data"],
            "v": gates[by],
            "s": gates["seed"],
            "l": gates["layer"].map(layer_name),
            "e": gates["epoch"],
            "H": gates["entropy"].round(3),
        }
    )
    tasks, values = list(dict.fromkeys(data["d"])), sorted(data["v"].unique())
    seeds = sorted(data["s"].unique())
    layers = list(dict.fromkeys(data["l"]))
    params = [
        choice("task", tasks[0], tasks, "task ", [task_title(t) for t in tasks]),
        choice("v", values[len(values) // 2], values, f"{by} "),
        choice(  # one seed: nothing to choose
            "seed",
            "mean",
            ["mean", *map(int, seeds)] if len(seeds) > 1 else ["mean"],
            "seed ",
            ["mean ± sd", *(f"seed {s}" for s in seeds)],
        ),
    ]
    picked = alt.Chart(data, width=480, height=240).transform_filter(
        "datum.d == task && datum.v == v && (seed == 'mean' || datum.s == seed)"
    )
    x = alt.X("e:Q", title="epoch", axis=alt.Axis(tickMinStep=1))
    colour = alt.Color(
        "l:N", title="layer", sort=layers, scale=alt.Scale(scheme="tableau10")
    )
    axis = "gate entropy (nats)"
    y = alt.Y("mean(H):Q", title=axis, scale=alt.Scale(domain=[0, 0.72]))
    lines = picked.mark_line(point=True).encode(x=x, y=y, color=colour)
    band = picked.mark_errorband(extent="stdev", opacity=0.15).encode(
        x=x, y=alt.Y("H:Q", title=axis), color=colour
    )
    levels = pd.DataFrame(
        {"y": [round(math.log(2), 3), eps_h], "what": ["ln 2", "eps_H"]}
    )
    rules = (
        alt.Chart(levels)
        .mark_rule(color="grey")
        .encode(
            y="y:Q",
            strokeDash=alt.StrokeDash(
                "what:N",
                scale=alt.Scale(domain=["ln 2", "eps_H"], range=[[2, 3], [6, 3]]),
                legend=None,
            ),
        )
    )
    chart = (
        alt.layer(band, lines, rules)
        .add_params(*params)
        .properties(title=f"{title} (dotted: ln 2; dashed: eps_H = {eps_h:g})")
    )
    return Interactive(
        chart, f"{title}: gate entropy per layer, by task, {by} and seed"
    )


def entropy_explorer(
    gates: pd.DataFrame, by: str, title: str, eps_h: float = EPS_H
) -> LiveAndStatic:
    """:func:`entropy_figure` of one task, one value of ``by`` and one seed or the mean over
    seeds, with controls: live ipywidgets in Jupyter and Colab, :func:`entropy_twin` in the
    HTML book (``gates``: a gate table)."""
    widgets = require("ipywidgets", "normlab.figures.gate_entropy")

    def draw(task: str, value: float, seed: Any) -> Figure:
        rows = (gates["data"] == task) & (gates[by] == value)
        if seed != "mean":
            rows &= gates["seed"] == seed
        label = "mean ± sd over seeds" if seed == "mean" else f"seed {seed}"
        return entropy_figure(gates[rows], f"{title}: {by} {value:g}, {label}", eps_h)

    values = sorted(gates[by].unique())
    live = widgets.interactive(
        draw,
        task=widgets.ToggleButtons(
            options=[(task_title(t), t) for t in dict.fromkeys(gates["data"])]
        ),
        value=widgets.SelectionSlider(
            options=values, value=values[len(values) // 2], description=by
        ),
        seed=widgets.Dropdown(
            options=["mean", *map(int, sorted(gates["seed"].unique()))]
        ),
    )
    if live.result is None:  # ipywidgets 7.7 draws an interactive only once it is shown
        live.update()
    return LiveAndStatic(live, entropy_twin(gates, by, title, eps_h))
