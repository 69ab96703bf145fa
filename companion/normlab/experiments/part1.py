"""Part I experiments: Part I's normalisers on fully-connected nets (chapters 6 and 7).

Both experiments choose the learning rate per configuration on the validation split (a
``lr`` axis plus the best-of summary): at one shared learning rate a comparison of
normalisers measures the learning rate instead, since affine-like's best rate is 10-100x
the others' (``shared/REFERENCE.md``). The optimiser is plain SGD in every profile, the
setting of the derivation; chapter 5 discusses momentum and Adam.

Datasets are named here and loaded at run time by :func:`normlab.data.load`: the quick
profile uses scikit-learn's digits (offline), the GPU profiles CIFAR-10.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import pandas as pd

from .. import data
from .._runtime import seed_everything
from ..models.mlp import mlp_for
from ..normalisers import PART1
from .grid import Grid
from .registry import Experiment, RunContext, register_experiment
from .runner import train_and_test

NORMALISERS: tuple[str, ...] = PART1  # the names the grids sweep, from normlab.normalisers
BUDGETS: tuple[str, ...] = ("fixed_epochs", "fixed_steps", "scaled_lr")


@lru_cache(maxsize=2)
def _splits(name: str) -> tuple[data.DataSplit, data.DataSplit, data.DataSplit]:
    """The train, val and test splits of a dataset, loaded once per process."""
    return data.load(name, "train"), data.load(name, "val"), data.load(name, "test")


def train_mlp(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """One Part I run: an :func:`~normlab.models.mlp_for` MLP trained with SGD, then tested.

    The ``budget`` setting fixes what stays constant across batch sizes:
    ``fixed_epochs`` (``epochs`` passes over the data), ``fixed_steps`` (``steps``
    optimiser steps) or ``scaled_lr`` (fixed epochs, the learning rate multiplied by
    ``batch_size / base_batch_size``).
    """
    train, val, test = _splits(config["data"])
    seed_everything(config["seed"])
    model = mlp_for(config["normaliser"], in_features=math.prod(train.x.shape[1:]), num_classes=train.num_classes,
                    width=config["width"], depth=config["depth"], activation=config["activation"])
    budget, batch_size, lr = config["budget"], config["batch_size"], config["lr"]
    epochs, max_steps = config["epochs"], None
    if budget == "fixed_steps":
        max_steps = config["steps"]
        epochs = math.ceil(max_steps / (len(train) // batch_size))
    elif budget == "scaled_lr":
        lr = lr * batch_size / config["base_batch_size"]
    elif budget != "fixed_epochs":
        raise ValueError(f"budget={budget!r} is not known; expected one of {', '.join(BUDGETS)}")
    return train_and_test(model, train, val, test, ctx, epochs=epochs, max_steps=max_steps, batch_size=batch_size,
                          lr=lr, optimizer="sgd", schedule=config["schedule"], seed=config["seed"])


# ------------------------------------------------------------------------- figures


def _fc_figures(results: pd.DataFrame, summary: pd.DataFrame) -> dict[str, Any]:
    from .. import plots
    from .runner import summarise

    figures: dict[str, Any] = {}
    metric = results["metric"].iloc[0]
    summary = summary.assign(shape=[f"{d}x{w}" for d, w in zip(summary["depth"], summary["width"])])
    figures["best_by_width"] = plots.metric_vs(
        summary, "width", hue="normaliser", col="activation", logx=True, base=2,
        ylabel=f"test {metric} (lr chosen on val)", title="Normalisers on fully-connected nets, by width")
    for activation, part in summary.groupby("activation"):
        table = part.pivot_table(index="normaliser", columns="shape", values="mean").reindex(
            [n for n in NORMALISERS if n in set(part["normaliser"])])
        table.columns.name = "depth x width"
        figures[f"heatmap_{activation}"] = plots.heatmap(
            table, fmt=".3f", title=f"test {metric}, {activation}", colorbar_label=f"test {metric}")
    largest = results[(results["width"] == results["width"].max()) & (results["depth"] == results["depth"].max())]
    by_lr = summarise(largest, ["activation", "normaliser", "lr"], value="val_metric")
    figures["lr_sensitivity"] = plots.metric_vs(
        by_lr, "lr", hue="normaliser", col="activation", logx=True, ylabel=f"val {metric}",
        title=f"Learning-rate sweep (depth {results['depth'].max()}, width {results['width'].max()})")
    return figures


def _batch_figures(results: pd.DataFrame, summary: pd.DataFrame) -> dict[str, Any]:
    from .. import plots

    metric = results["metric"].iloc[0]
    col = "budget" if "budget" in summary and summary["budget"].nunique() > 1 else None
    return {
        "best_by_batch_size": plots.metric_vs(
            summary, "batch_size", hue="normaliser", col=col, logx=True, base=2,
            ylabel=f"test {metric} (lr chosen on val)", title="Accuracy against batch size"),
        "chosen_lr": plots.metric_vs(
            summary, "batch_size", y="lr", err=None, hue="normaliser", col=col, logx=True, base=2, logy=True,
            ylabel="learning rate chosen on val", title="Best learning rate against batch size"),
    }


# --------------------------------------------------------------------- declarations

_QUICK = {"data": "digits", "schedule": "constant", "budget": "fixed_epochs"}
_CIFAR = {"data": "cifar10", "schedule": "cosine", "budget": "fixed_epochs"}

FC_NORMALISERS = register_experiment(Experiment(
    name="fc_normalisers",
    title="Normalisers head to head on fully-connected nets",
    chapter="6",
    select="lr",
    profiles={
        "quick": Grid(
            axes={"activation": ["tanh", "leaky_relu"], "width": [64], "depth": [3], "normaliser": list(NORMALISERS),
                  "lr": [0.003, 0.03, 0.3, 3.0, 30.0]},
            fixed={**_QUICK, "epochs": 8, "batch_size": 32},
            seeds=2,
        ),
        "standard": Grid(
            axes={"activation": ["tanh", "leaky_relu"], "width": [128, 512], "depth": [3, 6],
                  "normaliser": list(NORMALISERS), "lr": [0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]},
            fixed={**_CIFAR, "epochs": 20, "batch_size": 128},
            seeds=3,
        ),
        "paper": Grid(
            axes={"activation": ["tanh", "leaky_relu"], "width": [16, 64, 256, 1024], "depth": [3, 6, 9],
                  "normaliser": list(NORMALISERS),
                  "lr": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]},
            fixed={**_CIFAR, "epochs": 50, "batch_size": 128},
            seeds=5,
        ),
    },
    run_one=train_mlp,
    seconds_per_run={"quick": 0.2, "standard": 10.0, "paper": 30.0},
    figures=_fc_figures,
    notes="SGD without momentum; lr chosen per (activation, width, depth, normaliser) on the val split.",
))

BATCH_SIZE = register_experiment(Experiment(
    name="batch_size",
    title="The batch-size prediction",
    chapter="7",
    select="lr",
    profiles={
        "quick": Grid(
            axes={"normaliser": list(NORMALISERS), "batch_size": [8, 32, 128], "lr": [0.003, 0.03, 0.3, 3.0, 30.0]},
            fixed={**_QUICK, "activation": "tanh", "width": 64, "depth": 2, "epochs": 6},
            seeds=2,
        ),
        "standard": Grid(
            axes={"budget": ["fixed_epochs", "fixed_steps"], "normaliser": list(NORMALISERS),
                  "batch_size": [16, 64, 256, 1024],
                  "lr": [0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]},
            fixed={**{k: v for k, v in _CIFAR.items() if k != "budget"}, "activation": "tanh", "width": 256,
                   "depth": 4, "epochs": 20, "steps": 8000},
            seeds=3,
        ),
        "paper": Grid(
            axes={"budget": ["fixed_epochs", "fixed_steps"], "normaliser": list(NORMALISERS),
                  "batch_size": [8, 16, 32, 64, 128, 256, 512, 1024],
                  "lr": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]},
            fixed={**{k: v for k, v in _CIFAR.items() if k != "budget"}, "activation": "tanh", "width": 256,
                   "depth": 4, "epochs": 50, "steps": 20000},
            seeds=5,
        ),
    },
    run_one=train_mlp,
    seconds_per_run={"quick": 0.2, "standard": 15.0, "paper": 40.0},
    figures=_batch_figures,
    notes="Budget convention declared per profile: quick fixes epochs; standard/paper sweep fixed epochs and "
          "fixed steps. The lr is chosen per (budget, normaliser, batch size) on the val split.",
))
