"""Part I's quantities on batch size (chapter 7, A12 and A13): each normaliser's slope
against log2(batch size), read two ways, the paper's (accuracy after a fixed number of
epochs) and the mechanism's (the steps to a target accuracy), each batch size's rate chosen
on one half of the seeds and read on the other (cross-fitted).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .._hits import decode_hits
from ..experiments.part1 import CORRECTIONS, PART1_RIVALS
from ..stats import paired_item_variance, slope_weights
from .pairing import paired, test_items
from .registry import Arm, Effect, Unmeasurable
from .rules import AtLeast, Directional, Equivalent, Rule

__all__ = [
    "SLOPE_MARGIN",
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
    return terms, paired_item_variance(np.mean(per_seed, axis=0))


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
