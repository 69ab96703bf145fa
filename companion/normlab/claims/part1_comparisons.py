"""Part I's quantities on the comparisons of normalisers (chapters 6 and 8, A8-A11, A14,
A15): the corrections against the other normalisers, each at its learning rate chosen on
validation, and how the corrections' lead changes with width, depth and activation.

Every comparison goes through :func:`normlab.claims.paired`; the lead is the better
correction minus the stronger of :data:`~normlab.experiments.part1.LEAD_RIVALS`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..experiments.part1 import (
    CORRECTIONS,
    LEAD_RIVALS,
    PART1_RIVALS,
    SCALE_INVARIANT,
    verdict_rows,
)
from ..run_tables import common_seeds
from ..stats import paired_differences, paired_item_variance
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
from .registry import Arm, Effect, Unmeasurable

__all__: list[str] = []


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
