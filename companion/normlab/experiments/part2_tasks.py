"""Part II across tasks: language (chapter 13), tabular regression (14), corruption (15).

===========================  =========================================================  ========
experiment                   what it runs                                               chapter
===========================  =========================================================  ========
``autonorm_language``        POS tagging and sentence classification, every normaliser  13
``autonorm_gates``           learned AutoNorm on tagging, sentences and images with     13
                             one budget: the gate-entropy curves and per-layer gates
``autonorm_tabular``         tabular regression (RMSE in the target's units)            14
``autonorm_robustness``      train on clean images, test at 5 severities of every       15
                             corruption
===========================  =========================================================  ========

Every run is ``part2.fit_autonorm`` (one backbone, one normaliser in
every slot, AdamW with warm-up + cosine, gates recorded for AutoNorm); the learning rate is
chosen per configuration on the validation split. The quick and cpu profiles train small
backbones on offline data (the label-noised ``pos_grammar`` and ``sentiment_grammar``,
Friedman's generated regression, real MNIST's 5,000-digit sample and its corruptions): the
paper's 12-layer models do not move off chance in a CPU budget. The standard and paper
profiles run the paper's backbones on the real data.

A run's gate telemetry is summarised into its record with :mod:`normlab.gate_tables`;
the tables of the studies' runs (:func:`~normlab.analysis.tasks.corruption_table`, ...) are
:mod:`normlab.analysis`, above the experiments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._evaluation import item_hits
from .._hits import encode_hits
from ..corruption_suite import (
    accuracy_under_corruption,
    corruption_suite,
    mean_corruption_accuracy,
)
from ..gate_tables import (
    GATE_SUMMARY,
    PROGRESS_METRICS,
    gate_progress,
    gate_summary,
    gate_table,
)
from ..models.blocks import DEFAULT_INIT
from ..paper import EPS_H, TAU
from ..stats import paired_test
from .grid import Grid
from .part2 import ALL, fit_autonorm, train_autonorm
from .registry import Experiment, RunContext, register_experiment
from .runner import load_records

__all__ = [
    "AUTONORM_GATES",
    "AUTONORM_LANGUAGE",
    "AUTONORM_ROBUSTNESS",
    "AUTONORM_TABULAR",
    "GATE_METRICS",
    "QUICK_LANGUAGE",
    "QUICK_ROBUSTNESS",
    "ROBUSTNESS_CPU",
    "QUICK_TABULAR",
    "TABULAR_CPU",
    "load_records",
    "paired_test",
    "train_gates",
    "train_robust",
]

# The recipe every profile shares (the paper's, minus MixUp/CutMix on the stand-ins).
_RECIPE = {
    "weight_decay": 0.05,
    "label_smoothing": 0.1,
    "tau": TAU,
    "eps_h": EPS_H,
    "augment": False,
    "crop_padding": 4,
    "mixup_alpha": 0.0,
    "cutmix_alpha": 0.0,
    "attn_dropout": 0.0,
}
# quick and cpu: a small backbone without LayerScale, dropout or stochastic depth, so a few
# hundred CPU steps train it, from the book's one initialisation for small models (chapter
# 11: torch's fan-in default, gate_grids.DEFAULT_INIT); our choice, not the paper's.
_SMALL = {
    "init": DEFAULT_INIT,
    "dim": 32,
    "heads": 2,
    "drop_path": 0.0,
    "layer_scale_init": None,
    "dropout": 0.0,
    "patch_size": None,  # a part2.PATCH_GRID x PATCH_GRID grid of patches
    "warmup": 0.05,
}
# standard and paper: the paper's backbones (dim 128, 8 heads for language and tabular).
_PAPER = {
    "dim": 128,
    "heads": 8,
    "drop_path": 0.1,
    "layer_scale_init": 1e-4,
    "dropout": 0.1,
    "warmup": 0.1,
}
# Methods trimmed in the quick and cpu profiles to the ones each chapter's claims compare, so
# that a cpu run trains past 1,000 steps within about 90 CPU-minutes a chapter; the standard
# and paper grids run all eight, at two (standard) or three (paper) learning rates.
QUICK_LANGUAGE = [
    "frozen_ln",
    "autonorm_s",
]  # AutoNorm unfrozen: autonorm_gates' runs
QUICK_TABULAR = ["frozen_ln", "adanorm", "film", "autonorm_s"]
TABULAR_CPU = ["frozen_ln", "autonorm_s"]  # the arms N12 compares
QUICK_ROBUSTNESS = ["frozen_ln", "adanorm", "autonorm_s"]
ROBUSTNESS_CPU = ["frozen_ln", "autonorm_s"]  # the arms N7 compares


def _grid(
    data_axis: list[str],
    normalisers: list[str],
    lrs: list[float],
    seeds: int,
    **fixed: Any,
) -> Grid:
    return Grid(
        axes={"data": data_axis, "normaliser": normalisers, "lr": lrs},
        fixed={**_RECIPE, **fixed},
        seeds=seeds,
    )


def _gate_grid(
    data_axis: list[str], lrs: list[float], seeds: int, **fixed: Any
) -> Grid:
    """Learned AutoNorm on ``data_axis``; the offline image task, ``mnist``, is served by
    the real 5,000-digit sample (its ``source``), the language tasks by their stand-ins."""
    return Grid(
        axes={
            "data": data_axis,
            "normaliser": ["autonorm"],
            "lr": lrs,
            "source": [None, "mnist_5k"],
        },
        fixed={**_RECIPE, **fixed},
        seeds=seeds,
        where=lambda c: (c["source"] is None) == (c["data"] != "mnist"),
    )


# ------------------------------------------------------------------ chapter 13: language

_LANGUAGE_QUICK = {
    **_SMALL,
    "depth": 1,
    "epochs": 3,
    "batch_size": 32,
    "t_freeze": 1,
    "data_profile": "quick",
}
# cpu: four blocks, so that per-layer gate claims have layers to compare (N10, N11), and 12
# epochs of 62 steps (744 steps; AutoNorm-S decides after epoch 4, 33 % of training): the
# label-noised stand-ins (data.standins.TAG_NOISE, LABEL_NOISE) plateau by epoch 5 in a
# pilot (FrozenLN at 1e-3: 0.907 token accuracy against a ceiling of 0.9125, 0.882
# sentence accuracy against 0.9).
_LANGUAGE_CPU = {**_LANGUAGE_QUICK, "depth": 4, "epochs": 12, "t_freeze": 4}
# standard: one GPU in about half an hour (6 epochs, AutoNorm-S frozen after 2); paper: 30.
_LANGUAGE_STANDARD = {
    **_PAPER,
    "depth": 12,
    "epochs": 6,
    "batch_size": 64,
    "t_freeze": 2,
    "data_profile": "standard",
}
_LANGUAGE_PAPER = {
    **_PAPER,
    "depth": 12,
    "epochs": 30,
    "batch_size": 64,
    "t_freeze": 10,
    "data_profile": "paper",
}

AUTONORM_LANGUAGE = register_experiment(
    Experiment(
        name="autonorm_language",
        title="AutoNorm on language: POS tagging and sentence classification",
        chapter="13",
        profiles={
            "quick": _grid(
                ["ptb_pos", "sst2"], QUICK_LANGUAGE, [3e-3], 3, **_LANGUAGE_QUICK
            ),
            "cpu": _grid(
                ["ptb_pos", "sst2"],
                QUICK_LANGUAGE,
                [3e-4, 1e-3, 3e-3],
                5,
                **_LANGUAGE_CPU,
            ),
            "standard": _grid(
                ["ptb_pos", "sst2"], ALL, [3e-4, 1e-3], 3, **_LANGUAGE_STANDARD
            ),
            "paper": _grid(
                ["ptb_pos", "sst2"], ALL, [3e-4, 5e-4, 1e-3], 5, **_LANGUAGE_PAPER
            ),
        },
        run_one=train_autonorm,
        # standard/paper: about 3 s per epoch of the 12-layer model on one GPU.
        seconds_per_run={"quick": 3.0, "cpu": 21.0, "standard": 18.0, "paper": 120.0},
        notes="SequenceTransformer; quick/cpu: dim 32, one block (quick) or four (cpu), on pos_grammar and sentiment_grammar "
        "(10 % of tags, 20 % of labels redrawn at random); "
        "standard/paper: the paper's 12 layers, dim 128, 8 heads on PTB POS and SST-2.",
    )
)


def train_gates(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """A learned-AutoNorm run (:func:`fit_autonorm`) whose metrics also hold its gate summary
    (:func:`gate_summary`: ``entropy_mean``, ``entropy_final``, ``p_ln_final``,
    ``depth_slope``), the validation split's majority share ``chance`` and the gates at
    matched training progress (:func:`gate_progress`), so the results table carries what
    chapter 13's claims need."""
    _, splits, record = fit_autonorm(config, ctx)
    run = {"run_id": "run", "config": config, **record}
    summary = gate_summary(gate_table([run])).iloc[0]
    record["metrics"].update({key: float(summary[key]) for key in GATE_SUMMARY})
    labels = splits["val"].y.flatten()
    labels = labels[labels >= 0]  # tagging: padding is IGNORE_INDEX (negative)
    chance = float(labels.bincount().max() / len(labels))
    record["metrics"]["chance"] = chance
    record["metrics"].update(gate_progress(run, chance))
    return record


#: Every gate metric a learned-AutoNorm run of ``autonorm_gates`` records.
GATE_METRICS: tuple[str, ...] = GATE_SUMMARY + PROGRESS_METRICS
# Learned AutoNorm, never frozen, on tagging, sentences and images with one budget and one
# learning rate (the language runs' backbone size, epochs and batch size), so the gate
# curves of the three tasks share their x axis; the image task is real MNIST (the 5,000-digit
# sample, 94 steps an epoch against the language sets' 62). Its quick runs are also chapter
# 13's "freezing off" runs: with the same settings they are identical to
# autonorm_language's.
AUTONORM_GATES = register_experiment(
    Experiment(
        name="autonorm_gates",
        title="AutoNorm's gates on language and on images, with one budget",
        chapter="13",
        profiles={
            "quick": _gate_grid(
                ["ptb_pos", "sst2", "mnist"], [3e-3], 3, **_LANGUAGE_QUICK
            ),
            # cpu: at 1e-3; at 3e-3 some of the earlier gated sentence runs stayed at
            # chance, at 1e-3 every seed left it.
            "cpu": _gate_grid(["ptb_pos", "sst2", "mnist"], [1e-3], 5, **_LANGUAGE_CPU),
            "standard": _grid(
                ["ptb_pos", "sst2", "cifar10"],
                ["autonorm"],
                [1e-3],
                3,
                **{**_LANGUAGE_STANDARD, "patch_size": 4},
            ),
            "paper": _grid(
                ["ptb_pos", "sst2", "cifar10"],
                ["autonorm"],
                [1e-3],
                5,
                **{**_LANGUAGE_PAPER, "patch_size": 4},
            ),
        },
        run_one=train_gates,
        # standard/paper: about 3 s per epoch of the 12-layer model on one GPU.
        seconds_per_run={"quick": 3.0, "cpu": 50.0, "standard": 18.0, "paper": 120.0},
        notes="SequenceTransformer and ViT-Lite of the language runs' size; quick/cpu images: real MNIST, the 5,000-digit "
        "sample (mnist_5k), not a stand-in for CIFAR-10 (no offline dataset stands in for CIFAR-10 at CPU scale: "
        "data.sources.STAND_INS).",
    )
)

# ------------------------------------------------------------------ chapter 14: tabular

# quick and cpu: Friedman's generated regression (data.standins.friedman, 3,500 / 500 /
# 1,000 rows), the ``source`` of both regression tasks, so that the test split can resolve
# N12's 2 % margin (the diabetes set's 89 test rows could not).
_TABULAR_SMALL = {
    **_SMALL,
    "depth": 2,
    "batch_size": 32,
    "data_profile": "quick",
    "source": "friedman",
}

AUTONORM_TABULAR = register_experiment(
    Experiment(
        name="autonorm_tabular",
        title="AutoNorm on tabular regression",
        chapter="14",
        profiles={
            "quick": _grid(
                ["energy_efficiency"],
                QUICK_TABULAR,
                [3e-3],
                3,
                **_TABULAR_SMALL,
                epochs=2,
                t_freeze=1,
            ),
            # cpu: the two arms N12 compares, 9 epochs of 110 steps (981 steps; AutoNorm-S
            # decides after epoch 3, 33 % of training), the rate chosen per arm from four
            # (1e-2 added when both arms chose 3e-3, the top of the first three); eight
            # seeds, N12's plan (claims.plans) from the five-seed set's spread.
            "cpu": _grid(
                ["energy_efficiency"],
                TABULAR_CPU,
                [3e-4, 1e-3, 3e-3, 1e-2],
                8,
                **_TABULAR_SMALL,
                epochs=9,
                t_freeze=3,
            ),
            "standard": _grid(
                ["energy_efficiency", "california_housing"],
                ALL,
                [3e-4, 1e-3],
                3,
                **_PAPER,
                depth=12,
                epochs=60,  # one GPU in about half an hour
                batch_size=128,
                t_freeze=10,
                data_profile="standard",
            ),
            "paper": _grid(
                ["energy_efficiency", "california_housing"],
                ALL,
                [3e-4, 5e-4, 1e-3],
                5,
                **_PAPER,
                depth=12,
                epochs=200,
                batch_size=128,
                t_freeze=10,
                data_profile="paper",
            ),
        },
        run_one=train_autonorm,
        # standard/paper: about 0.3 s per epoch on one GPU.
        seconds_per_run={"quick": 3.0, "cpu": 16.0, "standard": 18.0, "paper": 60.0},
        notes="TabularTransformer; RMSE in the target's original units; quick/cpu on Friedman's generated regression "
        "(friedman, 5,000 rows; stand-in for both sets).",
    )
)

# ------------------------------------------------------------------ chapter 15: robustness


def train_robust(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """Train on clean images (:func:`fit_autonorm`), then test at every corruption and severity.

    The record adds ``corruption`` (one row per condition, from
    ``corruption_suite.accuracy_under_corruption``), ``clean_accuracy`` (the test metric) and
    ``mean_corruption_accuracy``, also among the ``metrics`` so that the results table has
    it, and among the metrics ``corruption_hits``: which corrupted images the model got
    right, every condition's ``eval_images`` in the suite's order
    (:func:`normlab.training.encode_hits`). ``config["eval_images"]`` caps the test images per condition (None: all).
    """
    model, splits, record = fit_autonorm(config, ctx)
    suite = corruption_suite(
        config["data"],
        config["data_profile"],
        images=config["eval_images"],
        chosen=config.get("source"),
    )
    rows, hits = [], []
    for condition in suite:  # one condition at a time (CIFAR-10-C is read file by file)
        rows += accuracy_under_corruption(model, [condition], device=ctx.device)
        # which corrupted images it got right: the drop's test-set noise measured image
        # by image (claims.part2's N7)
        hits.append(item_hits(model, condition[2]))
    record["corruption"] = rows
    record["metrics"]["corruption_hits"] = encode_hits(np.concatenate(hits))
    record["clean_accuracy"] = record["metrics"]["test_metric"]
    record["mean_corruption_accuracy"] = record["metrics"][
        "mean_corruption_accuracy"
    ] = mean_corruption_accuracy(rows)
    return record


# quick and cpu: real MNIST, the 5,000-digit sample (``source`` mnist_5k), corrupted by
# normlab.data.corrupt: a one-block ViT reaches about 0.89 clean test accuracy in 1,400 CPU
# steps (pilot; about 0.87 by step 700), off the ceiling, where the earlier grey-shapes
# stand-in reached 1.000.
_ROBUST_SMALL = {
    **_SMALL,
    "depth": 1,
    "batch_size": 64,
    "epochs": 3,
    "t_freeze": 1,
    "data_profile": "quick",
    "source": "mnist_5k",
}
_ROBUST_PAPER = {
    **_PAPER,
    "depth": 8,
    "heads": 4,
    "patch_size": 4,
    "t_freeze": 10,
    "eval_images": None,
    "augment": True,
}

AUTONORM_ROBUSTNESS = register_experiment(
    Experiment(
        name="autonorm_robustness",
        title="AutoNorm under corruption: clean training, corrupted test",
        chapter="15",
        profiles={
            "quick": _grid(
                ["mnist"],
                QUICK_ROBUSTNESS,
                [3e-3],
                3,
                **_ROBUST_SMALL,
                eval_images=200,
            ),
            # cpu: the two arms N7 compares, 30 epochs of 47 steps (1,410 steps;
            # AutoNorm-S decides after epoch 10, 33 % of training), three rates each, so
            # that every arm is read at its own rate and at each matched rate. 15 epochs
            # (705 steps) had not plateaued: a one-seed pilot at 30 epochs (seed 0, rates
            # 3e-3 and 1e-2) ended 0.002-0.026 higher in validation accuracy than the
            # 15-epoch runs (FrozenLN 0.902 -> 0.904, 0.896 -> 0.918; AutoNorm-S 0.878 ->
            # 0.906, 0.876 -> 0.902), and moved at most 0.014 over its last 10 epochs.
            "cpu": _grid(
                ["mnist"],
                ROBUSTNESS_CPU,
                [1e-3, 3e-3, 1e-2],
                5,
                **{**_ROBUST_SMALL, "epochs": 30, "t_freeze": 10},
                eval_images=300,
            ),
            # standard: one GPU in about half an hour: 8 epochs (AutoNorm-S frozen after 3),
            # the first 1,000 images of each of the 95 CIFAR-10-C conditions.
            "standard": _grid(
                ["cifar10"],
                ALL,
                [3e-4, 1e-3],
                3,
                **{**_ROBUST_PAPER, "eval_images": 1000, "t_freeze": 3},
                epochs=8,
                batch_size=256,
                data_profile="standard",
            ),
            "paper": _grid(
                ["cifar10"],
                ALL,
                [3e-4, 5e-4, 1e-3],
                5,
                **_ROBUST_PAPER,
                epochs=200,
                batch_size=128,
                data_profile="paper",
                mixup_alpha=0.8,
                cutmix_alpha=1.0,
            ),
        },
        run_one=train_robust,
        # standard: about 2 s per epoch and 10 s for 95,000 corrupted test images on one GPU.
        seconds_per_run={"quick": 5.0, "cpu": 36.0, "standard": 30.0, "paper": 700.0},
        notes="ViT-Lite trained on clean images; quick/cpu: real MNIST, the 5,000-digit sample (mnist_5k; no offline dataset "
        "stands in for CIFAR-10 at CPU scale: data.sources.STAND_INS) under normlab.data.corrupt "
        "(10 corruptions x 5 severities, a stand-in for CIFAR-10-C); standard/paper: CIFAR-10, then every CIFAR-10-C file.",
    )
)


# ------------------------------------------------------------------ reading the runs


# ------------------------------------------------------------------ statistics


# ------------------------------------------------------------------ chapter 13's baselines


# ------------------------------------------------------------------ chapter 14's references
