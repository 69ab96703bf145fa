"""Part I experiment of chapter 8: PatchNorm against the usual normalisers in small CNNs.

The nets are :func:`normlab.models.cnn_for` CNNs; ``norm_like`` and ``affine_like`` are
PatchNorm in its two modes. The learning rate is chosen per configuration on the validation
split, as in chapters 6 and 7. Each run also measures, on the trained net's real
activations, how much of a convolution's update kernel couples *different positions of one
image* (:func:`position_coupling`): the share the single-sample correction cannot remove.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from .._runtime import seed_everything
from ..data import DataSplit
from ..divergence import layer_inputs, offdiagonal_share, tangent_kernel
from ..functional import PATCHNORM_FLOOR, patch_sq_norm
from ..layers import PatchNormConv2d
from ..models.cnn import CNN, cnn_for
from ..normalisers import conv_names
from .grid import Grid
from .part1 import cifar_settings, config_splits, digits_settings, own_rates
from .registry import Experiment, RunContext, register_experiment
from .runner import train_and_test, train_and_test_population

__all__ = [
    "train_cnn_population",
    "OLD_FLOOR",
    "blank_patches",
    "init_gradients",
    "CONV_NAMES",
    "BOOK_CONV_NAMES",
    "COUPLING_IMAGES",
    "position_coupling",
    "train_cnn",
    "CPU_CNN_RATES",
    "CNN_NORMALISERS",
]

#: Every registered name with a ``conv`` pair (:func:`normlab.normalisers.conv_names`): the
#: quick grid, which a reader runs live, sweeps them all.
CONV_NAMES: tuple[str, ...] = conv_names()
#: The names the book's sets compare (cpu, saved with the book; standard and paper): fixed
#: here, so that registering a normaliser changes none of their grids or run ids.
BOOK_CONV_NAMES: tuple[str, ...] = (
    "none",
    "batchnorm",
    "layernorm",
    "rmsnorm",
    "norm_like",
    "affine_like",
)
COUPLING_IMAGES = 4  # images per measurement: the share varies little between digits


def position_coupling(model: CNN, x: torch.Tensor) -> float:
    """Mean off-diagonal share of the kernel over positions, per image and convolution.

    For every convolution of ``model`` and every image of ``x``, the tangent kernel over the
    output positions of that one image (:func:`normlab.divergence.tangent_kernel`) is built
    from the real input the layer receives; :func:`~normlab.divergence.offdiagonal_share`
    gives the part of each position's update that comes from the other positions' errors.
    A fully-connected layer has share 0 for one sample.
    """
    convs = model.convolutions()
    inputs = layer_inputs(model, convs, x)
    shares = [
        offdiagonal_share(tangent_kernel(conv, inp[i : i + 1]).double())
        for conv, inp in zip(convs, inputs)
        for i in range(inp.shape[0])
    ]
    return float(np.mean(shares))


# The floor norm-mode PatchNorm had before issue 35: a blank patch passed back W^T g / 1e-12.
OLD_FLOOR = 1e-12


def _seeded_cnn(config: Mapping[str, Any], normaliser: str, train: DataSplit) -> CNN:
    """The untrained net of a run ``config`` with ``normaliser`` for the data ``train``: the
    global seed set to the run's, then :func:`~normlab.models.cnn_for` with its shape."""
    seed_everything(config["seed"])
    return cnn_for(
        normaliser,
        in_channels=train.x.shape[1],
        num_classes=train.num_classes,
        channels=config["channels"],
        depth=config["depth"],
        activation=config["activation"],
        init=config.get("init", "default"),
        stride=config.get("stride", 1),
    )


def _init_model(
    config: Mapping[str, Any], normaliser: str, floor: float | None = None
) -> CNN:
    """The untrained net of a run ``config`` with ``normaliser``; PatchNorm's norm-mode
    floor set to ``floor`` where given."""
    train = config_splits(config)["train"]
    model = _seeded_cnn(config, normaliser, train)
    for conv in model.convolutions():
        if floor is not None and isinstance(conv, PatchNormConv2d):
            conv.eps = floor
    return model


def init_gradients(
    config: Mapping[str, Any],
    floors: Sequence[float] = (OLD_FLOOR, PATCHNORM_FLOOR),
    *,
    images: int = 64,
) -> list[dict[str, Any]]:
    """Each parameter's gradient norm at initialisation, on the first ``images`` training
    images of a run ``config`` (its data, shape, initialisation and seed).

    One record per arm and parameter (``pd.DataFrame`` makes them a table): norm-mode
    PatchNorm at each of ``floors``, and affine mode and no normalisation for reference
    (``floor`` NaN). Keys: ``arm`` (e.g. ``"norm_like, floor 1"``), ``normaliser``,
    ``floor``, ``parameter``, ``grad_norm``. With zero biases a blank margin stays exactly 0
    through ``tanh``, so the second convolution sees blank patches, which pass back
    ``W^T g / floor``.
    """
    arms = [("norm_like", float(f)) for f in floors]
    arms += [("affine_like", None), ("none", None)]
    train = config_splits(config)["train"]
    x, y = train.x[:images], train.y[:images]
    rows = []
    for normaliser, floor in arms:
        model = _init_model(config, normaliser, floor)
        F.cross_entropy(model(x), y).backward()
        rows += [
            {
                "arm": normaliser
                if floor is None
                else f"{normaliser}, floor {floor:g}",
                "normaliser": normaliser,
                "floor": np.nan if floor is None else floor,
                "parameter": name,
                "grad_norm": float(p.grad.norm()),
            }
            for name, p in model.named_parameters()
        ]
    return rows


def blank_patches(config: Mapping[str, Any], *, images: int = 64) -> pd.Series:
    """The share of each convolution's patches that are exactly zero at initialisation,
    on the first ``images`` training images of a run ``config`` (index: the layer's
    position among the convolutions, from 1)."""
    model = _init_model(config, "norm_like")
    x = config_splits(config)["train"].x[:images]
    convs = model.convolutions()
    shares = [
        float(
            (patch_sq_norm(inp, c.kernel_size, c.stride, c.padding, c.dilation) == 0)
            .double()
            .mean()
        )
        for c, inp in zip(convs, layer_inputs(model, convs, x), strict=True)
    ]
    return pd.Series(shares, index=range(1, len(convs) + 1), name="blank_share")


def _cnn_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(
        epochs=config["epochs"],
        batch_size=config["batch_size"],
        lr=config["lr"],
        optimizer=config["optimizer"],
        schedule=config["schedule"],
        seed=config["seed"],
    )


def _measure_coupling(train: DataSplit) -> Callable[[nn.Module, dict], None]:
    """Adds a trained model's position coupling to its record."""

    def measure(model: nn.Module, record: dict[str, Any]) -> None:
        x = train.x[:COUPLING_IMAGES].to(next(model.parameters()).device)
        record["metrics"]["position_coupling"] = position_coupling(model, x)

    return measure


def train_cnn(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """One chapter-8 run: a CNN trained with SGD, tested, then its position coupling measured."""
    splits = config_splits(config)
    train = splits["train"]
    model = _seeded_cnn(config, config["normaliser"], train)
    record = train_and_test(model, splits, ctx, **_cnn_settings(config))
    _measure_coupling(train)(model, record)
    return record


def train_cnn_population(
    configs: list[dict[str, Any]], ctx: RunContext
) -> list[dict[str, Any]]:
    """:func:`train_cnn` for configurations that differ only in seed and learning rate,
    trained as one population (:mod:`normlab.population`)."""
    splits = config_splits(configs[0])
    train = splits["train"]
    settings = [_cnn_settings(c) for c in configs]
    models = [_seeded_cnn(c, c["normaliser"], train) for c in configs]
    return train_and_test_population(
        models,
        splits,
        ctx,
        seeds=[s["seed"] for s in settings],
        lrs=[s["lr"] for s in settings],
        measure=_measure_coupling(train),
        **{k: v for k, v in settings[0].items() if k not in ("seed", "lr")},
    )


_SGD_TANH = {"optimizer": "sgd", "activation": "tanh"}
# cpu: half-decades around each normaliser's best rate in a one-seed pilot on real MNIST
# (6 epochs): BatchNorm's and PatchNorm's affine mode lie a half-decade up.
CPU_CNN_RATES: dict[str, tuple[float, ...]] = {
    **{name: (0.03, 0.1, 0.3, 1.0) for name in BOOK_CONV_NAMES},
    "batchnorm": (0.1, 0.3, 1.0, 3.0),
    "affine_like": (0.1, 0.3, 1.0, 3.0),
}


CNN_NORMALISERS = register_experiment(
    Experiment(
        name="cnn_normalisers",
        title="PatchNorm in convolutional nets",
        chapter="8",
        select="lr",
        profiles={
            "quick": Grid(
                axes={"normaliser": list(CONV_NAMES), "lr": [0.1, 0.3, 1.0]},
                fixed={
                    **digits_settings(profile="quick"),
                    **_SGD_TANH,
                    "channels": 8,
                    "depth": 2,
                    "epochs": 2,
                    "batch_size": 64,
                },
                seeds=3,
            ),
            # cpu: real MNIST (5,000 digits, 28x28), 2 x 8 with a stride-2 first convolution
            # (a 14x14 map, a quarter of the cost), 6 epochs at batch 16 (1,122 SGD steps),
            # Xavier-normal weights with zero biases. Eleven seeds: A14's plan (claims.plans)
            # from the nine-seed set's spread.
            "cpu": Grid(
                axes={
                    "normaliser": list(BOOK_CONV_NAMES),
                    "lr": sorted(
                        {lr for rates in CPU_CNN_RATES.values() for lr in rates}
                    ),
                },
                fixed={
                    **digits_settings(profile="cpu"),
                    "source": "mnist_5k",
                    **_SGD_TANH,
                    "init": "xavier_normal",
                    "depth": 2,
                    "channels": 8,
                    "stride": 2,
                    "epochs": 6,
                    "batch_size": 16,
                },
                seeds=11,
                where=own_rates(rates=CPU_CNN_RATES, by="normaliser"),
            ),
            "standard": Grid(
                axes={
                    "depth": [2, 4],
                    "channels": [32, 64],
                    "normaliser": list(BOOK_CONV_NAMES),
                    # half-decades over the paper's range: one GPU in about half an hour
                    "lr": [0.03, 0.3, 3.0],
                },
                fixed={
                    **cifar_settings(profile="standard"),
                    **_SGD_TANH,
                    "epochs": 8,
                    "batch_size": 128,
                },
                seeds=3,
            ),
            "paper": Grid(
                axes={
                    "depth": [2, 3, 4, 6],
                    "channels": [16, 32, 64, 128],
                    "normaliser": list(BOOK_CONV_NAMES),
                    "lr": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0],
                },
                fixed={
                    **cifar_settings(profile="paper"),
                    **_SGD_TANH,
                    "epochs": 50,
                    "batch_size": 128,
                },
                seeds=5,
            ),
        },
        run_one=train_cnn,
        run_population=train_cnn_population,
        # standard/paper: about 1 s per CIFAR-10 epoch on one GPU.
        # cpu: the pilot's median on a 2-core machine shared with two other jobs
        seconds_per_run={"quick": 0.3, "cpu": 11.0, "standard": 8.0, "paper": 60.0},
        notes="SGD; 3x3 convolutions, average pool to 4x4, plain linear head. norm_like/affine_like are "
        "PatchNorm (norm/affine mode; norm mode's floor 1). The lr is chosen per (depth, channels, "
        "normaliser) on the val split. cpu: real MNIST (5,000 digits), a stride-2 first convolution, "
        "1,122 steps per run, Xavier-normal weights.",
    )
)
