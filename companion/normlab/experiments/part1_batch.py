"""The batch-size prediction (chapter 7, claims A12 and A13), measured as the large-batch
literature measures it: the optimiser steps to a target accuracy against the batch size.

Shallue et al. (2019) and McCandlish et al. (2018) ask what a larger batch buys: the steps a
network needs to reach a target validation accuracy, each batch size at its own best
learning rate. Up to a critical batch size the steps halve with every doubling of the batch
(*perfect scaling*: the training samples needed stay the same); beyond it they stop halving
and the samples needed grow. Measured in samples (or epochs) to the target, perfect scaling
is a flat line and its end is where the line starts to rise.

The budget conventions (the grid's ``budget`` axis):

- ``to_target`` (primary): a run trains until its validation accuracy first reaches
  ``target`` (measured every ``ceil(eval_samples / batch_size)`` steps, by
  :class:`normlab.training.TargetStop`), or until a cap of ``cap_epochs`` passes over the
  data, and at least ``cap_steps`` steps. It records ``steps_to_target``, NaN for a run the
  cap stopped first: a *censored* run, whose steps are only known to exceed the cap.
- ``fixed_epochs`` (a sensitivity, the convention of the earlier sets): ``epochs`` passes
  over the data, whatever the batch size, and the test accuracy at the end.

The analysis (each cell's rate, the scaling slopes, the critical batch size) is
:mod:`normlab.analysis.batch`. Every run also measures the update kernel's cross-sample
coupling on the trained net (:func:`normlab.divergence.kernel_coupling`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..divergence import kernel_coupling
from ..training import TargetStop
from .grid import Grid
from .part1 import (
    BOOK_NORMALISERS,
    NORMALISERS,
    OPTIMIZERS,
    VERDICT_INIT,
    cifar_settings,
    config_splits,
    digits_settings,
    seeded_mlp,
)
from .registry import Experiment, RunContext, register_experiment
from .runner import train_and_test

__all__ = [
    "BATCH_BUDGETS",
    "BATCH_SIZE",
    "CENTRES",
    "CPU_ADAM_CENTRES",
    "CPU_ADAM_WIDER",
    "CPU_PRIMARY_SEEDS",
    "CPU_SEEDS",
    "CPU_SGD_CENTRES",
    "CPU_SIZES",
    "CPU_WIDER",
    "CPU_WIDER_EPOCHS",
    "DEFAULT_CENTRES",
    "GPU_RATES",
    "LADDER",
    "PRIMARY",
    "QUICK_CENTRES",
    "QUICK_SIZES",
    "SENSITIVITY_SIZES",
    "WIDER",
    "cap_steps",
    "eval_every",
    "rates_for",
    "train_batch_run",
]

#: The budget conventions: the primary one first.
BATCH_BUDGETS: tuple[str, ...] = ("to_target", "fixed_epochs")
#: The primary specification: the optimiser the derivation assumes, the paper's author's
#: initialisation and the steps-to-target budget; the other values are sensitivities.
PRIMARY: dict[str, str] = {
    "optimizer": "sgd",
    "init": VERDICT_INIT,
    "budget": BATCH_BUDGETS[0],
}
#: Seeds of the cpu set: the sensitivities at CPU_SEEDS, the primary specification at
#: CPU_PRIMARY_SEEDS, the most A12's and A13's plans (claims.plans) asked for from the
#: 5-seed pilot's spread (A13: 10).
CPU_SEEDS = 5
CPU_PRIMARY_SEEDS = 10


# --------------------------------------------------------------------------- runs


def cap_steps(config: Mapping[str, Any], n_train: int) -> int:
    """The step cap of a ``to_target`` run: ``cap_epochs`` passes over the ``n_train``
    samples, and at least ``cap_steps`` steps (a large batch takes few steps an epoch)."""
    per_epoch = n_train // config["batch_size"]
    return max(int(config["cap_steps"]), math.ceil(config["cap_epochs"] * per_epoch))


def eval_every(config: Mapping[str, Any]) -> int:
    """Steps between two measurements of the validation accuracy: one every
    ``eval_samples`` training samples, at least one a step."""
    return max(1, math.ceil(config["eval_samples"] / config["batch_size"]))


def train_batch_run(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """One run of the batch-size experiment: an :func:`~normlab.models.mlp_for` MLP trained
    under the ``budget`` convention (module docstring), tested, then measured with
    :func:`~normlab.divergence.kernel_coupling` on its first ``batch_size`` training
    samples. A ``to_target`` run's record adds ``steps_to_target`` (NaN when censored),
    ``reached`` and ``epochs_to_target``."""
    splits = config_splits(config)
    train = splits["train"]
    model = seeded_mlp(config, train)
    batch_size, budget = config["batch_size"], config["budget"]
    settings = {
        "batch_size": batch_size,
        "lr": config["lr"],
        "optimizer": config["optimizer"],
        "schedule": config["schedule"],
        "seed": config["seed"],
    }
    if budget == "to_target":
        cap = cap_steps(config, len(train))
        stop = TargetStop(splits["val"], config["target"], eval_every(config))
        epochs = math.ceil(cap / (len(train) // batch_size))
        record = train_and_test(
            model,
            splits,
            ctx,
            epochs=epochs,
            max_steps=cap,
            callbacks=[stop],
            **settings,
        )
        steps = math.nan if stop.reached_at is None else float(stop.reached_at)
        record["metrics"].update(
            steps_to_target=steps,
            reached=stop.reached_at is not None,
            epochs_to_target=steps * batch_size / len(train),
        )
    elif budget == "fixed_epochs":
        record = train_and_test(model, splits, ctx, epochs=config["epochs"], **settings)
    else:
        raise ValueError(
            f"budget={budget!r} is not known; expected one of {', '.join(BATCH_BUDGETS)}"
        )
    x = train.x[:batch_size].to(next(model.parameters()).device)
    record["metrics"].update(kernel_coupling(model, x))
    return record


# ---------------------------------------------------------------------- the grid

#: Learning rates a half-decade apart; each cell tries three consecutive ones.
LADDER: tuple[float, ...] = (
    0.0001,
    0.0003,
    0.001,
    0.003,
    0.01,
    0.03,
    0.1,
    0.3,
    1.0,
    3.0,
    10.0,
    30.0,
)
CPU_SIZES = (4, 8, 16, 32, 64, 128, 256)  # a factor of 64 in doublings
# The sensitivities' batch sizes: the same factor of 64, in steps of four.
SENSITIVITY_SIZES = (4, 16, 64, 256)
# The live run's: the same factor on the 8x8 digits, at a third of the steps.
QUICK_SIZES = (8, 64, 512)

# The centre of each cell's three rates, per normaliser at each batch size: the best of a
# one-seed pilot (plain SGD, real MNIST, 85 % validation accuracy). The best rate grows with
# the batch up to about where perfect scaling ends, as Shallue et al. (2019) found;
# affine-like's lies a decade above the others' (no |x|^2 + 1 amplification of its step).
CPU_SGD_CENTRES: dict[str, tuple[float, ...]] = {
    "none": (0.1, 0.1, 0.1, 0.3, 0.3, 0.3, 0.3),
    "batchnorm": (0.1, 0.1, 0.3, 0.3, 1.0, 1.0, 1.0),
    "layernorm": (0.03, 0.1, 0.1, 0.1, 0.3, 0.3, 0.3),
    "rmsnorm": (0.1, 0.1, 0.1, 0.3, 0.3, 0.3, 0.3),
    "l2": (0.1, 0.3, 0.3, 1.0, 1.0, 1.0, 1.0),
    "norm_like": (0.1, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3),
    "affine_like": (1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 3.0),
}
# The 8x8 digits (quick): |x|^2 + 1 is about 16 there, not 10^2, so the rates are larger.
QUICK_CENTRES: dict[str, tuple[float, ...]] = {
    "none": (0.3, 0.3, 0.3),
    "batchnorm": (0.3, 1.0, 1.0),
    "layernorm": (0.3, 0.3, 0.3),
    "rmsnorm": (0.3, 0.3, 0.3),
    "l2": (0.3, 1.0, 1.0),
    "norm_like": (0.3, 1.0, 1.0),
    "affine_like": (1.0, 3.0, 3.0),
}
# Adam, a sensitivity at SENSITIVITY_SIZES: the best of a one-seed pilot over 3e-4 .. 1e-2
# (real MNIST, 85 % validation accuracy, Xavier-normal weights); Adam's best rate grows
# with the batch as SGD's does, but spans a decade less across the normalisers.
CPU_ADAM_CENTRES: dict[str, tuple[float, ...]] = {
    "none": (0.003, 0.003, 0.01, 0.01),
    "batchnorm": (0.003, 0.01, 0.01, 0.01),
    "layernorm": (0.001, 0.003, 0.003, 0.01),
    "rmsnorm": (0.001, 0.003, 0.003, 0.01),
    "l2": (0.003, 0.01, 0.01, 0.01),
    "norm_like": (0.003, 0.01, 0.01, 0.01),
    "affine_like": (0.003, 0.01, 0.01, 0.01),
}
#: The normaliser whose centres a name without a pilot's takes: the plain net's, so a newly
#: registered normaliser starts where an uncorrected layer trains.
DEFAULT_CENTRES = "none"
#: Per (profile, optimiser): the batch sizes and each normaliser's centre rate at each.
CENTRES: dict[tuple[str, str], tuple[tuple[int, ...], dict[str, tuple[float, ...]]]] = {
    ("cpu", "sgd"): (CPU_SIZES, CPU_SGD_CENTRES),
    ("cpu", "adam"): (SENSITIVITY_SIZES, CPU_ADAM_CENTRES),
    ("quick", "sgd"): (QUICK_SIZES, QUICK_CENTRES),
}


# The cells whose rate the set's first three seeds chose at the edge of its three (under
# either initialisation), and which edge: the steps-to-target runs of such a cell also try
# the next rate of the ladder beyond it, so that the search brackets the best rate; a cell
# whose choice stayed at the new edge tries the next again (the count of rates added);
# three cells were added when the default initialisation chose their edge (issue 48).
CPU_WIDER: dict[tuple[str, int], int] = {
    ("affine_like", 4): +1,
    ("affine_like", 16): -1,
    ("affine_like", 64): +1,
    ("affine_like", 128): +1,
    ("affine_like", 256): +1,
    ("batchnorm", 4): -1,
    ("batchnorm", 16): -1,
    ("batchnorm", 64): -1,
    ("batchnorm", 256): -1,
    ("l2", 4): +1,
    ("l2", 256): +1,
    ("layernorm", 64): -1,
    ("layernorm", 256): -1,
    ("none", 4): -1,
    ("none", 16): +1,
    ("norm_like", 64): +1,
    ("norm_like", 128): +1,
    ("norm_like", 256): +1,
    ("rmsnorm", 4): -1,
    ("rmsnorm", 32): -1,
    ("rmsnorm", 64): -1,
}
# The same under the fixed-epochs budget (plain SGD, the paper's initialisation): the cells
# whose pilot chose the edge of their three rates on validation accuracy (issue 48).
CPU_WIDER_EPOCHS: dict[tuple[str, int], int] = {
    ("affine_like", 4): -1,
    ("affine_like", 256): -1,
    ("batchnorm", 4): -1,
    ("batchnorm", 64): -2,
    ("l2", 64): -1,
    ("l2", 256): -1,
    ("layernorm", 64): -1,
    ("none", 4): -1,
    ("none", 16): +1,
    ("norm_like", 16): -1,
    ("norm_like", 256): -1,
    ("rmsnorm", 4): -1,
    ("rmsnorm", 16): +1,
    ("rmsnorm", 64): -1,
}
# Adam (a sensitivity, steps to the target): the cells whose choice was at the edge.
CPU_ADAM_WIDER: dict[tuple[str, int], int] = {
    ("affine_like", 4): +1,
    ("affine_like", 64): +2,
    ("affine_like", 256): +2,
    ("l2", 256): +1,
    ("layernorm", 4): +1,
    ("norm_like", 16): -1,
    ("norm_like", 256): +1,
}
#: Per (profile, optimiser, budget): the cells that try rates beyond their three, and how
#: many beyond which edge (+ above, - below).
WIDER: dict[tuple[str, str, str], dict[tuple[str, int], int]] = {
    ("cpu", "sgd", "to_target"): CPU_WIDER,
    ("cpu", "sgd", "fixed_epochs"): CPU_WIDER_EPOCHS,
    ("cpu", "adam", "to_target"): CPU_ADAM_WIDER,
}


def rates_for(
    profile: str,
    optimizer: str,
    normaliser: str,
    batch_size: int,
    *,
    budget: str | None = None,
) -> tuple[float, ...]:
    """The rates a cell of ``profile``'s grid tries: its centre (:data:`CENTRES`; a name
    no pilot measured takes :data:`DEFAULT_CENTRES`') and the rates a half-decade either
    side of it; with a ``budget``, also the rates beyond the edge that :data:`WIDER` names
    for the cell under that budget, if it names any."""
    sizes, table = CENTRES[profile, optimizer]
    centres = table.get(normaliser, table[DEFAULT_CENTRES])
    centre = LADDER.index(centres[sizes.index(batch_size)])
    wider = WIDER.get((profile, optimizer, budget or ""), {})
    side = wider.get((normaliser, batch_size), 0)
    return LADDER[centre - 1 - max(0, -side) : centre + 2 + max(0, side)]


def _cpu_point(config: Mapping[str, Any]) -> bool:
    """The cpu set: the primary specification (:data:`PRIMARY`) at every batch size, and
    one sensitivity at a time at :data:`SENSITIVITY_SIZES`: the package's default
    initialisation and fixed epochs; each cell at its own rates (more where :data:`WIDER`
    says)."""
    off = [k for k, v in PRIMARY.items() if config[k] != v]
    if len(off) > 1 or (off and config["batch_size"] not in SENSITIVITY_SIZES):
        return False
    optimizer, name = config["optimizer"], config["normaliser"]
    rates = rates_for(
        "cpu", optimizer, name, config["batch_size"], budget=config["budget"]
    )
    return config["lr"] in rates


def _cpu_seeds(config: Mapping[str, Any]) -> int:
    """The seeds of a cpu cell: more under the primary specification, which the verdicts
    read, than under a sensitivity."""
    primary = all(config[k] == v for k, v in PRIMARY.items())
    return CPU_PRIMARY_SEEDS if primary else CPU_SEEDS


def _quick_point(config: Mapping[str, Any]) -> bool:
    name, batch_size = config["normaliser"], config["batch_size"]
    return config["lr"] in rates_for("quick", "sgd", name, batch_size)


def _ladder_union(
    profile: str, optimizers: Sequence[str], names: Sequence[str]
) -> list[float]:
    """Every rate some cell of ``profile``'s grid over ``names`` tries."""
    return sorted(
        {
            lr
            for o in optimizers
            for n in names
            for b in CENTRES[profile, o][0]
            for budget in BATCH_BUDGETS
            for lr in rates_for(profile, o, n, b, budget=budget)
        }
    )


# The GPU profiles' rates per optimiser: decades over each one's range.
GPU_RATES: dict[str, tuple[float, ...]] = {
    "sgd": (0.01, 0.1, 1.0, 10.0),
    "adam": (0.0001, 0.001, 0.01),
}


def _gpu_point(config: Mapping[str, Any]) -> bool:
    """Each optimiser's own rates; Adam under the primary budget only."""
    if config["optimizer"] == "adam" and config["budget"] != PRIMARY["budget"]:
        return False
    return config["lr"] in GPU_RATES[config["optimizer"]]


def _gpu_grid(profile: str, sizes: list[int], epochs: int, seeds: int) -> Grid:
    """A GPU profile's grid on CIFAR-10: both conventions with SGD, Adam to the target."""
    return Grid(
        axes={
            "optimizer": list(GPU_RATES),
            "budget": list(BATCH_BUDGETS),
            "normaliser": list(BOOK_NORMALISERS),
            "batch_size": sizes,
            "lr": sorted({lr for rates in GPU_RATES.values() for lr in rates}),
        },
        fixed={
            **cifar_settings(profile=profile),
            "init": VERDICT_INIT,
            "activation": "tanh",
            "width": 256,
            "depth": 4,
            "epochs": epochs,
            "target": 0.45,
            "eval_samples": 1024,
            "cap_epochs": 4 * epochs,
            "cap_steps": 2000,
        },
        seeds=seeds,
        where=_gpu_point,
    )


BATCH_SIZE = register_experiment(
    Experiment(
        name="batch_size",
        title="The batch-size prediction: steps to a target accuracy",
        chapter="7",
        select="lr",
        profiles={
            # quick: the 8x8 digits, to 75 % validation accuracy: the machinery, live.
            "quick": Grid(
                axes={
                    "normaliser": list(NORMALISERS),
                    "batch_size": list(QUICK_SIZES),
                    "lr": _ladder_union("quick", ["sgd"], NORMALISERS),
                },
                fixed={
                    **digits_settings(profile="quick"),
                    "optimizer": "sgd",
                    "init": VERDICT_INIT,
                    "budget": "to_target",
                    "activation": "tanh",
                    "width": 32,
                    "depth": 2,
                    "target": 0.75,
                    "eval_samples": 32,
                    "cap_epochs": 1,
                    "cap_steps": 60,
                    "epochs": 1,
                },
                seeds=3,
                where=_quick_point,
            ),
            # cpu: real MNIST (5,000 digits), to 85 % validation accuracy (these nets end
            # near 93 %); the primary specification at seven batch sizes, the sensitivities
            # (the default init, Adam, fixed epochs; one at a time) at four.
            "cpu": Grid(
                axes={
                    "optimizer": list(OPTIMIZERS),
                    "init": [VERDICT_INIT, "default"],
                    "budget": list(BATCH_BUDGETS),
                    "normaliser": list(BOOK_NORMALISERS),
                    "batch_size": list(CPU_SIZES),
                    "lr": _ladder_union("cpu", OPTIMIZERS, BOOK_NORMALISERS),
                },
                fixed={
                    **digits_settings(profile="cpu"),
                    "source": "mnist_5k",
                    "activation": "tanh",
                    "width": 64,
                    "depth": 2,
                    "target": 0.85,
                    "eval_samples": 32,
                    "cap_epochs": 2,
                    "cap_steps": 600,
                    "epochs": 2,
                },
                seeds=CPU_PRIMARY_SEEDS,
                where=_cpu_point,
                seeds_of=_cpu_seeds,
            ),
            # standard: one GPU in about half an hour; paper: the full sweep.
            "standard": _gpu_grid("standard", [32, 128, 512, 2048], 2, 3),
            "paper": _gpu_grid(
                "paper", [16, 32, 64, 128, 256, 512, 1024, 2048, 4096], 20, 5
            ),
        },
        run_one=train_batch_run,
        # standard/paper: about 1.6 ms per step on one GPU, plus the evaluations.
        seconds_per_run={"quick": 0.2, "cpu": 1.0, "standard": 2.0, "paper": 40.0},
        notes="SGD without momentum; Adam as a sensitivity. Primary: steps to a target "
        "validation accuracy, the rate chosen per cell as the one with the fewest steps among those at "
        "which every seed reached the target; fixed epochs as a sensitivity (rate chosen on val "
        "accuracy). Each run also measures the update kernel's cross-sample coupling.",
    )
)
