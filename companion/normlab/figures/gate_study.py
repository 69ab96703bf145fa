"""The gate study's results (chapters 11 and 12): the arms' accuracy, AutoNorm-S's rule
swept over its thresholds, and the Gumbel-Softmax gradient against tau.

- :func:`example_images`: a few images of each task, a row per task;
- :func:`draw_arms`: test accuracy per task and arm on one axis;
- :func:`sweep_figure`: heat maps of :func:`~normlab.claims.tables.sweep_table`;
- :func:`mechanism_figure`: chapter 11's mechanism sweep, learned minus random and how
  soon the gates specialise, against the backbone's rate;
- :func:`tau_figure`: the estimator's variance and SNR, and test accuracy, against tau.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..analysis.gates import arm_summary, at_defaults, with_schedules
from .column import COLUMN_INCHES, MIN_FONT_PT, colours, label, new_figure, style
from .gate_entropy import task_title

__all__ = [
    "ARM_ORDER",
    "draw_arms",
    "example_images",
    "mechanism_figure",
    "mix_figure",
    "rule_figure",
    "sweep_figure",
    "tau_figure",
]

#: The arms in the order the figures show them.
ARM_ORDER = [
    "frozen_ln",
    "autonorm_random",
    "autonorm",
    "autonorm_hard",
    "autonorm_exact",
    "autonorm_s",
    "autonorm_s_low",
    "autonorm_s_sample",
]


def example_images(rows: Mapping[str, Any], count: int = 8) -> Figure:
    """The first ``count`` images of each of ``rows`` (a title -> an image batch
    ``(N, 1, H, W)``), a row each, the width of the text column."""
    side = COLUMN_INCHES / count
    with style():
        figure = Figure(
            figsize=(COLUMN_INCHES, (side + 0.3) * len(rows)), layout="constrained"
        )
        for part, (name, images) in zip(
            np.atleast_1d(figure.subfigures(len(rows), 1)), rows.items()
        ):
            for ax, image in zip(part.subplots(1, count), images[:count]):
                ax.imshow(np.asarray(image[0]), cmap="gray")
                ax.set_axis_off()
            part.suptitle(name, x=0.0, ha="left", fontsize=MIN_FONT_PT + 1)
    return figure


def draw_arms(runs: pd.DataFrame, ax: Any) -> None:
    """Test accuracy (mean, 95 % CI) per task and arm on one axis, at the book's default
    configuration (``normlab.analysis.gates.at_defaults``); AutoNorm-S composed in."""
    summary = arm_summary(with_schedules(at_defaults(runs)))
    palette = colours(ARM_ORDER)
    tasks = list(dict.fromkeys(summary["data"]))
    labelled: set[str] = set()
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
            color=palette[row["arm"]],
            label=None if row["arm"] in labelled else label(row["arm"]),
        )
        labelled.add(row["arm"])
    ax.set_xticks(
        [
            i * (len(ARM_ORDER) + 1) + (len(ARM_ORDER) - 1) / 2
            for i in range(len(tasks))
        ],
        [task_title(d, runs) for d in tasks],
    )
    ax.set_ylabel("test accuracy (mean, 95 % CI)")
    ax.legend(fontsize=MIN_FONT_PT, ncol=2)


def _share(share: float) -> str:
    """A share of seeds as few characters: "0", "1" or ".33"."""
    return f"{share:g}" if share in (0, 1) else f"{share:.2f}".removeprefix("0")


def sweep_figure(table: pd.DataFrame) -> Figure:
    """Heat maps of a :func:`~normlab.claims.tables.sweep_table`, a row of panels per task
    and a column per rule: rows T_freeze, columns eps_H, colour AutoNorm-S's lead over
    FrozenLN, numbers the share of seeds where the rule fired."""
    tasks = list(table["data"].unique())
    limit = float(np.nanmax(np.abs(table["lead"])))
    with style():
        figure, axes = new_figure(
            ncols=2,
            nrows=len(tasks),
            size=(COLUMN_INCHES / 2, 2.3),
            sharex=True,
            sharey=True,
        )
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
                        _share(share),
                        ha="center",
                        va="center",
                        fontsize=MIN_FONT_PT,
                        color="white" if dark else "black",
                    )
                ax.set_xticks(
                    range(len(lead.columns)),
                    [f"{e:g}" for e in lead.columns],
                    fontsize=MIN_FONT_PT,
                )
                ax.set_yticks(range(len(lead.index)), lead.index)
                sign = r"\geq" if rule == "high" else "<"
                ax.set_title(
                    rf"{task_title(task)}: freeze if $H {sign} \epsilon_H$",
                    fontsize=MIN_FONT_PT + 1,
                )
                ax.grid(False)
            row[0].set_ylabel(r"$T_\mathrm{freeze}$ (epoch)")
        for ax in axes[-1]:
            ax.set_xlabel(r"$\epsilon_H$ (nats)")
        figure.colorbar(
            image,
            ax=axes,
            location="bottom",
            shrink=0.6,
            label="AutoNorm-S's test accuracy minus FrozenLN's (mean)",
        )
        figure.suptitle("Numbers: share of seeds where the rule fired")
    return figure


def tau_figure(
    estimator: pd.DataFrame, in_net: pd.DataFrame, accuracy: pd.DataFrame
) -> Figure:
    """The Gumbel-Softmax gradient against tau: the estimator's variance and SNR for one gate
    (``estimator``: columns ``tau``, ``variance``, ``SNR``), the SNR inside the network
    (``in_net``: indexed by tau, column ``("snr", "mean")``) and test accuracy (``accuracy``:
    ``tau``, ``mean``, ``ci95``)."""
    with style():
        figure, axes = new_figure(ncols=3, size=(COLUMN_INCHES / 2, 2.6))
        variance, snr, acc = axes[0]
        variance.loglog(estimator["tau"], estimator["variance"], "o-")
        variance.set(xlabel=r"$\tau$", ylabel="gradient variance", title="variance")
        snr.loglog(
            estimator["tau"], estimator["SNR"], "o-", label="estimator, one gate"
        )
        snr.loglog(in_net.index, in_net[("snr", "mean")], "s--", label="in the network")
        snr.set(xlabel=r"$\tau$", ylabel="SNR", title="signal-to-noise ratio")
        snr.legend(fontsize=MIN_FONT_PT)
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


def mechanism_figure(
    table: pd.DataFrame,
    *,
    budgets: Mapping[int, str] | None = None,
    lower: str = "early",
    lower_label: str = "share of seeds specialised early",
    title: str | None = None,
) -> Figure:
    """Chapter 11's mechanism sweep from a :func:`normlab.analysis.mechanism.mechanism_table`:
    a column per initialisation; on top the learned gate minus the random one (mean and
    95 % interval over seeds, a dashed line at zero), below the learned gate's ``lower``
    column (by default the share of seeds whose gates specialised early), each against the
    backbone's rate, a line per budget (``budgets``: epochs -> its legend text). Rows of
    ``table`` at a selector rate other than 1 are left out."""
    part = table[table["selector_lr"] == 1.0] if "selector_lr" in table else table
    inits = list(dict.fromkeys(part["init"]))
    epochs = sorted(part["epochs"].unique())
    palette = colours([f"budget {e}" for e in epochs])
    with style():
        figure, axes = new_figure(
            ncols=len(inits),
            nrows=2,
            size=(COLUMN_INCHES / len(inits), 2.4),
            sharex=True,
            sharey="row",
        )
        for j, init in enumerate(inits):
            top, bottom = axes[0, j], axes[1, j]
            for k, e in enumerate(epochs):
                rows = part[(part["init"] == init) & (part["epochs"] == e)]
                rows = rows.sort_values("lr")
                # the budgets side by side around each rate, so their bars do not overlap
                shift = 1.0 + 0.06 * (k - (len(epochs) - 1) / 2)
                name = (budgets or {}).get(int(e), f"{e} epochs")
                colour = palette[f"budget {e}"]
                top.errorbar(
                    rows["lr"] * shift,
                    rows["mean"],
                    yerr=np.nan_to_num(rows["ci95"].to_numpy(dtype=float)),
                    fmt="o-",
                    capsize=3,
                    color=colour,
                    label=name,
                )
                bottom.plot(rows["lr"] * shift, rows[lower], "o-", color=colour)
            top.axhline(0.0, color="grey", ls="--", lw=1)
            top.set_title(label(init, "init"), fontsize=MIN_FONT_PT + 1)
            bottom.set_xscale("log")
            bottom.set_xlabel("backbone learning rate")
            bottom.set_ylim(-0.05, 1.05)
        axes[0, 0].set_ylabel("learned − random\n(test accuracy)")
        axes[1, 0].set_ylabel(lower_label)
        axes[0, 0].legend(fontsize=MIN_FONT_PT)
        if title:
            figure.suptitle(title, fontsize=MIN_FONT_PT + 2)
    return figure


def mix_figure(
    summary: pd.DataFrame,
    runs: pd.DataFrame,
    title: str,
    tasks: Sequence[str] | None = None,
) -> Figure:
    """The mix or the gate: test accuracy (mean, 95 % CI) per arm, a panel per task (in
    the order of ``tasks``; default: the summary's), one above the other, each arm's seeds
    in brackets, LayerNorm's mean dashed (``summary``:
    :func:`normlab.chapters.ch11.mix_summary`; ``runs`` names each task's dataset)."""
    tasks = list(tasks or dict.fromkeys(summary["data"]))
    with style():
        figure, axes = new_figure(
            nrows=len(tasks), size=(COLUMN_INCHES, 2.3), sharex=True
        )
        for ax, task in zip(axes.ravel(), tasks):
            part = summary[summary["data"] == task].reset_index(drop=True)
            ys = np.arange(len(part))[::-1]
            for y, row in zip(ys, part.itertuples()):
                ax.errorbar(row.mean, y, xerr=row.ci95, fmt="o", capsize=3, color="C0")
            base = part.loc[part["arm"] == "frozen_ln", "mean"]
            if len(base):
                ax.axvline(float(base.iloc[0]), ls="--", color="grey", lw=1)
            names = [f"{label(a)} ({n})" for a, n in zip(part["arm"], part["n"])]
            ax.set_yticks(ys, names)
            ax.set_title(
                f"{task_title(task, runs)}: seeds in brackets", fontsize=MIN_FONT_PT + 1
            )
        axes.ravel()[-1].set_xlabel("test accuracy (mean, 95 % CI)")
        figure.suptitle(title)
    return figure


def rule_figure(sweep: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """AutoNorm-S's rule against eps_H at one T_freeze (``sweep``: a
    :func:`~normlab.claims.tables.sweep_table`): top, the share of seeds on which each
    reading of the rule fires; bottom, AutoNorm-S's test accuracy minus FrozenLN's; a line
    per task and reading (``runs`` names each task's dataset)."""
    t = int(sweep["t_freeze"].min())
    part = sweep[sweep["t_freeze"] == t]
    with style():
        figure, axes = new_figure(nrows=2, size=(COLUMN_INCHES, 2.4), sharex=True)
        top, bottom = axes[0, 0], axes[1, 0]
        for (task, rule), line in part.groupby(["data", "rule"], sort=False):
            words = "paper: H ≥ ε_H" if rule == "high" else "opposite: H < ε_H"
            style_ = "-" if rule == "high" else ":"
            name = f"{task_title(task, runs)}, {words}"
            top.plot(line["eps_h"], line["fired"], style_, marker="o", label=name)
            bottom.plot(line["eps_h"], line["lead"], style_, marker="o", label=name)
        top.set_ylabel("share of seeds\nfrozen")
        bottom.set_ylabel("AutoNorm-S − FrozenLN\n(test accuracy)")
        bottom.axhline(0.0, color="grey", lw=1, ls="--")
        bottom.set_xlabel(r"$\epsilon_H$ (nats)")
        handles, names = top.get_legend_handles_labels()
        figure.legend(
            handles, names, fontsize=MIN_FONT_PT, loc="outside lower center", ncol=1
        )
        figure.suptitle(rf"AutoNorm-S's rule at $T_\mathrm{{freeze}}$ = {t}")
    return figure
