"""The one training loop of the book: :func:`fit`, :func:`evaluate` and resumable checkpoints.

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

- **Data on the device.** Both splits are moved to the device once; a batch is an
  ``index_select`` of a shuffled index, and augmentations (:mod:`normlab.augment`) run on
  whole batches there. No DataLoader, no worker processes.
- **Determinism.** Shuffling and augmentation draw from a ``torch.Generator`` owned by the
  loop and seeded with ``seed``; a fresh run also seeds the global RNGs
  (:func:`normlab.seed_everything`), which dropout and stochastic depth use. On the CPU the
  same seed gives identical numbers. Build the model after ``seed_everything(seed)`` for
  identical initial weights.
- **Checkpoints.** With ``checkpoint_dir``, the model, optimiser, scheduler, every RNG state,
  the callbacks' ``state_dict`` and the history are saved atomically at each epoch end;
  calling ``fit`` again with the same arguments resumes from there, and an interrupted run
  ends with exactly the numbers of an uninterrupted one (on the CPU).
- **Speed.** bf16 autocast on CUDA by default, optional ``torch.compile``, and no host sync
  in the inner loop unless callbacks need ``state.loss``.
"""
from __future__ import annotations

import math
import os
import random
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._runtime import device as default_device
from ._runtime import seed_everything
from .augment import Augment
from .callbacks import Callback, TrainState
from .data.types import IGNORE_INDEX, DataSplit

__all__ = [
    "CHECKPOINT_NAME",
    "CheckpointError",
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
CHECKPOINT_NAME = "last.pt"
CHECKPOINT_FORMAT = 1
PROGRESS_ENV = "NORMLAB_PROGRESS"


class CheckpointError(RuntimeError):
    """A checkpoint cannot be used: unreadable, or written by another model or run."""


class History(list):
    """Per-epoch records of a run: a list of dicts, one per epoch.

    Each record holds ``epoch``, ``step``, ``lr``, ``train_loss``, ``val_loss``,
    ``val_<metric>`` (e.g. ``val_accuracy``), ``epoch_time_s`` and ``samples_per_s``
    (training throughput, evaluation excluded). ``metric`` names the metric and
    ``higher_is_better`` says which way is better.
    """

    def __init__(self, records: Iterable[dict[str, Any]] = (), *, metric: str, higher_is_better: bool) -> None:
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
        return [{k: v for k, v in record.items() if k not in TIMING_KEYS} for record in self]

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (JSON and ``torch.load(weights_only=True)`` safe)."""
        return {"metric": self.metric, "higher_is_better": self.higher_is_better, "epochs": [dict(r) for r in self]}


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


def model_signature(model: nn.Module) -> list[list[Any]]:
    """``[name, shape]`` of every entry of the model's state dict: what a checkpoint must match."""
    return [[name, list(t.shape)] for name, t in model.state_dict().items()]


def _check_positive(name: str, value: Any, kind: type) -> None:
    ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
    if not ok or not value > 0 or (kind is float and not math.isfinite(value)):
        raise ValueError(f"{name} must be a positive {'number' if kind is float else 'int'}, got {value!r}")


def _autocast(device: torch.device, amp: bool | None) -> Callable[[], ContextManager[Any]]:
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
        return lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, total_steps) / total_steps))

    def warmup_cosine(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(step - warmup_steps, total_steps - warmup_steps) / max(total_steps - warmup_steps, 1)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return warmup_cosine


def _build_optimizer(model: nn.Module, name: str, lr: float, weight_decay: float, kwargs: Mapping[str, Any]) -> torch.optim.Optimizer:
    """Weight decay applies to matrices and kernels (``ndim >= 2``), not to biases and gains."""
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    return OPTIMIZERS[name](groups, lr=lr, **kwargs)


def _task_loss(task: str, out: torch.Tensor, y: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    if task == "classification":
        return F.cross_entropy(out, y, label_smoothing=label_smoothing)
    if task == "tagging":
        return F.cross_entropy(out.flatten(0, -2), y.flatten(), ignore_index=IGNORE_INDEX, label_smoothing=label_smoothing)
    return F.mse_loss(out.reshape(y.shape).float(), y)


def _eval_sums(task: str, out: torch.Tensor, y: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """``[loss sum, metric sum, count]`` of one batch, as one float64 tensor (no host sync)."""
    out = out.float()
    if task == "classification":
        loss = F.cross_entropy(out, y, reduction="sum")
        hits = (out.argmax(-1) == y).sum()
        count = y.numel()
    elif task == "tagging":
        flat_y = y.flatten()
        loss = F.cross_entropy(out.flatten(0, -2), flat_y, ignore_index=IGNORE_INDEX, reduction="sum")
        mask = flat_y != IGNORE_INDEX
        hits = ((out.flatten(0, -2).argmax(-1) == flat_y) & mask).sum()
        count = mask.sum()
    else:
        err = out.reshape(y.shape) - y
        loss = err.pow(2).sum()
        hits = (err * scale).pow(2).sum() if scale is not None else loss
        count = y.numel()
    return torch.stack([loss.double(), hits.double(), torch.as_tensor(count, device=y.device).double()])


def _target_scale(split: DataSplit, device: torch.device) -> torch.Tensor | None:
    scale = split.meta.get("target_scale")
    return None if scale is None else torch.as_tensor(scale, dtype=torch.float32, device=device)


@torch.no_grad()
def _evaluate_on_device(model: nn.Module, split: DataSplit, batch_size: int, autocast: Callable[[], ContextManager[Any]]) -> dict[str, float]:
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
    value = math.sqrt(metric_sum / count) if split.task == "regression" else metric_sum / count
    return {"loss": loss_sum / count, metric: value}


def evaluate(model: nn.Module, split: DataSplit, *, batch_size: int = 1024, device: torch.device | str | None = None,
             amp: bool | None = None) -> dict[str, float]:
    """Loss and metric of ``model`` on ``split`` (e.g. the test split), in eval mode.

    Returns ``{"loss": ..., <metric>: ...}`` with the metric of the split's task
    (``accuracy``, ``token_accuracy`` or ``rmse``). The loss has no label smoothing.
    ``device`` defaults to the model's own device; the model's train/eval mode is restored.
    """
    if not isinstance(split, DataSplit):
        raise TypeError(f"split must be a normlab.data.DataSplit, got {type(split).__name__}")
    _check_positive("batch_size", batch_size, int)
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else torch.device("cpu")
    device = torch.device(device)
    was_training = model.training
    model.eval()
    try:
        return _evaluate_on_device(model, split.to(device), batch_size, _autocast(device, amp))
    finally:
        model.train(was_training)


# ----------------------------------------------------------------------- checkpoints


def _rng_state(generator: torch.Generator) -> dict[str, Any]:
    """Every RNG state as tensors and primitives (``weights_only``-loadable)."""
    py_version, py_state, py_gauss = random.getstate()
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "shuffle": generator.get_state(),
        "python": {"version": py_version, "state": torch.tensor(py_state, dtype=torch.int64), "gauss": py_gauss},
        "numpy": {"kind": np_kind, "keys": torch.from_numpy(np_keys.astype(np.int64)), "pos": int(np_pos),
                  "has_gauss": int(np_has_gauss), "gauss": float(np_gauss)},
    }


def _set_rng_state(state: Mapping[str, Any], generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    generator.set_state(state["shuffle"])
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"].tolist()), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"], npy["gauss"]))


def _save_atomic(payload: dict[str, Any], path: Path) -> None:
    """Write to a temporary file in the same folder, then rename over ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def _load_checkpoint(path: Path) -> dict[str, Any]:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a damaged file
        raise CheckpointError(
            f"checkpoint {path} is unreadable ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
            f"delete it (or its folder) to start the run afresh"
        ) from err
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a normlab.training checkpoint (format {CHECKPOINT_FORMAT}); delete it to start afresh")
    return payload


def _check_compatible(payload: Mapping[str, Any], path: Path, signature: list[list[Any]], run_config: Mapping[str, Any]) -> None:
    if payload["signature"] != signature:
        theirs = {name: shape for name, shape in payload["signature"]}
        ours = {name: shape for name, shape in signature}
        diff = sorted(k for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k))
        shown = ", ".join(f"{k}: checkpoint {theirs.get(k)} vs model {ours.get(k)}" for k in diff[:4])
        raise CheckpointError(
            f"checkpoint {path} was written by another model ({len(diff)} parameter(s) differ: {shown}); "
            f"use another checkpoint_dir or delete it"
        )
    saved = payload["run_config"]
    diff = sorted(k for k in saved.keys() | run_config.keys() if saved.get(k) != run_config.get(k))
    if diff:
        shown = ", ".join(f"{k}: checkpoint {saved.get(k)!r} vs now {run_config.get(k)!r}" for k in diff)
        raise CheckpointError(f"checkpoint {path} was written by a run with other settings ({shown}); "
                              f"use another checkpoint_dir or delete it")


def _restore_callbacks(callbacks: Sequence[Callback], saved: list[list[Any]]) -> None:
    """Give each callback the saved state of the same class, in order; others start fresh."""
    remaining = list(saved)
    for callback in callbacks:
        name = type(callback).__name__
        for i, (saved_name, state) in enumerate(remaining):
            if saved_name == name:
                callback.load_state_dict(state)
                del remaining[i]
                break


# ------------------------------------------------------------------------------ fit


def fit(
    model: nn.Module,
    train: DataSplit,
    val: DataSplit,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    optimizer: str = "adamw",
    weight_decay: float = 0.0,
    optimizer_kwargs: Mapping[str, Any] | None = None,
    schedule: str = "constant",
    warmup: float = 0.0,
    seed: int = 0,
    label_smoothing: float = 0.0,
    augment: Augment | None = None,
    max_steps: int | None = None,
    drop_last: bool = True,
    device: torch.device | str | None = None,
    amp: bool | None = None,
    compile: bool = False,
    callbacks: Sequence[Callback] = (),
    checkpoint_dir: str | Path | None = None,
    progress: bool | None = None,
    eval_batch_size: int = 1024,
    stop_on_divergence: bool = True,
) -> History:
    """Train ``model`` on ``train``, evaluating on ``val`` after every epoch.

    Args:
        epochs, batch_size, lr: the budget; all must be positive. ``max_steps`` (optional)
            ends training after that many optimiser steps (fixed-steps budgets).
        optimizer: ``"sgd"``, ``"adam"``, ``"adamw"`` or ``"rmsprop"``; ``optimizer_kwargs``
            go to its constructor (e.g. ``{"momentum": 0.9}``). ``weight_decay`` applies to
            weights with ``ndim >= 2`` only.
        schedule: ``"constant"``, ``"cosine"`` or ``"warmup_cosine"`` (linear warm-up over
            the fraction ``warmup`` of all steps, then cosine to zero); stepped per
            optimiser step.
        seed: seeds the loop's shuffling generator and, for a fresh run, the global RNGs.
        augment: an :class:`normlab.augment.Augment` for image batches (training only).
        drop_last: drop the last incomplete batch of each epoch (every sample is still
            seen across epochs; keeps BatchNorm away from one-sample batches).
        device: defaults to :func:`normlab.device`. The model and both splits move there.
        amp: bf16 autocast; ``None`` means on for CUDA with bf16 support, off otherwise.
        compile: wrap the model in ``torch.compile`` for the forward passes.
        callbacks: :class:`normlab.callbacks.Callback` objects, called as documented in
            :mod:`normlab.callbacks`. ``state.loss`` is set after every step only when
            callbacks are given (it costs a host sync).
        checkpoint_dir: save ``last.pt`` there at each epoch end and resume from it. On
            resume each callback gets the saved state of the first unused callback of the
            same class; a callback without one starts fresh.
        progress: a tqdm bar; ``None`` follows :func:`progress_default`.
        stop_on_divergence: stop after an epoch whose training loss is not finite.

    Returns:
        The :class:`History` (also ``TrainState.history`` for callbacks).

    Raises:
        ValueError: for a bad argument. CheckpointError: for an unreadable checkpoint or
        one written by another model or with other settings.
    """
    if not isinstance(train, DataSplit) or not isinstance(val, DataSplit):
        raise TypeError("train and val must be normlab.data.DataSplit objects")
    if train.task != val.task:
        raise ValueError(f"train and val have different tasks: {train.task!r} and {val.task!r}")
    _check_positive("epochs", epochs, int)
    _check_positive("batch_size", batch_size, int)
    _check_positive("lr", lr, float)
    _check_positive("eval_batch_size", eval_batch_size, int)
    if max_steps is not None:
        _check_positive("max_steps", max_steps, int)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r} is not known; expected one of {', '.join(OPTIMIZERS)}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is not known; expected one of {', '.join(SCHEDULES)}")
    if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
    if not 0.0 <= warmup < 1.0:
        raise ValueError(f"warmup must be a fraction of the steps in [0, 1), got {warmup!r}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1), got {label_smoothing!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if augment is not None and augment.mixes and train.task != "classification":
        raise ValueError("MixUp/CutMix need a classification task")
    steps_per_epoch = len(train) // batch_size if drop_last else math.ceil(len(train) / batch_size)
    if steps_per_epoch == 0:
        raise ValueError(f"batch_size={batch_size} exceeds the {len(train)} training samples (with drop_last=True)")

    device = torch.device(device) if device is not None else default_device()
    total_steps = epochs * steps_per_epoch if max_steps is None else min(max_steps, epochs * steps_per_epoch)
    metric, higher_is_better = METRICS[train.task]
    run_config = {
        "epochs": epochs, "batch_size": batch_size, "lr": float(lr), "optimizer": optimizer,
        "optimizer_kwargs": repr(sorted(dict(optimizer_kwargs or {}).items())), "weight_decay": float(weight_decay),
        "schedule": schedule, "warmup": float(warmup), "seed": seed, "label_smoothing": float(label_smoothing),
        "augment": repr(augment), "max_steps": max_steps, "drop_last": drop_last, "n_train": len(train),
    }

    model.to(device)
    train, val = train.to(device), val.to(device)
    generator = torch.Generator()
    opt = _build_optimizer(model, optimizer, lr, weight_decay, optimizer_kwargs or {})
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(schedule, total_steps, max(1, round(warmup * total_steps))))
    history = History(metric=metric, higher_is_better=higher_is_better)
    state = TrainState(model=model, optimizer=opt, scheduler=scheduler, epochs=epochs, history=history)

    path = Path(checkpoint_dir) / CHECKPOINT_NAME if checkpoint_dir is not None else None
    if path is not None and path.exists():
        payload = _load_checkpoint(path)
        _check_compatible(payload, path, model_signature(model), run_config)
        model.load_state_dict(payload["model"])
        opt.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        _restore_callbacks(callbacks, payload["callbacks"])
        history.extend(payload["history"])
        state.epoch, state.step, state.stop_training = payload["epoch"], payload["step"], payload["stopped"]
        _set_rng_state(payload["rng"], generator)
    else:
        seed_everything(seed)
        generator.manual_seed(seed)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    step_model = torch.compile(model) if compile else model
    autocast = _autocast(device, amp)
    bar = None
    if progress if progress is not None else progress_default(device):
        from tqdm.auto import tqdm

        bar = tqdm(total=total_steps, initial=state.step, unit="step", desc=f"{train.name} {metric}", leave=False)

    for callback in callbacks:
        callback.on_train_start(state)
    for epoch in range(state.epoch + 1, epochs + 1):
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
        for batch in range(steps_per_epoch):
            if state.step >= total_steps:
                break
            index = order[batch * batch_size : (batch + 1) * batch_size]
            x, y = train.x.index_select(0, index), train.y.index_select(0, index)
            y_mix, lam = y, 1.0
            if augment is not None:
                x, y_mix, lam = augment(x, y, generator)
            with autocast():
                out = step_model(x)
                loss = _task_loss(train.task, out, y, label_smoothing)
                if lam != 1.0:
                    loss = lam * loss + (1.0 - lam) * _task_loss(train.task, out, y_mix, label_smoothing)
            opt.zero_grad(set_to_none=True)  # frozen parameters keep grad None: no momentum/decay update
            loss.backward()
            for callback in callbacks:
                callback.on_after_backward(state)
            opt.step()
            scheduler.step()
            state.step += 1
            loss_sum += loss.detach() * len(index)
            seen += len(index)
            if callbacks:
                state.loss = loss.item()
                for callback in callbacks:
                    callback.on_step_end(state)
            if bar is not None:
                bar.update()
        train_loss = (loss_sum / max(seen, 1)).item()
        train_time = time.perf_counter() - started
        model.eval()
        scores = _evaluate_on_device(step_model, val, eval_batch_size, autocast)
        state.loss = train_loss
        history.append({
            "epoch": epoch,
            "step": state.step,
            "lr": float(scheduler.get_last_lr()[0]),
            "train_loss": train_loss,
            "val_loss": scores["loss"],
            f"val_{metric}": scores[metric],
            "epoch_time_s": time.perf_counter() - started,
            "samples_per_s": seen / train_time if train_time > 0 else float("nan"),
        })
        if bar is not None:
            bar.set_postfix(epoch=epoch, train_loss=f"{train_loss:.3g}", **{f"val_{metric}": f"{scores[metric]:.4g}"})
        if stop_on_divergence and not math.isfinite(train_loss):
            state.stop_training = True
        for callback in callbacks:
            callback.on_epoch_end(state)
        if path is not None:
            _save_atomic({
                "format": CHECKPOINT_FORMAT,
                "signature": model_signature(model),
                "run_config": run_config,
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": _rng_state(generator),
                "callbacks": [[type(callback).__name__, callback.state_dict()] for callback in callbacks],
                "history": [dict(record) for record in history],
                "epoch": epoch,
                "step": state.step,
                "stopped": bool(state.stop_training),
            }, path)
    if bar is not None:
        bar.close()
    for callback in callbacks:
        callback.on_train_end(state)
    return history
