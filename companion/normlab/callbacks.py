"""The callback protocol of :func:`normlab.training.fit`.

A callback sees the whole training state at fixed points of the loop and may change it
(freeze parameters, stop early, record telemetry) without the loop knowing about it::

    for epoch in range(start, epochs + 1):
        callbacks.on_epoch_start(state)
        for batch in batches:
            loss.backward()
            callbacks.on_after_backward(state)   # gradients are populated here
            optimizer.step(); scheduler.step()
            callbacks.on_step_end(state)
            if state.stop_training: break        # a step hook may end the run here
        (evaluate on val, append to state.history)
        callbacks.on_epoch_end(state)           # state.history[-1] holds this epoch
    callbacks.on_train_end(state)

Callbacks that keep state implement ``state_dict``/``load_state_dict`` so that a resumed run
continues exactly where an interrupted one stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

__all__ = [
    "Callback",
    "CallbackList",
    "TrainState",
]


@dataclass
class TrainState:
    """What the loop exposes to callbacks.

    ``epoch`` counts from 1 and is the epoch in progress (or just finished, in
    ``on_epoch_end``); ``step`` counts optimiser steps since the start of training;
    ``loss`` is the last mini-batch loss as a float. Setting ``stop_training`` ends the run:
    in ``on_step_end`` at that step (the cut-short epoch is evaluated and recorded as any
    other), elsewhere after the current epoch.
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    epochs: int
    epoch: int = 0
    step: int = 0
    loss: float = float("nan")
    history: list[dict[str, Any]] = field(default_factory=list)
    stop_training: bool = False


class Callback:
    """Base class: every hook does nothing; override the ones you need."""

    def on_train_start(self, state: TrainState) -> None:
        """Called once, after the model and optimiser are ready (and a checkpoint restored)."""

    def on_epoch_start(self, state: TrainState) -> None:
        """Called before the first batch of each epoch."""

    def on_after_backward(self, state: TrainState) -> None:
        """Called after ``loss.backward()`` and before ``optimizer.step()``."""

    def on_step_end(self, state: TrainState) -> None:
        """Called after each optimiser step."""

    def on_epoch_end(self, state: TrainState) -> None:
        """Called after validation; ``state.history[-1]`` holds this epoch's metrics."""

    def on_train_end(self, state: TrainState) -> None:
        """Called once when training ends."""

    def state_dict(self) -> dict[str, Any]:
        """Return what must be saved in a checkpoint for an exact resume."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""


class CallbackList(list):
    """The callbacks of a run as one: each hook calls that hook of every callback, in order.

    ``fit`` calls ``CallbackList(callbacks).on_epoch_end(state)`` where it would loop; the
    list is also what a checkpoint saves and restores, callback by callback.
    """

    def _call(self, hook: str, state: TrainState) -> None:
        for callback in self:
            getattr(callback, hook)(state)

    def on_train_start(self, state: TrainState) -> None:
        self._call("on_train_start", state)

    def on_epoch_start(self, state: TrainState) -> None:
        self._call("on_epoch_start", state)

    def on_after_backward(self, state: TrainState) -> None:
        self._call("on_after_backward", state)

    def on_step_end(self, state: TrainState) -> None:
        self._call("on_step_end", state)

    def on_epoch_end(self, state: TrainState) -> None:
        self._call("on_epoch_end", state)

    def on_train_end(self, state: TrainState) -> None:
        self._call("on_train_end", state)
