"""The one training loop of the book: :func:`fit`, its :class:`FitConfig`, and :func:`evaluate`.

``fit(model, train, val, ...)`` trains on a :class:`normlab.data.DataSplit`; the split's
``task`` decides the loss and the metric:

============== ========================================== ==============================
task           loss                                       metric
============== ========================================== ==============================
classification cross-entropy (optional label smoothing)   accuracy
tagging        token cross-entropy, ``ignore_index=-100`` token accuracy
regression     mean squared error                         RMSE (original units when
                                                          ``meta["target_scale"]`` is set)
============== ========================================== ==============================

Design, in short:

- **One config.** Every setting is a field of :class:`FitConfig`, validated in its
  constructor; ``fit(model, train, val, config)`` and ``fit(model, train, val, epochs=...,
  batch_size=..., lr=...)`` are the same call.
- **Data checked before training.** Empty splits, non-finite inputs and a model that cannot
  take the data fail with a message naming the split, before the first step (the split's
  own checks, dtypes and label range, run when it is built; see :class:`DataSplit`).
- **Data on the device.** Both splits are moved to the device once; a batch is an
  ``index_select`` of a shuffled index, and augmentations (:mod:`normlab.augment`) run on
  whole batches there. No DataLoader, no worker processes.
- **Determinism.** Shuffling and augmentation draw from a ``torch.Generator`` owned by the
  loop and seeded with ``seed``; a fresh run also seeds the global RNGs
  (:func:`normlab.seed_everything`), which dropout and stochastic depth use. On the CPU the
  same seed gives identical numbers. Build the model after ``seed_everything(seed)`` for
  identical initial weights.
- **Checkpoints** (:mod:`normlab.checkpoint`). With ``checkpoint_dir``, the whole loop state
  is saved atomically at each epoch end; calling ``fit`` again with the same settings
  resumes from there, and an interrupted run ends with exactly the numbers of an
  uninterrupted one (on the CPU).
- **Divergence.** A non-finite training loss (or non-finite outputs on val) ends the run:
  by default with a :class:`DivergenceError` naming the epoch and the step, or, with
  ``on_divergence="stop"`` (the experiment grids, whose learning-rate sweeps expect some runs
  to diverge), by stopping after that epoch with the run's losses and metrics NaN. No metric
  is ever computed from non-finite outputs: :func:`evaluate` then reports NaN.
- **Speed.** bf16 autocast on CUDA by default, optional ``torch.compile``, and no host sync
  in the inner loop unless callbacks need ``state.loss``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import checkpoint
from ._checks import fraction, one_of, positive_int, positive_number
from ._checks import seed as check_seed
from ._runtime import device as default_device
from ._runtime import seed_everything
from .augment import Augment
from .callbacks import Callback, TrainState
from .checkpoint import CHECKPOINT_NAME, CheckpointError, model_signature
from .data.types import IGNORE_INDEX, DataSplit

__all__ = [
    "CHECKPOINT_NAME",
    "CheckpointError",
    "DIVERGENCE_ACTIONS",
    "DivergenceError",
    "FitConfig",
    "History",
    "METRICS",
    "OPTIMIZERS",
    "SCHEDULES",
    "TIMING_KEYS",
    "evaluate",
    "fit",
    "model_signature",
    "progress_default",
]

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "rmsprop": torch.optim.RMSprop,
}
SCHEDULES: tuple[str, ...] = ("constant", "cosine", "warmup_cosine")
# task -> (metric name, higher is better)
METRICS: dict[str, tuple[str, bool]] = {
    "classification": ("accuracy", True),
    "tagging": ("token_accuracy", True),
    "regression": ("rmse", False),
}
TIMING_KEYS: tuple[str, ...] = ("epoch_time_s", "samples_per_s")
DIVERGENCE_ACTIONS: tuple[str, ...] = ("raise", "stop")
PROGRESS_ENV = "NORMLAB_PROGRESS"
DRY_RUN_SAMPLES = 2


# ------------------------------------------------------------------------- config


class DivergenceError(FloatingPointError):
    """Training produced a non-finite loss or non-finite outputs; ``epoch`` and ``step`` say
    where (``step`` counts optimiser steps from the start of the run, from 1)."""

    def __init__(self, message: str, *, epoch: int, step: int) -> None:
        super().__init__(message)
        self.epoch = epoch
        self.step = step


def _how(default: Any = None, **kwargs: Any) -> Any:
    """A field that changes how, not what, is computed: left out of the run record."""
    return field(default=default, metadata={"in_record": False}, **kwargs)


def _flag(name: str, value: Any, *, optional: bool = False) -> None:
    if not (isinstance(value, bool) or (optional and value is None)):
        raise TypeError(
            f"{name} must be True or False{' or None' if optional else ''}, got {value!r}"
        )


class _FrozenKwargs(Mapping[str, Any]):
    """A read-only, hashable copy of a keyword mapping (``FitConfig.optimizer_kwargs``)."""

    def __init__(self, items: Mapping[str, Any]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)


@dataclass(frozen=True)
class FitConfig:
    """Every setting of :func:`fit`, checked when the config is built.

    Args:
        epochs, batch_size, lr: the budget; all must be positive. ``max_steps`` (optional)
            ends training after that many optimiser steps (fixed-steps budgets).
        optimizer: ``"sgd"``, ``"adam"``, ``"adamw"`` or ``"rmsprop"``; ``optimizer_kwargs``
            go to its constructor (e.g. ``{"momentum": 0.9}``; kept as a read-only copy, so
            that a config is hashable). ``weight_decay`` applies to weights with ``ndim >= 2``
            only.
        schedule: ``"constant"``, ``"cosine"`` or ``"warmup_cosine"`` (linear warm-up over
            the fraction ``warmup`` of all steps, then cosine to zero); stepped per
            optimiser step.
        seed: seeds the loop's shuffling generator and, for a fresh run, the global RNGs.
        label_smoothing: of the training loss, in ``[0, 1)``.
        augment: an :class:`normlab.augment.Augment` for image batches (training only).
        drop_last: drop the last incomplete batch of each epoch (every sample is still
            seen across epochs; keeps BatchNorm away from one-sample batches).
        on_divergence: what a non-finite training loss (or non-finite outputs on val) does:
            ``"raise"`` (default) raises :class:`DivergenceError` naming the epoch and step,
            before that epoch's checkpoint; ``"stop"`` ends training after that epoch and
            records it, its losses and metrics NaN (for grids that expect divergence).
        amp: bf16 autocast; ``None`` means on for CUDA with bf16 support, off otherwise.
        device: defaults to :func:`normlab.device`. The model and both splits move there.
        compile: wrap the model in ``torch.compile`` for the forward passes.
        checkpoint_dir: a folder (created if missing); ``last.pt`` is saved there at each
            epoch end and a run resumes from it (:mod:`normlab.checkpoint`).
        progress: a tqdm bar; ``None`` follows :func:`progress_default`.
        eval_batch_size: batch size of the validation passes.

    A checkpoint records :meth:`run_record`: every field except those that change how, not
    what, is computed (``device``, ``compile``, ``checkpoint_dir``, ``progress``,
    ``eval_batch_size``). A new field is recorded unless it is declared with ``_how``.
    """

    epochs: int
    batch_size: int
    lr: float
    optimizer: str = "adamw"
    weight_decay: float = 0.0
    optimizer_kwargs: Mapping[str, Any] | None = None
    schedule: str = "constant"
    warmup: float = 0.0
    seed: int = 0
    label_smoothing: float = 0.0
    augment: Augment | None = None
    max_steps: int | None = None
    drop_last: bool = True
    on_divergence: str = "raise"
    amp: bool | None = None
    device: torch.device | str | None = _how()
    compile: bool = _how(False)
    checkpoint_dir: str | Path | None = _how()
    progress: bool | None = _how()
    eval_batch_size: int = _how(1024)

    def __post_init__(self) -> None:
        def normalise(
            name: str, value: Any
        ) -> None:  # frozen: the one place fields are rewritten
            object.__setattr__(self, name, value)

        for name in ("epochs", "batch_size", "eval_batch_size"):
            positive_int(name, getattr(self, name))
        if self.max_steps is not None:
            positive_int("max_steps", self.max_steps)
        check_seed("seed", self.seed)
        normalise("lr", positive_number("lr", self.lr))
        wd = self.weight_decay
        if (
            isinstance(wd, bool)
            or not isinstance(wd, (int, float))
            or not math.isfinite(wd)
            or wd < 0
        ):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {wd!r}")
        normalise("weight_decay", float(wd))
        normalise("warmup", fraction("warmup", self.warmup))
        normalise("label_smoothing", fraction("label_smoothing", self.label_smoothing))
        one_of("optimizer", self.optimizer, OPTIMIZERS)
        one_of("schedule", self.schedule, SCHEDULES)
        one_of("on_divergence", self.on_divergence, DIVERGENCE_ACTIONS)
        if self.optimizer_kwargs is not None and not isinstance(
            self.optimizer_kwargs, Mapping
        ):
            raise TypeError(
                f"optimizer_kwargs must be a mapping, got {type(self.optimizer_kwargs).__name__}"
            )
        normalise("optimizer_kwargs", _FrozenKwargs(self.optimizer_kwargs or {}))
        if self.augment is not None and not isinstance(self.augment, Augment):
            raise TypeError(
                f"augment must be a normlab.augment.Augment or None, got {type(self.augment).__name__}"
            )
        for name in ("drop_last", "compile"):
            _flag(name, getattr(self, name))
        for name in ("amp", "progress"):
            _flag(name, getattr(self, name), optional=True)
        if self.device is not None:
            try:
                torch.device(self.device)
            except (RuntimeError, TypeError) as err:
                raise ValueError(
                    f"device={self.device!r} is not a torch device ({err})"
                ) from err
        if self.checkpoint_dir is not None:
            self._check_checkpoint_dir()

    def _check_checkpoint_dir(self) -> None:
        if not isinstance(self.checkpoint_dir, (str, os.PathLike)):
            raise TypeError(
                f"checkpoint_dir must be a path or None, got {type(self.checkpoint_dir).__name__}"
            )
        folder = Path(self.checkpoint_dir)
        existing = next(p for p in (folder, *folder.parents) if p.exists())
        if not existing.is_dir():
            what = (
                "is an existing file"
                if existing == folder
                else f"lies under {existing}, which is a file"
            )
            raise ValueError(
                f"checkpoint_dir={str(self.checkpoint_dir)!r} {what}; expected a folder (created if missing)"
            )

    def run_record(self) -> dict[str, Any]:
        """What a checkpoint must share with the run resuming it: the recorded fields, as plain types."""
        return {
            f.name: _plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.metadata.get("in_record", True)
        }


def _plain(value: Any) -> Any:
    """A value comparable across processes and ``weights_only``-loadable: objects by their repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return repr(sorted(value.items()))
    return repr(value)


def _resolve_config(config: FitConfig | None, settings: Mapping[str, Any]) -> FitConfig:
    """``config`` with ``settings`` replacing its fields, or a config of ``settings`` alone."""
    if config is not None and not isinstance(config, FitConfig):
        raise TypeError(
            f"config must be a normlab.training.FitConfig, got {type(config).__name__}"
        )
    known = {f.name for f in dataclasses.fields(FitConfig)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(
            f"fit got unknown setting(s) {', '.join(unknown)}; FitConfig has {', '.join(sorted(known))}"
        )
    return (
        dataclasses.replace(config, **settings)
        if config is not None
        else FitConfig(**settings)
    )


class History(list):
    """Per-epoch records of a run: a list of dicts, one per epoch.

    Each record holds ``epoch``, ``step``, ``lr``, ``train_loss``, ``val_loss``,
    ``val_<metric>`` (e.g. ``val_accuracy``), ``epoch_time_s`` and ``samples_per_s``
    (training throughput, evaluation excluded). ``metric`` names the metric and
    ``higher_is_better`` says which way is better.
    """

    def __init__(
        self,
        records: Iterable[dict[str, Any]] = (),
        *,
        metric: str,
        higher_is_better: bool,
    ) -> None:
        super().__init__(records)
        self.metric = metric
        self.higher_is_better = higher_is_better

    def column(self, key: str) -> list[Any]:
        """The values of one key across epochs."""
        return [record[key] for record in self]

    @property
    def val_metric(self) -> list[float]:
        """The validation metric of every epoch."""
        return self.column(f"val_{self.metric}")

    def without_timing(self) -> list[dict[str, Any]]:
        """The records without wall-clock fields: what two identical runs must share."""
        return [
            {k: v for k, v in record.items() if k not in TIMING_KEYS} for record in self
        ]

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (JSON and ``torch.load(weights_only=True)`` safe)."""
        return {
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "epochs": [dict(r) for r in self],
        }


# --------------------------------------------------------------------------- helpers


def progress_default(device: torch.device | str | None = None) -> bool:
    """Whether progress bars show by default.

    ``$NORMLAB_PROGRESS`` = ``0`` or ``1`` decides when set. Otherwise bars show on a
    terminal (stderr is a TTY) and whenever training runs on a GPU, where runs are long
    enough to need one (``tqdm.auto`` draws a widget in notebooks). Quick-profile CPU runs
    in notebooks, nbval and the book build therefore stay quiet.
    """
    value = os.environ.get(PROGRESS_ENV, "").strip()
    if value:
        return value.lower() not in ("0", "false", "no", "off")
    on_gpu = device is not None and torch.device(device).type == "cuda"
    return on_gpu or bool(getattr(sys.stderr, "isatty", lambda: False)())


def _autocast(
    device: torch.device, amp: bool | None
) -> Callable[[], AbstractContextManager[Any]]:
    """A factory of autocast contexts: bf16 on CUDA when supported (``amp=None``), else off."""
    if amp is None:
        amp = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if not amp:
        return nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def _schedule(name: str, total_steps: int, warmup_steps: int) -> Callable[[int], float]:
    """The learning-rate multiplier after ``step`` optimiser steps."""
    if name == "constant":
        return lambda step: 1.0
    if name == "cosine":
        return lambda step: (
            0.5 * (1.0 + math.cos(math.pi * min(step, total_steps) / total_steps))
        )

    def warmup_cosine(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(step - warmup_steps, total_steps - warmup_steps) / max(
            total_steps - warmup_steps, 1
        )
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return warmup_cosine


def _build_optimizer(
    model: nn.Module,
    name: str,
    lr: float,
    weight_decay: float,
    kwargs: Mapping[str, Any],
) -> torch.optim.Optimizer:
    """Weight decay applies to matrices and kernels (``ndim >= 2``), not to biases and gains."""
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    return OPTIMIZERS[name](groups, lr=lr, **kwargs)


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


# ------------------------------------------------------------------------------ fit


def _divergence(
    epoch: int, step: int, step_losses: torch.Tensor, val_title: str
) -> DivergenceError:
    """The error for an epoch that ended after ``step`` with a non-finite loss or val output."""
    bad = (~torch.isfinite(step_losses)).nonzero()
    if len(bad):
        first = int(bad[0])
        at = step - len(step_losses) + first + 1
        what = (
            f"the training loss is {float(step_losses[first])} at epoch {epoch}, step {at} "
            f"(batch {first + 1} of the epoch)"
        )
    else:
        at = step
        what = (
            f"the outputs on {val_title} are not finite after epoch {epoch}, step {at}"
        )
    return DivergenceError(
        f"training diverged: {what}; the parameters are no longer finite. Lower lr, or pass "
        "on_divergence='stop' to record the run as diverged",
        epoch=epoch,
        step=at,
    )


def fit(
    model: nn.Module,
    train: DataSplit,
    val: DataSplit,
    config: FitConfig | None = None,
    *,
    callbacks: Sequence[Callback] = (),
    **settings: Any,
) -> History:
    """Train ``model`` on ``train``, evaluating on ``val`` after every epoch.

    The settings are the fields of :class:`FitConfig`, given as a ``config``, as keywords
    (``fit(model, train, val, epochs=10, batch_size=64, lr=1e-3)``), or both: keywords then
    replace the config's fields.

    ``callbacks`` are :class:`normlab.callbacks.Callback` objects, called as documented in
    :mod:`normlab.callbacks`. ``state.loss`` is set after every step only when callbacks
    are given (it costs a host sync). On resume each callback gets the saved state of the
    first unused callback of the same class; a callback without one starts fresh.

    Before the first step the splits are checked: both non-empty, of one task, with finite
    inputs, and the model is run on two samples of train (and of val, when its samples differ
    in shape or dtype) so that a shape mismatch is reported with the split's sample shape.

    Returns:
        The :class:`History` (also ``TrainState.history`` for callbacks).

    Raises:
        ValueError: for a bad setting or bad data (TypeError for a wrong kind of object).
        CheckpointError: for an unreadable checkpoint or one written by another model or
            with other settings.
        DivergenceError: for a non-finite training loss or val output, unless
            ``on_divergence="stop"``.
    """
    cfg = _resolve_config(config, settings)
    _check_split(train, "train")
    _check_split(val, "val")
    if train.task != val.task:
        raise ValueError(
            f"train and val have different tasks: {train.task!r} and {val.task!r}"
        )
    if cfg.augment is not None and cfg.augment.mixes and train.task != "classification":
        raise ValueError("MixUp/CutMix need a classification task")
    batch_size = cfg.batch_size
    steps_per_epoch = (
        len(train) // batch_size
        if cfg.drop_last
        else math.ceil(len(train) / batch_size)
    )
    if steps_per_epoch == 0:
        raise ValueError(
            f"batch_size={batch_size} exceeds the {len(train)} training samples (with drop_last=True)"
        )

    device = torch.device(cfg.device) if cfg.device is not None else default_device()
    total_steps = cfg.epochs * steps_per_epoch
    if cfg.max_steps is not None:
        total_steps = min(cfg.max_steps, total_steps)
    metric, higher_is_better = METRICS[train.task]
    run_record = {**cfg.run_record(), "n_train": len(train)}

    model.to(device)
    train, val = train.to(device), val.to(device)
    autocast = _autocast(device, cfg.amp)
    _check_data(model, train, val, autocast)

    generator = torch.Generator()
    opt = _build_optimizer(
        model, cfg.optimizer, cfg.lr, cfg.weight_decay, cfg.optimizer_kwargs
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        opt,
        _schedule(cfg.schedule, total_steps, max(1, round(cfg.warmup * total_steps))),
    )
    history = History(metric=metric, higher_is_better=higher_is_better)
    state = TrainState(
        model=model,
        optimizer=opt,
        scheduler=scheduler,
        epochs=cfg.epochs,
        history=history,
    )

    path = (
        Path(cfg.checkpoint_dir) / CHECKPOINT_NAME
        if cfg.checkpoint_dir is not None
        else None
    )
    saving = dict(run_record=run_record, generator=generator, callbacks=callbacks)
    if path is None or not checkpoint.resume(path, state, **saving):
        seed_everything(cfg.seed)
        generator.manual_seed(cfg.seed)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    step_model = torch.compile(model) if cfg.compile else model
    bar = None
    if cfg.progress if cfg.progress is not None else progress_default(device):
        from tqdm.auto import tqdm

        bar = tqdm(
            total=total_steps,
            initial=state.step,
            unit="step",
            desc=f"{train.name} {metric}",
            leave=False,
        )

    for callback in callbacks:
        callback.on_train_start(state)
    for epoch in range(state.epoch + 1, cfg.epochs + 1):
        if state.stop_training or state.step >= total_steps:
            break
        state.epoch = epoch
        model.train()
        for callback in callbacks:
            callback.on_epoch_start(state)
        started = time.perf_counter()
        order = torch.randperm(len(train), generator=generator).to(device)
        loss_sum = torch.zeros((), device=device)
        seen = 0
        # each step's loss is kept on the device (no host sync), to name a diverging step
        step_losses: list[torch.Tensor] = []
        for batch in range(steps_per_epoch):
            if state.step >= total_steps:
                break
            index = order[batch * batch_size : (batch + 1) * batch_size]
            x, y = train.x.index_select(0, index), train.y.index_select(0, index)
            y_mix, lam = y, 1.0
            if cfg.augment is not None:
                x, y_mix, lam = cfg.augment(x, y, generator)
            with autocast():
                out = step_model(x)
                loss = _task_loss(train.task, out, y, cfg.label_smoothing)
                if lam != 1.0:
                    loss = lam * loss + (1.0 - lam) * _task_loss(
                        train.task, out, y_mix, cfg.label_smoothing
                    )
            opt.zero_grad(
                set_to_none=True
            )  # frozen parameters keep grad None: no momentum/decay update
            loss.backward()
            for callback in callbacks:
                callback.on_after_backward(state)
            opt.step()
            scheduler.step()
            state.step += 1
            loss_sum += loss.detach() * len(index)
            seen += len(index)
            step_losses.append(loss.detach())
            if callbacks:
                state.loss = loss.item()
                for callback in callbacks:
                    callback.on_step_end(state)
            if bar is not None:
                bar.update()
        train_loss = (loss_sum / max(seen, 1)).item()
        train_time = time.perf_counter() - started
        model.eval()
        scores = _evaluate_on_device(step_model, val, cfg.eval_batch_size, autocast)
        diverged = not (math.isfinite(train_loss) and math.isfinite(scores["loss"]))
        if diverged and cfg.on_divergence == "raise":
            if bar is not None:
                bar.close()
            losses = torch.stack(step_losses) if step_losses else torch.zeros(0)
            raise _divergence(epoch, state.step, losses, val.title)
        state.loss = train_loss
        history.append(
            {
                "epoch": epoch,
                "step": state.step,
                "lr": float(scheduler.get_last_lr()[0]),
                "train_loss": train_loss,
                "val_loss": scores["loss"],
                f"val_{metric}": scores[metric],
                "epoch_time_s": time.perf_counter() - started,
                "samples_per_s": seen / train_time if train_time > 0 else float("nan"),
            }
        )
        if bar is not None:
            bar.set_postfix(
                epoch=epoch,
                train_loss=f"{train_loss:.3g}",
                **{f"val_{metric}": f"{scores[metric]:.4g}"},
            )
        if diverged:
            state.stop_training = True
        for callback in callbacks:
            callback.on_epoch_end(state)
        if path is not None:
            checkpoint.save(path, state, **saving)
    if bar is not None:
        bar.close()
    for callback in callbacks:
        callback.on_train_end(state)
    return history
