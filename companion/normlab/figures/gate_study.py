"""The gate study's results (chapters 11 and 12): the arms' accuracy, AutoNorm-S's rule
swept over its thresholds, and the Gumbel-Softmax gradient against tau.

- :func:`draw_arms`: test accuracy per task and arm on one axis;
- :func:`sweep_figure`: heat maps of :func:`~normlab.claims.tables.sweep_table`;
- :func:`tau_figure`: the estimator's variance and SNR, and test accuracy, against tau.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..experiments.gate_study import TASKS, arm_summary, at_defaults, with_schedules
from .column import colours, label, style

__all__ = ["ARM_ORDER", "draw_arms", "sweep_figure", "tau_figure"]

#: The arms in the order the figures show them.
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
    configuration (``normlab.experiments.gate_study.at_defaults``); AutoNorm-S composed in."""
    summary = arm_summary(with_schedules(at_defaults(runs)))
    palette = colours(ARM_ORDER)
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
            color=palette[row["arm"]],
            label=label(row["arm"]) if row["data"] == tasks[0] else None,
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


def sweep_figure(table: pd.DataFrame) -> Figure:
    """Heat maps of a :func:`~normlab.claims.tables.sweep_table`, a row of panels per task
    and a column per rule: rows T_freeze, columns eps_H, colour AutoNorm-S's lead over
    FrozenLN, numbers the share of seeds where the rule fired."""
    tasks = list(table["data"].unique())
    limit = float(np.nanmax(np.abs(table["lead"])))
    with style():
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


def tau_figure(
    estimator: pd.DataFrame, in_net: pd.DataFrame, accuracy: pd.DataFrame
) -> Figure:
    """The Gumbel-Softmax gradient against tau: the estimator's variance and SNR for one gate
    (``estimator``: columns ``tau``, ``variance``, ``SNR``), the SNR inside the network
    (``in_net``: indexed by tau, column ``("snr", "mean")``) and test accuracy (``accuracy``:
    ``tau``, ``mean``, ``ci95``)."""
    with style():
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
