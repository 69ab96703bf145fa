"""The scorecard's forest plots: every judged effect with its interval, at the column's
width, its labels wrapped so that the plot keeps most of the width.

:func:`forest` draws every effect on one axis; :func:`forest_by_unit` draws one panel per
unit (an accuracy, a slope, nats, ...), each effect with its claim's margin, from the
scorecard's records (:func:`normlab.claims.scorecard_records`); :func:`regime_forest`
draws each effect once per regime it was measured in."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .column import COLUMN_INCHES, MIN_FONT_PT, new_figure, style

__all__ = ["VERDICT_COLOURS", "forest", "forest_by_unit", "regime_forest"]

#: The colour of each verdict an effect can have (:mod:`normlab.claims.rules`' words): the
#: palette's green, blue, sky blue, vermilion, grey, pink and orange; a verdict of sign
#: alone, its decided colour lightened.
VERDICT_COLOURS = {
    "supported": "#009E73",
    "supported in sign, size unresolved": "#7FCEB9",
    "consistent with": "#0072B2",
    "consistent in sign, size unresolved": "#7FB8D8",
    "smaller than the margin": "#56B4E9",
    "contradicted in sign, size unresolved": "#EAAE7F",
    "contradicted": "#D55E00",
    "inconclusive": "#7F7F7F",
    "did not train": "#CC79A7",
    "at the ceiling": "#E69F00",
}
#: Characters per line of an effect's label, and lines at most.
LABEL_WIDTH, LABEL_LINES = 34, 2


def _label(text: str) -> str:
    return "\n".join(
        textwrap.wrap(text, LABEL_WIDTH, max_lines=LABEL_LINES, placeholder=" ...")
    )


def forest(outcomes: Sequence[Any]) -> Figure:
    """Effect sizes with 95 % CIs, one row per effect of every judged empirical claim.

    ``outcomes`` are :class:`normlab.claims.Outcome` objects, each effect coloured by its
    verdict (:data:`VERDICT_COLOURS`). With nothing judged yet the figure says so instead of
    drawing an empty axis.
    """
    rows = [
        (f"{o.claim.id}: {label}", ci, verdict)
        for o in outcomes
        for label, ci, verdict in o.effects
    ]
    with style():
        figure, axes = new_figure(
            size=(COLUMN_INCHES, max(2.0, 0.42 * len(rows) + 1.2))
        )
        ax = axes[0, 0]
        if not rows:
            ax.text(
                0.5,
                0.5,
                "No empirical claim has a saved result set yet:\nevery one is "
                "'not yet tested' or needs a larger profile.",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
            ax.set_axis_off()
            return figure
        for y, (_, ci, verdict) in enumerate(rows):
            half = ci.half if math.isfinite(ci.half) else 0.0
            colour = VERDICT_COLOURS[verdict]
            ax.errorbar(ci.mean, y, xerr=half, fmt="o", color=colour, capsize=3)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(
            range(len(rows)), [_label(r[0]) for r in rows], fontsize=MIN_FONT_PT
        )
        ax.invert_yaxis()
        ax.set_xlabel("effect: mean and 95 % CI across seeds\n(units of each claim)")
        for verdict, colour in VERDICT_COLOURS.items():
            ax.plot([], [], "o", color=colour, label=verdict)
        ax.legend(loc="best")
    return figure


#: The colour of the band that marks each effect's margin.
MARGIN_COLOUR = "#D9D9D9"


def forest_by_unit(records: Sequence[dict[str, Any]]) -> Figure:
    """One forest plot per unit: every effect of the scorecard's ``records`` (the JSON
    objects of :func:`normlab.claims.scorecard_records`) as its estimate and the interval
    its verdict read (seeds and test items, at its Holm level), coloured by its verdict,
    over a grey band for its claim's margin (``±margin``; an effect without one has no
    band). Panels share no axis: each unit keeps its own scale. With nothing judged yet
    the figure says so."""
    panels: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for record in records:
        for effect in record.get("effects", []):
            if effect.get("estimate") is None:
                continue
            unit = effect.get("units") or "units of the claim"
            panels.setdefault(unit, []).append((record["id"], effect))
    with style():
        if not panels:
            figure, axes = new_figure(size=(COLUMN_INCHES, 2.0))
            ax = axes[0, 0]
            ax.text(
                0.5,
                0.5,
                "No empirical claim has a judged effect yet.",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
            ax.set_axis_off()
            return figure
        heights = [len(rows) + 1.6 for rows in panels.values()]
        figure = Figure(
            figsize=(COLUMN_INCHES, 0.42 * sum(heights) + 0.6), layout="constrained"
        )
        grid = figure.subplots(
            len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights}
        )
        for ax, (unit, rows) in zip(grid[:, 0], panels.items()):
            for y, (_, effect) in enumerate(rows):
                margin = effect.get("margin")
                if margin:
                    ax.fill_betweenx(
                        [y - 0.4, y + 0.4], -margin, margin, color=MARGIN_COLOUR, lw=0
                    )
                low, high, mean = effect["low"], effect["high"], effect["estimate"]
                colour = VERDICT_COLOURS.get(effect["verdict"], "#000000")
                if low is not None and high is not None:
                    ax.plot([low, high], [y, y], color=colour, linewidth=1.6)
                ax.plot([mean], [y], "o", color=colour)
            ax.axvline(0, color="black", linewidth=0.8)
            ax.set_yticks(
                range(len(rows)),
                [_label(f"{claim}: {e['label']}") for claim, e in rows],
                fontsize=MIN_FONT_PT,
            )
            ax.set_ylim(len(rows) - 0.5, -0.5)
            ax.set_title(unit, loc="left")
        grid[-1, 0].set_xlabel(
            "effect: estimate and interval (seeds and test items);\n"
            "grey: the claim's margin, ±(smallest effect that matters)"
        )
        seen = {e["verdict"] for rows in panels.values() for _, e in rows}
        handles = [
            Line2D([], [], marker="o", linestyle="", color=colour, label=verdict)
            for verdict, colour in VERDICT_COLOURS.items()
            if verdict in seen
        ]
        figure.legend(
            handles=handles, loc="outside upper center", ncols=3, fontsize=MIN_FONT_PT
        )
    return figure


#: The markers of the regimes in :func:`regime_forest`, in the order the regimes come.
REGIME_MARKERS = ("o", "s", "^", "D")


def regime_forest(rows: Any, xlabel: str = "effect (accuracy)") -> Figure:
    """Each effect once per regime, beside each other: ``rows`` (a DataFrame) has
    ``effect`` (its short name, a row of the plot), ``regime`` (a marker each, filled for
    the first regime, hollow after), ``mean``, ``half`` (the interval its verdict read)
    and ``verdict`` (its colour, :data:`VERDICT_COLOURS`); ``margin``, where present and
    finite, draws the effect's ±margin band."""
    effects = list(dict.fromkeys(rows["effect"]))
    regimes = list(dict.fromkeys(rows["regime"]))
    if len(regimes) > len(REGIME_MARKERS):
        raise ValueError(
            f"rows: at most {len(REGIME_MARKERS)} regimes, got {len(regimes)}"
        )
    step = 0.3 if len(regimes) > 1 else 0.0
    with style():
        figure, axes = new_figure(
            size=(COLUMN_INCHES, max(2.2, 0.55 * len(effects) * len(regimes) + 2.4))
        )
        ax = axes[0, 0]
        for row in rows.itertuples(index=False):
            y = effects.index(row.effect) + step * (
                regimes.index(row.regime) - (len(regimes) - 1) / 2
            )
            k = regimes.index(row.regime)
            colour = VERDICT_COLOURS.get(row.verdict, "black")
            half = row.half if math.isfinite(row.half) else 0.0
            ax.errorbar(
                row.mean,
                y,
                xerr=half,
                fmt=REGIME_MARKERS[k],
                color=colour,
                mfc=colour if k == 0 else "white",
                capsize=3,
            )
            margin = getattr(row, "margin", math.nan)
            if margin is not None and math.isfinite(margin):
                ax.fill_betweenx(
                    [y - step / 2, y + step / 2], -margin, margin, color=MARGIN_COLOUR
                )
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(effects)), [_label(e) for e in effects])
        ax.tick_params(axis="y", labelsize=MIN_FONT_PT)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        handles = [
            Line2D(
                [],
                [],
                marker=REGIME_MARKERS[k],
                ls="",
                color="black",
                mfc="black" if k == 0 else "white",
                label=name,
            )
            for k, name in enumerate(regimes)
        ] + [
            Line2D([], [], marker="o", ls="", color=VERDICT_COLOURS[v], label=v)
            for v in dict.fromkeys(rows["verdict"])
            if v in VERDICT_COLOURS
        ]
        # below the axis, so that no interval hides behind it
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=2,
            fontsize=MIN_FONT_PT,
        )
    return figure
