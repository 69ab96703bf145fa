"""Part II's quantities on the gate studies (chapters 11-13, N1-N3, N5, N10, N11, N13, N14):
the gates' entropy and weights per task, and the arms of AutoNorm's gate compared.

The gate studies compare arms (the ``arm`` axis of :mod:`normlab.experiments.gate_study`,
AutoNorm-S composed from the ``autonorm`` and ``freeze_at_<T>`` runs of the same set, or
deciding after warm-up), each at its learning rate chosen on validation, through
:func:`normlab.claims.paired`; a verdict's label names its regime: the epochs, the
decision to freeze and each arm's final training loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..gates import READY_ARM as READY
from ..paper import EPS_H
from ..stats import paired_differences
from .pairing import (
    chance_level,
    difference,
    item_level_variance,
    paired,
    per_seed,
)
from .pairing import (
    paired_item_variance as pairing_item_variance,
)
from .part2_tasks import _lead_items, _named
from .registry import Arm, Effect, Unmeasurable

__all__ = [
    "GATE_VISION",
    "LANGUAGE",
    "MIN_GATE_DEPTH",
    "CIFAR10",
]

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
    progress (``entropy_at_progress``: :data:`normlab.gate_tables.PROGRESS`),
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
    arms = ("autonorm_exact", "autonorm")
    return [
        _with_regime(_gate_diff(best, d, *arms), _regime(results, best, d, *arms))
        for d in tasks
    ]


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
    arms = ("autonorm", "autonorm_hard")
    return [
        _with_regime(
            _gate_diff(best, d, *arms, "val_curve_mean"),
            _regime(results, best, d, *arms),
        )
        for d in tasks
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
    arms = ("autonorm_s", "frozen_ln")
    return [
        _with_regime(
            Effect(
                f"lead of autonorm_s over frozen_ln on {a} - on {b}",
                paired_differences(_gate_lead(best, a), _gate_lead(best, b)),
                data=(a, b),
                items=_lead_items(best, a, b, by="arm"),
                item_var=_leads_item_variance(best, a, b, pairing_item_variance),
                item_level=_leads_item_variance(best, a, b, item_level_variance),
            ),
            f"{a}: {_regime(results, best, a, *arms)}",
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
