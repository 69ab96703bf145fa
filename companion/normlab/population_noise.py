"""What a population's members draw and report one by one: the gates' noise, and callbacks.

:class:`GateNoise` draws, for every member and every AutoNorm gate that samples, the noise a
single run would draw in its forward pass: Gumbel noise for a learned gate
(:func:`normlab.functional.sample_gumbel`), a uniform weight for the random selector. Member k's
stream is a generator seeded with its seed, which is the stream a single run's forward
passes read (:func:`normlab.training.fit` seeds the global generator with the seed before
the first step, and nothing else in the loop reads it); draws are made in the order of the
model's modules, which is the order its forward pass calls them. So a member's first loss is
its single run's, and its later noise too, while their weights agree.

:class:`MemberCallbacks` runs read-only callbacks (:class:`normlab.gates.GateTelemetry`) for
each member on its own plain model: before each update that model is given the member's
gradients and gate probabilities, which is all such a callback reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from .callbacks import Callback, CallbackList, TrainState
from .functional import sample_gumbel
from .gates import autonorm_layers
from .layers.gate import AutoNorm, NormSelector

if TYPE_CHECKING:  # pragma: no cover
    from ._fit_config import FitConfig


class _PopulationView(Protocol):
    """What the noise and the callbacks read of a :class:`normlab.population.Population`
    (a protocol, so this module does not import the one that imports it)."""

    template: nn.Module
    probed: dict[str, torch.Tensor]
    frozen: dict[str, torch.Tensor]


__all__ = ["GateNoise", "MemberCallbacks"]


class GateNoise:
    """Each member's gate noise for one training forward pass, from its own stream.

    ``GateNoise(model, seeds)(population, batch)`` returns ``{module name: (K, batch, k)}``
    for each learned gate (:class:`~normlab.layers.NormSelector`) and ``(K, batch)`` for
    each random selector (an :class:`~normlab.layers.AutoNorm` without one); pinned
    layers, frozen gates and eval mode draw nothing, as in a single run.
    """

    def __init__(self, model: nn.Module, seeds: Sequence[int]) -> None:
        self.sites: list[tuple[str, str]] = []
        for name, module in model.named_modules():
            if isinstance(module, NormSelector):
                self.sites.append((name, "gumbel"))
            elif isinstance(module, AutoNorm) and module.selector is None:
                self.sites.append((name, "uniform"))
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]

    def _active(self, template: nn.Module) -> list[tuple[str, str, nn.Module]]:
        """The sites that draw in this pass: in training mode, not pinned, not frozen."""
        active = []
        for name, kind in self.sites:
            module = template.get_submodule(name)
            parent = (
                template.get_submodule(name.rpartition(".")[0])
                if kind == "gumbel"
                else module
            )
            if not module.training or getattr(parent, "pin", None) is not None:
                continue
            if kind == "gumbel" and module.frozen:
                continue
            active.append((name, kind, module))
        return active

    def __call__(
        self, population: _PopulationView, batch: int
    ) -> dict[str, torch.Tensor]:
        sites = self._active(population.template)
        draws: dict[str, list[torch.Tensor]] = {name: [] for name, _, _ in sites}
        # member by member, each one's draws in its forward pass's order
        for k, generator in enumerate(self.generators):
            for name, kind, module in sites:
                frozen = population.frozen.get(name)
                if frozen is not None and bool(frozen[k]):  # draws nothing, as alone
                    draws[name].append(torch.zeros(batch, module.k))
                    continue
                draws[name].append(
                    sample_gumbel((batch, module.k), generator=generator)
                    if kind == "gumbel"
                    else torch.rand(batch, generator=generator)
                )
        device = next(iter(population.params.values())).device
        return {name: torch.stack(d).to(device) for name, d in draws.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"generators": [g.get_state() for g in self.generators]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for g, saved in zip(self.generators, state["generators"]):
            g.set_state(saved)


class _ModuleView(nn.Module):
    """A member's model as its callbacks see it: its modules listed once, not walked at
    every call (a callback looks its gates up several times a step, for K members)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        object.__setattr__(self, "module", module)  # not a child: no second walk
        object.__setattr__(self, "_listed", list(module.named_modules()))

    def named_modules(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return iter(self._listed)

    def parameters(self, recurse: bool = True) -> Any:  # type: ignore[override]
        return self.module.parameters(recurse)


class MemberCallbacks:
    """Callbacks per member, each on its member's own plain model (``shadows[k]``, whose
    weights are not trained): a callback reads its gates' gradients and probabilities,
    and may drop a gate's gradients or freeze it (AutoNorm-S), which the population then
    does for that member. The other parameters carry no gradient there."""

    def __init__(
        self,
        shadows: Sequence[nn.Module],
        callbacks: Sequence[Sequence[Callback]],
        histories: Sequence[list[dict[str, Any]]],
        cfg: FitConfig,
    ) -> None:
        if len(callbacks) != len(shadows):
            raise ValueError(
                f"{len(shadows)} members but {len(callbacks)} callback lists"
            )
        self.callbacks = [CallbackList(c) for c in callbacks]
        self.states = [
            TrainState(
                model=_ModuleView(m),
                optimizer=None,
                scheduler=None,
                epochs=cfg.epochs,
                history=h,
            )  # type: ignore[arg-type]
            for m, h in zip(shadows, histories)
        ]
        self.params = [dict(m.named_parameters()) for m in shadows]
        self.layers = [dict(autonorm_layers(m)) for m in shadows]
        self.probes = list(self.layers[0])
        gates = [
            f"{n}."
            for n, m in shadows[0].named_modules()
            if isinstance(m, NormSelector)
        ]
        self.gate_params = [
            n for n in self.params[0] if any(n.startswith(g) for g in gates)
        ]
        self.epoch = 0

    def __bool__(self) -> bool:
        return any(self.callbacks)

    def after_backward(
        self,
        population: _PopulationView,
        grads: Mapping[str, torch.Tensor],
        losses: torch.Tensor,
        active: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Give each active member's model its gradients (none for a frozen gate's
        parameters, as a single run has none) and gate probabilities, then call its
        callbacks' ``on_after_backward``. Returns, per parameter name, the ``(K,)`` members
        left without a gradient (by a freeze, or a callback that dropped it)."""
        dropped: dict[str, list[int]] = {}
        # the gates' gradients, what these callbacks read or drop (the others: not given)
        members = {n: grads[n].unbind(0) for n in self.gate_params if n in grads}
        for k, callbacks in enumerate(self.callbacks):
            if not bool(active[k]):
                continue
            frozen = [f"{g}." for g, mask in population.frozen.items() if bool(mask[k])]
            for name, grad in members.items():
                none = frozen and any(name.startswith(prefix) for prefix in frozen)
                self.params[k][name].grad = None if none else grad[k]
            for name, layer in self.layers[k].items():
                probed = population.probed.get(name)
                layer.last_probs = None if probed is None else probed[k]
            state = self.states[k]
            state.loss, state.epoch = float(losses[k]), self.epoch
            callbacks.on_after_backward(state)
            for name in members:
                if self.params[k][name].grad is None:
                    dropped.setdefault(name, []).append(k)
        skip = {}
        for name, ks in dropped.items():
            skip[name] = torch.zeros(len(self.callbacks), dtype=torch.bool)
            skip[name][ks] = True
        return skip

    def sync_frozen(self, population: _PopulationView, k: int) -> None:
        """Member ``k``'s gates as its callbacks left them (AutoNorm-S froze them on its
        own model): frozen in the population too."""
        model = self.states[k].model.module
        for name, mask in population.frozen.items():
            mask[k] = bool(model.get_submodule(name).frozen)

    def call(self, hook: str, step: int, active: torch.Tensor) -> None:
        """``hook`` of every active member's callbacks, at ``step``."""
        for k, callbacks in enumerate(self.callbacks):
            if bool(active[k]):
                self.states[k].step, self.states[k].epoch = step, self.epoch
                getattr(callbacks, hook)(self.states[k])

    def epoch_end(self, k: int, step: int, train_loss: float) -> None:
        """Member ``k``'s ``on_epoch_end``, once its epoch is in its history."""
        state = self.states[k]
        state.step, state.epoch, state.loss = step, self.epoch, train_loss
        self.callbacks[k].on_epoch_end(state)

    def state_dict(self) -> list[list[dict[str, Any]]]:
        return [[c.state_dict() for c in callbacks] for callbacks in self.callbacks]

    def load_state_dict(self, saved: Sequence[Sequence[Mapping[str, Any]]]) -> None:
        for callbacks, states in zip(self.callbacks, saved):
            for callback, state in zip(callbacks, states):
                callback.load_state_dict(dict(state))
