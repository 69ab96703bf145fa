"""The optimisers of :mod:`normlab.population`: SGD, Adam and AdamW on stacked parameters.

Every parameter has a leading member dimension ``K``; each member has its own learning rate
(a ``(K,)`` tensor) and its own optimiser state, and a member that is no longer ``active``
(it diverged) keeps its parameters and state unchanged. The update rules are torch's
single-tensor ones (``torch.optim.SGD``, ``Adam``, ``AdamW``), written out so that the
learning rate may differ per member: per element they are the same formulas, so a member
follows its single run to rounding (the order of a few multiplications differs).

Weight decay applies to matrices and kernels only (a member's ``ndim >= 2``), as
:func:`normlab.training.fit`'s optimiser groups do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["POPULATION_OPTIMIZERS", "StackedOptimizer"]

POPULATION_OPTIMIZERS: tuple[str, ...] = ("sgd", "adam", "adamw")


def _pick(
    keep: torch.Tensor | None, new: torch.Tensor, old: torch.Tensor
) -> torch.Tensor:
    """``new`` where ``keep`` (every member when ``keep`` is None), else ``old``."""
    return new if keep is None else torch.where(keep, new, old)


@dataclass
class StackedOptimizer:
    """One optimiser over stacked parameters, torch's defaults where ``kwargs`` say nothing.

    ``step(params, grads, lr, active)``: ``lr`` is the ``(K,)`` learning rate of this step
    (the base rates times the schedule's multiplier), ``active`` a ``(K,)`` bool mask.
    """

    name: str
    weight_decay: float = 0.0
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    state: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    steps: int = 0

    def __post_init__(self) -> None:
        if self.name not in POPULATION_OPTIMIZERS:
            raise ValueError(
                f"a population trains with {', '.join(POPULATION_OPTIMIZERS)}, not {self.name!r}"
            )
        allowed = {
            "sgd": {"momentum", "dampening", "nesterov"},
            "adam": {"betas", "eps"},
            "adamw": {"betas", "eps"},
        }[self.name]
        unknown = set(self.kwargs) - allowed
        if unknown:
            raise ValueError(
                f"population {self.name} does not take {', '.join(sorted(unknown))}"
            )

    @torch.no_grad()
    def step(
        self,
        params: Mapping[str, torch.Tensor],
        grads: Mapping[str, torch.Tensor | None],
        lr: torch.Tensor,
        active: torch.Tensor,
        skip: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        """One step; ``skip`` (optional) maps a parameter's name to the ``(K,)`` members
        whose single run would have no gradient for it (a frozen gate): as there, they
        get no update, no decay and no moment update.

        The parameters with one weight decay are updated as one flat ``(K, P)`` tensor
        (a few dozen small tensors cost a few dozen times the operations): per element
        the arithmetic is the single-tensor rule's, so the numbers are the same."""
        self.steps += 1
        k = lr.shape[0]
        groups: dict[float, list[str]] = {}
        for name, p in params.items():
            if grads.get(name) is None:  # frozen in every member: as in fit, no step
                continue
            groups.setdefault(self.weight_decay if p.dim() >= 3 else 0.0, []).append(
                name
            )
        for decay, names in groups.items():
            sizes = [params[n][0].numel() for n in names]
            flat = torch.cat([params[n].reshape(k, -1) for n in names], 1)
            grad = torch.cat([grads[n].reshape(k, -1) for n in names], 1)  # type: ignore[union-attr]
            alive = [
                active if not skip or n not in skip else active & ~skip[n]
                for n in names
            ]
            # every member stepping (the usual case): no masking, the same numbers
            keep = None
            if not all(bool(a.all()) for a in alive):
                keep = torch.cat(
                    [a.view(k, 1).expand(k, size) for a, size in zip(alive, sizes)], 1
                )
            counted = torch.stack(alive, 1).double()  # (K, parameters): who steps
            rate = lr.reshape(k, 1).to(flat.dtype)
            new = _pick(
                keep,
                self._update(
                    "|".join(names), flat, grad, rate, decay, keep, counted, sizes
                ),
                flat,
            )
            for name, part in zip(names, new.split(sizes, 1)):
                params[name].copy_(part.view_as(params[name]))

    def _update(
        self,
        key: str,
        p: torch.Tensor,
        grad: torch.Tensor,
        rate: torch.Tensor,
        decay: float,
        keep: torch.Tensor | None,
        counted: torch.Tensor,
        sizes: list[int],
    ) -> torch.Tensor:
        """The flat ``(K, P)`` parameters ``p`` after one step (state updated only where
        ``keep``; None: all); ``counted`` says, per member and parameter, whether its
        step counts (Adam's bias correction), ``sizes`` each parameter's length."""
        state = self.state.setdefault(key, {})
        if self.name == "sgd":
            return self._sgd(state, p, grad, rate, decay, keep)
        return self._adam(state, p, grad, rate, decay, keep, counted, sizes)

    def _sgd(self, state, p, grad, rate, decay, keep) -> torch.Tensor:  # type: ignore[no-untyped-def]
        momentum = float(self.kwargs.get("momentum", 0.0))
        dampening = float(self.kwargs.get("dampening", 0.0))
        if decay:
            grad = grad.add(p, alpha=decay)
        if momentum:
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p)
                state["started"] = torch.zeros_like(p, dtype=torch.bool)
            # torch starts a buffer at a parameter's first gradient, as the gradient
            # itself: per member, since a frozen gate's member may get its first later
            buf = torch.where(
                state["started"],
                state["momentum_buffer"] * momentum + grad * (1 - dampening),
                grad,
            )
            state["momentum_buffer"] = _pick(keep, buf, state["momentum_buffer"])
            state["started"] = state["started"] | (True if keep is None else keep)
            grad = grad.add(buf, alpha=momentum) if self.kwargs.get("nesterov") else buf
        return p - rate * grad

    def _adam(self, state, p, grad, rate, decay, keep, counted, sizes) -> torch.Tensor:  # type: ignore[no-untyped-def]
        beta1, beta2 = self.kwargs.get("betas", (0.9, 0.999))
        eps = float(self.kwargs.get("eps", 1e-8))
        if "exp_avg" not in state:
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
            state["step"] = torch.zeros(counted.shape, dtype=torch.float64)
        if self.name == "adamw":
            p = p * (1 - rate * decay)
        elif decay:
            grad = grad.add(p, alpha=decay)
        # each member counts its own steps, per parameter: a stopped member's (or a
        # frozen gate's) bias correction stands still
        step = state["step"] + counted.cpu()
        exp_avg = _pick(keep, state["exp_avg"].lerp(grad, 1 - beta1), state["exp_avg"])
        exp_avg_sq = _pick(
            keep,
            state["exp_avg_sq"] * beta2 + grad * grad * (1 - beta2),
            state["exp_avg_sq"],
        )
        state.update(step=step, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
        t = step.clamp_min(1)
        lengths = torch.tensor(sizes, device=p.device)
        correction1 = (1 - beta1**t).to(p.device, p.dtype).repeat_interleave(lengths, 1)
        correction2 = (
            (1 - beta2**t).sqrt().to(p.device, p.dtype).repeat_interleave(lengths, 1)
        )
        step_size = rate / correction1
        denom = exp_avg_sq.sqrt() / correction2 + eps
        return p - step_size * exp_avg / denom

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "state": self.state}

    def load_state_dict(self, saved: Mapping[str, Any]) -> None:
        self.steps = int(saved["steps"])
        self.state = {k: dict(v) for k, v in saved["state"].items()}


def check_rates(lrs: torch.Tensor) -> None:
    """Every member's learning rate positive and finite."""
    bad = [float(v) for v in lrs if not (math.isfinite(float(v)) and float(v) > 0)]
    if bad:
        raise ValueError(f"learning rates must be positive and finite, got {bad}")
