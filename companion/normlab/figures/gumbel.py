"""Chapter 10's figures of the Gumbel-Softmax gate, each the width of the text column.

- :func:`relaxed_histograms`: the relaxed weight's samples at several temperatures;
- :func:`gradient_against_tau`: the gradient estimate's variance and mean against tau;
- :func:`telemetry_entropy`: each layer's gate entropy per epoch of one run, with
  AutoNorm-S's threshold and decision epoch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..names import layer_name
from ..normalisers import colour
from .column import COLUMN_INCHES, MIN_FONT_PT, new_figure, style

__all__ = ["gradient_against_tau", "relaxed_histograms", "telemetry_entropy"]


def relaxed_histograms(samples: Mapping[float, np.ndarray], title: str = "") -> Figure:
    """A density histogram of the relaxed weight ``w_1`` per temperature (``samples``:
    tau -> the samples), side by side in one row the width of the column."""
    with style():
        figure, axes = new_figure(
            ncols=len(samples),
            size=(COLUMN_INCHES / len(samples), 2.1),
            sharey=True,
        )
        for ax, (tau, weights) in zip(axes[0], samples.items()):
            ax.hist(
                np.asarray(weights),
                bins=40,
                density=True,
                color=colour("autonorm"),
            )
            ax.set_title(rf"$\tau = {tau:g}$")
            ax.set_xlabel(r"$w_1$")
            ax.set_xticks([0, 0.5, 1], ["0", ".5", "1"])
        axes[0, 0].set_ylabel("density")
        if title:
            figure.suptitle(title)
    return figure


def gradient_against_tau(
    table: pd.DataFrame, exact: float, theory: Sequence[float]
) -> Figure:
    """The Gumbel-Softmax gradient estimate against tau: its variance (``table``'s
    ``variance (trace)``) beside the small-tau law ``theory``, and its mean (``mean grad``)
    beside the exact gradient ``exact``; ``table`` has a ``tau`` column."""
    with style():
        figure, axes = new_figure(ncols=2, size=(COLUMN_INCHES / 2, 3.0))
        left, right = axes[0]
        left.loglog(table["tau"], table["variance (trace)"], "o-", label="measured")
        left.loglog(
            table["tau"], theory, "--", label=r"small-$\tau$ law $2p(1-p)/(6\tau)$"
        )
        left.set(
            xlabel=r"$\tau$",
            ylabel="gradient variance",
            title=r"Noise grows like $1/\tau$",
        )
        left.legend(fontsize=MIN_FONT_PT)
        right.semilogx(table["tau"], table["mean grad"], "o-", label="mean estimate")
        right.axhline(exact, color="k", ls=":", label="exact gradient")
        right.set(
            xlabel=r"$\tau$",
            ylabel=r"$\partial / \partial \ell_1$",
            title=r"Bias shrinks as $\tau \to 0$",
        )
        right.legend(fontsize=MIN_FONT_PT)
    return figure


def telemetry_entropy(
    records: pd.DataFrame, t_freeze: int, eps_h: float, title: str = ""
) -> Figure:
    """Each layer's mean gate entropy per epoch of one run (``records``: the rows of a
    :class:`normlab.gates.GateTelemetry`, columns ``layer``, ``epoch``, ``entropy``),
    with ln 2, AutoNorm-S's threshold ``eps_h`` and its decision epoch ``t_freeze``."""
    with style():
        figure, axes = new_figure(size=(COLUMN_INCHES, 3.2))
        ax = axes[0, 0]
        for name, group in records.groupby("layer", sort=False):
            ax.plot(group["epoch"], group["entropy"], "o-", label=layer_name(name))
        ax.axhline(math.log(2), color="grey", ls=":", label=r"$\ln 2$")
        ax.axhline(eps_h, color="k", ls="--", label=r"$\epsilon_H$")
        ax.axvline(t_freeze, color="red", alpha=0.3, lw=6, label=r"$T_\mathrm{freeze}$")
        ax.set(xlabel="epoch", ylabel="mean gate entropy (nats)")
        ax.legend(fontsize=MIN_FONT_PT, loc="center left", bbox_to_anchor=(1.0, 0.5))
        if title:
            ax.set_title(title)
    return figure
