"""What :func:`normlab.training.fit` computes besides its steps: the task's loss, the
evaluation passes (:func:`evaluate`) and the checks of the data before the first step.

Also importable from :mod:`normlab.training`, the module that documents them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._checks import positive_int
from ._hits import decode_hits, encode_hits  # noqa: F401  (re-exported by training)
from .data.types import IGNORE_INDEX, DataSplit

# task -> (metric name, higher is better)
METRICS: dict[str, tuple[str, bool]] = {
    "classification": ("accuracy", True),
    "tagging": ("token_accuracy", True),
    "regression": ("rmse", False),
}
DRY_RUN_SAMPLES = 2


def _autocast(
    device: torch.device, amp: bool | None
) -> Callable[[], AbstractContextManager[Any]]:
    """A factory of autocast contexts: bf16 on CUDA when supported (``amp=None``), else off."""
    if amp is None:
        amp = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if not amp:
        return nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def _task_loss(
    task: str, out: torch.Tensor, y: torch.Tensor, label_smoothing: float
) -> torch.Tensor:
    if task == "classification":
        return F.cross_entropy(out, y, label_smoothing=label_smoothing)
    if task == "tagging":
        return F.cross_entropy(
            out.flatten(0, -2),
            y.flatten(),
            ignore_index=IGNORE_INDEX,
            label_smoothing=label_smoothing,
        )
    return F.mse_loss(out.reshape(y.shape).float(), y)


def _eval_sums(
    task: str, out: torch.Tensor, y: torch.Tensor, scale: torch.Tensor | None
) -> torch.Tensor:
    """``[loss sum, metric sum, count]`` of one batch, as one float64 tensor (no host sync)."""
    out = out.float()
    if task == "classification":
        loss = F.cross_entropy(out, y, reduction="sum")
        hits = (out.argmax(-1) == y).sum()
        count = y.numel()
    elif task == "tagging":
        flat_y = y.flatten()
        loss = F.cross_entropy(
            out.flatten(0, -2), flat_y, ignore_index=IGNORE_INDEX, reduction="sum"
        )
        mask = flat_y != IGNORE_INDEX
        hits = ((out.flatten(0, -2).argmax(-1) == flat_y) & mask).sum()
        count = mask.sum()
    else:
        err = out.reshape(y.shape) - y
        loss = err.pow(2).sum()
        hits = (err * scale).pow(2).sum() if scale is not None else loss
        count = y.numel()
    return torch.stack(
        [loss.double(), hits.double(), torch.as_tensor(count, device=y.device).double()]
    )


def _target_scale(split: DataSplit, device: torch.device) -> torch.Tensor | None:
    scale = split.meta.get("target_scale")
    return (
        None
        if scale is None
        else torch.as_tensor(scale, dtype=torch.float32, device=device)
    )


@torch.no_grad()
def _evaluate_on_device(
    model: nn.Module,
    split: DataSplit,
    batch_size: int,
    autocast: Callable[[], AbstractContextManager[Any]],
) -> dict[str, float]:
    metric, _ = METRICS[split.task]
    scale = _target_scale(split, split.x.device)
    sums = torch.zeros(3, dtype=torch.float64, device=split.x.device)
    for start in range(0, len(split), batch_size):
        x, y = split.x[start : start + batch_size], split.y[start : start + batch_size]
        with autocast():
            out = model(x)
        sums += _eval_sums(split.task, out, y, scale)
    loss_sum, metric_sum, count = sums.tolist()
    count = max(count, 1.0)
    if not math.isfinite(
        loss_sum
    ):  # non-finite outputs: no metric (argmax of NaN is 0)
        return {"loss": math.nan, metric: math.nan}
    value = (
        math.sqrt(metric_sum / count)
        if split.task == "regression"
        else metric_sum / count
    )
    return {"loss": loss_sum / count, metric: value}


# ---------------------------------------------------------------------- data checks


def _check_split(split: Any, role: str) -> None:
    if not isinstance(split, DataSplit):
        raise TypeError(
            f"{role} must be a normlab.data.DataSplit, got {type(split).__name__}"
        )
    if len(split) == 0:
        raise ValueError(
            f"{role} split {split.title} is empty; it needs at least one sample"
        )


def _check_finite(*splits: DataSplit) -> None:
    """Every float tensor of ``splits`` is finite: one reduction each on the device, one host sync.

    A sum is finite whenever every term is (NaN and inf propagate through it), so a finite
    sum proves the tensor clean at the cost of one read; ``isfinite`` would cost several
    passes and a boolean copy. Only a non-finite sum (bad data, or an overflow of large
    values) pays for the exact element-wise scan, which then names the first bad row.
    """
    tensors = [
        (split, key, t)
        for split in splits
        for key, t in (("x", split.x), ("y", split.y))
        if t.is_floating_point()
    ]
    if not tensors:
        return
    sums = torch.stack(
        [
            t.sum(dtype=torch.promote_types(t.dtype, torch.float32)).float()
            for _, _, t in tensors
        ]
    )
    if torch.isfinite(sums).all():
        return
    for split, key, t in tensors:
        bad = ~torch.isfinite(t.reshape(len(t), -1))
        if bad.any():
            row = int(bad.any(1).nonzero()[0])
            raise ValueError(
                f"{key} of split {split.title} holds {int(bad.sum())} non-finite value(s) (NaN or inf), "
                f"the first in row {row}; clean or drop those rows"
            )


@torch.no_grad()
def _dry_run(
    model: nn.Module,
    split: DataSplit,
    autocast: Callable[[], AbstractContextManager[Any]],
) -> None:
    """One forward pass and loss on the first samples of ``split``, in eval mode.

    A model that cannot take the data then fails before training, with a message naming the
    split's sample shape around torch's own error. Eval mode keeps BatchNorm's running
    statistics and dropout's RNG untouched; ``fit`` seeds (or restores) every RNG afterwards.
    """
    x, y = split.x[:DRY_RUN_SAMPLES], split.y[:DRY_RUN_SAMPLES]
    was_training = model.training
    model.eval()
    try:
        with autocast():
            _task_loss(split.task, model(x), y, 0.0)
    except torch.cuda.OutOfMemoryError:
        raise
    except (RuntimeError, IndexError, ValueError) as err:
        raise ValueError(
            f"the model cannot take the samples of split {split.title} (sample shape {tuple(x.shape[1:])}, "
            f"dtype {x.dtype}, task {split.task}): {type(err).__name__}: {err}"
        ) from err
    finally:
        model.train(was_training)


def _check_data(
    model: nn.Module,
    train: DataSplit,
    val: DataSplit,
    autocast: Callable[[], AbstractContextManager[Any]],
) -> None:
    """What ``fit`` checks on the device before its first step: finite inputs, and a dry run of
    the model on train (and on val when its samples differ in shape or dtype)."""
    _check_finite(train, val)
    _dry_run(model, train, autocast)
    if _sample_kind(val) != _sample_kind(train):
        _dry_run(model, val, autocast)


def _sample_kind(split: DataSplit) -> tuple[Any, ...]:
    return split.x.shape[1:], split.x.dtype, split.y.shape[1:]


def evaluate(
    model: nn.Module,
    split: DataSplit,
    *,
    batch_size: int = 1024,
    device: torch.device | str | None = None,
    amp: bool | None = None,
) -> dict[str, float]:
    """Loss and metric of ``model`` on ``split`` (e.g. the test split), in eval mode.

    Returns ``{"loss": ..., <metric>: ...}`` with the metric of the split's task
    (``accuracy``, ``token_accuracy`` or ``rmse``). The loss has no label smoothing.
    ``device`` defaults to the model's own device; the model's train/eval mode is restored.

    Raises:
        ValueError: for an empty split, non-finite inputs, a model that cannot take the
            split's samples, or a bad argument.
    """
    _check_split(split, "split")
    positive_int("batch_size", batch_size)
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else torch.device("cpu")
    device = torch.device(device)
    split = split.to(device)
    _check_finite(split)
    autocast = _autocast(device, amp)
    _dry_run(model, split, autocast)
    was_training = model.training
    model.eval()
    try:
        return _evaluate_on_device(model, split, batch_size, autocast)
    finally:
        model.train(was_training)


# ------------------------------------------------------------------ per-item scores


@torch.no_grad()
def item_hits(
    model: nn.Module, split: DataSplit, *, batch_size: int = 1024
) -> np.ndarray:
    """Which items of a classification or tagging ``split`` ``model`` gets right, a bool
    array, in eval mode on the model's device (its mode is restored): one per example of a
    classification split, one per scored token of a tagging split (padding, the
    ``IGNORE_INDEX`` labels, excluded; sentence by sentence, in order), so that the hits'
    mean is the split's ``accuracy`` or ``token_accuracy``. :func:`item_starts` marks where
    each sentence's tokens begin.

    Two models scored on the same items can then be compared item by item: the test set's
    noise of their accuracy difference is the variance of the per-item differences, far
    below the bound that treats the two accuracies as unrelated
    (:func:`normlab.stats.paired_item_variance`).
    """
    _check_split(split, "split")
    if split.task not in ("classification", "tagging"):
        raise ValueError(
            f"item_hits needs a classification or tagging split, got task={split.task!r}"
        )
    positive_int("batch_size", batch_size)
    first = next(iter(model.parameters()), None)
    split = split.to(first.device if first is not None else torch.device("cpu"))
    was_training = model.training
    model.eval()
    try:
        hits = []
        for i in range(0, len(split), batch_size):
            y = split.y[i : i + batch_size]
            right = model(split.x[i : i + batch_size]).argmax(-1) == y
            hits.append(right[y != IGNORE_INDEX] if split.task == "tagging" else right)
    finally:
        model.train(was_training)
    return torch.cat(hits).cpu().numpy()


def item_starts(split: DataSplit) -> np.ndarray | None:
    """For a tagging ``split``, a bool per scored token (the items of :func:`item_hits`),
    True at the first scored token of each sentence: the sentences that the paired variance
    treats as its independent units (:func:`normlab.stats.paired_item_variance`). None for
    any other task, whose items are independent examples."""
    _check_split(split, "split")
    if split.task != "tagging":
        return None
    scored = split.y.cpu() != IGNORE_INDEX
    first = torch.zeros_like(scored)
    first[:, 1:] = scored[:, 1:] & ~scored.cumsum(1).bool()[:, :-1]
    first[:, 0] = scored[:, 0]
    return first[scored].numpy()
