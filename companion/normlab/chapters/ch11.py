"""Chapter 11's numbers: the mix or the gate, N1 on the seeds N3 ran, and the regime; the
arms' diagnostics, the mechanism sweep and its selector rates in words, and the answer.

Every function reads saved sets (``gate_bottleneck`` and ``gate_mix``, cpu) or a table
given to it, and returns plain values or tables; the chapter glues them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..analysis import gates as ag
from ..claims.tables import paired_table
from ..data.sources import served_by, title
from ..experiments import gate_study as gs
from ..experiments.gate_grids import N3_TASK, T_FREEZE
from ..names import display_name
from ..paper import DYT_ALPHA_INIT
from ..run_tables import common_seeds, summarise
from .part2 import markdown

__all__ = [
    "MIX_ORDER",
    "MAIN_ARMS",
    "CONTRASTS",
    "mix_runs",
    "mix_summary",
    "mix_contrasts",
    "mix_sentence",
    "short_regime",
    "n1_regime_sentence",
    "control_words",
    "mix_edges",
    "gate_diagnostics",
    "plainly",
    "mechanism",
    "mechanism_selector",
]

#: The arms of the mix-or-gate study, in the order the figure shows them.
MIX_ORDER: tuple[str, ...] = (
    "frozen_ln",
    "dyt",
    "dyt_alpha_0.1",
    "autonorm_fixed",
    "autonorm_random",
    "autonorm",
)
#: Its contrasts, ``a`` minus ``b``: the mix's cost, and what a gate adds to the mix.
CONTRASTS: tuple[tuple[str, str], ...] = (
    ("autonorm_fixed", "frozen_ln"),
    ("autonorm", "autonorm_fixed"),
    ("autonorm_random", "autonorm_fixed"),
    ("dyt", "frozen_ln"),
)
_GATED = ("frozen_ln", "autonorm", "autonorm_random")


def mix_runs(bottleneck: pd.DataFrame, mix: pd.DataFrame) -> pd.DataFrame:
    """The study's runs: FrozenLN, the learned gate and the Random Selector of
    ``bottleneck`` (``gate_bottleneck``'s, or ``gate_regime``'s past the plateau) on the
    tasks ``mix`` ran, beside the DyT and fixed-mix runs of ``mix`` (``gate_mix``'s, or
    ``gate_regime``'s own); DyT at a smaller alpha is its own arm (``dyt_alpha_0.1``).
    Both at the book's defaults."""
    gates = ag.at_defaults(bottleneck)
    gates = gates[gates["arm"].isin(_GATED) & gates["data"].isin(set(mix["data"]))]
    mix = ag.at_defaults(mix)
    mix = mix[mix["arm"].isin(set(MIX_ORDER) - set(_GATED))].copy()
    if "alpha_init" not in mix:  # a set with DyT at the paper's alpha only
        mix["alpha_init"] = DYT_ALPHA_INIT
    alpha = mix["alpha_init"].fillna(DYT_ALPHA_INIT)
    other = alpha != DYT_ALPHA_INIT
    mix.loc[other, "arm"] = (
        mix.loc[other, "arm"] + "_alpha_" + alpha[other].map("{:g}".format)
    )
    return pd.concat([gates, mix.drop(columns="alpha_init")], ignore_index=True)


#: The arms the main contrasts compare, read on the seeds all of them ran.
MAIN_ARMS: tuple[str, ...] = (
    "frozen_ln",
    "autonorm_fixed",
    "autonorm_random",
    "autonorm",
)


def _at_rates(runs: pd.DataFrame) -> pd.DataFrame:
    """Every arm at its rate chosen on validation: :data:`MAIN_ARMS` on the seeds all of
    them ran there, the others (DyT alone) on their own."""
    best = ag.chosen(runs)
    main = best["arm"].isin(MAIN_ARMS)
    shared = [common_seeds(task, ["arm"]) for _, task in best[main].groupby("data")]
    return pd.concat([*shared, best[~main]], ignore_index=True)


def mix_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per task and arm at its chosen rate (:data:`MAIN_ARMS` on the seeds
    all of them ran, DyT alone on its own): ``mean``, ``ci95``, ``n``, ``lr`` and
    ``at_edge`` (the choice at the grid's edge), in :data:`MIX_ORDER`."""
    best = _at_rates(runs)
    summary = summarise(best, ["data", "arm"])
    rates = best.groupby(["data", "arm"])[["lr", "at_edge"]].first().reset_index()
    summary = summary.merge(rates, on=["data", "arm"])
    order = {arm: i for i, arm in enumerate(MIX_ORDER)}
    summary["order"] = summary["arm"].map(order)
    return summary.sort_values(["data", "order"]).drop(columns="order")


def mix_contrasts(runs: pd.DataFrame) -> pd.DataFrame:
    """:data:`CONTRASTS` per task, each arm at its chosen rate, paired by seed: ``a``,
    ``b``, ``mean``, ``ci95``, ``low``, ``high``, ``n``."""
    best = ag.chosen(runs)
    tables = [
        paired_table(best, a, b, by="arm", higher_is_better=True)
        for a, b in CONTRASTS
        if {a, b} <= set(best["arm"])
    ]
    return pd.concat(tables, ignore_index=True)


def mix_sentence(contrasts: pd.DataFrame, task: str = N3_TASK) -> str:
    """One sentence: is the cost the mix's or the gate's, on ``task``?"""
    rows = contrasts[contrasts["data"] == task].set_index(["a", "b"])
    mix = rows.loc[("autonorm_fixed", "frozen_ln")]
    gate = rows.loc[("autonorm", "autonorm_fixed")]

    def span(row: pd.Series) -> str:
        return f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"

    if mix["high"] < 0 and gate["low"] <= 0 <= gate["high"]:
        who = "the mix's, not the gate's"
    elif mix["high"] < 0 and gate["high"] < 0:
        larger = "gate's" if abs(gate["mean"]) > abs(mix["mean"]) else "mix's"
        who = f"both, mostly the {larger}"
    elif mix["low"] <= 0 <= mix["high"] and gate["high"] < 0:
        who = "the gate's, not the mix's"
    elif mix["low"] <= 0 <= mix["high"]:
        who = "not shown to be the mix's"
    else:
        who = "neither reading alone"
    return (
        f"Mixing DyT into every LayerNorm slot, with no gate at all, costs "
        f"{span(mix)} of test accuracy against LayerNorm alone, and the learned gate "
        f"changes that mix by {span(gate)} (over {int(mix['n'])} paired seeds): the cost "
        f"is {who}."
    )


def short_regime(
    records: list[dict[str, Any]], lrs: dict[str, float], task: str = N3_TASK
) -> pd.DataFrame:
    """The regime of ``gate_bottleneck``'s arms on ``task`` (default: the CIFAR-10
    stand-in), each at its rate in ``lrs``: :func:`normlab.analysis.gates.regime` at the
    freeze decision's epoch (``T_FREEZE["cpu"]``)."""
    chosen = [
        r
        for r in records
        if r["config"]["data"] == task
        and lrs.get(r["config"]["arm"]) == r["config"]["lr"]
        and r["config"].get("init", ag.DEFAULT_INIT) == ag.DEFAULT_INIT
        and r["config"].get("selector_lr", 1.0) == 1.0
    ]
    return ag.regime(chosen, decision=T_FREEZE["cpu"])


def n1_regime_sentence(regime: pd.DataFrame, seeds: int, name: str) -> str:
    """N1's regime in one sentence: the seeds, the schedule and each compared arm's final
    training loss against FrozenLN's (``regime``: :func:`short_regime`; ``name``: the
    task's dataset)."""
    rows = regime.set_index("arm")
    learned, random, ln = (
        rows.loc[a] for a in ("autonorm", "autonorm_random", "frozen_ln")
    )
    short = [a for a in ("autonorm", "autonorm_random") if not rows.loc[a, "plateau"]]
    state = (
        "both gated arms short of their plateau"
        if len(short) == 2
        else "at least one gated arm past its plateau"
    )
    return (
        f"N1 reads {seeds} seeds per arm on {name}, {int(learned['epochs'])} epochs; the "
        f"learned gate ends with training loss {learned['train_loss']:.2f}, the Random "
        f"Selector {random['train_loss']:.2f} and FrozenLN {ln['train_loss']:.2f} ({state})."
    )


def control_words(outcome: Any, names: Mapping[str, str]) -> str:
    """A gate control's verdict per task (N2's exact gradient, N13's hard gate), one
    sentence each: the estimate, the half-width its verdict read, the seeds and the
    verdict (``outcome``: :func:`normlab.claims.evaluate`; ``names``: each task's dataset,
    in the order the sentences take).

    Raises:
        ValueError: an effect of ``outcome`` names none of the tasks of ``names``.
    """
    found = {}
    for judged in outcome.judged:
        task = next((t for t in names if f" on {t} (" in judged.label), None)
        if task is None:
            raise ValueError(
                f"outcome: effect {judged.label!r} names none of the tasks {list(names)}"
            )
        found[task] = judged
    return " ".join(
        f"On {name}, {found[task].interval.mean:+.3f} ± "
        f"{found[task].interval.half:.3f} over {found[task].interval.n} seeds: "
        f"{found[task].verdict}."
        for task, name in names.items()
        if task in found
    )


def mix_edges(summary: pd.DataFrame, names: dict[str, str]) -> str:
    """Which arms chose a rate at the edge of the grid, per task, in words (``names``:
    each task's dataset); empty when none did."""
    from ..figures import label

    words = []
    for task, part in summary[summary["at_edge"].astype(bool)].groupby("data"):
        arms = [label(a) for a in part["arm"]]
        listed = " and ".join(filter(None, [", ".join(arms[:-1]), arms[-1]]))
        words.append(
            f"on {names.get(task, task)} the rate chosen for {listed} sits at the "
            "edge of the grid"
        )
    return "; ".join(words)


def gate_diagnostics(runs: pd.DataFrame) -> pd.DataFrame:
    """Per task and arm, each at its learning rate chosen on validation data (AutoNorm-S
    composed in): the std of what the head reads at initialisation
    (``head std at init``, the class token after the final norm), the epoch the learned
    gates' mean entropy first fell below eps_H (``epochs to specialise``, mean over the
    seeds that did; ``specialised``: their share, blank for an arm without gates), the
    final gate entropy and test accuracy; mean over seeds."""
    best = ag.chosen(ag.with_schedules(runs))
    grouped = best.groupby(["data", "arm"], sort=False)
    table = pd.DataFrame(
        {
            "lr": grouped["lr"].first(),
            "head std at init": grouped["head_input_std_init"].mean(),
            "epochs to specialise": grouped["epochs_to_specialise"].mean(),
            "specialised": grouped["epochs_to_specialise"]
            .apply(lambda v: float(v.notna().mean()))
            .where(grouped["final_entropy"].count() > 0),
            "final entropy": grouped["final_entropy"].mean(),
            "test accuracy": grouped["test_metric"].mean(),
        }
    )
    return table.reset_index().sort_values(["data", "arm"], ignore_index=True)


def plainly(n1: pd.DataFrame, profile: str) -> Any:
    """Chapter 11's answer, one line per task of the N1 table ``n1`` (a paired table of
    learned minus random: ``data``, ``mean``, ``low``, ``high``, ``n``) with at least two
    seeds, as Markdown: on which side of the random gate the learned one lies, with its
    95 % interval; and the scale of the gate study's ``profile``."""
    lines = []
    for row in n1[n1["n"] >= 2].itertuples():
        side = (
            "below"
            if row.high < 0
            else "above"
            if row.low > 0
            else "not clearly on either side of"
        )
        kind = gs.TASKS.get(row.data, "")
        source = (
            gs.CPU_TASKS.get(row.data, {}).get("source") if profile == "cpu" else None
        )
        name = title(served_by(row.data, profile, source))
        lines.append(
            f"- **{name}** ({kind}): the learned gate "
            f"is {side} the random one, {row.mean:+.3f} [{row.low:+.3f}, "
            f"{row.high:+.3f}], n = {row.n}."
        )
    scale = gs.SETUP[profile]
    rates = ", ".join(f"{lr:g}" for lr in gs.LRS[profile])
    chosen = (
        "chosen per arm on validation data from " if len(gs.LRS[profile]) > 1 else ""
    )
    lines.append(
        f"\nThe scale: a ViT-Lite of {scale['depth']} blocks and width {scale['dim']}, "
        f"{scale['epochs']} epochs, learning rate {chosen}{rates}, "
        f"{display_name(scale['init'], 'init')} initialisation, stand-in data."
    )
    return markdown("\n".join(lines))


def _cell_words(row: Any, steps: Mapping[int, int]) -> str:
    """One cell of the mechanism sweep in words: its budget, init and rate."""
    return (
        f"{steps.get(int(row['epochs']), row['epochs'])} steps, "
        f"{display_name(row['init'], 'init')}, rate {row['lr']:g}"
    )


def _share_words(value: float) -> str:
    return "none" if pd.isna(value) else f"{value:.2f}"


def _way(a: float, b: float) -> str:
    return "rises" if b > a else "falls" if b < a else "stays"


def _mechanism_cells(part: pd.DataFrame, steps: Mapping[int, int]) -> dict[str, Any]:
    """The sweep's counts, its largest gap and the cells whose interval lies below zero."""
    budgets = sorted(part["epochs"].unique())
    short, full = int(budgets[0]), int(budgets[-1])
    below = part["high"] < 0
    worst = part.loc[part["mean"].idxmin()]
    out: dict[str, Any] = {
        "cells": len(part),
        "below": int(below.sum()),
        "above": int((part["low"] > 0).sum()),
        "steps_short": int(steps[short]),
        "steps_full": int(steps[full]),
        "worst": float(worst["mean"]),
        "worst_half": float(worst["ci95"]),
        "worst_learned": float(worst["a_mean"]),
        "worst_random": float(worst["b_mean"]),
        "worst_where": markdown(_cell_words(worst, steps)),
    }
    where = _cell_words(worst, steps)
    numbers = (
        f"{worst['mean']:+.3f} ± {worst['ci95']:.3f} (learned {worst['a_mean']:.3f} "
        f"against random {worst['b_mean']:.3f})"
    )
    out["worst_words"] = markdown(
        f"The learned gate trails the random one most, on average, at {where}: {numbers}."
        if worst["mean"] < 0
        else f"The learned gate's mean is at or above the random one's in every cell; "
        f"the closest is at {where}: {numbers}."
    )
    per_budget = []
    for e in budgets:
        at = part[part["epochs"] == e]
        per_budget.append(
            f"{int((at['high'] < 0).sum())} of {len(at)} at {steps[int(e)]} steps"
        )
    listed = "; ".join(
        f"{_cell_words(r, steps)} ({r['mean']:+.3f} ± {r['ci95']:.3f})"
        for _, r in part[below].iterrows()
    )
    out["where_below"] = markdown(
        f"The learned gate trails the random one (the whole 95 % interval below zero) in "
        f"{' and '.join(per_budget)}" + (f": {listed}." if listed else ".")
    )
    return out


def _mechanism_rates(part: pd.DataFrame, steps: Mapping[int, int]) -> dict[str, Any]:
    """How the gap and early commitment move with the backbone's rate, per budget and
    init."""
    moves = []
    for (e, init), at in part.groupby(["epochs", "init"], sort=True):
        at = at.sort_values("lr")
        if len(at) < 2:
            continue
        low, high = at.iloc[0], at.iloc[-1]
        moves.append(
            f"at {steps[int(e)]} steps from {display_name(init, 'init')}, the gap "
            f"{_way(low['mean'], high['mean'])} from {low['mean']:+.3f} at rate "
            f"{low['lr']:g} to {high['mean']:+.3f} ± {high['ci95']:.3f} at {high['lr']:g}"
            f" while the share of seeds specialised early "
            f"{_way(low['early'], high['early'])} from {low['early']:.2f} to "
            f"{high['early']:.2f}"
        )
    return {
        "rate_words": markdown(
            "With the backbone's rate: " + "; ".join(moves) + "." if moves else ""
        )
    }


def _mechanism_issue(part: pd.DataFrame, steps: Mapping[int, int]) -> dict[str, Any]:
    """The short budget with ViT's std-0.02 start: whether the learned gate falls below
    the random one there, and whether that gap vanishes at the full budget."""
    budgets = sorted(part["epochs"].unique())
    short, full = int(budgets[0]), int(budgets[-1])
    out: dict[str, Any] = {}
    vit = part[(part["init"] == "trunc_normal_0.02")]
    first = vit[vit["epochs"] == short].set_index("lr")
    last = vit[vit["epochs"] == full].set_index("lr")
    hits = [lr for lr in first.index if first.loc[lr, "high"] < 0]
    gone = [lr for lr in hits if lr in last.index and last.loc[lr, "high"] >= 0]
    if hits:
        out["issue_verdict"] = markdown(
            "the short-budget bottleneck with the std-0.02 start appears, and "
            + (
                "vanishes at the full budget"
                if len(gone) == len(hits)
                else "at some rates persists at the full budget"
            )
        )
    else:
        out["issue_verdict"] = markdown(
            "the short-budget bottleneck with the std-0.02 start does not appear"
        )
    return out


def _mechanism_commitment(
    part: pd.DataFrame, *, early: int, threshold: float
) -> dict[str, Any]:
    """Whether early commitment goes with the cells where the learned gate trails."""
    below = part["high"] < 0
    out: dict[str, Any] = {}
    mlp = "to_dyt pre-MLP" if "to_dyt pre-MLP" in part else None
    inside, outside = part[below], part[~below]
    out["early_below"] = float(inside["early"].mean()) if len(inside) else float("nan")
    out["early_other"] = (
        float(outside["early"].mean()) if len(outside) else float("nan")
    )
    dyt_in = float(inside[mlp].mean()) if mlp and len(inside) else float("nan")
    dyt_out = float(outside[mlp].mean()) if mlp and len(outside) else float("nan")
    if not len(inside):
        verdict = "No cell shows the learned gate below the random one, so there is no "
        verdict += "bottleneck for early commitment to go with."
    elif not len(outside):
        verdict = (
            "Every cell shows the bottleneck, so there is nothing to compare with."
        )
    else:
        gap = out["early_below"] - out["early_other"]
        verdict = (
            "Early commitment goes with the bottleneck here."
            if gap >= 0.25
            else "Here the bottleneck goes with gates that had *not* committed early: "
            "a plateau the gates had not left, not early specialisation."
            if gap <= -0.25
            else "Early commitment is about as common where the learned gate trails as "
            "elsewhere, so it does not explain the bottleneck here."
        )
    out["commit_verdict"] = markdown(verdict)
    specialised = (
        f"specialised (mean gate entropy below {threshold:.2f} nats) by the end of "
        f"epoch {early}"
    )
    if len(inside):
        compared = (
            f"Where the learned gate trails ({len(inside)} cells), a share "
            f"{_share_words(out['early_below'])} of its seeds had {specialised}, and a "
            f"share {_share_words(dyt_in)} of its pre-MLP gates committed to DyT; in "
            f"the other {len(outside)} cells, {_share_words(out['early_other'])} and "
            f"{_share_words(dyt_out)}."
        )
    else:
        compared = (
            f"Over the {len(outside)} cells, a share {_share_words(out['early_other'])} "
            f"of the learned gate's seeds had {specialised}, and a share "
            f"{_share_words(dyt_out)} of its pre-MLP gates committed to DyT."
        )
    # whatever the intervals say: the mean gap where most seeds committed early and not
    soon = part["early"] >= 0.5
    out["gap_early"] = float(part.loc[soon, "mean"].mean()) if soon.any() else math.nan
    out["gap_late"] = (
        float(part.loc[~soon, "mean"].mean()) if (~soon).any() else math.nan
    )
    out["cells_early"] = int(soon.sum())
    out["negative"] = int((part["mean"] < 0).sum())
    out["median_half"] = float(part["ci95"].median())
    trend = (
        f" Across the cells, the mean gap is {out['gap_early']:+.3f} where most seeds "
        f"specialised early ({int(soon.sum())} cells) and {out['gap_late']:+.3f} where "
        f"most did not ({int((~soon).sum())})."
        if soon.any() and (~soon).any()
        else ""
    )
    out["commit_words"] = markdown(f"{compared} {verdict}{trend}")
    return out


def _mechanism_checks(part: pd.DataFrame, steps: Mapping[int, int]) -> dict[str, Any]:
    """What the intervals can resolve, and whether every arm trained."""
    out: dict[str, Any] = {}
    half = float(part["ci95"].median())
    negative = int((part["mean"] < 0).sum())
    out["resolution_words"] = markdown(
        f"The learned gate's mean lies below the random one's in {negative} of "
        f"{len(part)} cells; the intervals' median half-width is {half:.3f}, so a gap "
        f"smaller than about {2 * half:.3f} could hide within them."
    )
    if "trained" in part:
        off = part[~part["trained"].astype(bool)]
        out["untrained_words"] = markdown(
            "Every arm of every cell trained (mean test accuracy between chance + 0.1 "
            "and 0.97)."
            if off.empty
            else f"In {len(off)} of {len(part)} cells an arm's mean test accuracy lies "
            f"outside the band between chance + 0.1 and 0.97 ("
            + "; ".join(_cell_words(r, steps) for _, r in off.iterrows())
            + "): there the gap measures whether an arm left its plateau at all, not "
            "how well it trained."
        )
    return out


def mechanism(
    table: pd.DataFrame,
    steps: Mapping[int, int],
    *,
    early: int,
    threshold: float,
    chosen: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Chapter 11's mechanism sweep in numbers and sentences, from a
    :func:`normlab.analysis.mechanism.mechanism_table` (the rows at the selector's default
    rate) and ``steps`` (epochs -> optimiser steps): how many cells show the learned gate
    below the random one (the whole interval below zero) per budget, the largest gap and
    where, whether the short-budget bottleneck with ViT's std-0.02 start appears and
    vanishes at the full budget, and whether early commitment (specialised by the end of
    epoch ``early``, mean entropy below ``threshold``) goes with it. ``chosen``: the
    :func:`~normlab.analysis.mechanism.chosen_gap_table` of the same runs."""
    part = table[table["selector_lr"] == 1.0] if "selector_lr" in table else table
    part = part[part["n"] >= 2]
    out = _mechanism_cells(part, steps)
    out.update(_mechanism_rates(part, steps))
    out.update(_mechanism_issue(part, steps))
    out.update(_mechanism_commitment(part, early=early, threshold=threshold))
    out.update(_mechanism_checks(part, steps))
    if chosen is not None and len(chosen):
        rows = chosen[chosen["n"] >= 2]
        out["chosen_below"] = int((rows["high"] < 0).sum())
        out["chosen_settings"] = len(rows)
    return out


def _epoch_words(row: Any) -> str:
    """How many seeds of a selector row specialised, and by which epoch on average."""
    share = row["specialised"]
    if pd.isna(share) or share == 0:
        return "no seed specialised"
    return f"a share {share:.2f} of seeds specialised, at epoch {row['epoch_specialised']:.1f}"


def _selector_setting(
    default: Any, slow: Any, steps: Mapping[int, int]
) -> tuple[str, bool, bool]:
    """One budget and init of :func:`mechanism_selector` in words; whether the slow
    selector specialised later (a smaller share, or the same share at a later epoch) and
    whether the learned gate's gap to the random one rose with it."""
    later = slow["specialised"] < default["specialised"] or (
        slow["specialised"] == default["specialised"] > 0
        and slow["epoch_specialised"] > default["epoch_specialised"]
    )
    rose = bool(slow["mean"] > default["mean"])
    words = (
        f"at {steps.get(int(default['epochs']), default['epochs'])} steps from "
        f"{display_name(default['init'], 'init')}, {_epoch_words(default)} at the default "
        f"rate and {_epoch_words(slow)} at the slow one; the final entropy "
        f"{_way(default['entropy_final'], slow['entropy_final'])} from "
        f"{default['entropy_final']:.3f} to {slow['entropy_final']:.3f} nats and the "
        f"learned gate minus the random one {_way(default['mean'], slow['mean'])} from "
        f"{default['mean']:+.3f} ± {default['ci95']:.3f} to {slow['mean']:+.3f} ± "
        f"{slow['ci95']:.3f}"
    )
    return words, bool(later), rose


def _selector_verdict(later: int, rose: int, settings: int, trails: int) -> str:
    """What the slow selector's settings say about early commitment (``trails``: the
    settings where the default selector's gap lies wholly below zero)."""
    if not trails:
        return (
            "At the default selector rate the learned gate does not trail the random one "
            "here (no interval wholly below zero), so there is no bottleneck for a "
            f"slower selector to remove: it specialised later in {later} of {settings} "
            f"settings, and the learned gate's mean gap rose in {rose} of {settings}."
        )
    if 2 * later < settings:
        return (
            f"The slow selector specialised later in only {later} of {settings} "
            "settings, so this contrast cannot test early commitment here."
        )
    if 2 * rose > settings:
        return (
            f"Slowing the selector delays its gates' commitment ({later} of {settings} "
            f"settings) and the learned gate gains on the random one ({rose} of "
            f"{settings}): what early commitment as the mechanism predicts."
        )
    return (
        f"Slowing the selector delays its gates' commitment ({later} of {settings} "
        f"settings), but the learned gate gains on the random one in only {rose} of "
        f"{settings}: at this scale, early commitment alone does not explain the gap."
    )


def mechanism_selector(table: pd.DataFrame, steps: Mapping[int, int]) -> dict[str, Any]:
    """Chapter 11's selector-rate comparison from a
    :func:`normlab.analysis.mechanism.selector_table`: at the backbone rate where the
    sweep has a slow selector (``lr``), the slow selector (``rate``, its multiple of the
    backbone's) against the default one, over the budgets and inits (``settings``):
    the mean share of seeds specialised (``spec_default``, ``spec_slow``), the mean final
    gate entropy (``h_default``, ``h_slow``), the mean gap learned minus random
    (``gap_default``, ``gap_slow``), the settings where the slow selector specialised
    later (``later``), where its gap rose (``rose``) and where the default selector's
    gap lies wholly below zero (``trails``); ``words``, per setting, and ``verdict``, what
    that says about early commitment. Empty without a slow selector."""
    if table.empty:
        return {}
    slow_rate = float(table.loc[table["selector_lr"] != 1.0, "selector_lr"].min())
    keys = ["epochs", "init", "lr"]
    default = table[table["selector_lr"] == 1.0].set_index(keys).sort_index()
    slow = table[table["selector_lr"] == slow_rate].set_index(keys).sort_index()
    shared = default.index.intersection(slow.index)
    default, slow = default.loc[shared], slow.loc[shared]
    parts, later, rose = [], 0, 0
    for key in shared:
        d = {**default.loc[key].to_dict(), **dict(zip(keys, key))}
        s = {**slow.loc[key].to_dict(), **dict(zip(keys, key))}
        words, was_later, did_rise = _selector_setting(d, s, steps)
        parts.append(words)
        later, rose = later + was_later, rose + did_rise
    lrs = sorted({float(k[2]) for k in shared})
    out: dict[str, Any] = {
        "rate": slow_rate,
        "lr": lrs[-1],
        "settings": len(shared),
        "spec_default": float(default["specialised"].mean()),
        "spec_slow": float(slow["specialised"].mean()),
        "h_default": float(default["entropy_final"].mean()),
        "h_slow": float(slow["entropy_final"].mean()),
        "gap_default": float(default["mean"].mean()),
        "gap_slow": float(slow["mean"].mean()),
        "later": later,
        "rose": rose,
    }
    out["words"] = markdown(
        f"With the selector at {slow_rate:g} times the backbone's rate "
        f"({', '.join(f'{lr:g}' for lr in lrs)}): " + "; ".join(parts) + "."
    )
    out["trails"] = int((default["high"] < 0).sum())
    out["verdict"] = markdown(
        _selector_verdict(later, rose, len(shared), out["trails"])
    )
    return out
