"""Helpers every loader shares: fixed splits, train-only standardisation, vocabularies.

Real-data modules and the offline stand-ins both build on this module and never on each
other, so :mod:`normlab.data.standins` loads without touching any real-data code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from .._checks import one_of
from .types import IGNORE_INDEX, PAD_ID, DataSplit

SPLITS: tuple[str, ...] = ("train", "val", "test")
SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)
SPLIT_SEED = 0
UNK = "<unk>"
PAD = "<pad>"
UNK_ID = 1


def split_indices(
    n: int, fractions: tuple[float, float] = (0.7, 0.1), seed: int = SPLIT_SEED
) -> dict[str, np.ndarray]:
    """A fixed random train/val/test partition of ``range(n)`` (fractions of train and val)."""
    order = np.random.default_rng(seed).permutation(n)
    n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
    return {
        "train": order[:n_train],
        "val": order[n_train : n_train + n_val],
        "test": order[n_train + n_val :],
    }


def carve_val(n: int, n_val: int, seed: int = SPLIT_SEED) -> dict[str, np.ndarray]:
    """Split a source's training set of ``n`` rows into train and a held-out val of ``n_val``
    rows, by a fixed permutation; both index arrays are sorted (source order kept)."""
    if not 0 < n_val < n:
        raise ValueError(f"n_val={n_val} must lie strictly between 0 and n={n}")
    order = np.random.default_rng(seed).permutation(n)
    return {"train": np.sort(order[n_val:]), "val": np.sort(order[:n_val])}


def check_split(split: str) -> None:
    """Raise a ValueError naming ``split`` unless it is one of :data:`SPLITS`."""
    one_of("split", split, SPLITS)


def channel_stats(images: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-channel mean and standard deviation of ``(N, C, H, W)`` images in [0, 1]."""
    flat = np.moveaxis(images, 1, 0).reshape(images.shape[1], -1).astype(np.float64)
    return flat.mean(axis=1).tolist(), flat.std(axis=1).tolist()


def standardize(
    train: np.ndarray, *arrays: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Column means and standard deviations of ``train`` and every array standardised by them.

    Constant columns (up to rounding) get a standard deviation of 1: they become 0, not NaN.
    """
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    std = np.where(std > 1e-12 * np.maximum(1.0, np.abs(mean)), std, 1.0)
    return mean, std, [((a - mean) / std).astype(np.float32) for a in arrays]


def regression_split(
    name: str,
    split: str,
    features: np.ndarray,
    target: np.ndarray,
    meta: dict[str, Any],
) -> DataSplit:
    """Split rows 70/10/20 (seed 0) and standardise features and target with train statistics."""
    check_split(split)
    parts = split_indices(len(target))
    x_mean, x_std, (x,) = standardize(features[parts["train"]], features[parts[split]])
    y_mean, y_std, (y,) = standardize(target[parts["train"]], target[parts[split]])
    return DataSplit(
        x=torch.from_numpy(x),
        y=torch.from_numpy(y),
        task="regression",
        name=name,
        split=split,
        meta={
            "feature_mean": x_mean.tolist(),
            "feature_std": x_std.tolist(),
            "target_mean": float(y_mean),
            "target_scale": float(y_std),
            "stand_in": False,
            **meta,
        },
    )


def mixed_conditions(
    n: int, corruptions: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Condition of each row of a mixed corrupted test split: row ``i`` gets corruption
    ``corruptions[(i // 5) % len(corruptions)]`` at severity ``i % 5 + 1``, so every
    (corruption, severity) pair appears equally often (up to rounding)."""
    rows = np.arange(n)
    return (rows // len(SEVERITIES)) % len(corruptions), rows % len(SEVERITIES) + 1


def build_vocab(sentences: Iterable[Sequence[str]], min_freq: int = 1) -> list[str]:
    """Vocabulary built on training sentences: ``<pad>`` (id 0 = PAD_ID), ``<unk>`` (id 1),
    then words seen at least ``min_freq`` times, most frequent first (ties alphabetical)."""
    counts = Counter(word for sentence in sentences for word in sentence)
    words = sorted(
        (w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w)
    )
    return [PAD, UNK, *words]


def _ids(
    rows: Sequence[Sequence[str]],
    names: Sequence[str],
    length: int,
    fill: int,
    unknown: int | None = None,
) -> torch.Tensor:
    """``(N, length)`` positions in ``names`` of each row's first ``length`` items, ``fill``
    after its end; an item not in ``names`` is ``unknown`` (None: a KeyError)."""
    index = {name: i for i, name in enumerate(names)}
    out = torch.full((len(rows), length), fill, dtype=torch.long)
    for row, items in enumerate(rows):
        ids = [
            index[item] if unknown is None else index.get(item, unknown)
            for item in items[:length]
        ]
        out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def encode(
    sentences: Sequence[Sequence[str]], vocab: Sequence[str], length: int
) -> torch.Tensor:
    """Token ids ``(N, length)``, unknown words -> ``UNK_ID``, padded with ``PAD_ID``."""
    return _ids(sentences, vocab, length, fill=PAD_ID, unknown=UNK_ID)


def encode_tags(
    tag_rows: Sequence[Sequence[str]], tags: Sequence[str], length: int
) -> torch.Tensor:
    """Tag ids ``(N, length)`` with ``IGNORE_INDEX`` at padding."""
    return _ids(tag_rows, tags, length, fill=IGNORE_INDEX)
