"""Part II's claims (AutoNorm and AutoNorm-S, N1-N14): their quantities and declarations.

The gate studies of chapters 11 and 12 compare arms (the ``arm`` axis of
:mod:`normlab.experiments.gate_study`, AutoNorm-S composed from the ``autonorm`` and
``freeze_at_<T>`` runs of the same set); the task studies of chapters 13-15 compare
normalisers. Every comparison of two arms goes through
:func:`normlab.claims.paired`. On the CPU, every dataset is a stand-in, so such a
verdict tests the mechanism only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .._hits import decode_hits
from ..gates import READY_ARM as READY
from ..normalisers import PART2
from ..paper import EPS_H
from ..stats import paired_differences, paired_item_variance
from .pairing import (
    at_chosen_lr,
    chance_level,
    difference,
    item_level_variance,
    item_terms,
    only,
    paired,
    per_seed,
    test_items,
)
from .pairing import (
    paired_item_variance as pairing_item_variance,
)
from .registry import Arm, Effect, Test, Unmeasurable, declare
from .rules import AtLeast, Directional, Equivalent

__all__ = [
    "VISION",
    "GATE_VISION",
    "LANGUAGE",
    "MIN_GATE_DEPTH",
    "CIFAR10",
]

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


GATE_VISION = (
    "mnist",
    "fashion_mnist",
    "cifar10",
)  # the image task of autonorm_gates (real MNIST's sample on the CPU; real)
LANGUAGE = ("ptb_pos", "sst2")


# Per-layer and per-task gate claims need a backbone deep enough to have layers to compare.
MIN_GATE_DEPTH = 4


def _gates(results: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    vision = [d for d in GATE_VISION if d in set(results.get("data", ()))]
    if not vision or not set(LANGUAGE) <= set(results["data"]):
        raise Unmeasurable("the set needs gate runs on ptb_pos, sst2 and an image task")
    depth = int(results["depth"].min()) if "depth" in results else 0
    if depth < MIN_GATE_DEPTH:
        raise Unmeasurable(
            f"not testable on this stand-in: its runs have {depth} block(s), and gate "
            f"claims across layers and tasks need {MIN_GATE_DEPTH} or more, trained off "
            "chance on the sentence task"
        )
    return results, vision[0]


def _gate_metric(results: pd.DataFrame, task: str, key: str) -> dict[int, float]:
    rows = results[results["data"] == task]
    return {int(s): float(v) for s, v in rows.groupby("seed")[key].mean().items()}


def _gate_arm(results: pd.DataFrame, task: str) -> Arm:
    """The learned AutoNorm on ``task``: a gate read off a network that did not train
    says nothing, so its test metric and chance level go to the learnability rule."""
    rows = results[results["data"] == task]
    return Arm(
        f"autonorm on {task}", float(rows["test_metric"].mean()), chance_level(rows)
    )


def _n10(results: pd.DataFrame) -> list[Effect]:
    """Per language task, minus the image task: the mean gate entropy over training (the
    same epochs), and, where the set records it, the gate entropy at matched training
    progress (``entropy_at_progress``: :data:`normlab.analysis.gates.PROGRESS`),
    which takes out how fast each task is learned."""
    results, vision = _gates(results)
    measures = [("entropy_mean", "mean gate entropy over training")]
    if (
        "entropy_at_progress" in results
        and results["entropy_at_progress"].notna().all()
    ):
        measures.append(("entropy_at_progress", "gate entropy at matched progress"))
    return [
        Effect(
            f"{what}, {_named(results, t)} - {_named(results, vision)}",
            paired_differences(
                _gate_metric(results, t, key), _gate_metric(results, vision, key)
            ),
            arms=(_gate_arm(results, t), _gate_arm(results, vision)),
            data=(t, vision),
            name=f"{what} on {t}",
        )
        for key, what in measures
        for t in LANGUAGE
    ]


def _n11(results: pd.DataFrame) -> list[Effect]:
    results, vision = _gates(results)
    effects = [
        Effect(
            f"final weight on LayerNorm - 1/2, {_named(results, vision)}",
            np.array(list(_gate_metric(results, vision, "p_ln_final").values())) - 0.5,
            arms=(_gate_arm(results, vision),),
            data=(vision,),
            name=f"LayerNorm's final weight on {vision}",
        )
    ]
    for task in LANGUAGE:
        for label, key, shift, short in (
            (
                f"final gate entropy - eps_H ({EPS_H})",
                "entropy_final",
                EPS_H,
                "final entropy",
            ),
            (
                "slope of the final weight on DyT over relative depth",
                "depth_slope",
                0.0,
                "DyT's depth slope",
            ),
        ):
            effects.append(
                Effect(
                    f"{label}, {_named(results, task)}",
                    np.array(list(_gate_metric(results, task, key).values())) - shift,
                    arms=(_gate_arm(results, task),),
                    data=(task,),
                    name=f"{short} on {task}",
                )
            )
    return effects


# The gate studies (chapters 11 and 12). The cpu sets use stand-ins: ``mnist`` (stationary
# digits) and ``mnist_restyled`` (the same digits, each in its own style: diverse); the GPU
# profiles add the real vision datasets. AutoNorm-S is the paper's rule (H >= eps_H at
# T_freeze), composed from the autonorm and freeze_at_<T> runs (ag.compose_schedule).


def _gate_best(results: pd.DataFrame) -> pd.DataFrame:
    """Every arm (AutoNorm-S composed in) at the lr chosen on val per (data, arm), at the
    book's default initialisation, readout and selector rate (a set's other configurations,
    where it has any, are not these claims')."""
    from ..analysis import gates as ag

    if results.empty or "arm" not in results:
        raise Unmeasurable("no gate-study runs (an 'arm' column) in this table")
    table = results = ag.at_defaults(results)
    if ag.freeze_epochs(results["arm"].unique()) and "autonorm" in set(results["arm"]):
        table = ag.with_schedules(results, EPS_H)
    elif READY in set(results["arm"]):
        # AutoNorm-S deciding after warm-up (``gate_regime``) is the claims' AutoNorm-S;
        # the paper's rule fired where the gates' mean entropy at the decision was high
        ready = table["arm"] == READY
        table = table.assign(
            arm=table["arm"].mask(ready, "autonorm_s"),
            fired=(table["decision_entropy"] >= EPS_H).where(ready),
        )
    return ag.chosen(table)


def _gate_diff(
    best: pd.DataFrame, data: str, a: str, b: str, value: str = "test_metric"
) -> Effect:
    suffix = "" if value == "test_metric" else f" ({value})"
    return paired(
        best,
        a,
        b,
        by="arm",
        value=value,
        within={"data": data},
        higher_is_better=True,  # accuracies, and the area under the accuracy curve
        label=f"{a} - {b} on {data}{suffix}",
    )


def _first(best: pd.DataFrame, *candidates: str) -> str:
    for data in candidates:
        if data in set(best["data"]):
            return data
    raise Unmeasurable(f"none of {', '.join(candidates)} in this set")


def _gate_lead(best: pd.DataFrame, data: str) -> dict[int, float]:
    lead, _ = difference(
        best, "autonorm_s", "frozen_ln", by="arm", within={"data": data}
    )
    return per_seed(lead)


# The one CIFAR-10 stand-in of every claim that names CIFAR-10 (N1, N3): the restyled
# digits, each image in its own style, the diverse task of the CPU sets.
CIFAR10 = ("cifar10", "mnist_restyled")
# The stationary tasks (the book's sense: every input shares one set of statistics), the
# first present of which N1 is also judged on.
STATIONARY = ("mnist", "fashion_mnist")


def _regime(results: pd.DataFrame, best: pd.DataFrame, data: str, *arms: str) -> str:
    """The regime of a gate verdict, for its label (issue 51): the schedule's epochs, for
    AutoNorm-S the epoch of its decision and the share of seeds on which the rule fired,
    and each compared arm's final training loss (mean over seeds at its chosen rate)."""
    from ..analysis import gates as ag

    rows = best[best["data"] == data]
    words = [f"{int(rows['epochs'].max())} epochs"] if "epochs" in rows else []
    freeze = ag.freeze_epochs(results["arm"].unique())
    composed = rows[rows["arm"] == "autonorm_s"]
    if "autonorm_s" in arms and "fired" in composed and not composed.empty:
        fired = f"fired on {100 * float(composed['fired'].mean()):.0f} % of seeds"
        if freeze:
            words.append(f"freeze decided at epoch {freeze[0]}, {fired}")
        elif "decided_at" in composed:
            at = composed["decided_at"]
            when = f"{int(at.min())}" + (
                f" to {int(at.max())}" if at.nunique() > 1 else ""
            )
            accuracy = float(composed["accuracy_at"].mean())
            words.append(
                f"freeze decided after warm-up at epoch {when} (validation accuracy "
                f"{accuracy:.2f}), {fired}"
            )
    if "train_loss" in rows:
        losses = rows.groupby("arm")["train_loss"].mean()
        words.append(
            "final training loss "
            + ", ".join(f"{a} {losses[a]:.2f}" for a in arms if a in losses)
        )
    return "; ".join(words)


def _with_regime(effect: Effect, regime: str) -> Effect:
    return dataclasses.replace(
        effect, label=f"{effect.label} ({regime})", regime=regime
    )


def _n1_gate(results: pd.DataFrame) -> list[Effect]:
    """The learned gate minus the Random Selector on the paper's dataset (CIFAR-10, else its
    stand-in) and on a stationary task (real MNIST), where the set has one."""
    best = _gate_best(results)
    arms = ("autonorm", "autonorm_random")
    tasks = [_first(best, *CIFAR10)]
    tasks += [d for d in STATIONARY if d in set(best["data"]) and d not in tasks][:1]
    return [
        _with_regime(_gate_diff(best, d, *arms), _regime(results, best, d, *arms))
        for d in tasks
    ]


def _n2_gate(results: pd.DataFrame) -> list[Effect]:
    """The gate trained with the exact gradient minus the Gumbel-Softmax one, the forward
    noise unchanged (the ``autonorm_exact`` control), per task: test accuracy."""
    best = _gate_best(results)
    tasks = sorted(set(best.loc[best["arm"] == "autonorm_exact", "data"]))
    if not tasks:
        raise Unmeasurable("no runs of autonorm_exact (the exact-gradient control)")
    return [_gate_diff(best, data, "autonorm_exact", "autonorm") for data in tasks]


def _n3_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    data = _first(best, *CIFAR10)
    regime = _regime(results, best, data, "autonorm_s", "frozen_ln", "autonorm")
    return [
        _with_regime(_gate_diff(best, data, "autonorm_s", "frozen_ln"), regime),
        _with_regime(_gate_diff(best, data, "autonorm_s", "autonorm"), regime),
    ]


def _n5_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    found = [d for d in ("mnist", "fashion_mnist") if d in set(best["data"])]
    if not found:
        raise Unmeasurable("no MNIST-like dataset in this set")
    arms = ("autonorm_s", "frozen_ln")
    return [
        _with_regime(_gate_diff(best, d, *arms), _regime(results, best, d, *arms))
        for d in found
    ]


def _n13_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    tasks = sorted(set(best.loc[best["arm"] == "autonorm_hard", "data"]))
    if not tasks:
        raise Unmeasurable("no runs of autonorm_hard")
    return [
        _gate_diff(best, data, "autonorm", "autonorm_hard", "val_curve_mean")
        for data in tasks
    ]


def _n14_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    present = set(best["data"])
    if {"cifar100", "cifar10"} <= present:
        pairs = [
            ("cifar100", "cifar10"),
            *[("cifar10", d) for d in ("mnist", "fashion_mnist") if d in present],
        ]
    elif {"mnist_restyled", "mnist"} <= present:
        pairs = [("mnist_restyled", "mnist")]
    else:
        raise Unmeasurable("needs a diverse and a stationary task")
    return [
        Effect(
            f"lead of autonorm_s over frozen_ln on {a} - on {b}",
            paired_differences(_gate_lead(best, a), _gate_lead(best, b)),
            data=(a, b),
            items=_lead_items(best, a, b, by="arm"),
            item_var=_leads_item_variance(best, a, b, pairing_item_variance),
            item_level=_leads_item_variance(best, a, b, item_level_variance),
        )
        for a, b in pairs
    ]


def _leads_item_variance(
    best: pd.DataFrame, a: str, b: str, variance: Callable[..., float | None]
) -> float | None:
    """The test sets' variance of (autonorm_s - frozen_ln on ``a``) - (the same on ``b``),
    measured item by item from the runs' hits by ``variance`` (the paired variance, or its
    item-level share): the two tasks' test sets are drawn apart, so their variances add
    (None where a run lacks its hits)."""
    found = [
        variance(best, "autonorm_s", "frozen_ln", by="arm", within={"data": data})
        for data in (a, b)
    ]
    return None if None in found else float(sum(found))


# ---------------------------------------------------------------------- the claims


_N = "II"

declare(
    id="N1",
    part=_N,
    kind="empirical",
    sentence="On stationary vision, the learned gate (AutoNorm, unfrozen) does worse than the "
    "Random Selector: the stabilisation bottleneck.",
    chapter=11,
    paper={"AutoNorm (CIFAR-10)": 84.35, "Random": 85.48},
    datasets=("cifar10",),
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n1_gate,
        rule=Directional(-1),
        says="autonorm minus autonorm_random test accuracy, paired by seed, lr chosen on val, "
        "on CIFAR-10 when present (else its stand-in, the restyled digits) and on a "
        "stationary task (real MNIST); trained past the plateau, the short budget a "
        "sensitivity",
    ),
)
declare(
    id="N2",
    part=_N,
    kind="empirical",
    sentence="The cause: the Gumbel-Softmax gate's gradient variance is high, so gates cannot "
    "specialise before the backbone's features mature.",
    chapter=11,
    test=Test(
        experiment="gate_bottleneck",
        quantity=_n2_gate,
        rule=Directional(+1),
        says="the gate trained with the exact gradient of its expected (linearised) loss "
        "minus the Gumbel-Softmax gradient, the same sampled gate in the forward pass, test "
        "accuracy paired by seed, each at its lr chosen on val, per task: if the gradient's "
        "noise is the cause, removing it alone helps",
    ),
)
declare(
    id="N3",
    part=_N,
    kind="empirical",
    sentence="AutoNorm-S recovers and leads on CIFAR-10.",
    chapter=12,
    paper={
        "AutoNorm-S": 86.35,
        "AutoNorm-S CI": 0.22,
        "FrozenLN": 82.97,
        "AdaNorm": 84.20,
    },
    datasets=("cifar10",),
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n3_gate,
        rule=Directional(+1),
        says=f"autonorm_s (the paper's rule, eps_H {EPS_H:g}, decided after warm-up) minus "
        "frozen_ln and minus autonorm, paired by seed, on CIFAR-10 when present, else the "
        "restyled (diverse) digits; trained past the plateau, the short budget (the "
        "freeze at a fixed epoch) a sensitivity",
    ),
)
declare(
    id="N4",
    part=_N,
    kind="empirical",
    sentence="CIFAR-100: AutoNorm-S has its largest vision lead.",
    chapter=15,
    paper={"AutoNorm-S": 67.15, "FrozenLN": 64.82},
    datasets=("cifar100",),
    test=Test(
        experiment="autonorm_vision",
        quantity=_n4,
        rule=Directional(+1),
        says="lead over frozen_ln on CIFAR-100 minus the next largest vision lead",
        min_profile="standard",
    ),
)
declare(
    id="N5",
    part=_N,
    kind="empirical",
    sentence="MNIST and Fashion-MNIST: no real gain (within the CI, or FrozenLN ahead).",
    chapter=12,
    paper={
        "MNIST AutoNorm-S": 99.18,
        "MNIST CI": 0.10,
        "MNIST FrozenLN": 98.82,
        "MNIST AdaNorm": 98.95,
        "F-MNIST AutoNorm-S": 92.95,
        "F-MNIST FrozenLN": 93.12,
        "F-MNIST AdaNorm": 92.48,
    },
    datasets=("mnist", "fashion_mnist"),
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n5_gate,
        rule=AtLeast(0.005, direction=-1),
        says="autonorm_s (decided after warm-up) minus frozen_ln on MNIST-like data; no gain "
        "beyond 0.005 (half an accuracy point); trained past the plateau, the short "
        "budget a sensitivity",
    ),
)
declare(
    id="N6",
    part=_N,
    kind="empirical",
    sentence="SVHN: AdaNorm is best.",
    chapter=15,
    paper={"AdaNorm": 91.10, "FrozenLN": 90.37, "AutoNorm-S": 89.38},
    datasets=("svhn",),
    test=Test(
        experiment="autonorm_vision",
        quantity=_on("svhn", "adanorm", [n for n in PART2 if n != "adanorm"]),
        rule=Directional(+1),
        says="adanorm minus the strongest other normaliser (chosen on val) on SVHN",
        min_profile="standard",
    ),
)
declare(
    id="N7",
    part=_N,
    kind="empirical",
    sentence="AutoNorm-S is more robust to corruption, significantly (p < 0.05).",
    chapter=15,
    paper={"AutoNorm-S CIFAR-10-C": 72.8, "FrozenLN": 68.2, "AdaNorm": 70.8},
    datasets=("cifar10_c",),
    test=Test(
        experiment="autonorm_robustness",
        quantity=_n7,
        rule=Directional(+1),
        says="the drop under corruption (clean accuracy minus mean corruption accuracy, every "
        "corruption and severity weighted alike; clean training), frozen_ln's minus "
        "autonorm_s's, paired by seed at the lr chosen on clean val; clean accuracies beside it",
    ),
)
declare(
    id="N8",
    part=_N,
    kind="empirical",
    sentence="PTB POS tagging: AutoNorm-S ahead (p < 0.01), lower perplexity.",
    chapter=13,
    paper={
        "AutoNorm-S": 97.42,
        "FrozenLN": 96.80,
        "AdaNorm": 97.15,
        "FiLM": 96.72,
        "AutoNorm-S ppl": 38.6,
        "FrozenLN ppl": 41.9,
    },
    datasets=("ptb_pos",),
    test=Test(
        experiment="autonorm_language",
        quantity=_versus(
            "ptb_pos", "autonorm_s", ["frozen_ln"], what=" token accuracy"
        ),
        rule=Directional(+1),
        says="autonorm_s minus frozen_ln token accuracy, paired by seed at the lr chosen on "
        "val (the perplexity half: chapter 13's bound)",
    ),
)
declare(
    id="N9",
    part=_N,
    kind="empirical",
    sentence="SST-2: AutoNorm-S ahead.",
    chapter=13,
    paper={"AutoNorm-S": 91.25, "FrozenLN": 89.42, "AdaNorm": 90.15, "FiLM": 88.95},
    datasets=("sst2",),
    test=Test(
        experiment="autonorm_language",
        quantity=_versus("sst2", "autonorm_s", ["frozen_ln"], what=" accuracy"),
        rule=Directional(+1),
        says="autonorm_s minus frozen_ln sentence accuracy, paired by seed at the lr chosen "
        "on val",
    ),
)
declare(
    id="N10",
    part=_N,
    kind="empirical",
    sentence="Language gate entropy stays high for longer than vision's.",
    chapter=13,
    datasets=("ptb_pos", "sst2", "mnist"),
    test=Test(
        experiment="autonorm_gates",
        quantity=_n10,
        rule=Directional(+1),
        says="learned AutoNorm, one budget: mean gate entropy over layers and epochs, and the gate entropy "
        "at matched progress (the first epoch at 80 % of the way from chance to the run's best validation "
        "accuracy), each language task minus the image task, seeds paired by index (independent runs)",
    ),
)
declare(
    id="N11",
    part=_N,
    kind="empirical",
    sentence="Per-layer gates: vision collapses to LayerNorm quickly; language keeps a mixed "
    "gate, deeper layers preferring DyT.",
    chapter=13,
    datasets=("ptb_pos", "sst2", "mnist"),
    test=Test(
        experiment="autonorm_gates",
        quantity=_n11,
        rule=Directional(+1),
        says=f"at the last epoch: image p_LN - 1/2; per language task, gate entropy - eps_H ({EPS_H}) and the "
        "slope of p_DyT over relative depth; every part must hold",
    ),
)
declare(
    id="N12",
    part=_N,
    kind="empirical",
    sentence="Tabular regression: negligible differences.",
    chapter=14,
    paper={
        "California AutoNorm-S": 0.4892,
        "California FrozenLN": 0.4905,
        "Energy AutoNorm-S": 22.75,
        "Energy AdaNorm": 22.78,
        "Energy FiLM": 22.82,
    },
    datasets=("california_housing", "energy_efficiency"),
    test=Test(
        experiment="autonorm_tabular",
        quantity=_n12,
        rule=Equivalent(0.02),
        says="relative RMSE difference (autonorm_s - frozen_ln)/frozen_ln; equivalent within ±2 %",
    ),
)
declare(
    id="N13",
    part=_N,
    kind="empirical",
    sentence="Hard (straight-through) gating converges slower than soft gating.",
    chapter=11,
    test=Test(
        experiment="gate_bottleneck",
        quantity=_n13_gate,
        rule=Directional(+1),
        says="soft minus hard gate: mean validation accuracy over the epochs (area under the learning curve), "
        "paired by seed",
    ),
)
declare(
    id="N14",
    part=_N,
    kind="empirical",
    sentence="Adaptive selection helps only when features are non-stationary: the lead orders "
    "CIFAR-100 > CIFAR-10 > MNIST / Fashion-MNIST.",
    chapter=12,
    datasets=("cifar100", "cifar10", "mnist", "fashion_mnist"),
    test=Test(
        experiment="gate_bottleneck",
        quantity=_n14_gate,
        rule=Directional(+1),
        says="lead of autonorm_s over frozen_ln on the more diverse data minus on the less diverse, paired by "
        "seed (CIFAR-100 > CIFAR-10 > MNIST on a GPU; restyled > plain digits on the CPU)",
    ),
)
