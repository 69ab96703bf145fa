"""Part II experiments: AutoNorm against its baselines on vision, language and tabular data.

Every run trains one backbone (:class:`~normlab.models.ViTLite`,
:class:`~normlab.models.SequenceTransformer` or :class:`~normlab.models.TabularTransformer`)
with one normaliser in every normalisation slot, then tests it. The normalisers are named
as in the paper's tables:

``frozen_ln``, ``dyt``, ``adanorm``, ``film``, ``autonorm``, ``autonorm_random``,
``autonorm_s`` and ``autonorm_s_low``: Part II of :mod:`normlab.normalisers`, which says what
each one builds and which AutoNorm-S freezing rule it trains with.

Data come from :func:`normlab.data.for_profile`: stand-ins in the quick profile, the real
sets otherwise (the grid's ``data_profile`` setting, so it is part of every run id). The learning rate is chosen per configuration on the validation split.
The language, tabular and robustness experiments live in
:mod:`normlab.experiments.part2_tasks`. Every AutoNorm run also records its gates (per-layer probabilities, entropy and selector
gradient SNR per epoch) and which layers AutoNorm-S froze.

The paper's recipe (AdamW, warm-up + cosine, label smoothing 0.1, stochastic depth 0.1,
LayerScale 1e-4, MixUp/CutMix, 5 seeds) is the ``paper`` profile; its epoch counts are not
stated, so ours are our choice.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .. import data
from .._runtime import seed_everything
from ..augment import Augment
from ..callbacks import Callback
from ..gates import AutoNormS, GateTelemetry
from ..models import SequenceTransformer, TabularTransformer, ViTLite
from ..models.sequence import sequence_config
from ..models.tabular import tabular_config
from ..models.vit import vit_config
from ..normalisers import PART2, get, norm_layer
from ..paper import EPS_H, TAU
from .grid import Grid
from .registry import Experiment, RunContext, register_experiment
from .runner import train_and_test

__all__ = [
    "NORMALISERS",
    "FLIPPABLE",
    "PATCH_GRID",
    "ALL",
    "AUTONORM_VISION",
    "build_model",
    "adamw_recipe",
    "fit_autonorm",
    "train_autonorm",
]

NORMALISERS: tuple[str, ...] = (
    PART2  # the names the grids sweep, from normlab.normalisers
)
FLIPPABLE = ("cifar10", "cifar100", "cifar10_c")
#: ``patch_size`` is a patch's side in pixels everywhere (the gate studies' 4 is a 2 x 2 grid
#: on the 8 x 8 digits); a grid's ``patch_size=None`` cuts each image into a
#: ``PATCH_GRID`` x ``PATCH_GRID`` grid instead (side = image side // PATCH_GRID: 2 pixels on
#: the digits). The quick and cpu grids of Part II's comparisons keep None, as their run
#: ids record it.
PATCH_GRID = 4


def build_model(train: data.DataSplit, config: dict[str, Any]) -> nn.Module:
    """The backbone for the split's task, with ``config["normaliser"]`` in every slot (an
    image's ``patch_size``: see :data:`PATCH_GRID`)."""
    norm = norm_layer(config["normaliser"])
    encoder = {
        key: config[key]
        for key in (
            "dim",
            "depth",
            "heads",
            "drop_path",
            "layer_scale_init",
            "dropout",
            "attn_dropout",
            "init",
            "readout",
        )
        if key in config
    }
    if train.task == "regression":
        return TabularTransformer(
            tabular_config("paper_tabular", num_features=train.x.shape[1], **encoder),
            norm,
        )
    if train.x.dim() == 4:
        _, channels, size, _ = train.x.shape
        patch_size = config["patch_size"] or size // PATCH_GRID
        vit = vit_config(
            "paper_vision",
            img_size=size,
            in_chans=channels,
            num_classes=train.num_classes,
            patch_size=patch_size,
            **encoder,
        )
        return ViTLite(vit, norm)
    sequence = sequence_config(
        "paper_nlp",
        vocab_size=len(train.meta["vocab"]),
        max_len=train.x.shape[1],
        num_outputs=train.num_classes,
        task=train.task,
        **encoder,
    )
    return SequenceTransformer(sequence, norm)


def _callbacks(config: dict[str, Any]) -> list[Callback]:
    normaliser = get(config["normaliser"])
    callbacks: list[Callback] = []
    if normaliser.gated:
        callbacks.append(GateTelemetry())
    if normaliser.freeze_rule is not None:
        callbacks.append(
            AutoNormS(
                config["t_freeze"],
                config["eps_h"],
                tau=config["tau"],
                rule=normaliser.freeze_rule,
            )
        )
    return callbacks


def adamw_recipe(config: dict[str, Any], task: str) -> dict[str, Any]:
    """The paper's optimisation recipe as ``fit`` settings: AdamW, warm-up then cosine, label
    smoothing for classification (none for regression), all read from ``config``."""
    return {
        "epochs": config["epochs"],
        "batch_size": config["batch_size"],
        "lr": config["lr"],
        "optimizer": "adamw",
        "weight_decay": config["weight_decay"],
        "schedule": "warmup_cosine",
        "warmup": config["warmup"],
        "label_smoothing": 0.0 if task == "regression" else config["label_smoothing"],
        "seed": config["seed"],
    }


def fit_autonorm(
    config: dict[str, Any], ctx: RunContext
) -> tuple[nn.Module, dict[str, data.DataSplit], dict[str, Any]]:
    """Build, train with AdamW (warm-up + cosine) and test one Part II run.

    The data are ``config["data"]``'s source in ``config["data_profile"]``, or the offline
    dataset that ``config["source"]`` names (:data:`normlab.data.sources.CHOICES`; None or
    absent: the default). Returns the trained model, its ``train``/``val``/``test`` splits
    and the run record
    (with the gates, for AutoNorm), so an experiment can evaluate the model further.
    """
    splits = data.for_profile(
        config["data"], config["data_profile"], chosen=config.get("source")
    )
    train = splits["train"]
    seed_everything(config["seed"])
    model = build_model(train, config)
    augment = None
    if train.x.dim() == 4 and config["augment"]:
        augment = Augment(
            crop_padding=config["crop_padding"],
            hflip=config["data"] in FLIPPABLE,
            mixup_alpha=config["mixup_alpha"],
            cutmix_alpha=config["cutmix_alpha"],
        )
    callbacks = _callbacks(config)
    record = train_and_test(
        model,
        splits,
        ctx,
        **adamw_recipe(config, train.task),
        augment=augment,
        callbacks=callbacks,
    )
    for callback in callbacks:
        if isinstance(callback, GateTelemetry):
            record["gates"] = callback.records
        if isinstance(callback, AutoNormS):
            record["frozen"] = callback.frozen
            record["entropy_records"] = callback.entropy_records
    return model, splits, record


def train_autonorm(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """One Part II run's record (:func:`fit_autonorm`)."""
    return fit_autonorm(config, ctx)[2]


# --------------------------------------------------------------------- declarations

ALL = list(NORMALISERS)
_RECIPE = {
    "warmup": 0.1,
    "weight_decay": 0.05,
    "label_smoothing": 0.1,
    "tau": TAU,
    "eps_h": EPS_H,
    "crop_padding": 4,
    "mixup_alpha": 0.0,
    "cutmix_alpha": 0.0,
}
# The quick profile's CPU budget (a few hundred steps) barely moves a LayerScale-1e-4 ViT off
# chance, so quick runs drop LayerScale and dropout: our choice, not the paper's recipe.
_QUICK_MODEL = {
    "dim": 32,
    "depth": 2,
    "heads": 2,
    "drop_path": 0.0,
    "layer_scale_init": None,
    "dropout": 0.0,
    "attn_dropout": 0.0,
    "patch_size": None,  # a PATCH_GRID x PATCH_GRID grid of patches
}
_PAPER_MODEL = {"drop_path": 0.1, "layer_scale_init": 1e-4, "patch_size": 4}


def _profiles(
    quick_data: list[str],
    standard_data: list[str],
    real_data: list[str],
    quick: dict[str, Any],
    standard: dict[str, Any],
    paper: dict[str, Any],
) -> dict[str, Grid]:
    return {
        "quick": Grid(
            axes={"data": quick_data, "normaliser": ALL, "lr": [3e-3, 1e-2]},
            fixed={
                **_RECIPE,
                **_QUICK_MODEL,
                "data_profile": "quick",
                "augment": False,
                "warmup": 0.05,
                **quick,
            },
            seeds=2,
        ),
        "standard": Grid(
            axes={"data": standard_data, "normaliser": ALL, "lr": [3e-4, 1e-3]},
            fixed={**_RECIPE, **_PAPER_MODEL, "data_profile": "standard", **standard},
            seeds=3,
        ),
        "paper": Grid(
            axes={"data": real_data, "normaliser": ALL, "lr": [3e-4, 5e-4, 1e-3]},
            fixed={**_RECIPE, **_PAPER_MODEL, "data_profile": "paper", **paper},
            seeds=5,
        ),
    }


AUTONORM_VISION = register_experiment(
    Experiment(
        name="autonorm_vision",
        title="AutoNorm on images: stationary and diverse data",
        chapter="11",
        profiles=_profiles(
            # quick: the digits only (no offline dataset stands in for CIFAR-10 at CPU
            # scale: data.sources.STAND_INS)
            ["mnist"],
            ["mnist", "cifar10"],
            ["mnist", "fashion_mnist", "svhn", "cifar10", "cifar100", "cifar10_c"],
            # quick: 4 heads, batch 64 and patch 4 (a 2 x 2 grid on the 8 x 8 digits, as in the gate
            # studies), so that FrozenLN reaches about 90 % on the digits in a few seconds per run.
            quick={
                "epochs": 10,
                "batch_size": 64,
                "t_freeze": 3,
                "heads": 4,
                "patch_size": 4,
            },
            # standard (one GPU, about half an hour): one stationary and one diverse set
            # (see _profiles), 10 epochs, AutoNorm-S frozen after 3; paper: all six sets.
            standard={"epochs": 10, "batch_size": 256, "t_freeze": 3, "augment": True},
            paper={
                "epochs": 200,
                "batch_size": 128,
                "t_freeze": 10,
                "augment": True,
                "mixup_alpha": 0.8,
                "cutmix_alpha": 1.0,
            },
        ),
        run_one=train_autonorm,
        # standard/paper: about 2 s per epoch of ViT-Lite on one GPU (paper: MixUp/CutMix, 200).
        seconds_per_run={"quick": 4.0, "standard": 20.0, "paper": 600.0},
        notes="ViT-Lite (paper_vision); quick uses dim 32, depth 2, 4 heads, patch 4 on the digits.",
    )
)
