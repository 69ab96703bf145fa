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
  is saved atomically at each epoch end, with its SHA-256 digest; calling ``fit`` again with
  the same settings resumes from there, and an interrupted run ends with exactly the numbers
  of an uninterrupted one (on the CPU). A checkpoint damaged since it was saved, or lacking
  a key, is refused with a :class:`CheckpointError` naming it.
- **Divergence.** One rule (:func:`is_diverged`): an epoch has diverged when its mean
  training loss or its validation loss is not finite, or exceeds :data:`DIVERGENCE_FACTOR`
  (10⁴) times the chance-level loss of the training split (:func:`divergence_bound`): the
  loss of a prediction that ignores the input, ln(number of classes) for classification and
  tagging, the variance of the targets for regression, at least 1. A loss that large is an
  explosion however it ends (2.6e8 is as diverged as NaN), while an ordinary run, whose loss
  starts near the chance level and falls, stays far below it (the largest loss of a run in
  the saved sets that did not diverge is about 200 times the chance level). A diverged
  epoch ends the run: by default with a :class:`DivergenceError` naming the epoch and the
  step, or, with ``on_divergence="stop"`` (the experiment grids, whose learning-rate sweeps
  expect some runs to diverge), by stopping after that epoch; its losses and metrics are
  recorded as they are (NaN where not finite), and the grid's record marks the run
  ``diverged``. No metric is ever computed from non-finite outputs: :func:`evaluate` then
  reports NaN.
- **Speed.** bf16 autocast on CUDA by default, optional ``torch.compile``, and no host sync
  in the inner loop unless callbacks need ``state.loss``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from . import checkpoint
from ._evaluation import (
    METRICS,
    _autocast,
    _check_data,
    _check_split,
    _evaluate_on_device,
    _task_loss,
    decode_hits,
    encode_hits,
    evaluate,
    item_hits,
    item_starts,
)
from ._fit_config import (
    DIVERGENCE_ACTIONS,
    OPTIMIZERS,
    SCHEDULES,
    FitConfig,
    _resolve_config,
)
from ._runtime import device as default_device
from ._runtime import progress_default, seed_everything
from .callbacks import Callback, CallbackList, TrainState
from .checkpoint import CHECKPOINT_NAME, CheckpointError, model_signature
from .data.types import DataSplit

__all__ = [
    "CHECKPOINT_NAME",
    "CheckpointError",
    "DIVERGENCE_ACTIONS",
    "DIVERGENCE_FACTOR",
    "DivergenceError",
    "FitConfig",
    "History",
    "METRICS",
    "OPTIMIZERS",
    "SCHEDULES",
    "TIMING_KEYS",
    "TargetStop",
    "decode_hits",
    "divergence_bound",
    "encode_hits",
    "evaluate",
    "fit",
    "is_diverged",
    "item_hits",
    "item_starts",
    "model_signature",
    "progress_default",
]

TIMING_KEYS: tuple[str, ...] = ("epoch_time_s", "samples_per_s")
#: A loss above this multiple of the chance-level loss (:func:`divergence_bound`) counts as
#: diverged, like a non-finite one. 10⁴: an order of magnitude and more above every loss of
#: a run in the saved sets that did not diverge (at most about 200 times the chance level,
#: in the first epochs at the largest learning rates).
DIVERGENCE_FACTOR = 1e4


# ------------------------------------------------------------------------- config


class DivergenceError(FloatingPointError):
    """Training diverged (:func:`is_diverged`): a non-finite loss or non-finite outputs, or a
    loss above :func:`divergence_bound`; ``epoch`` and ``step`` say where (``step`` counts
    optimiser steps from the start of the run, from 1)."""

    def __init__(self, message: str, *, epoch: int, step: int) -> None:
        super().__init__(message)
        self.epoch = epoch
        self.step = step


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


def divergence_bound(train: DataSplit) -> float:
    """The loss above which a run has diverged: :data:`DIVERGENCE_FACTOR` times the
    chance-level loss of ``train``, at least 1.

    The chance level is the loss of a prediction that ignores the input: ln(number of
    classes) for classification and tagging (a uniform prediction's cross-entropy), and the
    variance of the targets for regression (predicting their mean). Flooring it at 1 keeps
    the bound from shrinking for two classes or near-constant targets.
    """
    if train.task == "regression":
        chance = float(train.y.double().var(dim=0, unbiased=False).mean())
    else:
        chance = math.log(train.num_classes)
    return DIVERGENCE_FACTOR * max(chance, 1.0) if math.isfinite(chance) else math.inf


def is_diverged(losses: Iterable[float], bound: float) -> bool:
    """Whether any of ``losses`` (an epoch's mean training loss and its validation loss) is
    not finite or exceeds ``bound`` (:func:`divergence_bound`): the one rule for
    ``on_divergence`` and for a grid record's ``diverged``."""
    return any(not (math.isfinite(loss) and loss <= bound) for loss in losses)


class TargetStop(Callback):
    """Stop training at the first step whose validation metric reaches ``target``.

    The metric is measured on ``val`` every ``every`` optimiser steps (and read from each
    epoch's own evaluation), in eval mode and without gradients; training ends at that
    step (:mod:`normlab.callbacks`). ``reached_at`` is the step, None while the target has
    not been reached: a run that ends without it is censored, its steps to the target only
    known to exceed the steps it ran. A higher-is-better metric reaches the target at or
    above it, an RMSE at or below. A non-finite validation loss also ends the run (it has
    diverged, and will reach nothing). ``amp`` is as :class:`FitConfig`'s (None: bf16 on
    CUDA).

    Examples::

        stop = TargetStop(val, target=0.9, every=8)
        fit(model, train, val, epochs=20, batch_size=16, lr=0.1, callbacks=[stop])
        stop.reached_at  # e.g. 344, or None
    """

    def __init__(
        self,
        val: DataSplit,
        target: float,
        every: int,
        *,
        amp: bool | None = None,
        eval_batch_size: int = 1024,
    ) -> None:
        _check_split(val, "val")
        if not math.isfinite(target):
            raise ValueError(f"target must be a finite number, got {target!r}")
        for name, value in (("every", every), ("eval_batch_size", eval_batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.val, self.target, self.every = val, float(target), every
        self.amp, self.eval_batch_size = amp, eval_batch_size
        self.metric, self.higher_is_better = METRICS[val.task]
        self.reached_at: int | None = None
        self._on_device: DataSplit | None = None

    def on_train_start(self, state: TrainState) -> None:
        first = next(iter(state.model.parameters()), None)
        self.device = first.device if first is not None else torch.device("cpu")
        self._on_device = self.val.to(self.device)

    def _reached(self, value: float) -> bool:
        return value >= self.target if self.higher_is_better else value <= self.target

    def _judge(self, state: TrainState, value: float, loss: float) -> None:
        if self.reached_at is None and math.isfinite(value) and self._reached(value):
            self.reached_at = state.step
            state.stop_training = True
        elif not math.isfinite(loss):
            state.stop_training = True

    def on_step_end(self, state: TrainState) -> None:
        if state.step % self.every or self._on_device is None:
            return
        model = state.model
        was_training = model.training
        model.eval()
        scores = _evaluate_on_device(
            model,
            self._on_device,
            self.eval_batch_size,
            _autocast(self.device, self.amp),
        )
        model.train(was_training)
        self._judge(state, scores[self.metric], scores["loss"])

    def on_epoch_end(self, state: TrainState) -> None:
        last = state.history[-1]
        self._judge(state, last[f"val_{self.metric}"], last["val_loss"])

    def state_dict(self) -> dict[str, Any]:
        return {"reached_at": self.reached_at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reached_at = state["reached_at"]


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


# ------------------------------------------------------------------------------ fit


def _divergence(
    epoch: int,
    step: int,
    step_losses: torch.Tensor,
    losses: tuple[float, float],
    bound: float,
    val_title: str,
) -> DivergenceError:
    """The error for an epoch that ended after ``step`` diverged: a non-finite step loss or
    val output, or a mean training or val loss (``losses``) above ``bound``."""
    bad = (~torch.isfinite(step_losses)).nonzero()
    train_loss, val_loss = losses
    if len(bad):
        first = int(bad[0])
        at = step - len(step_losses) + first + 1
        what = (
            f"the training loss is {float(step_losses[first])} at epoch {epoch}, step {at} "
            f"(batch {first + 1} of the epoch); the parameters are no longer finite"
        )
    elif not math.isfinite(val_loss):
        at = step
        what = (
            f"the outputs on {val_title} are not finite after epoch {epoch}, step {at}; "
            "the parameters are no longer finite"
        )
    else:
        at = step
        which, value = (
            ("the mean training loss", train_loss)
            if not train_loss <= bound
            else (f"the loss on {val_title}", val_loss)
        )
        what = (
            f"{which} is {value:.3g} after epoch {epoch}, step {at}, above {bound:.3g} "
            f"({DIVERGENCE_FACTOR:g} times the chance-level loss)"
        )
    return DivergenceError(
        f"training diverged: {what}. Lower lr, or pass on_divergence='stop' to record the "
        "run as diverged",
        epoch=epoch,
        step=at,
    )


@dataclass
class _Run:
    """What :func:`fit` prepares before its first step and each epoch uses."""

    cfg: FitConfig
    train: DataSplit
    val: DataSplit
    state: TrainState
    generator: torch.Generator
    autocast: Callable[[], AbstractContextManager[Any]]
    step_model: nn.Module
    steps_per_epoch: int
    total_steps: int
    path: Path | None
    saving: dict[str, Any]
    bar: Any
    bound: float


def _steps_per_epoch(cfg: FitConfig, n_train: int) -> int:
    steps = (
        n_train // cfg.batch_size
        if cfg.drop_last
        else math.ceil(n_train / cfg.batch_size)
    )
    if steps == 0:
        raise ValueError(
            f"batch_size={cfg.batch_size} exceeds the {n_train} training samples (with drop_last=True)"
        )
    return steps


def _check_splits(train: DataSplit, val: DataSplit, cfg: FitConfig) -> None:
    """Both splits usable and of one task, and an augmentation that suits that task."""
    _check_split(train, "train")
    _check_split(val, "val")
    if train.task != val.task:
        raise ValueError(
            f"train and val have different tasks: {train.task!r} and {val.task!r}"
        )
    if cfg.augment is not None and cfg.augment.mixes and train.task != "classification":
        raise ValueError("MixUp/CutMix need a classification task")


def _total_steps(cfg: FitConfig, steps_per_epoch: int) -> int:
    """The optimiser steps of the whole run: ``epochs`` epochs, at most ``max_steps``."""
    total_steps = cfg.epochs * steps_per_epoch
    if cfg.max_steps is not None:
        total_steps = min(cfg.max_steps, total_steps)
    return total_steps


def _fresh_state(
    model: nn.Module, cfg: FitConfig, total_steps: int, history: History
) -> TrainState:
    """The loop state before the first step: the optimiser, its learning-rate schedule over
    ``total_steps``, and ``history`` (empty)."""
    opt = _build_optimizer(
        model, cfg.optimizer, cfg.lr, cfg.weight_decay, cfg.optimizer_kwargs
    )
    warmup_steps = max(1, round(cfg.warmup * total_steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        opt, _schedule(cfg.schedule, total_steps, warmup_steps)
    )
    return TrainState(
        model=model,
        optimizer=opt,
        scheduler=scheduler,
        epochs=cfg.epochs,
        history=history,
    )


def _checkpoint_path(cfg: FitConfig) -> Path | None:
    """Where the run's checkpoint lives, or None without ``checkpoint_dir``."""
    if cfg.checkpoint_dir is None:
        return None
    return Path(cfg.checkpoint_dir) / CHECKPOINT_NAME


def _resume_or_seed(
    path: Path | None, state: TrainState, seed: int, saving: dict[str, Any]
) -> None:
    """Resume ``state`` (and the ``saving`` generator and callbacks) from the checkpoint at
    ``path`` when there is one; else seed a fresh run and make the checkpoint's folder."""
    if path is None or not checkpoint.resume(path, state, **saving):
        seed_everything(seed)
        saving["generator"].manual_seed(seed)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)


def _progress_bar(
    cfg: FitConfig, device: torch.device, total_steps: int, initial: int, desc: str
) -> Any:
    """A tqdm bar over the run's steps, starting at ``initial``; None when ``progress`` is
    off (``progress=None``: as :func:`progress_default` decides for ``device``)."""
    if not (cfg.progress if cfg.progress is not None else progress_default(device)):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total_steps, initial=initial, unit="step", desc=desc, leave=False)


def _prepare(
    model: nn.Module,
    train: DataSplit,
    val: DataSplit,
    cfg: FitConfig,
    callbacks: CallbackList,
) -> _Run:
    """Check the splits, move everything to the device, build the optimiser and schedule,
    and resume from a checkpoint or seed a fresh run."""
    _check_splits(train, val, cfg)
    steps_per_epoch = _steps_per_epoch(cfg, len(train))
    device = torch.device(cfg.device) if cfg.device is not None else default_device()
    total_steps = _total_steps(cfg, steps_per_epoch)
    metric, higher_is_better = METRICS[train.task]
    run_record = {**cfg.run_record(), "n_train": len(train)}

    model.to(device)
    train, val = train.to(device), val.to(device)
    autocast = _autocast(device, cfg.amp)
    _check_data(model, train, val, autocast)

    generator = torch.Generator()
    history = History(metric=metric, higher_is_better=higher_is_better)
    state = _fresh_state(model, cfg, total_steps, history)
    path = _checkpoint_path(cfg)
    saving = dict(run_record=run_record, generator=generator, callbacks=callbacks)
    _resume_or_seed(path, state, cfg.seed, saving)

    step_model = torch.compile(model) if cfg.compile else model
    desc = f"{train.name} {metric}"
    bar = _progress_bar(cfg, device, total_steps, state.step, desc)
    return _Run(
        cfg=cfg,
        train=train,
        val=val,
        state=state,
        generator=generator,
        autocast=autocast,
        step_model=step_model,
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
        path=path,
        saving=saving,
        bar=bar,
        bound=divergence_bound(train),
    )


def _train_steps(run: _Run, callbacks: CallbackList) -> tuple[float, int, list[Any]]:
    """The optimiser steps of one epoch: (mean training loss, samples seen, step losses).

    Each step's loss is kept on the device (no host sync), to name a diverging step.
    """
    cfg, train, state = run.cfg, run.train, run.state
    device = train.x.device
    order = torch.randperm(len(train), generator=run.generator).to(device)
    loss_sum = torch.zeros((), device=device)
    seen = 0
    step_losses: list[torch.Tensor] = []
    for batch in range(run.steps_per_epoch):
        if state.step >= run.total_steps:
            break
        index = order[batch * cfg.batch_size : (batch + 1) * cfg.batch_size]
        x, y = train.x.index_select(0, index), train.y.index_select(0, index)
        y_mix, lam = y, 1.0
        if cfg.augment is not None:
            x, y_mix, lam = cfg.augment(x, y, run.generator)
        with run.autocast():
            out = run.step_model(x)
            loss = _task_loss(train.task, out, y, cfg.label_smoothing)
            if lam != 1.0:
                loss = lam * loss + (1.0 - lam) * _task_loss(
                    train.task, out, y_mix, cfg.label_smoothing
                )
        # frozen parameters keep grad None: no momentum/decay update
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        callbacks.on_after_backward(state)
        state.optimizer.step()
        state.scheduler.step()
        state.step += 1
        loss_sum += loss.detach() * len(index)
        seen += len(index)
        step_losses.append(loss.detach())
        if run.bar is not None:
            run.bar.update()
        if callbacks:
            state.loss = loss.item()
            callbacks.on_step_end(state)
            if state.stop_training:  # a step hook ends the run at this step, not later
                break
    return (loss_sum / max(seen, 1)).item(), seen, step_losses


def _epoch(run: _Run, epoch: int, callbacks: CallbackList) -> None:
    """One epoch: its steps, the evaluation on val, its history record and checkpoint."""
    state, metric = run.state, run.state.history.metric
    state.epoch = epoch
    state.model.train()
    callbacks.on_epoch_start(state)
    started = time.perf_counter()
    train_loss, seen, step_losses = _train_steps(run, callbacks)
    train_time = time.perf_counter() - started
    state.model.eval()
    scores = _evaluate_on_device(
        run.step_model, run.val, run.cfg.eval_batch_size, run.autocast
    )
    diverged = is_diverged((train_loss, scores["loss"]), run.bound)
    if diverged and run.cfg.on_divergence == "raise":
        if run.bar is not None:
            run.bar.close()
        losses = torch.stack(step_losses) if step_losses else torch.zeros(0)
        raise _divergence(
            epoch,
            state.step,
            losses,
            (train_loss, scores["loss"]),
            run.bound,
            run.val.title,
        )
    state.loss = train_loss
    state.history.append(
        {
            "epoch": epoch,
            "step": state.step,
            "lr": float(state.scheduler.get_last_lr()[0]),
            "train_loss": train_loss,
            "val_loss": scores["loss"],
            f"val_{metric}": scores[metric],
            "epoch_time_s": time.perf_counter() - started,
            "samples_per_s": seen / train_time if train_time > 0 else float("nan"),
        }
    )
    if run.bar is not None:
        run.bar.set_postfix(
            epoch=epoch,
            train_loss=f"{train_loss:.3g}",
            **{f"val_{metric}": f"{scores[metric]:.4g}"},
        )
    if diverged:
        state.stop_training = True
    callbacks.on_epoch_end(state)
    if run.path is not None:
        checkpoint.save(run.path, state, **run.saving)


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
        DivergenceError: for a diverged epoch (:func:`is_diverged`: a non-finite training
            loss or val output, or a loss above :func:`divergence_bound`), unless
            ``on_divergence="stop"``.
    """
    cfg = _resolve_config(config, settings)
    hooks = CallbackList(callbacks)
    run = _prepare(model, train, val, cfg, hooks)
    state = run.state
    hooks.on_train_start(state)
    for epoch in range(state.epoch + 1, cfg.epochs + 1):
        if state.stop_training or state.step >= run.total_steps:
            break
        _epoch(run, epoch, hooks)
    if run.bar is not None:
        run.bar.close()
    hooks.on_train_end(state)
    return state.history
