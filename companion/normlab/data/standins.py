"""Offline stand-ins for the quick profile: data that ship with a dependency or are generated."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from .registry import register
from .types import DataSplit

SPLIT_SEED = 0


def _split_indices(n: int, fractions: tuple[float, float] = (0.7, 0.1), seed: int = SPLIT_SEED) -> dict[str, np.ndarray]:
    """A fixed random train/val/test partition of ``range(n)``."""
    order = np.random.default_rng(seed).permutation(n)
    n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
    return {"train": order[:n_train], "val": order[n_train : n_train + n_val], "test": order[n_train + n_val :]}


@lru_cache(maxsize=1)
def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return (bunch.images / 16.0).astype(np.float32), bunch.target.astype(np.int64)


@register("digits")
def digits(split: str, *, root: str | Path | None = None, download: bool = True) -> DataSplit:
    """scikit-learn's digits: 1,797 real 8x8 grey images of 10 classes, shipped offline.

    Pixels scaled to [0, 1], shape ``(N, 1, 8, 8)``. Split 70/10/20 % (1,257 / 179 / 361)
    by a fixed permutation (seed 0). Licence: CC BY 4.0 (UCI ML hand-written digits).
    """
    images, target = _digits_arrays()
    index = _split_indices(len(target))[split]
    return DataSplit(
        x=torch.from_numpy(images[index]).unsqueeze(1),
        y=torch.from_numpy(target[index]),
        task="classification",
        name="digits",
        split=split,
        meta={"classes": [str(c) for c in range(10)], "source": "sklearn.datasets.load_digits", "stand_in": True},
    )
