"""The settings of :func:`normlab.training.fit`: :class:`FitConfig`, checked when built.

Also importable from :mod:`normlab.training`, the module that documents them.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._checks import fraction, one_of, positive_int, positive_number
from ._checks import seed as check_seed
from .augment import Augment

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "rmsprop": torch.optim.RMSprop,
}
SCHEDULES: tuple[str, ...] = ("constant", "cosine", "warmup_cosine")
DIVERGENCE_ACTIONS: tuple[str, ...] = ("raise", "stop")


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
        on_divergence: what a diverged epoch does (a training or val loss that is not finite
            or is above :func:`normlab.training.divergence_bound`): ``"raise"`` (default)
            raises :class:`DivergenceError` naming the epoch and step, before that epoch's
            checkpoint; ``"stop"`` ends training after that epoch and records it, its losses
            and metrics as they are, NaN where not finite (for grids that expect divergence).
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
