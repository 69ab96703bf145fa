"""The papers' image datasets: MNIST, Fashion-MNIST, CIFAR-10, CIFAR-100, SVHN, CIFAR-10-C.

Images come back as float tensors ``(N, C, H, W)`` in [0, 1] (uint8 / 255), labels as long
``(N,)``. No standardisation is applied; ``meta["channel_mean"]`` and
``meta["channel_std"]`` hold per-channel statistics of the *train* split (after the val
split is carved out) for models that want to standardise.

Splits: every source has a train and a test set. ``val`` is 10 % of the source's training
set chosen by a fixed permutation (seed 0); ``train`` is the other 90 %; ``test`` is the
source's test set. Downloads use torchvision's URLs and MD5 checksums (CIFAR-10-C: the
Zenodo record's MD5).

MNIST, Fashion-MNIST, CIFAR and SVHN files are parsed by torchvision's own dataset classes
with ``download=False``: we download (checksum first, then an atomic rename) and torchvision
reads, re-checking the MD5 of every CIFAR and SVHN file it opens. CIFAR-10-C has no
torchvision class and is read with NumPy.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._checks import one_of
from ._common import SEVERITIES, carve_val, channel_stats, check_split, mixed_conditions
from ._download import (
    NO_STAND_IN,
    ChecksumError,
    Resource,
    _instead,
    cache_root,
    ensure_extracted,
    ensure_file,
)
from .types import DataSplit

__all__ = [
    "cifar10",
    "cifar100",
    "CIFAR10_C",
    "cifar10_c",
    "CIFAR10_C_CORRUPTIONS",
    "CIFAR10_CLASSES",
    "fashion_mnist",
    "load_cifar10_c",
    "LOADERS",
    "mnist",
    "svhn",
    "VAL_FRACTION",
]

VAL_FRACTION = 0.1

# The 19 corruptions of Hendrycks & Dietterich (2019): 15 benchmark ones, then 4 extra.
CIFAR10_C_CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
    "speckle_noise",
    "gaussian_blur",
    "spatter",
    "saturate",
)
CIFAR10_C = Resource(
    url="https://zenodo.org/records/2535967/files/CIFAR-10-C.tar?download=1",
    filename="CIFAR-10-C.tar",
    md5="56bf5dcef84df0e2308c6dcbcbbd8499",
)
CIFAR10_CLASSES = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
]


def _vision_split(
    name: str,
    split: str,
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    classes: list[str],
    meta: dict,
) -> DataSplit:
    """Carve val from the source's train set and return ``split`` as floats in [0, 1]."""
    check_split(split)
    n = len(train[1])
    parts = carve_val(n, max(1, round(VAL_FRACTION * n)))
    train_images = train[0][parts["train"]]
    mean, std = channel_stats(train_images.astype(np.float32) / 255.0)
    images, labels = {
        "train": (train_images, train[1][parts["train"]]),
        "val": (train[0][parts["val"]], train[1][parts["val"]]),
        "test": test,
    }[split]
    return DataSplit(
        x=torch.from_numpy(images).float().div_(255.0),
        y=torch.from_numpy(np.asarray(labels, dtype=np.int64)),
        task="classification",
        name=name,
        split=split,
        meta={
            "classes": classes,
            "channel_mean": mean,
            "channel_std": std,
            "stand_in": False,
            **meta,
        },
    )


def _parsed(cls: type, root: str | Path, standin: str, **kwargs: Any) -> Any:
    """``cls(root, download=False, **kwargs)``, a torchvision dataset parsed from files already
    in place; its "not found or corrupted" RuntimeError becomes a :class:`ChecksumError` that
    says what to do."""
    try:
        return cls(str(root), download=False, **kwargs)
    except RuntimeError as error:
        raise ChecksumError(
            f"torchvision's {cls.__name__} could not read the files in {root} ({error}). Delete them and call "
            f"load again with download=True; {_instead(standin)}."
        ) from error


# ---------------------------------------------------------------- MNIST and Fashion-MNIST


@lru_cache(maxsize=2)
def _idx_arrays(
    root: str, dataset: str, download: bool
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Parse the four IDX files with torchvision's own MNIST class (torchvision layout
    ``<root>/<MNIST|FashionMNIST>/raw/``), downloading and un-gzipping them if needed."""
    import torchvision.datasets as tvd

    cls = {"MNIST": tvd.MNIST, "FashionMNIST": tvd.FashionMNIST}[dataset]
    raw = Path(root) / dataset / "raw"
    standin = "digits" if dataset == "MNIST" else "shapes_stationary"
    for filename, md5 in cls.resources:
        ensure_extracted(
            Resource(url=cls.mirrors[0] + filename, filename=filename, md5=md5),
            raw,
            filename[: -len(".gz")],
            download_ok=download,
            standin=standin,
        )
    arrays = []
    for train in (True, False):
        parsed = _parsed(cls, root, standin, train=train)
        arrays.append(
            (parsed.data.numpy()[:, None], parsed.targets.numpy().astype(np.int64))
        )
    return arrays[0], arrays[1]


def _idx_split(
    name: str,
    dataset: str,
    classes: list[str],
    split: str,
    root: str | Path | None,
    download: bool,
) -> DataSplit:
    """``split`` of ``dataset`` (``"MNIST"`` or ``"FashionMNIST"``), registered as ``name``."""
    check_split(split)
    train, test = _idx_arrays(str(cache_root(root)), dataset, download)
    meta = {"source": f"torchvision.datasets.{dataset}"}
    return _vision_split(name, split, train, test, classes, meta)


def mnist(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """MNIST (LeCun et al.): 70,000 28x28 grey hand-written digits, 10 classes.

    Source: torchvision.datasets.MNIST mirrors (IDX files, torchvision's MD5s). Splits:
    train 54,000 / val 6,000 (10 % of the official 60,000, seed 0) / test 10,000.
    Shape ``(N, 1, 28, 28)`` in [0, 1]. Licence: CC BY-SA 3.0 (as listed by torchvision/TFDS).
    Quick-profile stand-in: ``digits``.
    """
    return _idx_split(
        "mnist", "MNIST", [str(c) for c in range(10)], split, root, download
    )


def fashion_mnist(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """Fashion-MNIST (Xiao et al. 2017): 70,000 28x28 grey clothing images, 10 classes.

    Source: torchvision.datasets.FashionMNIST (IDX files, torchvision's MD5s). Splits: train
    54,000 / val 6,000 (seed 0) / test 10,000. Shape ``(N, 1, 28, 28)`` in [0, 1].
    Licence: MIT. Quick-profile stand-in: ``shapes_stationary``.
    """
    import torchvision.datasets as tvd

    classes = list(tvd.FashionMNIST.classes)
    return _idx_split("fashion_mnist", "FashionMNIST", classes, split, root, download)


# ---------------------------------------------------------------- CIFAR-10 and CIFAR-100


@lru_cache(maxsize=2)
def _cifar_arrays(
    root: str, which: str, download: bool
) -> tuple[tuple, tuple, list[str]]:
    """Train and test arrays ``(N, 3, 32, 32)`` uint8 and labels, parsed by torchvision's
    CIFAR class from the extracted python batches (downloaded and extracted if needed)."""
    import torchvision.datasets as tvd

    cls = {"cifar10": tvd.CIFAR10, "cifar100": tvd.CIFAR100}[which]
    ensure_extracted(
        Resource(url=cls.url, filename=cls.filename, md5=cls.tgz_md5),
        root,
        cls.base_folder,
        download_ok=download,
        standin=NO_STAND_IN,
    )
    parts = [_parsed(cls, root, NO_STAND_IN, train=train) for train in (True, False)]
    # torchvision holds images channels-last (N, 32, 32, 3); ours are channels-first.
    train, test = (
        (
            np.ascontiguousarray(p.data.transpose(0, 3, 1, 2)),
            np.asarray(p.targets, dtype=np.int64),
        )
        for p in parts
    )
    return train, test, list(parts[0].classes)


def cifar10(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """CIFAR-10 (Krizhevsky 2009): 60,000 32x32 colour images, 10 classes.

    Source: the python pickle batches ``cifar-10-python.tar.gz`` (torchvision's URL and MD5),
    parsed by ``torchvision.datasets.CIFAR10``.
    Splits: train 45,000 / val 5,000 (10 % of the official 50,000, seed 0) / test 10,000.
    Shape ``(N, 3, 32, 32)`` in [0, 1]. Licence: no formal licence; free for research with
    citation of the tech report. No offline stand-in (``normlab.data.sources.STAND_INS``).
    """
    check_split(split)
    train, test, classes = _cifar_arrays(str(cache_root(root)), "cifar10", download)
    return _vision_split(
        "cifar10", split, train, test, classes, {"source": "cifar-10-python.tar.gz"}
    )


def cifar100(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """CIFAR-100 (Krizhevsky 2009): 60,000 32x32 colour images, 100 fine classes.

    Source: ``cifar-100-python.tar.gz`` (torchvision's URL and MD5), parsed by
    ``torchvision.datasets.CIFAR100``; fine labels. Splits:
    train 45,000 / val 5,000 (seed 0) / test 10,000. Shape ``(N, 3, 32, 32)`` in [0, 1].
    Licence: as CIFAR-10. No offline stand-in (``normlab.data.sources.STAND_INS``).
    """
    check_split(split)
    train, test, classes = _cifar_arrays(str(cache_root(root)), "cifar100", download)
    return _vision_split(
        "cifar100", split, train, test, classes, {"source": "cifar-100-python.tar.gz"}
    )


# ---------------------------------------------------------------- SVHN


@lru_cache(maxsize=1)
def _svhn_arrays(root: str, download: bool) -> tuple[tuple, tuple]:
    """Train and test arrays of the cropped digits, parsed by torchvision's SVHN class from
    ``<root>/svhn/*_32x32.mat`` (downloaded if needed); torchvision maps label 10 to 0."""
    import torchvision.datasets as tvd

    folder = Path(root) / "svhn"
    arrays = []
    for part in ("train", "test"):
        url, filename, md5 = tvd.SVHN.split_list[part]
        ensure_file(
            Resource(url=url, filename=filename, md5=md5),
            folder,
            download_ok=download,
            standin=NO_STAND_IN,
        )
        parsed = _parsed(tvd.SVHN, folder, NO_STAND_IN, split=part)
        arrays.append(
            (
                np.ascontiguousarray(parsed.data),
                np.asarray(parsed.labels, dtype=np.int64).reshape(-1),
            )
        )
    return arrays[0], arrays[1]


def svhn(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """SVHN (Netzer et al. 2011), cropped digits: 32x32 colour house-number digits, 10 classes.

    Source: ``train_32x32.mat`` and ``test_32x32.mat`` in ``<root>/svhn/`` (torchvision's
    URLs and MD5s; the 531,131 "extra" images are not used), parsed by
    ``torchvision.datasets.SVHN``. Label 10 (digit 0) becomes 0.
    Splits: train 65,931 / val 7,326 (10 % of 73,257, seed 0) / test 26,032. Shape
    ``(N, 3, 32, 32)`` in [0, 1]. Licence: non-commercial use only.
    No offline stand-in (``normlab.data.sources.STAND_INS``).
    """
    check_split(split)
    train, test = _svhn_arrays(str(cache_root(root)), download)
    return _vision_split(
        "svhn",
        split,
        train,
        test,
        [str(c) for c in range(10)],
        {"source": "torchvision.datasets.SVHN (cropped digits)"},
    )


# ---------------------------------------------------------------- CIFAR-10-C


def _cifar10_c_folder(root: str | Path | None, download: bool) -> Path:
    return ensure_extracted(
        CIFAR10_C,
        cache_root(root),
        "CIFAR-10-C",
        download_ok=download,
        standin=NO_STAND_IN,
    )


def load_cifar10_c(
    corruption: str,
    severity: int,
    *,
    root: str | Path | None = None,
    download: bool = True,
) -> DataSplit:
    """The 10,000 CIFAR-10 test images under one corruption at one severity (1..5).

    Reads ``<root>/CIFAR-10-C/<corruption>.npy`` (50,000 x 32 x 32 x 3 uint8: rows
    ``(severity-1)*10000 .. severity*10000``) and ``labels.npy``. Shape ``(10000, 3, 32, 32)``
    in [0, 1].
    """
    one_of("corruption", corruption, CIFAR10_C_CORRUPTIONS)
    one_of("severity", severity, SEVERITIES)
    folder = _cifar10_c_folder(root, download)
    data = np.load(folder / f"{corruption}.npy", mmap_mode="r")
    labels = np.load(folder / "labels.npy")
    per = len(labels) // len(SEVERITIES)
    rows = slice((severity - 1) * per, severity * per)
    images = np.ascontiguousarray(np.transpose(data[rows], (0, 3, 1, 2)))
    return DataSplit(
        x=torch.from_numpy(images).float().div_(255.0),
        y=torch.from_numpy(labels[rows].astype(np.int64)),
        task="classification",
        name="cifar10_c",
        split="test",
        meta={
            "classes": CIFAR10_CLASSES,
            "corruption": corruption,
            "severity": severity,
            "source": "Zenodo 2535967 CIFAR-10-C.tar",
            "stand_in": False,
        },
    )


def cifar10_c(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """CIFAR-10-C (Hendrycks & Dietterich 2019): the CIFAR-10 test set under 19 corruptions
    at 5 severities (950,000 images). A test-only set: ``train``/``val`` raise ValueError
    (train on ``cifar10``, whose val split is the clean validation set).

    Source: Zenodo record 2535967, ``CIFAR-10-C.tar`` (2.9 GB, MD5
    56bf5dcef84df0e2308c6dcbcbbd8499). Licence: CC BY 4.0.

    ``load("cifar10_c", "test")`` returns one mixed split of 10,000 images, the same size as
    the CIFAR-10 test set: test image ``i`` under the condition given by
    :func:`normlab.data._common.mixed_conditions` (every corruption and severity equally
    often), with
    ``meta["corruption_index"]`` and ``meta["severity"]`` (long tensors, one entry per
    row, in load order) and ``meta["corruptions"]``. Its accuracy estimates the benchmark's
    mean over corruptions and severities. For one exact condition use
    :func:`load_cifar10_c`. No offline stand-in (``normlab.data.sources.STAND_INS``).
    """
    check_split(split)
    if split != "test":
        raise ValueError(
            f"split={split!r}: CIFAR-10-C has only a test split; train and validate on 'cifar10'"
        )
    folder = _cifar10_c_folder(root, download)
    labels = np.load(folder / "labels.npy")
    per = len(labels) // len(SEVERITIES)
    corruption_index, severity = mixed_conditions(per, CIFAR10_C_CORRUPTIONS)
    images = np.empty((per, 3, 32, 32), dtype=np.uint8)
    for c, corruption in enumerate(CIFAR10_C_CORRUPTIONS):
        data = np.load(folder / f"{corruption}.npy", mmap_mode="r")
        for s in SEVERITIES:
            rows = np.flatnonzero((corruption_index == c) & (severity == s))
            images[rows] = np.transpose(data[(s - 1) * per + rows], (0, 3, 1, 2))
    return DataSplit(
        x=torch.from_numpy(images).float().div_(255.0),
        y=torch.from_numpy(labels[:per].astype(np.int64)),
        task="classification",
        name="cifar10_c",
        split="test",
        meta={
            "classes": CIFAR10_CLASSES,
            "corruptions": list(CIFAR10_C_CORRUPTIONS),
            "row_keys": ("corruption_index", "severity"),
            "corruption_index": torch.from_numpy(corruption_index),
            "severity": torch.from_numpy(severity),
            "source": "Zenodo 2535967 CIFAR-10-C.tar",
            "stand_in": False,
        },
    )


LOADERS = {
    "mnist": mnist,
    "fashion_mnist": fashion_mnist,
    "cifar10": cifar10,
    "cifar100": cifar100,
    "svhn": svhn,
    "cifar10_c": cifar10_c,
}
