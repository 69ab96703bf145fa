"""Name -> loader table behind :func:`normlab.data.load`.

The loader modules know nothing of this table: it imports them, never the reverse, and the
offline stand-ins import no real-data module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .._checks import one_of
from . import standins, tabular, text, vision
from ._common import check_split
from .types import DataSplit

__all__ = [
    "load",
    "Loader",
    "LOADERS",
    "names",
    "REAL",
    "REAL_LOADERS",
]

Loader = Callable[..., DataSplit]
# The papers' datasets, in the order of :func:`load`'s table.
REAL_LOADERS: dict[str, Loader] = {**vision.LOADERS, **text.LOADERS, **tabular.LOADERS}
REAL: tuple[str, ...] = tuple(REAL_LOADERS)
LOADERS: dict[str, Loader] = {**REAL_LOADERS, **standins.LOADERS}


def names() -> list[str]:
    """Every dataset name that :func:`load` accepts: the ten real sets and the stand-ins."""
    return sorted(LOADERS)


def load(
    name: str, split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
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
    ``digits``, ``mnist_5k``, ``shapes_stationary``, ``pos_grammar``,
    ``sentiment_grammar``, ``diabetes``, ``friedman``.
    """
    one_of("name", name, names())
    check_split(split)
    return LOADERS[name](split, root=root, download=download)
