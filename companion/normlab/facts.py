"""The numbers Part II's prose cites, gathered from the runs a chapter made or loaded.

A chapter shows the code that teaches; what its sentences quote (a bias, a share of seeds, a
verdict) is gathered here and glued (:func:`normlab.display.glue`) in a cell whose input the
HTML leaves out. Each function returns a dict of plain numbers (or, for a verdict or a list
of findings, IPython ``Markdown`` for ``{glue:md}``), keyed by the name the chapter glues it
under after its own prefix (``ch11_`` + ``gap_default``), and a table where the chapter
shows the one the numbers come from.

- chapters 11 and 12: :func:`power_table`, :func:`gate_diagnostics`;
- chapter 11: :func:`plainly`, :func:`mechanism` (the mechanism sweep),
  :func:`mechanism_selector` (its selector rates);
- chapter 12: :func:`freeze_decisions`, :func:`freeze_effect`, :func:`freeze_plainly`,
  :func:`lead_over_frozen_ln`, :func:`verdict`;
- every chapter with a plan: :func:`plan_cost`, :func:`plan_plainly`, and
  :func:`resolve_cost` (which :mod:`normlab.chapters.part2` reads for chapters 13-15).

Chapters 9, 10 and 13-15 take their numbers from their own modules in
:mod:`normlab.chapters`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from . import claims
from .data.sources import served_by, title
from .experiments import gate_study as gs
from .names import display_name

__all__ = [
    "gate_diagnostics",
    "gate_seeds_held",
    "mechanism",
    "mechanism_selector",
    "plainly",
    "power_table",
    "plan_cost",
    "plan_plainly",
    "resolve_cost",
    "verdict",
]


def _markdown(text: str) -> Any:
    """``text`` as IPython Markdown (for ``{glue:md}``), or the text without IPython."""
    try:
        from IPython.display import Markdown
    except ImportError:  # pragma: no cover - IPython comes with every notebook
        return text
    return Markdown(text)


# ------------------------------------------------------------------------ chapter 11


def power_table(claim_ids: Iterable[str]) -> pd.DataFrame:
    """What the saved sets can resolve, one row per effect of each claim (judged as the
    scorecard judges it): ``id``, ``effect``, ``verdict``, ``estimate`` with its interval
    (``low``, ``high``: seeds and test items), ``margin``, ``mde`` (the smallest effect
    these seeds detect at 80 % power), ``seeds`` (held), ``planned`` (the claim's plan,
    from the pilot spread) and ``to resolve`` (the seeds that would resolve an inconclusive
    effect at the observed spread; blank when resolved)."""
    from .claims.report import evaluate, scorecard_records

    records = scorecard_records(outcomes=[evaluate(i) for i in claim_ids])
    rows = [
        {
            "id": r["id"],
            "effect": e["label"],
            "verdict": e["verdict"],
            "estimate": e["estimate"],
            "low": e["low"],
            "high": e["high"],
            "margin": e["margin"],
            "mde": e["mde"],
            "seeds": e["n"],
            "planned": r.get("planned_seeds"),
            "to resolve": e["n_needed"],
        }
        for r in records
        for e in r["effects"]
    ]
    return pd.DataFrame(rows)


def gate_diagnostics(runs: pd.DataFrame) -> pd.DataFrame:
    """Per task and arm, each at its learning rate chosen on validation data (AutoNorm-S
    composed in): the std of what the head reads at initialisation
    (``head std at init``, the class token after the final norm), the epoch the learned
    gates' mean entropy first fell below eps_H (``epochs to specialise``, mean over the
    seeds that did; ``specialised``: their share, blank for an arm without gates), the
    final gate entropy and test accuracy; mean over seeds."""
    best = gs.chosen(gs.with_schedules(runs))
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
    return _markdown("\n".join(lines))


# The bottleneck the independent runs of issue 36 reported on real MNIST at about 285
# steps with the std-0.02 start: the learned gate's 0.286 against the random one's 0.535.
_EARLIER_GAP = 0.286 - 0.535


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
        "worst_where": _markdown(_cell_words(worst, steps)),
    }
    where = _cell_words(worst, steps)
    numbers = (
        f"{worst['mean']:+.3f} ± {worst['ci95']:.3f} (learned {worst['a_mean']:.3f} "
        f"against random {worst['b_mean']:.3f})"
    )
    out["worst_words"] = _markdown(
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
    out["where_below"] = _markdown(
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
        "rate_words": _markdown(
            "With the backbone's rate: " + "; ".join(moves) + "." if moves else ""
        )
    }


def _mechanism_issue(part: pd.DataFrame, steps: Mapping[int, int]) -> dict[str, Any]:
    """The issue's setting: the short budget with ViT's std-0.02 start, and whether its
    bottleneck vanishes at the full budget."""
    budgets = sorted(part["epochs"].unique())
    short, full = int(budgets[0]), int(budgets[-1])
    out: dict[str, Any] = {}
    vit = part[(part["init"] == "trunc_normal_0.02")]
    first = vit[vit["epochs"] == short].set_index("lr")
    last = vit[vit["epochs"] == full].set_index("lr")
    hits = [lr for lr in first.index if first.loc[lr, "high"] < 0]
    gone = [lr for lr in hits if lr in last.index and last.loc[lr, "high"] >= 0]
    span = (
        f"between {first['mean'].min():+.3f} and {first['mean'].max():+.3f}"
        if len(first) > 1
        else f"{first['mean'].iloc[0]:+.3f}"
        if len(first)
        else "not measured"
    )
    if hits:
        where = ", ".join(
            f"at rate {lr:g} the learned gate reaches {first.loc[lr, 'a_mean']:.3f} "
            f"against the random one's {first.loc[lr, 'b_mean']:.3f} "
            f"({first.loc[lr, 'mean']:+.3f} ± {first.loc[lr, 'ci95']:.3f})"
            for lr in hits
        )
        later = (
            f"at the full budget the same setting's gap is no longer below zero at "
            f"{len(gone)} of these {len(hits)} rates"
            + (
                " ("
                + ", ".join(
                    f"{last.loc[lr, 'mean']:+.3f} ± {last.loc[lr, 'ci95']:.3f} at {lr:g}"
                    for lr in gone
                )
                + ")"
                if gone
                else ""
            )
        )
        out["issue_verdict"] = _markdown(
            "the short-budget bottleneck with the std-0.02 start appears, and "
            + (
                "vanishes at the full budget"
                if len(gone) == len(hits)
                else "at some rates persists at the full budget"
            )
        )
        out["issue_words"] = _markdown(
            f"The bottleneck the earlier runs reported appears here: with the std-0.02 "
            f"start and {steps[short]} steps, {where}; {later}."
            + (
                " It is a short-budget effect at this scale, as reported."
                if len(gone) == len(hits)
                else " It does not vanish at the full budget at every rate."
            )
        )
    else:
        out["issue_verdict"] = _markdown(
            "the short-budget bottleneck with the std-0.02 start does not appear"
        )
        out["issue_words"] = _markdown(
            f"The bottleneck the earlier runs reported does not appear here: with the "
            f"std-0.02 start and {steps[short]} steps, the learned gate minus the random "
            f"one is {span} across the rates, no interval wholly below zero."
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
    out["commit_verdict"] = _markdown(verdict)
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
    out["commit_words"] = _markdown(f"{compared} {verdict}{trend}")
    return out


def _mechanism_checks(part: pd.DataFrame, steps: Mapping[int, int]) -> dict[str, Any]:
    """What the intervals can resolve, and whether every arm trained."""
    out: dict[str, Any] = {}
    half = float(part["ci95"].median())
    negative = int((part["mean"] < 0).sum())
    out["resolution_words"] = _markdown(
        f"The learned gate's mean lies below the random one's in {negative} of "
        f"{len(part)} cells; the intervals' median half-width is {half:.3f}, so "
        + (
            f"a gap as large as the earlier runs' ({_EARLIER_GAP:+.3f}) would show, "
            "one of a few points would not."
            if half < abs(_EARLIER_GAP) / 2
            else f"even a gap as large as the earlier runs' ({_EARLIER_GAP:+.3f}) "
            "could hide within them."
        )
    )
    if "trained" in part:
        off = part[~part["trained"].astype(bool)]
        out["untrained_words"] = _markdown(
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
    out["words"] = _markdown(
        f"With the selector at {slow_rate:g} times the backbone's rate "
        f"({', '.join(f'{lr:g}' for lr in lrs)}): " + "; ".join(parts) + "."
    )
    out["trails"] = int((default["high"] < 0).sum())
    out["verdict"] = _markdown(
        _selector_verdict(later, rose, len(shared), out["trails"])
    )
    return out


def gate_seeds_held(runs: pd.DataFrame, profile: str = "cpu") -> Any:
    """The seeds a gate set's ``runs`` hold, in words (Markdown): those of every arm at
    every rate and, per task, the arms run further for a claim's plan (a pilot at every
    rate, then the rate it chose alone)."""
    per_rate = runs.groupby(["data", "arm", "lr"])["seed"].nunique()
    swept = per_rate.groupby(level=["data", "arm"]).min()
    total = runs.groupby(["data", "arm"])["seed"].nunique()
    base = int(per_rate.min())
    words = [f"{base} seeds of every arm at every rate"]
    further = pd.DataFrame({"total": total, "swept": swept})
    further = further[further["total"] > base].reset_index()
    rank = {arm: i for i, arm in enumerate(gs.ARMS)}  # the freezes after the arms
    for (task, n, pilot), group in further.groupby(["data", "total", "swept"]):
        source = gs.CPU_TASKS.get(task, {}).get("source") if profile == "cpu" else None
        order = sorted(group["arm"], key=lambda a: (rank.get(a, len(rank)), a))
        names = [display_name(a) for a in order]
        names = [n if n[0].isupper() else f"the {n}" for n in names]
        arms = (
            ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        )
        how = (
            "at every rate"
            if n == pilot
            else f"{pilot} at every rate, the other {n - pilot} at the rate those "
            f"{pilot} chose"
        )
        words.append(
            f"on the {title(served_by(str(task), profile, source))}, {arms} have {n} ({how})"
        )
    return _markdown("; ".join(words))


# ------------------------------------------------------- verdicts and what resolves them


def verdict(claim_id: str, no_note: str = "") -> dict[str, Any]:
    """A claim's verdict on the largest saved set (:func:`normlab.claims.evaluate`):
    ``verdict`` (italic Markdown), ``seeds`` (the most its effects read, 0 for an exact
    claim); for a claim judged on one effect, its mean ``diff``, its 95 % half-width
    ``half`` and the note on it, ``note`` (``no_note`` when the claim has none)."""
    outcome = claims.evaluate(claim_id)
    found: dict[str, Any] = {
        "verdict": _markdown(f"*{outcome.verdict}*"),
        "seeds": int(max((j.n for j in outcome.judged if j.n), default=0)),
    }
    if len(outcome.effects) == 1:
        ((label, effect, _),) = outcome.effects
        found["diff"] = float(effect.mean)
        found["half"] = float(effect.half)
        found["note"] = _markdown(outcome.notes.get(label, no_note))
    return found


def _claim_runs(claim_id: str, outcome: Any, table: pd.DataFrame) -> pd.DataFrame:
    """The runs of a claim's saved set that a seed of it adds to: those on the tasks its
    effects read, of the arms they compare where each names its arms (AutoNorm-S's by the
    runs it is composed from, :func:`normlab.analysis.gates.runs_behind`), under its
    plan's primary specification (each axis of the plan's ``primary`` that the set
    sweeps), so that cells only another claim or a sensitivity runs are not counted."""
    from .claims import plans

    read = table
    if outcome.data and "data" in read and set(outcome.data) & set(read["data"]):
        read = read[read["data"].isin(outcome.data)]
    if outcome.arms and "arm" in read:
        behind = gs.runs_behind(outcome.arms, read["arm"].unique())
        if behind:
            read = read[read["arm"].isin(behind)]
    found = plans.plan(claim_id)
    for key, value in (found.primary if found else {}).items():
        if key in read and read[key].nunique() > 1 and (read[key] == value).any():
            read = read[read[key] == value]
    return read


def _pace(claim_id: str, outcome: Any) -> tuple[int, int, int, float]:
    """A claim's saved set: the seeds its verdict read, the runs (:func:`_claim_runs`) a
    further seed of the pilot adds (every rate of every cell), the runs a confirmation
    seed adds (each cell at its rate chosen on the pilot, the grid's ``select`` axis
    dropped) and the set's own seconds per run (the mean of the runs it reads, or the
    manifest's)."""
    from . import results as saved_results
    from .claims.registry import get
    from .experiments.registry import get as experiment

    name = get(claim_id).test.experiment
    saved = saved_results.largest(name)
    read = _claim_runs(claim_id, outcome, saved.results)
    # the seeds its verdict read (a set may run some cells for more seeds than others)
    held = int(
        max((j.n for j in outcome.judged if j.n), default=read["seed"].nunique())
    )
    select = experiment(name).select
    cells = [c for c in experiment(name).grid("cpu").axes if c in read and c != select]
    per_pilot = len(read[read["seed"] == read["seed"].min()])
    per_confirm = len(read[cells].drop_duplicates()) if cells else 1
    # the seconds of the runs it reads where the records keep them (a set's cells differ
    # in cost: its tasks, arms and rates), else the set's mean from its manifest
    if "seconds" in read and read["seconds"].notna().all() and len(read):
        per_run = float(read["seconds"].mean())
    else:
        per_run = float(saved.manifest["wall_seconds"]) / saved.runs
    return held, per_pilot, per_confirm, per_run


def _seed_cost(
    pace: tuple[int, int, int, float], seeds: int | None
) -> tuple[int | None, float | None]:
    """The runs and CPU-hours of ``seeds`` further seeds at ``pace`` (:func:`_pace`): those
    that complete the pilot (:data:`normlab.claims.plans.PILOT_SEEDS`) run every rate, the
    rest confirm the pilot's choice of rate."""
    from .claims.plans import PILOT_SEEDS

    held, per_pilot, per_confirm, per_run = pace
    if seeds is None:
        return None, None
    pilot = min(seeds, max(PILOT_SEEDS - held, 0))
    runs = pilot * per_pilot + (seeds - pilot) * per_confirm
    return runs, runs * per_run / 3600


# The columns of resolve_cost's and plan_cost's tables, kept when a table has no rows.
_RESOLVE_COLUMNS = ["id", "seeds", "seeds needed", "test items", "test items needed"]
_RESOLVE_COLUMNS += ["runs needed", "CPU-hours", "budgets"]
_PLAN_COLUMNS = ["id", "verdict", "seeds", "planned seeds", "test items"]
_PLAN_COLUMNS += ["planned test items", "runs to plan", "CPU-hours", "budgets"]


def resolve_cost(claim_ids: Iterable[str]) -> pd.DataFrame:
    """What would resolve each inconclusive claim of ``claim_ids`` on its saved cpu set,
    and what that would cost on the CPU: one row per inconclusive claim, with ``id``,
    ``seeds`` (held), ``seeds needed`` and ``test items`` / ``test items needed`` (the
    scorecard's, from the observed spread and the test set's measured noise), ``runs
    needed`` (a set of that many seeds under the claim's primary specification, of the
    arms it compares on the tasks it reads, :func:`_claim_runs`: the pilot's seeds at
    every rate, the rest at the rates the pilot chose, :func:`_seed_cost`), ``CPU-hours``
    (at the seconds the runs it reads took, :func:`_pace`; the larger test set's
    evaluation not counted)
    and ``budgets``: that time over a chapter's CPU budget
    (:data:`normlab.experiments.costs.CPU_BUDGET_MIN`). Empty when none is inconclusive."""
    from .claims.report import INCONCLUSIVE, evaluate
    from .experiments.costs import CPU_BUDGET_MIN

    rows = []
    for claim_id in claim_ids:
        outcome = evaluate(claim_id)
        if outcome.verdict != INCONCLUSIVE:
            continue
        seeds = outcome.n_needed
        pace = _pace(claim_id, outcome)
        held = pace[0]
        runs, hours = _seed_cost((0, *pace[1:]), seeds)  # a set of that many, afresh
        tested = [j.n_test for j in outcome.judged if j.n_test]
        rows.append(
            {
                "id": claim_id,
                "seeds": held,
                "seeds needed": seeds,
                "test items": max(tested) if tested else None,
                "test items needed": outcome.n_test_needed,
                "runs needed": runs,
                "CPU-hours": hours,
                "budgets": None if hours is None else hours * 60 / CPU_BUDGET_MIN,
            }
        )
    return pd.DataFrame(rows, columns=_RESOLVE_COLUMNS)


def plan_cost(claim_ids: Iterable[str]) -> pd.DataFrame:
    """Each claim of ``claim_ids`` whose plan (from the pilot,
    :func:`normlab.claims.report.planned_from`) asks for more than its saved cpu set
    holds: ``id``, ``verdict``, ``seeds`` (held), ``planned seeds``, ``test items`` and
    ``planned test items`` (where the plan needs a larger test set), ``runs to plan``
    (the runs the missing seeds add under the primary specification, of the arms the
    claim compares, :func:`_claim_runs`: each at the rate the pilot chose,
    :func:`_seed_cost`), ``CPU-hours`` and
    ``budgets`` (that time over :data:`normlab.experiments.costs.CPU_BUDGET_MIN`). Empty
    when every plan is met."""
    from .claims.report import evaluate
    from .experiments.costs import CPU_BUDGET_MIN

    rows = []
    for claim_id in claim_ids:
        outcome = evaluate(claim_id)
        seeds, items = outcome.planned or (None, None)
        tested = max((j.n_test or 0 for j in outcome.judged), default=0)
        pace = _pace(claim_id, outcome)
        held = pace[0]
        if (seeds is None or seeds <= held) and not items:
            continue
        more = None if seeds is None else max(seeds - held, 0)
        runs, hours = _seed_cost(pace, more)
        rows.append(
            {
                "id": claim_id,
                "verdict": outcome.verdict,
                "seeds": held,
                "planned seeds": seeds,
                "test items": tested or None,
                "planned test items": items,
                "runs to plan": runs,
                "CPU-hours": hours,
                "budgets": None if hours is None else hours * 60 / CPU_BUDGET_MIN,
            }
        )
    return pd.DataFrame(rows, columns=_PLAN_COLUMNS)


def plan_plainly(cost: pd.DataFrame, whole: int | None = None) -> Any:
    """:func:`plan_cost`'s table in sentences (Markdown for ``{glue:md}``): per claim, what
    its plan asks for beyond the set, what the missing seeds would cost against a
    chapter's CPU budget, and where a planned test set exceeds ``whole`` (the items the
    task's whole sample holds) that no number of seeds can meet it."""
    from .claims import plans
    from .claims.rules import INCONCLUSIVE
    from .experiments.costs import CPU_BUDGET_MIN

    pilot = f"from the pilot (a set's first {plans.PILOT_SEEDS} seeds, or all of a smaller set)"
    if cost.empty:
        return _markdown(f"Every plan of this chapter, computed {pilot}, is met.")
    sentences = []
    for v in cost.to_dict("records"):
        words = f"**{v['id']}**'s plan asks for "
        seeds, held = v["planned seeds"], v["seeds"]
        words += (
            f"{int(seeds):,} seeds (the set has {held})"
            if pd.notna(seeds) and seeds > held
            else f"no more seeds than the set's {held}"
        )
        if pd.notna(v["planned test items"]):
            items = int(v["planned test items"])
            words += f" and about {items:,} test items (the set has {int(v['test items']):,})"
            if whole is not None and items > whole:
                words += f", more than the {whole:,} items of the whole sample"
        if pd.notna(v["CPU-hours"]) and v["runs to plan"]:
            share = v["budgets"]
            words += (
                f"; the missing seeds are {int(v['runs to plan']):,} runs (beyond "
                "the pilot, each arm the claim compares at the rate the pilot chose), "
                "about "
                f"{v['CPU-hours']:.1f} CPU-hours, "
                + (
                    "within a chapter's CPU budget"
                    if share <= 1
                    else f"{share:.1f} times a chapter's budget of "
                    f"{CPU_BUDGET_MIN:.0f} CPU-minutes"
                )
            )
        words += (
            "; the verdict stays open"
            if v["verdict"] == INCONCLUSIVE
            else f"; its verdict ({v['verdict']}) is decided on the seeds in hand, "
            "its intervals already lie on one side of the margin"
        )
        sentences.append(words + ".")
    return _markdown(f"The plans, computed {pilot}: " + " ".join(sentences))
