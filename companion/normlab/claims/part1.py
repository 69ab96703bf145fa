"""Part I's claims (the affine divergence, A1-A15): their quantities and declarations.

A1-A7 are settled by the exact measurements of :mod:`normlab.claims.exact`. A8-A15 are judged
on the saved sets of chapters 6-8 (5,000 real MNIST digits on the CPU: a stand-in for
CIFAR-10, so a verdict there tests the mechanism), every arm at its learning rate chosen on
validation, through the one paired comparison (:func:`normlab.claims.paired`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .._hits import decode_hits
from ..experiments.part1 import (
    CORRECTIONS,
    LEAD_RIVALS,
    PART1_RIVALS,
    SCALE_INVARIANT,
    verdict_rows,
)
from ..run_tables import common_seeds
from ..stats import paired_differences, paired_item_variance, slope_weights
from .exact import (
    measure_a1,
    measure_a2,
    measure_a3,
    measure_a4,
    measure_a5,
    measure_a6,
    measure_a7,
)
from .pairing import (
    CONFIG,
    at_chosen_lr,
    difference,
    item_differences,
    item_terms,
    only,
    paired,
    per_seed,
    test_items,
)
from .registry import Arm, Effect, Measurement, Test, Unmeasurable, declare
from .rules import AtLeast, Directional, Equivalent, Rule

__all__ = [
    "SLOPE_MARGIN",
    "ACCURACY_MARGIN",
    "ACCURACY_SLOPE_MARGIN",
    "ACCURACY_READING",
    "STEPS_READING",
    "PRIMARY_BUDGET",
    "PAPER_BUDGET",
    "OTHERS",
    "accuracy_table",
    "scaling_table",
]

# log2(epochs to the target) per doubling of the batch: a tenth of a doubling of the data
# needed, a factor 2^0.6 (about 1.5) over the 64-fold range of batch sizes
SLOPE_MARGIN = 0.1
ACCURACY_MARGIN = 0.01  # one accuracy point: "matches", "on par"
_PAIRED = (
    "paired by seed at the lr chosen on val per configuration, mean over configurations"
)


def _balanced(best: pd.DataFrame) -> pd.DataFrame:
    """The rows of the seeds that every cell (configuration and normaliser) of ``best``
    ran, so that a quantity averaged over cells per seed averages the same cells at every
    seed: the fully-connected set runs A11's cell for more seeds than the others."""
    return common_seeds(best, [c for c in (*CONFIG, "normaliser") if c in best])


def _best(results: pd.DataFrame) -> pd.DataFrame:
    """The verdict rows (Xavier-normal init, corrected head), each at its chosen rate, of
    the seeds every cell ran (:func:`_balanced`)."""
    return _balanced(at_chosen_lr(verdict_rows(results)))


def _lead(best: pd.DataFrame) -> tuple[pd.Series, tuple[Arm, ...]]:
    """The corrections' lead per (configuration, seed): the better correction minus the
    stronger of :data:`~normlab.experiments.part1.LEAD_RIVALS`, each chosen on val (one
    rival set at every shape, so leads at two shapes compare like with like)."""
    return difference(best, CORRECTIONS, LEAD_RIVALS)


def _lead_items(best: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`_lead` item by item: per (configuration, seed), each test item's hit of the
    better correction minus the stronger rival's (None without the runs' hits)."""
    return item_differences(best, CORRECTIONS, LEAD_RIVALS)


def _item_var(per_item: np.ndarray | None) -> float | None:
    """The test set's variance of an effect whose per-item values are ``per_item``."""
    return None if per_item is None else paired_item_variance(per_item)


def _a8(results: pd.DataFrame) -> list[Effect]:
    best = _best(results)
    return [
        paired(best, "affine_like", "norm_like"),
        paired(best, "norm_like", PART1_RIVALS),  # the label names the rivals present
    ]


def _matched(
    lead: pd.Series, axis: str, fixed: Sequence[str], items: pd.DataFrame | None = None
) -> list[Effect]:
    """The lead's change along ``axis`` (largest minus smallest value, per seed) in every
    group of ``fixed`` values that has two values of ``axis``, averaged over those groups;
    with the lead's per-item rows ``items`` (:func:`_lead_items`), the same change item by
    item, whose spread over the items is the effect's test-set variance."""
    table = lead.rename("lead").reset_index()
    changes: list[dict[int, float]] = []
    item_changes: list[pd.DataFrame] = []
    groups = []
    for key, group in table.groupby(list(fixed), sort=True):
        if group[axis].nunique() < 2:
            continue
        at = group.groupby([axis, "seed"])["lead"].mean()
        high, low = group[axis].max(), group[axis].min()
        changes.append(_seed_differences(at.xs(high), at.xs(low)))
        if items is not None:
            keep = items.index.to_frame(index=False)
            mask = np.ones(len(keep), dtype=bool)
            for name, value in zip(fixed, key if isinstance(key, tuple) else (key,)):
                mask &= (keep[name] == value).to_numpy()
            rows = items[mask].groupby(level=[axis, "seed"]).mean()
            item_changes.append(rows.xs(high, level=axis) - rows.xs(low, level=axis))
        values = key if isinstance(key, tuple) else (key,)
        groups.append(f"{axis} {low} -> {high} at " + ", ".join(map(str, values)))
    if not changes:
        return []
    seeds = sorted(set.intersection(*(set(c) for c in changes)))
    samples = np.array([np.mean([c[s] for c in changes]) for s in seeds])
    per_item = None
    if items is not None and all(set(seeds) <= set(c.index) for c in item_changes):
        per_item = np.mean([c.loc[seeds].to_numpy() for c in item_changes], axis=(0, 1))
    return [Effect(f"lead, {'; '.join(groups)}", samples, item_var=_item_var(per_item))]


def _seed_differences(a: pd.Series, b: pd.Series) -> dict[int, float]:
    """``a - b`` per seed for the seeds both have."""
    both = sorted(set(a.index) & set(b.index))
    return {int(s): float(a[s] - b[s]) for s in both}


def _a9(results: pd.DataFrame) -> list[Effect]:
    """The width effect at fixed depth and activation, the depth effect at fixed width and
    activation: never a net of one shape against nets of another activation."""
    best = _best(results)
    lead, arms = _lead(best)
    per_item = _lead_items(best)
    # the lead at the larger value minus at the smaller: each arm enters twice, once a sign
    items = item_terms((*arms, *arms), (1, -1, -1, 1), test_items(best))
    effects = [
        Effect(e.label, e.samples, arms=arms, items=items, item_var=e.item_var)
        for axis, fixed in (
            ("width", ("activation", "depth")),
            ("depth", ("activation", "width")),
        )
        for e in _matched(lead, axis, fixed, per_item)
    ]
    if not effects:
        raise Unmeasurable("no two widths at one depth, nor two depths at one width")
    return effects


def _a10(results: pd.DataFrame) -> list[Effect]:
    """The lead with tanh minus the lead with leaky-ReLU at the shapes both have, and the
    tanh lead itself (a lead cannot be clearest where there is none); the label says "no lead
    under either" when neither mean lead is positive."""
    best = _best(results)
    shapes = (
        best.groupby(["depth", "width"])["activation"].nunique().loc[lambda n: n >= 2]
    )
    if shapes.empty:
        raise Unmeasurable("no shape with both tanh and leaky-ReLU runs")
    keep = best.set_index(["depth", "width"]).index.isin(shapes.index)
    best = best[keep]
    tanh, tanh_arms = _lead(only(best, activation="tanh"))
    leaky, leaky_arms = _lead(only(best, activation="leaky_relu"))
    tanh_seeds, leaky_seeds = per_seed(tanh), per_seed(leaky)
    tanh_items = _lead_items(only(best, activation="tanh"))
    leaky_items = _lead_items(only(best, activation="leaky_relu"))
    contrast = lead_tanh = None
    if tanh_items is not None and leaky_items is not None:
        # per seed as the samples are (mean over shapes), then over the seeds both have
        on_tanh = tanh_items.groupby(level="seed").mean()
        on_leaky = leaky_items.groupby(level="seed").mean()
        both = sorted(set(on_tanh.index) & set(on_leaky.index))
        contrast = (on_tanh.loc[both] - on_leaky.loc[both]).to_numpy().mean(axis=0)
        lead_tanh = on_tanh.to_numpy().mean(axis=0)
    means = np.mean(list(tanh_seeds.values())), np.mean(list(leaky_seeds.values()))
    none = " (no lead under either)" if max(means) <= 0 else ""
    n_test = test_items(best)
    return [
        Effect(
            f"lead with tanh - lead with leaky-ReLU{none}",
            paired_differences(tanh_seeds, leaky_seeds),
            arms=(*tanh_arms, *leaky_arms),
            items=item_terms((*tanh_arms, *leaky_arms), (1, -1, -1, 1), n_test),
            item_var=_item_var(contrast),
        ),
        Effect(
            "lead with tanh",
            np.array([tanh_seeds[s] for s in sorted(tanh_seeds)]),
            arms=tanh_arms,
            items=item_terms(tanh_arms, (1, -1), n_test),
            item_var=_item_var(lead_tanh),
        ),
    ]


def _a11(results: pd.DataFrame) -> list[Effect]:
    """Norm-like minus affine-like at 3 x 16, on every seed of that cell (its plan asks for
    more seeds than the other cells')."""
    chosen = only(at_chosen_lr(verdict_rows(results)), depth=3, width=16)
    best = _balanced(chosen[chosen["normaliser"].isin(CORRECTIONS)])
    return [
        paired(
            best,
            "norm_like",
            "affine_like",
            label="norm_like - affine_like at depth 3, width 16",
        )
    ]


PRIMARY_BUDGET = (
    "to_target"  # steps to a target accuracy, as in the large-batch studies
)
#: The paper's budget convention: a fixed number of epochs, whatever the batch size.
PAPER_BUDGET = "fixed_epochs"
#: Accuracy per doubling of the batch at fixed epochs that matters: half a point per
#: doubling, three points over the 64-fold range of batch sizes.
ACCURACY_SLOPE_MARGIN = 0.005
OTHERS = "mean of none/BN/LN/RMS/L2"
#: The two readings of A12 and A13, in their effects' labels: the paper's quantity, and
#: the steps to a target (the mechanism the large-batch studies measure).
ACCURACY_READING = "accuracy per doubling of the batch, fixed epochs"
STEPS_READING = "steps to the target: log2 epochs per doubling of the batch"


def _served(results: pd.DataFrame) -> tuple[str, float]:
    """The dataset that served the runs (the grid's ``source`` where it names one) and the
    majority class's share of its test split (the chance level)."""
    from ..data import served_by
    from ..experiments.part1 import config_splits

    first = results.iloc[0]
    chosen = first.get("source")
    config = {
        "data": str(first["data"]),
        "data_profile": str(first["data_profile"]),
        "source": chosen if isinstance(chosen, str) else None,
    }
    labels = config_splits(config)["test"].y
    chance = float(labels.bincount().max() / labels.numel())
    return served_by(config["data"], config["data_profile"], config["source"]), chance


def _specified(results: pd.DataFrame, budget: str, column: str) -> pd.DataFrame:
    """The runs of the batch-size specification (:data:`~normlab.experiments.part1_batch.
    PRIMARY`: SGD, Xavier-normal) under ``budget``, with ``column`` measured, at two batch
    sizes or more; Unmeasurable otherwise."""
    from ..experiments.part1_batch import PRIMARY

    rows = results
    for key, value in {**PRIMARY, "budget": budget}.items():
        rows = rows[rows[key] == value] if key in rows else rows.iloc[0:0]
    if rows.empty or column not in rows:
        words = ", ".join(f"{k} {v}" for k, v in {**PRIMARY, "budget": budget}.items())
        raise Unmeasurable(f"no runs under the specification {words}")
    if rows["batch_size"].nunique() < 2:
        raise Unmeasurable("the set has one batch size")
    return rows


def _with_others(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """``table`` (per normaliser and seed: ``slope``, ``test_metric``) with the rivals'
    mean slope per seed as the arm :data:`OTHERS` (where every rival ran), and the data
    that served ``rows`` and its chance level."""
    rivals = table[table["normaliser"].isin(PART1_RIVALS)]
    if rivals["normaliser"].nunique() == len(PART1_RIVALS):
        mean = rivals.groupby("seed")[["slope"]].mean().reset_index()
        weakest = rivals["test_metric"].min()
        axes = {k: rivals[k].iloc[0] for k in ("optimizer", "init", "budget")}
        mean = mean.assign(test_metric=weakest, val_metric=weakest, **axes)
        table = pd.concat([table, mean.assign(normaliser=OTHERS)], ignore_index=True)
    served, chance = _served(rows)
    return table.assign(higher_is_better=True, served=served, chance=chance)


def scaling_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per normaliser and seed, under the primary specification
    (:data:`normlab.experiments.part1_batch.PRIMARY`: SGD, Xavier-normal, steps to the
    target), the ``slope`` of log2(epochs to the target) against log2(batch size)
    (:func:`~normlab.analysis.batch.scaling_slopes`: 0 is perfect scaling), each batch
    size's rate chosen on the other half of the seeds (cross-fitted,
    :func:`~normlab.analysis.batch.steps_scores`), the weakest batch size's mean test
    metric as ``test_metric`` (learnability is judged on the weakest cell); plus the
    rivals' mean slope per seed as the arm :data:`OTHERS`. Unmeasurable when a batch size
    of a normaliser is censored (no rate at which every seed reached the target)."""
    from ..analysis.batch import scaling_slopes, steps_scores

    rows = _specified(results, PRIMARY_BUDGET, "steps_to_target")
    scores = steps_scores(rows, cross_fitted=True)
    censored = scores[scores["censored"]].drop_duplicates(["normaliser", "batch_size"])
    if not censored.empty:
        cells = ", ".join(
            f"{n} at batch {b}"
            for n, b in zip(censored["normaliser"], censored["batch_size"])
        )
        raise Unmeasurable(f"no rate reached the target with every seed: {cells}")
    table = scaling_slopes(scores).rename(columns={"weakest": "test_metric"})
    return _with_others(table.assign(val_metric=table["test_metric"]), rows)


def accuracy_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per normaliser and seed, under the paper's convention (SGD, Xavier-normal, a fixed
    number of epochs), the ``slope`` of the test accuracy against log2(batch size)
    (:func:`~normlab.analysis.batch.accuracy_slopes`), each batch size's rate chosen on
    validation on the other half of the seeds (cross-fitted), the weakest batch size's
    mean test accuracy as ``test_metric``; plus the rivals' mean slope as :data:`OTHERS`."""
    return _accuracy(results)[0]


def _accuracy(results: pd.DataFrame) -> tuple[pd.DataFrame, _Noise]:
    """:func:`accuracy_table`, and per normaliser the test set's noise of its slope: the
    bound's terms and, where every run kept its hits, the variance measured item by item."""
    from ..analysis.batch import accuracy_scores, accuracy_slopes

    rows = _specified(results, PAPER_BUDGET, "test_metric")
    if rows["seed"].nunique() < 2:
        raise Unmeasurable("the fixed-epochs runs have one seed: nothing to cross-fit")
    scores = accuracy_scores(rows)
    table = accuracy_slopes(scores).rename(columns={"weakest": "test_metric"})
    n_test = test_items(rows)
    noise = {
        str(name): _slope_noise(part, n_test)
        for name, part in scores.groupby("normaliser")
    }
    return _with_others(table.assign(val_metric=table["test_metric"]), rows), noise


def _slope_noise(
    scores: pd.DataFrame, n_test: int | None
) -> tuple[tuple[tuple[float, float, int], ...], float | None]:
    """The test set's noise of one normaliser's accuracy slope (``scores``: its rows of
    :func:`~normlab.analysis.batch.accuracy_scores`): the terms ``(weight, mean accuracy,
    items)`` of the slope as a weighted sum of the batch sizes' accuracies
    (:func:`normlab.stats.slope_weights`), and the paired variance of each item's weighted
    hits averaged over the seeds (None without every run's hits)."""
    sizes = sorted(scores["batch_size"].unique())
    if len(sizes) < 2:
        return (), None
    weights = dict(zip(sizes, slope_weights(sizes)))
    accuracy = scores.groupby("batch_size")["test_metric"].mean()
    terms = (
        ()
        if n_test is None
        else tuple((float(weights[b]), float(accuracy[b]), n_test) for b in sizes)
    )
    if "test_hits" not in scores or scores["test_hits"].isna().any():
        return terms, None
    per_seed = []
    for _, part in scores.groupby("seed"):
        if sorted(part["batch_size"]) != sizes:
            return terms, None
        try:
            hits = [
                weights[b] * decode_hits(h)
                for b, h in zip(part["batch_size"], part["test_hits"])
            ]
        except ValueError:
            return terms, None
        if len({h.size for h in hits}) != 1:
            return terms, None
        per_seed.append(np.sum(hits, axis=0))
    return terms, _item_var(np.mean(per_seed, axis=0))


def _arms(effect: Effect, table: pd.DataFrame) -> Effect:
    """``effect`` with its arms' chance level and the dataset that served it (the grid's
    ``source``), which the generic pairing cannot know."""
    chance = float(table["chance"].iloc[0])
    arms = tuple(Arm(a.name, a.score, chance) for a in effect.arms)
    return dataclasses.replace(effect, arms=arms, data=(str(table["served"].iloc[0]),))


def _readings(
    results: pd.DataFrame,
    accuracy: Callable[[pd.DataFrame], list[Effect]],
    steps: Callable[[pd.DataFrame], list[Effect]],
) -> list[Effect]:
    """The effects of both readings of a batch-size claim, the paper's (accuracy at fixed
    epochs) first; a reading the set cannot measure is left out, and a set that measures
    neither is Unmeasurable with both reasons."""
    effects, reasons = [], []
    for quantity in (accuracy, steps):
        try:
            effects += quantity(results)
        except Unmeasurable as err:
            reasons.append(str(err))
    if not effects:
        raise Unmeasurable("; ".join(reasons))
    return effects


def _a12_accuracy(results: pd.DataFrame) -> list[Effect]:
    """Each correction's own accuracy slope (the paper's "significant negative slopes")."""
    table, noise = _accuracy(results)
    return _own_slopes(
        table, list(CORRECTIONS), Directional(-1), ACCURACY_READING, "accuracy", noise
    )


def _a12_steps(results: pd.DataFrame) -> list[Effect]:
    """Each correction's scaling slope minus the other normalisers' mean slope, paired by
    seed: positive when the correction leaves perfect scaling at a smaller batch."""
    table = scaling_table(results)
    effects = []
    for name in CORRECTIONS:
        effect = paired(
            table,
            name,
            OTHERS,
            value="slope",
            higher_is_better=True,
            label=f"{name} - {OTHERS}: {STEPS_READING}",
            rule=Directional(+1),
        )
        named = dataclasses.replace(effect, name=f"{name} (steps)")
        effects.append(_arms(named, table))
    return effects


def _a12(results: pd.DataFrame) -> list[Effect]:
    """Both readings of A12 under SGD and Xavier-normal weights: the paper's (each
    correction's accuracy falls per doubling of the batch, at fixed epochs) and the
    mechanism's (each correction leaves perfect scaling of the steps to a target sooner
    than the others)."""
    return _readings(results, _a12_accuracy, _a12_steps)


#: Per normaliser, the test set's noise of its slope: the bound's terms, and the variance
#: measured item by item where the runs kept their hits (:func:`_slope_noise`).
_Noise = Mapping[str, tuple[tuple[tuple[float, float, int], ...], float | None]]


def _own_slopes(
    table: pd.DataFrame,
    names: Sequence[str],
    rule: Rule,
    reading: str = STEPS_READING,
    short: str = "steps",
    noise: _Noise | None = None,
) -> list[Effect]:
    """Each of ``names``' own slope per seed, judged by ``rule``, with its test-set
    ``noise`` where known."""
    effects = []
    for name in names:
        rows = table[table["normaliser"] == name].sort_values("seed")
        if rows.empty:
            raise Unmeasurable(f"no runs of {name}")
        arm = Arm(name, float(rows["test_metric"].iloc[0]))
        samples = rows["slope"].dropna().to_numpy()
        items, item_var = (noise or {}).get(name, ((), None))
        effect = Effect(
            f"{name}: {reading}",
            samples,
            rule,
            (arm,),
            items=items,
            item_var=item_var,
            name=f"{name} ({short})",
        )
        effects.append(_arms(effect, table))
    return effects


def _a13_accuracy(results: pd.DataFrame) -> list[Effect]:
    """LayerNorm's accuracy slope within the margin of 0 ("roughly flat"), and
    BatchNorm's, RMSNorm's and no normalisation's not below minus the margin ("flat or
    rising")."""
    margin = ACCURACY_SLOPE_MARGIN
    table, noise = _accuracy(results)
    return [
        *_own_slopes(
            table,
            ["layernorm"],
            Equivalent(margin),
            ACCURACY_READING,
            "accuracy",
            noise,
        ),
        *_own_slopes(
            table,
            ["batchnorm", "rmsnorm", "none"],
            AtLeast(margin),
            ACCURACY_READING,
            "accuracy",
            noise,
        ),
    ]


def _a13_steps(results: pd.DataFrame) -> list[Effect]:
    """LayerNorm's own scaling slope within the margin of 0 (perfect scaling: the data it
    needs does not grow with the batch), and BatchNorm's, RMSNorm's and no normalisation's
    at most the margin above it."""
    table = scaling_table(results)
    return [
        *_own_slopes(table, ["layernorm"], Equivalent(SLOPE_MARGIN)),
        *_own_slopes(
            table, ["batchnorm", "rmsnorm", "none"], AtLeast(SLOPE_MARGIN, direction=-1)
        ),
    ]


def _a13(results: pd.DataFrame) -> list[Effect]:
    """Both readings of A13: accuracy at fixed epochs (the paper's), steps to the target."""
    return _readings(results, _a13_accuracy, _a13_steps)


def _a14(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    return [
        paired(
            best,
            CORRECTIONS,
            ("layernorm", "rmsnorm"),
            label="PatchNorm (better mode) - stronger of LayerNorm/RMSNorm",
        )
    ]


def _a15(results: pd.DataFrame) -> list[Effect]:
    best = _best(results)
    return [
        paired(
            best,
            "affine_like",
            SCALE_INVARIANT,
            label="affine_like - strongest scale-invariant normaliser",
        )
    ]


_A = "I"

declare(
    id="A1",
    part=_A,
    kind="exact",
    # U+2212 minus and U+03B7 eta: a minus sign never parts from what it negates where
    # the sentence wraps in a table, as an ASCII hyphen may
    sentence="One SGD step on an affine layer z = Wx + b moves z by \u2212\u03b7 (\u2016x\u2016\u00b2 + 1) g, "
    "not the ideal \u2212\u03b7 g.",
    chapter=2,
    test=Measurement(
        measure=measure_a1,
        says="relative deviation of a real SGD step from the formula",
    ),
)
declare(
    id="A2",
    part=_A,
    kind="exact",
    sentence="In a batch, the effective update is \u2212\u03b7 \u03a3_j (x_i \u00b7 x_j + 1) g_j / B: "
    "kernel XX\u1d40 + 1, with cross-sample terms.",
    chapter=2,
    test=Measurement(
        measure=measure_a2, says="real step and tangent kernel against XX^T + 1"
    ),
)
declare(
    id="A3",
    part=_A,
    kind="exact",
    sentence="Norm-like correction W (x/|x|) + b: kernel xh_i . xh_j + 1, diagonal exactly 2; "
    "scale-invariant, loses the radial degree of freedom.",
    chapter=3,
    test=Measurement(
        measure=measure_a3, says="tangent kernel and outputs under rescaling"
    ),
)
declare(
    id="A4",
    part=_A,
    kind="exact",
    sentence="Affine-like correction (Wx + b)/sqrt(|x|^2 + 1): single-sample update exactly \u2212\u03b7 g "
    "(kernel = cosine Gram of [x; 1]); not scale-invariant.",
    chapter=3,
    test=Measurement(
        measure=measure_a4,
        says="single-sample steps, tangent kernel, outputs under rescaling",
    ),
)
declare(
    id="A5",
    part=_A,
    kind="exact",
    sentence="A learned scale placed after the correction breaks the exact cancellation.",
    chapter=3,
    test=Measurement(
        measure=measure_a5, says="single-sample step of affine-like followed by a gain"
    ),
)
declare(
    id="A6",
    part=_A,
    kind="exact",
    sentence="In a convolution, shared weights couple output positions p, q through "
    "patch_p . patch_q + 1, so the single-sample correction is only partial.",
    chapter=4,
    test=Measurement(
        measure=measure_a6,
        says="conv tangent kernel; PatchNorm kernel diagonal and single-sample step",
    ),
)
declare(
    id="A7",
    part=_A,
    kind="conceptual",
    sentence="A normaliser is better seen as a nonlinear, activation-like map plus a "
    "parameterised scale (e.g. RMSNorm = sqrt(d) * L2 map, then a gain).",
    chapter=3,
    test=Measurement(
        measure=measure_a7,
        says="RMSNorm against sqrt(d) L2 then a gain",
        tolerance=1e-12,
    ),
)
declare(
    id="A8",
    part=_A,
    kind="empirical",
    sentence="Fully-connected nets on CIFAR-10: affine-like is best, norm-like next, both ahead of "
    "none, BatchNorm, LayerNorm, RMSNorm and L2.",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a8,
        rule=Directional(+1),
        says=f"test accuracy differences, {_PAIRED}",
    ),
)
declare(
    id="A9",
    part=_A,
    kind="empirical",
    sentence="The lead of the corrections grows with depth and width.",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a9,
        rule=Directional(+1),
        says="the lead (best correction minus the strongest rival, chosen on val) against log2 width, "
        "and deepest minus shallowest, per seed",
    ),
)
declare(
    id="A10",
    part=_A,
    kind="empirical",
    sentence="The lead is clearest with tanh (against leaky-ReLU).",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a10,
        rule=Directional(+1),
        says=f"lead with tanh minus lead with leaky-ReLU, {_PAIRED}",
    ),
)
declare(
    id="A11",
    part=_A,
    kind="empirical",
    sentence="One exception: 3 layers, width 16, where norm-like is slightly ahead of "
    "affine-like.",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a11,
        rule=Directional(+1),
        says="norm_like minus affine_like at depth 3, width 16",
    ),
)
declare(
    id="A12",
    part=_A,
    kind="empirical",
    sentence="Accuracy falls as the batch size grows for norm-like and affine-like "
    "(significant negative slopes).",
    chapter=7,
    datasets=("cifar10",),
    test=Test(
        experiment="batch_size",
        quantity=_a12,
        rule=Directional(+1),
        says="two readings, each batch size's rate chosen on one half of the seeds and read "
        "on the other (cross-fitted). The paper's: per seed, the least-squares slope of the "
        "test accuracy after a fixed number of epochs against log2(batch size), for each "
        "correction (negative: accuracy falls). The mechanism's: the slope of log2(epochs "
        "to a target validation accuracy), each batch size at its rate with the fewest "
        f"steps, each correction's minus the mean of {OTHERS}'s (positive: the correction "
        "leaves perfect scaling sooner)",
    ),
)
declare(
    id="A13",
    part=_A,
    kind="empirical",
    sentence="LayerNorm is roughly flat over batch size; BatchNorm, RMSNorm and no "
    "normalisation are flat or rising.",
    chapter=7,
    datasets=("cifar10",),
    test=Test(
        experiment="batch_size",
        quantity=_a13,
        rule=AtLeast(ACCURACY_SLOPE_MARGIN),
        says="two readings, cross-fitted as A12's. The paper's: each normaliser's slope of "
        "the test accuracy at fixed epochs per doubling of the batch, LayerNorm's within "
        f"±{ACCURACY_SLOPE_MARGIN} (equivalence), the others' not below "
        f"-{ACCURACY_SLOPE_MARGIN}. The mechanism's: slopes of log2(epochs to a target "
        f"validation accuracy) per doubling (0: perfect scaling), LayerNorm's within "
        f"±{SLOPE_MARGIN}, the others' at most +{SLOPE_MARGIN}",
    ),
)
declare(
    id="A14",
    part=_A,
    kind="empirical",
    sentence="In convolutional nets, PatchNorm is roughly on par with LayerNorm and RMSNorm, "
    "with smaller margins than in fully-connected nets.",
    chapter=8,
    datasets=("cifar10",),
    test=Test(
        experiment="cnn_normalisers",
        quantity=_a14,
        rule=Equivalent(ACCURACY_MARGIN),
        says=f"PatchNorm's better mode minus the stronger of LayerNorm and RMSNorm, {_PAIRED}; margin "
        f"{ACCURACY_MARGIN} (the margins in fully-connected nets are compared in the chapter, not "
        f"judged)",
    ),
)
declare(
    id="A15",
    part=_A,
    kind="empirical",
    sentence="Affine-like, which is not scale-invariant, matches or beats the scale-invariant "
    "normalisers: scale invariance is not what makes normalisation work.",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a15,
        rule=AtLeast(ACCURACY_MARGIN),
        says=f"affine_like minus the strongest scale-invariant normaliser, {_PAIRED}; margin {ACCURACY_MARGIN}",
    ),
)
