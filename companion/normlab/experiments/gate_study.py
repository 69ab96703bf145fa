"""Part II gate studies: the stabilisation bottleneck (chapter 11), AutoNorm-S at work
(chapter 12) and the runs behind chapter 10's gate-collapse widget.

This module holds their figures and gathers the names the chapters use from
:mod:`.gate_runs` (the arms and one run), :mod:`.gate_schedules` (AutoNorm-S composed
from saved runs, paired tables) and :mod:`.gate_grids` (the grids and their budgets).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..interactive import Interactive, LiveAndStatic, choice
from ..normalisers import colour
from ..paper import EPS_H
from .gate_grids import (  # noqa: F401  (the grids, for the chapters)
    AUTONORM_S_SWEEP,
    GATE_BOTTLENECK,
    GATE_TAU,
    GATE_WIDGET,
    LRS,
    SEEDS,
    SETUP,
    T_FREEZE,
)
from .gate_runs import (  # noqa: F401  (one run, for the chapters)
    ARMS,
    FREEZE_PREFIX,
    RESTYLED_SUFFIX,
    TASKS,
    SelectorLR,
    SelectorSnapshots,
    arm_settings,
    gate_callbacks,
    gate_table,
    gate_vit,
    restyle,
    run_table,
    task_splits,
    train_gate,
)
from .gate_schedules import (  # noqa: F401  (AutoNorm-S composed, for the chapters)
    CONFIG_AXES,
    EPS_GRID,
    arm_summary,
    at_defaults,
    at_lr_of,
    chosen,
    compose_schedule,
    freeze_epochs,
    paired_differences,
    sweep_table,
    with_schedules,
)
from .runner import at_chosen_lr, load_records, summarise  # noqa: F401

# ------------------------------------------------------------------------- figures

ARM_ORDER = [
    "frozen_ln",
    "autonorm_random",
    "autonorm",
    "autonorm_hard",
    "autonorm_s",
    "autonorm_s_low",
]


def draw_arms(runs: pd.DataFrame, ax: Any) -> None:
    """Test accuracy (mean, 95 % CI) per task and arm on one axis, at the book's default
    configuration (:func:`at_defaults`); AutoNorm-S composed in."""
    from .. import plots

    summary = arm_summary(with_schedules(at_defaults(runs)))
    colours = plots.colours(ARM_ORDER)
    tasks = list(dict.fromkeys(summary["data"]))
    for _, row in summary.iterrows():
        x = tasks.index(row["data"]) * (len(ARM_ORDER) + 1) + ARM_ORDER.index(
            row["arm"]
        )
        ax.errorbar(
            x,
            row["mean"],
            yerr=row["ci95"],
            fmt="o",
            capsize=3,
            color=colours[row["arm"]],
            label=plots.label(row["arm"]) if row["data"] == tasks[0] else None,
        )
    ax.set_xticks(
        [
            i * (len(ARM_ORDER) + 1) + (len(ARM_ORDER) - 1) / 2
            for i in range(len(tasks))
        ],
        [f"{d} ({TASKS.get(d, d)})" for d in tasks],
    )
    ax.set_ylabel("test accuracy (mean, 95 % CI)")
    ax.legend(fontsize=7, ncol=2)


def entropy_figure(gates: pd.DataFrame, title: str, eps_h: float = EPS_H) -> Any:
    """Gate entropy per layer over training, one panel per task: the mean over seeds and a band of
    one standard deviation (``gates``: a :func:`gate_table`)."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    from .. import plots

    tasks = list(dict.fromkeys(gates["data"]))
    with plots.style():
        figure = Figure(figsize=(5 * len(tasks), 3.4), layout="constrained")
        axes = np.atleast_1d(figure.subplots(1, len(tasks), sharey=True))
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
                    label=layer["layer"].iloc[0],
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
                title=f"{task} ({TASKS.get(task, task)})",
                xlabel="epoch",
                ylim=(0, math.log(2) + 0.05),
            )
        axes[0].set_ylabel("gate entropy (nats)")
        axes[-1].legend(fontsize=7, title="layer")
        figure.suptitle(title)
    return figure


def entropy_twin(
    gates: pd.DataFrame, by: str, title: str, eps_h: float = EPS_H
) -> Interactive:
    """:func:`entropy_figure` for the HTML book, with controls: the task, the value of the
    column ``by`` (e.g. ``tau``), and one seed or the mean over seeds with a band of one
    standard deviation (``gates``: a :func:`gate_table`; numbers rounded to 3 decimals)."""
    import altair as alt

    data = pd.DataFrame(
        {
            "d": gates["data"],
            "v": gates[by],
            "s": gates["seed"],
            "l": gates["layer"],
            "e": gates["epoch"],
            "H": gates["entropy"].round(3),
        }
    )
    tasks, values = list(dict.fromkeys(data["d"])), sorted(data["v"].unique())
    seeds = sorted(data["s"].unique())
    layers = list(dict.fromkeys(data["l"]))
    params = [
        choice("task", tasks[0], tasks, "task ", [TASKS.get(t, t) for t in tasks]),
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
    HTML book (``gates``: a :func:`gate_table`)."""
    import ipywidgets as widgets

    def draw(task: str, value: float, seed: Any) -> Any:
        rows = (gates["data"] == task) & (gates[by] == value)
        if seed != "mean":
            rows &= gates["seed"] == seed
        label = "mean ± sd over seeds" if seed == "mean" else f"seed {seed}"
        return entropy_figure(gates[rows], f"{title}: {by} {value:g}, {label}", eps_h)

    values = sorted(gates[by].unique())
    live = widgets.interactive(
        draw,
        task=widgets.ToggleButtons(
            options=[(TASKS.get(t, t), t) for t in dict.fromkeys(gates["data"])]
        ),
        value=widgets.SelectionSlider(
            options=values, value=values[len(values) // 2], description=by
        ),
        seed=widgets.Dropdown(
            options=["mean", *map(int, sorted(gates["seed"].unique()))]
        ),
    )
    return LiveAndStatic(live, entropy_twin(gates, by, title, eps_h))


def sweep_figure(table: pd.DataFrame) -> Any:
    """Heat maps of a :func:`sweep_table`, a row of panels per task and a column per rule:
    rows T_freeze, columns eps_H, colour AutoNorm-S's lead over FrozenLN, numbers the share
    of seeds where the rule fired."""
    import numpy as np
    from matplotlib.figure import Figure

    from .. import plots

    tasks = list(table["data"].unique())
    limit = float(np.nanmax(np.abs(table["lead"])))
    with plots.style():
        figure = Figure(figsize=(10, 3.0 * len(tasks)), layout="constrained")
        axes = np.atleast_2d(figure.subplots(len(tasks), 2, sharex=True, sharey=True))
        for row, task in zip(axes, tasks):
            for ax, rule in zip(row, ("high", "low")):
                part = table[(table["data"] == task) & (table["rule"] == rule)]
                lead = part.pivot(index="t_freeze", columns="eps_h", values="lead")
                fired = part.pivot(index="t_freeze", columns="eps_h", values="fired")
                image = ax.imshow(
                    lead.to_numpy(), cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto"
                )
                for (i, j), share in np.ndenumerate(fired.to_numpy()):
                    dark = abs(lead.iloc[i, j]) > 0.6 * limit
                    ax.text(
                        j,
                        i,
                        f"{share:.1f}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if dark else "black",
                    )
                ax.set_xticks(
                    range(len(lead.columns)), [f"{e:g}" for e in lead.columns]
                )
                ax.set_yticks(range(len(lead.index)), lead.index)
                sign = ">=" if rule == "high" else "<"
                ax.set_title(
                    f"{task} ({TASKS.get(task, task)}): freeze if H {sign} eps_H"
                )
                ax.grid(False)
            row[0].set_ylabel(r"$T_\mathrm{freeze}$")
        for ax in axes[-1]:
            ax.set_xlabel(r"$\epsilon_H$")
        figure.colorbar(image, ax=axes, label="test accuracy minus FrozenLN's (mean)")
        figure.suptitle("numbers: share of seeds where the rule fired")
    return figure


def freeze_figure(gates: pd.DataFrame, t_freeze: int) -> Any:
    """Mean gate entropy over layers and seeds per epoch, the plain learned gate against the
    gate frozen at the end of epoch ``t_freeze`` (``gates``: a :func:`gate_table`), a panel
    per task."""
    import numpy as np
    from matplotlib.figure import Figure

    from .. import plots

    frozen = f"{FREEZE_PREFIX}{t_freeze}"
    pair = gates[gates["arm"].isin(["autonorm", frozen])]
    tasks = list(dict.fromkeys(pair["data"]))
    with plots.style():
        figure = Figure(figsize=(5 * len(tasks), 3.4), layout="constrained")
        axes = np.atleast_1d(figure.subplots(1, len(tasks), sharey=True))
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
                    label=arm,
                    color=shade,
                )
            ax.axvline(t_freeze, color="#d62728", alpha=0.3, lw=5)
            ax.set(
                title=f"{task} ({TASKS.get(task, task)})",
                xlabel="epoch",
                ylim=(0, math.log(2) + 0.05),
            )
        axes[0].set_ylabel("mean gate entropy (nats)")
        axes[0].legend(fontsize=8)
    return figure


def tau_figure(
    estimator: pd.DataFrame, in_net: pd.DataFrame, accuracy: pd.DataFrame
) -> Any:
    """The Gumbel-Softmax gradient against tau: the estimator's variance and SNR for one gate
    (``estimator``: columns ``tau``, ``variance``, ``SNR``), the SNR inside the network
    (``in_net``: indexed by tau, column ``("snr", "mean")``) and test accuracy (``accuracy``:
    ``tau``, ``mean``, ``ci95``)."""
    from matplotlib.figure import Figure

    from .. import plots

    with plots.style():
        figure = Figure(figsize=(12, 3.4), layout="constrained")
        variance, snr, acc = figure.subplots(1, 3)
        variance.loglog(estimator["tau"], estimator["variance"], "o-")
        variance.set(xlabel=r"$\tau$", ylabel="gradient variance", title="variance")
        snr.loglog(
            estimator["tau"], estimator["SNR"], "o-", label="estimator, one gate"
        )
        snr.loglog(in_net.index, in_net[("snr", "mean")], "s--", label="in the network")
        snr.set(xlabel=r"$\tau$", ylabel="SNR", title="signal-to-noise ratio")
        snr.legend(fontsize=8)
        acc.errorbar(
            accuracy["tau"],
            accuracy["mean"],
            yerr=accuracy["ci95"],
            fmt="o-",
            capsize=3,
        )
        acc.set(
            xscale="log",
            xlabel=r"$\tau$",
            ylabel="test accuracy",
            title="learned gate, lr chosen on val per tau",
        )
    return figure
