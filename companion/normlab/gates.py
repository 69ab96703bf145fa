"""AutoNorm's gate: telemetry, the Gumbel-Softmax gradient estimator, and the AutoNorm-S schedule.

- :func:`gate_entropy`, :func:`autonorm_layers`, :func:`selector_parameters`: plain functions.
- :func:`gumbel_grad_moments`: the mean and variance of the reparameterised gradient as a
  function of the temperature, measured by sampling; :func:`categorical_grad` is the exact
  gradient it estimates as :math:`\\tau \\to 0`.
- :class:`GateAverages`: per-layer means of the gate probabilities and entropy over training
  steps, the one accumulator both callbacks below use.
- :class:`GateTelemetry`: a callback recording, per AutoNorm layer and epoch, the gate
  probabilities, their entropy and a running estimate of the selector's gradient variance and
  signal-to-noise ratio.
- :class:`AutoNormS`: the paper's gate-freezing schedule, as a callback.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from ._checks import one_of, positive_int
from .callbacks import Callback, TrainState
from .functional import check_tau, gumbel_softmax, sample_gumbel
from .layers.gate import CANDIDATES, AutoNorm
from .paper import EPS_H, FREEZE_RULES, T_FREEZE_EPOCHS

__all__ = [
    "FREEZE_PREFIX",
    "READY_ARM",
    "READY_LEAD",
    "SAMPLE_PREFIX",
    "AutoNormS",
    "GateAverages",
    "GateTelemetry",
    "ReadyAutoNormS",
    "autonorm_layers",
    "categorical_grad",
    "freeze_selector",
    "gate_entropy",
    "gumbel_grad_moments",
    "gumbel_grad_snr",
    "gumbel_softmax",
    "sample_gumbel",
    "selector_parameters",
]

#: The gate studies' arm names: freeze the gates at the end of epoch T (AutoNorm-S's
#: freeze), or stop their learning there and keep sampling (chapter 12's ablation).
FREEZE_PREFIX = "freeze_at_"
SAMPLE_PREFIX = "sample_at_"
#: :class:`ReadyAutoNormS`'s lead in the gate studies: the freeze is decided after warm-up,
#: at the first epoch whose validation accuracy has left chance by this much (the features
#: have formed)
READY_LEAD = 0.3
#: The gate studies' arm of AutoNorm-S deciding after warm-up (``gate_regime``).
READY_ARM = "autonorm_s_ready"


def gate_entropy(probs: torch.Tensor) -> torch.Tensor:
    r"""Entropy in nats of each distribution along the last dimension: :math:`-\sum_i p_i \log p_i`.

    Give it the gate *probabilities* (``AutoNorm.last_probs``), never a hard sample, whose
    entropy is always 0. ``0 log 0 = 0``. The result lies in :math:`[0, \log k]`.
    """
    if probs.dim() < 1 or probs.shape[-1] < 1:
        raise ValueError(
            f"probs must have a last dimension of candidates, got shape {tuple(probs.shape)}"
        )
    probs = probs.float()
    return -torch.special.xlogy(probs, probs).sum(dim=-1)


def autonorm_layers(model: nn.Module) -> list[tuple[str, AutoNorm]]:
    """Every :class:`AutoNorm` in ``model``, as ``(qualified name, layer)`` in module order."""
    return [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, AutoNorm)
    ]


def selector_parameters(layer: AutoNorm) -> list[nn.Parameter]:
    """The gate's parameters (empty for the random selector)."""
    return [] if layer.selector is None else list(layer.selector.parameters())


def freeze_selector(layer: AutoNorm) -> None:
    """Stop a layer's gate from learning or sampling.

    Its parameters get ``requires_grad=False`` and ``grad=None``: backward then never fills
    their gradients, ``zero_grad`` (with or without ``set_to_none``) leaves them ``None``, and
    torch optimisers skip parameters without a gradient, so neither AdamW's weight decay nor
    its moments move them. They stay in the optimiser's parameter groups, so an optimiser
    state saved after freezing loads into a freshly built optimiser (exact resume). The
    selector is marked ``frozen``: its weights become deterministic, as in eval mode.
    """
    if layer.selector is None:
        raise ValueError("the random selector has no gate parameters to freeze")
    layer.selector.frozen = True
    for param in layer.selector.parameters():
        param.requires_grad_(False)
        param.grad = None


def categorical_grad(logits: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    r"""Exact gradient of :math:`\mathbb{E}_{i \sim \mathrm{softmax}(\ell)}[v_i]` with respect to
    :math:`\ell`: :math:`p \odot (v - p^\top v)`."""
    p = torch.softmax(logits.double(), dim=-1)
    v = values.double()
    return p * (v - (p * v).sum(dim=-1, keepdim=True))


def gumbel_grad_moments(
    logits: torch.Tensor,
    tau: float,
    n: int,
    *,
    values: torch.Tensor | None = None,
    hard: bool = False,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Mean and variance, per logit, of the Gumbel-Softmax gradient of :math:`f(w) = v^\top w`.

    Draws ``n`` independent relaxed samples :math:`w^{(s)} = \mathrm{GumbelSoftmax}(\ell, \tau)`
    and returns the sample mean and variance over ``s`` of :math:`\partial f(w^{(s)}) / \partial
    \ell`. ``values`` :math:`v` defaults to the first basis vector, so :math:`f = w_0` (the
    weight given to the first candidate). ``hard=True`` measures the straight-through
    estimator (whose gradient is the soft one).
    """
    if logits.dim() != 1 or logits.numel() < 2:
        raise ValueError(
            f"logits must be a 1-D tensor over >= 2 candidates, got shape {tuple(logits.shape)}"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2, got {n!r}")
    k = logits.numel()
    if values is None:
        values = torch.zeros(k).index_fill_(0, torch.tensor(0), 1.0)
    if values.shape != logits.shape:
        raise ValueError(
            f"values of shape {tuple(values.shape)} do not match logits {tuple(logits.shape)}"
        )
    batch = logits.detach().float().expand(n, k).clone().requires_grad_(True)
    weights = gumbel_softmax(batch, tau, hard, generator=generator)
    (grad,) = torch.autograd.grad((weights * values.float()).sum(), batch)
    grad = grad.double()
    return grad.mean(dim=0), grad.var(dim=0)


def gumbel_grad_snr(
    logits: torch.Tensor,
    tau: float,
    n: int,
    *,
    generator: torch.Generator | None = None,
) -> float:
    r"""Signal-to-noise ratio of the Gumbel-Softmax gradient of the first weight:
    :math:`\lVert \mathbb{E}[g] \rVert^2 / \operatorname{tr} \operatorname{Cov}(g)`, from ``n``
    samples (:func:`gumbel_grad_moments`). It grows with ``tau`` and falls as the gate decides.
    """
    mean, var = gumbel_grad_moments(logits, tau, n, generator=generator)
    return float((mean**2).sum() / var.sum())


class GateAverages:
    """Per-layer means, over training steps, of each AutoNorm gate's probabilities and entropy.

    :meth:`add` counts one step and sums, for every layer with gate probabilities
    (``last_probs``; pinned layers have none), the batch means of the probabilities and of
    their entropy, in float32. :meth:`means` divides the sums by the steps counted.
    """

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.steps = 0

    def reset(self) -> None:
        self.sums, self.steps = {}, 0

    def add(self, layers: Iterable[tuple[str, AutoNorm]]) -> None:
        self.steps += 1
        for name, layer in layers:
            if layer.last_probs is None:
                continue
            probs = layer.last_probs.float()
            row = torch.cat([probs.mean(dim=0), gate_entropy(probs).mean().reshape(1)])
            self.sums[name] = self.sums[name] + row if name in self.sums else row

    def means(self) -> dict[str, dict[str, float]]:
        """Per layer: ``p_<candidate>`` for each of :data:`CANDIDATES`, and ``entropy`` (nats)."""
        keys = [f"p_{c}" for c in CANDIDATES] + ["entropy"]
        return {
            name: {key: total / self.steps for key, total in zip(keys, sums.tolist())}
            for name, sums in self.sums.items()
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "sums": {n: s.detach().cpu().clone() for n, s in self.sums.items()},
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sums = {n: s.clone() for n, s in state["sums"].items()}
        self.steps = int(state["steps"])


#: An AutoNorm layer as the telemetry reads it: its name, itself, its gate's parameters.
_Gate = tuple[str, AutoNorm, list[nn.Parameter]]


class GateTelemetry(Callback):
    r"""Record what every AutoNorm gate does, per layer and epoch.

    Per training step it accumulates, for each layer, the mean gate probabilities and their
    entropy (on ``last_probs``, the probabilities, not the sampled weights) and updates
    exponential moving averages (decay ``beta``, bias-corrected as in Adam) of the gradient
    :math:`g` of the layer's selector parameters and of :math:`g^2`. From them:

    .. math::
        \widehat{\mathrm{Var}} = \hat m_2 - \hat m_1^2, \qquad
        \mathrm{SNR} = \frac{\lVert \hat m_1 \rVert^2}{\sum \widehat{\mathrm{Var}}}

    ``grad_var`` is the mean per-parameter variance. At each epoch end one row per layer is
    appended to ``records``: ``epoch``, ``layer``, ``p_dyt``, ``p_ln``, ``entropy``,
    ``grad_var``, ``snr``; the last two are NaN when the selector received no gradient during
    the epoch (random selector, frozen gate).
    """

    def __init__(self, beta: float = 0.9) -> None:
        if not 0.0 < beta < 1.0:
            raise ValueError(f"beta must lie in (0, 1), got {beta!r}")
        self.beta = float(beta)
        self.records: list[dict[str, Any]] = []
        self._moments: dict[str, dict[str, Any]] = {}
        self._averages = GateAverages()
        self._with_grad: set[str] = set()
        self._listed: tuple[nn.Module | None, list[_Gate]] = (None, [])

    def _gates(self, model: nn.Module) -> list[_Gate]:
        """The model's AutoNorm layers with their gates' parameters, listed once per model
        (a population calls this for each member at every step)."""
        if self._listed[0] is not model:
            self._listed = (
                model,
                [(n, m, selector_parameters(m)) for n, m in autonorm_layers(model)],
            )
        return self._listed[1]

    def on_epoch_start(self, state: TrainState) -> None:
        self._averages.reset()
        self._with_grad = set()

    def on_after_backward(self, state: TrainState) -> None:
        for name, _, params in self._gates(state.model):
            grads = [p.grad.detach().flatten() for p in params if p.grad is not None]
            if not grads:
                continue
            g = torch.cat(grads).double()
            moments = self._moments.setdefault(
                name, {"m1": torch.zeros_like(g), "m2": torch.zeros_like(g), "t": 0}
            )
            moments["m1"].mul_(self.beta).add_(g, alpha=1 - self.beta)
            moments["m2"].mul_(self.beta).add_(g * g, alpha=1 - self.beta)
            moments["t"] += 1
            self._with_grad.add(name)

    def on_step_end(self, state: TrainState) -> None:
        self._averages.add((name, layer) for name, layer, _ in self._gates(state.model))

    def gradient_stats(self, name: str) -> tuple[float, float]:
        """``(grad_var, snr)`` of one layer's selector gradient so far (NaN before any gradient)."""
        moments = self._moments.get(name)
        if moments is None or moments["t"] == 0:
            return math.nan, math.nan
        correction = 1 - self.beta ** moments["t"]
        m1, m2 = moments["m1"] / correction, moments["m2"] / correction
        var = (m2 - m1 * m1).clamp_min(0.0)
        total = var.sum().item()
        snr = m1.pow(2).sum().item() / total if total > 0 else math.inf
        return var.mean().item(), snr

    def on_epoch_end(self, state: TrainState) -> None:
        means = self._averages.means()
        for name, _, _ in self._gates(state.model):
            if name not in means:
                continue
            grad_var, snr = (
                self.gradient_stats(name)
                if name in self._with_grad
                else (math.nan, math.nan)
            )
            self.records.append(
                {
                    "epoch": state.epoch,
                    "layer": name,
                    **means[name],
                    "grad_var": grad_var,
                    "snr": snr,
                }
            )

    def state_dict(self) -> dict[str, Any]:
        moments = {
            n: {"m1": m["m1"].clone(), "m2": m["m2"].clone(), "t": m["t"]}
            for n, m in self._moments.items()
        }
        return {
            "records": [dict(r) for r in self.records],
            "moments": moments,
            "averages": self._averages.state_dict(),
            "with_grad": sorted(self._with_grad),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.records = [dict(r) for r in state["records"]]
        self._moments = {
            n: {"m1": m["m1"].clone(), "m2": m["m2"].clone(), "t": m["t"]}
            for n, m in state["moments"].items()
        }
        self._averages.load_state_dict(state["averages"])
        self._with_grad = set(state["with_grad"])


class AutoNormS(Callback):
    r"""AutoNorm-S: monitor gate entropy during warm-up, then freeze undecided gates.

    During epochs :math:`1 \ldots T_\text{freeze}` it records the mean gate entropy :math:`H`
    (nats, over the epoch's training steps and samples) of every learned AutoNorm layer and
    overall. At the end of epoch :math:`T_\text{freeze}`:

    - ``rule="high"`` (the paper): if :math:`H \geq \epsilon_H` the gates have not decided,
      and every selector is frozen (:func:`freeze_selector`); the backbone keeps training.
    - ``rule="low"``: the opposite reading, freeze once :math:`H < \epsilon_H` (the gate
      has decided, so stop its noise).
    - ``per_layer=True``: apply the rule to each layer's own entropy and freeze only those
      layers, instead of to the overall mean.

    Defaults are the paper's: ``t_freeze`` 10, ``eps_h`` 0.1, and ``tau`` 0.5, which is set
    on every selector at the start of training (``tau=None`` keeps each layer's own).
    ``eps_h`` must lie in :math:`[0, \log k]` (the largest entropy over :math:`k` candidates).
    ``entropy_records`` holds one ``{"epoch", "mean", "layers"}`` dict per warm-up epoch;
    ``frozen`` lists the frozen layers' names.
    """

    def __init__(
        self,
        t_freeze: int = T_FREEZE_EPOCHS,
        eps_h: float = EPS_H,
        *,
        tau: float | None = 0.5,
        per_layer: bool = False,
        rule: str = "high",
    ) -> None:
        positive_int("t_freeze", t_freeze)
        max_entropy = math.log(len(CANDIDATES))
        if not isinstance(eps_h, (int, float)) or not 0.0 <= eps_h <= max_entropy:
            raise ValueError(
                f"eps_h (eps_H) must lie in [0, ln {len(CANDIDATES)}] = [0, {max_entropy:.4f}], got {eps_h!r}"
            )
        one_of("rule", rule, FREEZE_RULES)
        self.t_freeze = t_freeze
        self.eps_h = float(eps_h)
        self.tau = None if tau is None else check_tau(tau)
        self.per_layer = bool(per_layer)
        self.rule = rule
        self.entropy_records: list[dict[str, Any]] = []
        self.frozen: list[str] = []
        self.decided = False
        self._averages = GateAverages()

    def _layers(self, model: nn.Module) -> list[tuple[str, AutoNorm]]:
        return [
            (name, layer)
            for name, layer in autonorm_layers(model)
            if layer.selector is not None
        ]

    def _should_freeze(self, entropy: float) -> bool:
        return entropy >= self.eps_h if self.rule == "high" else entropy < self.eps_h

    def on_train_start(self, state: TrainState) -> None:
        layers = self._layers(state.model)
        if not layers:
            raise ValueError(
                "AutoNormS needs a model with at least one learned AutoNorm layer"
            )
        if self.t_freeze > state.epochs:
            raise ValueError(
                f"AutoNormS(t_freeze={self.t_freeze}) with epochs={state.epochs} would never "
                f"decide (it freezes at the end of epoch t_freeze); use t_freeze <= "
                f"{state.epochs} or train for more epochs"
            )
        for name, layer in layers:
            if self.eps_h > math.log(layer.selector.k):
                raise ValueError(
                    f"eps_h={self.eps_h} exceeds ln k = {math.log(layer.selector.k):.4f} for layer {name}"
                )
            if self.tau is not None:
                layer.selector.tau = self.tau
            if name in self.frozen:
                freeze_selector(layer)

    def on_epoch_start(self, state: TrainState) -> None:
        if state.epoch <= self.t_freeze:
            self._averages.reset()

    def on_after_backward(self, state: TrainState) -> None:
        for name, layer in self._layers(state.model):
            if name in self.frozen:
                for param in layer.selector.parameters():
                    param.grad = None

    def on_step_end(self, state: TrainState) -> None:
        if state.epoch <= self.t_freeze:
            self._averages.add(self._layers(state.model))

    def on_epoch_end(self, state: TrainState) -> None:
        if state.epoch > self.t_freeze or self._averages.steps == 0:
            return
        layers = {
            name: means["entropy"] for name, means in self._averages.means().items()
        }
        mean = sum(layers.values()) / len(layers) if layers else math.nan
        self.entropy_records.append(
            {"epoch": state.epoch, "mean": mean, "layers": layers}
        )
        if state.epoch == self.t_freeze and not self.decided:
            self.decided = True
            if self.per_layer:
                chosen = [
                    name
                    for name, entropy in layers.items()
                    if self._should_freeze(entropy)
                ]
            else:
                chosen = list(layers) if self._should_freeze(mean) else []
            for name, layer in self._layers(state.model):
                if name in chosen:
                    freeze_selector(layer)
            self.frozen = chosen

    def state_dict(self) -> dict[str, Any]:
        return {
            "entropy_records": [
                dict(r, layers=dict(r["layers"])) for r in self.entropy_records
            ],
            "frozen": list(self.frozen),
            "decided": self.decided,
            "averages": self._averages.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.entropy_records = [
            dict(r, layers=dict(r["layers"])) for r in state["entropy_records"]
        ]
        self.frozen = list(state["frozen"])
        self.decided = bool(state["decided"])
        self._averages.load_state_dict(state["averages"])


class ReadyAutoNormS(AutoNormS):
    r"""AutoNorm-S with its decision taken once the features have formed (issue 51).

    The paper decides at a fixed :math:`T_\text{freeze}` of a long schedule, after warm-up;
    in a short schedule a fixed epoch can fall before the backbone has learned anything,
    where every gate is still undecided and the rule fires on every seed. This callback
    decides instead at the end of the first epoch :math:`\ge` ``after`` whose validation
    accuracy is at least ``chance + lead``, by the same rule on that epoch's mean gate
    entropy (as :class:`AutoNormS`); if no epoch gets there, at the last one (where a freeze changes
    nothing). ``decided_at`` and ``accuracy_at`` record when and at what accuracy.
    """

    def __init__(
        self,
        chance: float,
        lead: float,
        *,
        after: int = 1,
        eps_h: float = EPS_H,
        tau: float | None = 0.5,
        rule: str = "high",
    ) -> None:
        super().__init__(1, eps_h, tau=tau, rule=rule)
        if not 0 <= chance < 1 or not 0 < lead <= 1 - chance:
            raise ValueError(
                f"need 0 <= chance < 1 and 0 < lead <= 1 - chance, got {chance!r}, {lead!r}"
            )
        positive_int("after", after)
        self.chance, self.lead, self.after = float(chance), float(lead), after
        self.decided_at: int | None = None
        self.accuracy_at = math.nan

    def on_train_start(self, state: TrainState) -> None:
        if not self.decided:
            self.t_freeze = state.epochs  # monitor until the decision
        super().on_train_start(state)

    def on_epoch_end(self, state: TrainState) -> None:
        accuracy = float(state.history[-1].get("val_accuracy", math.nan))
        ready = state.epoch >= self.after and accuracy >= self.chance + self.lead
        if not self.decided and (ready or state.epoch == state.epochs):
            self.t_freeze = state.epoch
            self.decided_at, self.accuracy_at = state.epoch, accuracy
        super().on_epoch_end(state)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "t_freeze": self.t_freeze,
            "decided_at": self.decided_at,
            "accuracy_at": self.accuracy_at,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.t_freeze = int(state["t_freeze"])
        self.decided_at = state["decided_at"]
        self.accuracy_at = float(state["accuracy_at"])
