"""Accuracy under corruption: every (corruption, severity) of a clean-trained image classifier.

:func:`corruption_suite` yields the test sets: for ``cifar10`` with real data, the
CIFAR-10-C files (19 corruptions x 5 severities, ``normlab.data.load_cifar10_c``);
with the offline stand-ins, the stand-in's clean test images under every corruption of
:func:`normlab.data.corrupt` (10 x 5), made here with a seed per condition so every run
sees the same images. :func:`accuracy_under_corruption` evaluates a
model on each; :func:`mean_corruption_accuracy` is the benchmark's summary, the mean over
corruptions and severities (Hendrycks & Dietterich report errors; we report accuracy, as
the AutoNorm paper does). Chapter 15's tables of these runs are in
:mod:`normlab.robustness`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from torch import nn

from . import data, training
from ._runtime import check_profile
from .data.corruptions import CORRUPTIONS, corrupt
from .data.sources import OFFLINE_PROFILES
from .data.types import DataSplit

__all__ = [
    "SEVERITIES",
    "accuracy_under_corruption",
    "corruption_suite",
    "mean_corruption_accuracy",
]

SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)


@lru_cache(maxsize=4)
def _stand_in_suite(
    task: str, images: int | None, chosen: str | None = None
) -> tuple[tuple[str, int, DataSplit], ...]:
    clean = data.for_profile(task, "quick", chosen=chosen)["test"]
    if images is not None:
        clean = clean.subset(slice(0, images))
    suite = []
    for c, name in enumerate(CORRUPTIONS):
        for severity in SEVERITIES:
            generator = torch.Generator().manual_seed(1000 * c + severity)
            x = corrupt(clean.x, name, severity, generator=generator)
            meta = {**clean.meta, "corruption": name, "severity": severity}
            suite.append(
                (
                    name,
                    severity,
                    DataSplit(
                        x=x,
                        y=clean.y,
                        task=clean.task,
                        name=f"{clean.name}_c",
                        split="test",
                        meta=meta,
                    ),
                )
            )
    return tuple(suite)


def corruption_suite(
    task: str,
    data_profile: str | None = None,
    *,
    images: int | None = None,
    chosen: str | None = None,
) -> Iterator[tuple[str, int, DataSplit]]:
    """``(corruption, severity, test split)`` for every condition of ``task``'s corrupted test.

    ``data_profile`` ``quick`` (the stand-ins, also used by the ``cpu`` profile) corrupts the
    stand-in's clean test images; ``standard``/``paper`` read CIFAR-10-C (``task`` must be
    ``cifar10``). ``images`` keeps the first ``images`` test images of each condition (None:
    all). ``chosen`` names an offline dataset among the task's
    ``normlab.data.sources.CHOICES`` (``mnist_5k`` for ``mnist``) instead of its default
    stand-in. Stand-in suites are built once per process and cached; CIFAR-10-C conditions are
    read one at a time.
    """
    if images is not None and (
        isinstance(images, bool) or not isinstance(images, int) or images < 1
    ):
        raise ValueError(f"images must be a positive int or None, got {images!r}")
    if check_profile(data_profile) in OFFLINE_PROFILES:
        yield from _stand_in_suite(task, images, chosen)
        return
    if task != "cifar10":
        raise ValueError(
            f"task={task!r} has no real corrupted test set; only 'cifar10' (CIFAR-10-C) has one"
        )
    from .data.vision import CIFAR10_C_CORRUPTIONS, load_cifar10_c

    for name in CIFAR10_C_CORRUPTIONS:
        for severity in SEVERITIES:
            split = load_cifar10_c(name, severity)
            yield (
                name,
                severity,
                split if images is None else split.subset(slice(0, images)),
            )


def accuracy_under_corruption(
    model: nn.Module,
    suite: Iterator[tuple[str, int, DataSplit]],
    *,
    device: torch.device | str | None = None,
) -> list[dict[str, Any]]:
    """One ``{"corruption", "severity", "accuracy", "n"}`` row per condition of ``suite``."""
    rows = []
    for name, severity, split in suite:
        scores = training.evaluate(model, split, device=device)
        rows.append(
            {
                "corruption": name,
                "severity": severity,
                "accuracy": scores["accuracy"],
                "n": len(split),
            }
        )
    return rows


def mean_corruption_accuracy(rows: Sequence[dict[str, Any]]) -> float:
    """The mean accuracy over every (corruption, severity) row: each condition weighs the same."""
    if not rows:
        raise ValueError("rows is empty: no corrupted test sets were evaluated")
    return float(np.mean([row["accuracy"] for row in rows]))
