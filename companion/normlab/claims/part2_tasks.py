"""Part II's quantities on the task studies (chapters 13-15, N4, N6-N9, N12): each arm at
its learning rate chosen on validation, one normaliser against another on a named dataset.

The models of the task studies are the named normalisers and the ``data`` axis names the
dataset; every comparison goes through :func:`normlab.claims.paired`. Offline, each
verdict names the stand-in that served its task, as the gate studies' labels do too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .._hits import decode_hits
from ..stats import paired_differences, paired_item_variance
from .pairing import (
    at_chosen_lr,
    difference,
    item_terms,
    only,
    paired,
    per_seed,
    test_items,
)
from .registry import Effect, Unmeasurable

__all__ = ["VISION"]

# The task studies: the ``data`` axis names the dataset; the models are the named normalisers.
VISION = ("mnist", "fashion_mnist", "svhn", "cifar10", "cifar100", "cifar10_c")


def _on(
    data: str, a: str, b: str | Sequence[str]
) -> Callable[[pd.DataFrame], list[Effect]]:
    def quantity(results: pd.DataFrame) -> list[Effect]:
        rival = b if isinstance(b, str) else "strongest other"
        best = at_chosen_lr(results)
        label = f"{a} - {rival} on {data}"
        return [paired(best, a, b, within={"data": data}, label=label)]

    return quantity


def _part2_lead(best: pd.DataFrame, data: str) -> dict[int, float]:
    lead, _ = difference(best, "autonorm_s", "frozen_ln", within={"data": data})
    return per_seed(lead)


def _lead_items(
    best: pd.DataFrame, a: str, b: str, by: str = "normaliser"
) -> tuple[tuple[float, float, int], ...]:
    """The test-item terms of (autonorm_s - frozen_ln on ``a``) - (the same on ``b``)."""
    terms: tuple[tuple[float, float, int], ...] = ()
    for data, sign in ((a, 1), (b, -1)):
        _, arms = difference(
            best, "autonorm_s", "frozen_ln", by=by, within={"data": data}
        )
        n_test = test_items(only(best, data=data))
        terms += item_terms(arms, (sign, -sign), n_test)
    return terms


def _n4(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    top = _part2_lead(best, "cifar100")
    others = {
        d: _part2_lead(best, d)
        for d in VISION
        if d != "cifar100" and d in set(best["data"])
    }
    if not others:
        raise Unmeasurable("no vision dataset besides cifar100")
    runner_up = max(others, key=lambda d: np.mean(list(others[d].values())))
    return [
        Effect(
            f"lead on cifar100 - lead on {runner_up} (the next largest)",
            paired_differences(top, others[runner_up]),
            items=_lead_items(best, "cifar100", runner_up),
        )
    ]


def _n12(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    effects = []
    for data in sorted(best["data"].unique()):
        rows = only(best, data=data)
        wide = rows.pivot_table(
            index="seed", columns="normaliser", values="test_metric"
        )
        if not {"autonorm_s", "frozen_ln"} <= set(wide.columns):
            raise Unmeasurable(f"no runs of autonorm_s and frozen_ln on {data}")
        relative = (wide["autonorm_s"] - wide["frozen_ln"]) / wide["frozen_ln"]
        effects.append(
            Effect(
                "relative RMSE (AutoNorm-S - FrozenLN) / FrozenLN, positive when "
                f"AutoNorm-S's error is larger, on {_named(results, data)}",
                relative.dropna().to_numpy(dtype=float),
            )
        )
    return effects


def _named(results: pd.DataFrame, task: str) -> str:
    """``task`` by its reader-facing name, and offline the dataset that served it (named in
    every verdict; the grid's ``source`` where it chose one), e.g. "a synthetic tagging
    grammar (standing in for PTB POS tagging)"."""
    from ..data.sources import OFFLINE_PROFILES, source, title

    profile = (
        str(results["profile"].iloc[0]) if "profile" in results and len(results) else ""
    )
    if profile in OFFLINE_PROFILES:
        chosen = None
        if "source" in results and "data" in results:
            named = results.loc[results["data"] == task, "source"].dropna()
            chosen = str(named.iloc[0]) if len(named) else None
        served = source(task, profile, chosen).fit
        return f"{title(served)} (standing in for {title(task)})"
    return title(task)


def _label(name: str) -> str:
    """A normaliser's reader-facing name ("FrozenLN" for ``frozen_ln``)."""
    from ..normalisers import label

    return label(name)


def _versus(
    task: str, a: str, rivals: Sequence[str], value: str = "test_metric", what: str = ""
) -> Callable[[pd.DataFrame], list[Effect]]:
    """``a`` minus each of ``rivals`` in ``value`` on ``task``, paired by seed at the lr chosen on val."""

    def quantity(results: pd.DataFrame) -> list[Effect]:
        best = at_chosen_lr(results)
        return [
            paired(
                best,
                a,
                b,
                value=value,
                within={"data": task},
                label=f"{_label(a)} - {_label(b)}{what} on {_named(results, task)}",
            )
            for b in rivals
        ]

    return quantity


def _n7(results: pd.DataFrame) -> list[Effect]:
    """The drop under corruption (clean minus mean corruption accuracy), lower is better,
    frozen_ln's minus autonorm_s's; each side's clean accuracy in the label."""
    if results.empty or "mean_corruption_accuracy" not in results:
        raise Unmeasurable("no mean corruption accuracy in this set")
    task = str(results["data"].iloc[0])
    best = at_chosen_lr(
        results.assign(
            drop=results["test_metric"] - results["mean_corruption_accuracy"]
        )
    )
    effect = paired(
        best,
        "autonorm_s",
        "frozen_ln",
        value="drop",
        within={"data": task},
        higher_is_better=False,
    )
    a, b = effect.arms
    label = (
        f"drop under corruption, FrozenLN's - AutoNorm-S's (positive: AutoNorm-S loses "
        f"less), on {_named(results, task)} "
        f"(clean accuracy {a.score:.3f} vs {b.score:.3f})"
    )
    return [
        dataclasses.replace(
            effect,
            label=label,
            items=_drop_items(best, task),
            item_var=_drop_item_variance(best, task),
        )
    ]


def _drop_item_variance(best: pd.DataFrame, task: str) -> float | None:
    """The test set's variance of frozen_ln's drop minus autonorm_s's, measured image by
    image from the runs' ``test_hits`` (clean) and ``corruption_hits`` (every condition's
    first ``eval_images`` test images, condition by condition); None where a run lacks them.

    Per image, the two arms' clean hits differ by ``e`` and their shares of the conditions
    right by ``k`` (each averaged over the seeds); the effect is ``mean(e) - mean(k)``, a
    sum over images of ``e/n - k/m`` (the ``m`` corrupted images, the first of the clean
    ones) and ``e/n`` (the rest), whose variance over draws of the images is each stratum's
    size times the variance of its terms.
    """
    rows = only(best, data=task)
    if not {"test_hits", "corruption_hits"} <= set(rows) or rows[
        ["test_hits", "corruption_hits"]
    ].isna().any(axis=None):
        return None
    arm = {
        name: rows[rows["normaliser"] == name].set_index("seed")
        for name in ("frozen_ln", "autonorm_s")
    }
    seeds = sorted(set(arm["frozen_ln"].index) & set(arm["autonorm_s"].index))
    images = rows["eval_images"].iloc[0] if "eval_images" in rows else None
    e, k = [], []
    try:
        for seed in seeds:
            clean = [decode_hits(arm[n].at[seed, "test_hits"]) for n in arm]
            m = (
                int(images)
                if images is not None and pd.notna(images)
                else clean[0].size
            )
            shares = [
                decode_hits(arm[n].at[seed, "corruption_hits"]).reshape(-1, m).mean(0)
                for n in arm
            ]
            e.append(clean[0].astype(float) - clean[1])
            k.append(shares[0] - shares[1])
    except (ValueError, KeyError):
        return None
    if not seeds or len({x.size for x in e}) != 1 or len({x.size for x in k}) != 1:
        return None
    e_mean, k_mean = np.mean(e, axis=0), np.mean(k, axis=0)
    n, m = e_mean.size, k_mean.size
    if m > n:
        return None
    both = e_mean[:m] / n - k_mean / m
    total = m**2 * paired_item_variance(both) if m >= 2 else 0.0
    if n - m >= 2:
        total += (n - m) ** 2 * paired_item_variance(e_mean[m:] / n)
    return float(total)


def _drop_items(best: pd.DataFrame, task: str) -> tuple[tuple[float, float, int], ...]:
    """The test-item terms of frozen_ln's drop minus autonorm_s's: each drop is a clean
    accuracy (the test split's items) minus a mean corruption accuracy (its images, each
    seen under every corruption, so counted once)."""
    rows = only(best, data=task)
    n_test = test_items(rows)
    if n_test is None:
        return ()
    images = rows["eval_images"].iloc[0] if "eval_images" in rows else None
    n_corrupt = int(images) if images is not None and pd.notna(images) else n_test
    terms = []
    for name, sign in (("frozen_ln", 1), ("autonorm_s", -1)):
        arm = rows[rows["normaliser"] == name]
        terms += [
            (sign, float(arm["test_metric"].mean()), n_test),
            (-sign, float(arm["mean_corruption_accuracy"].mean()), n_corrupt),
        ]
    return tuple(terms)
