"""Name -> loader registry behind :func:`normlab.data.load`, and :func:`for_profile`."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .types import DataSplit

SPLITS: tuple[str, ...] = ("train", "val", "test")
REAL: tuple[str, ...] = ("mnist", "fashion_mnist", "cifar10", "cifar100", "svhn", "cifar10_c",
                         "ptb_pos", "sst2", "energy_efficiency", "california_housing")

Loader = Callable[..., DataSplit]
_LOADERS: dict[str, Loader] = {}


def register(name: str) -> Callable[[Loader], Loader]:
    """Register ``fn(split, *, root, download) -> DataSplit`` under ``name``."""

    def wrap(fn: Loader) -> Loader:
        _LOADERS[name] = fn
        return fn

    return wrap


def names() -> list[str]:
    """Every dataset name that :func:`load` accepts: the ten real sets and the stand-ins."""
    from . import standins, tabular, text, vision  # noqa: F401  (each module registers its loaders)

    return sorted(_LOADERS)


def load(name: str, split: str, *, root: str | Path | None = None, download: bool = True) -> DataSplit:
    """Load one split (``train``, ``val`` or ``test``) of one dataset as a :class:`DataSplit`.

    Files live in ``root``, else ``$NORMLAB_DATA``, else ``$XDG_CACHE_HOME/normlab``
    (``~/.cache/normlab``). A missing file is downloaded when ``download`` is True, checked
    against its published checksum and renamed into place only if it matches; offline, the
    call fails within seconds naming the file to place by hand and the stand-in to use.

    Real datasets (each loader's docstring gives the details):

    ====================  =======================================  ====================  =========================  ==================
    name                  source                                   size                  splits (train/val/test)    licence
    ====================  =======================================  ====================  =========================  ==================
    mnist                 torchvision MNIST (IDX)                  70,000 1x28x28        54,000 / 6,000* / 10,000   CC BY-SA 3.0
    fashion_mnist         torchvision FashionMNIST (IDX)           70,000 1x28x28        54,000 / 6,000* / 10,000   MIT
    cifar10               cifar-10-python.tar.gz                   60,000 3x32x32        45,000 / 5,000* / 10,000   research use
    cifar100              cifar-100-python.tar.gz                  60,000 3x32x32        45,000 / 5,000* / 10,000   research use
    svhn                  train/test_32x32.mat                     99,289 3x32x32        65,931 / 7,326* / 26,032   non-commercial
    cifar10_c             Zenodo 2535967 CIFAR-10-C.tar            19 x 5 x 10,000       test only (mixed 10,000)   CC BY 4.0
    ptb_pos               NLTK treebank sample (.mrg)              3,914 sentences       by file 80 / 10 / 10 %     non-commercial
    sst2                  GLUE SST-2.zip (TSV)                     67,349 + 872          66,477 / 872* / 872 (dev)  research use
    energy_efficiency     UCI ENB2012_data.xlsx                    768 x 8, target Y1    70 / 10 / 20 % (seed 0)    CC BY 4.0
    california_housing    sklearn fetch_california_housing         20,640 x 8            70 / 10 / 20 % (seed 0)    none stated
    ====================  =======================================  ====================  =========================  ==================

    (* carved from the source's training set with a fixed permutation, seed 0.) Images are
    float ``(N, C, H, W)`` in [0, 1]; token ids long ``(N, L)`` padded with ``PAD_ID``;
    tags long ``(N, L)`` with ``IGNORE_INDEX`` at padding; regression features and targets
    standardised with train statistics. Vocabularies and statistics come from train only.

    Stand-ins (offline, for the quick profile; see :mod:`normlab.data.standins`):
    ``digits``, ``shapes_stationary``, ``shapes_diverse``, ``shapes_diverse_c``,
    ``pos_grammar``, ``sentiment_grammar``, ``diabetes``.
    """
    known = names()
    if name not in known:
        raise ValueError(f"name={name!r} is not a dataset; expected one of {', '.join(known)}")
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not a split; expected one of {', '.join(SPLITS)}")
    return _LOADERS[name](split, root=root, download=download)


# task -> (train/val source, test source) in the quick profile
QUICK_STANDINS: dict[str, tuple[str, str]] = {
    "mnist": ("digits", "digits"),
    "fashion_mnist": ("shapes_stationary", "shapes_stationary"),
    "cifar10": ("shapes_diverse", "shapes_diverse"),
    "cifar100": ("shapes_diverse", "shapes_diverse"),
    "svhn": ("shapes_diverse", "shapes_diverse"),
    "cifar10_c": ("shapes_diverse", "shapes_diverse_c"),
    "ptb_pos": ("pos_grammar", "pos_grammar"),
    "sst2": ("sentiment_grammar", "sentiment_grammar"),
    "energy_efficiency": ("diabetes", "diabetes"),
    "california_housing": ("diabetes", "diabetes"),
}


def for_profile(task: str, profile: str | None = None, *, root: str | Path | None = None) -> dict[str, DataSplit]:
    """The ``train``, ``val`` and ``test`` splits for ``task`` in ``profile``.

    ``profile`` None means the active one (:func:`normlab.profile`). ``standard`` and
    ``paper`` load the real dataset (downloading it if needed); ``quick`` loads its offline
    stand-in, so notebooks never branch on the network themselves:

    ====================  ============================  =====================================
    task                  quick-profile stand-in        what it keeps
    ====================  ============================  =====================================
    mnist                 digits                        real grey digits, 10 classes
    fashion_mnist         shapes_stationary             grey, one fixed style, 10 classes
    cifar10               shapes_diverse                colour, diverse styles, 10 classes
    cifar100              shapes_diverse                (10 classes, not 100)
    svhn                  shapes_diverse                colour, diverse backgrounds
    cifar10_c             shapes_diverse (train, val),  clean training, corrupted test
                          shapes_diverse_c (test)
    ptb_pos               pos_grammar                   tagging that needs context
    sst2                  sentiment_grammar             labels that need negation, order
    energy_efficiency     diabetes                      small tabular regression
    california_housing    diabetes                      tabular regression
    ====================  ============================  =====================================

    ``cifar10_c`` in the standard and paper profiles trains and validates on ``cifar10``
    and tests on ``cifar10_c``. Every returned split has ``meta["stand_in"]`` set.
    """
    from .._runtime import check_profile

    profile = check_profile(profile)
    if task not in REAL:
        raise ValueError(f"task={task!r} is not a task; expected one of {', '.join(REAL)}")
    if profile == "quick":
        fit_name, test_name = QUICK_STANDINS[task]
    else:
        fit_name, test_name = ("cifar10", "cifar10_c") if task == "cifar10_c" else (task, task)
    return {"train": load(fit_name, "train", root=root), "val": load(fit_name, "val", root=root),
            "test": load(test_name, "test", root=root)}
