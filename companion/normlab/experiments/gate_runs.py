"""Part II gate studies, one run: the arms, the data, the ViT-Lite and its training.

The studies (:mod:`.gate_grids`) are the stabilisation bottleneck (chapter 11), AutoNorm-S
at work (chapter 12) and the runs behind chapter 10's gate-collapse widget.

Every run trains one small ViT-Lite on an image task with one *arm* in every
normalisation slot:

=================  ======================================================================
arm                what runs
=================  ======================================================================
frozen_ln          plain LayerNorm (the paper's "FrozenLN")
autonorm_random    AutoNorm with the Random Selector (fresh uniform weights per sample)
autonorm           AutoNorm with its learned soft Gumbel-Softmax gate, never frozen
autonorm_hard      the same gate with straight-through (hard) samples
freeze_at_<T>      AutoNorm whose gates are all frozen at the end of epoch T
autonorm_exact     the learned soft gate, its forward sample unchanged, trained with the
                   exact gradient of the expected (linearised) loss (:class:`ExactGateGrad`)
dyt                DyT alone (:class:`normlab.layers.DyT`), the other candidate
autonorm_fixed     AutoNorm's two candidates mixed 50/50, no gate: the mix without the
                   choice (``selector="fixed"``)
autonorm_s_ready   AutoNorm-S (the paper's rule, eps_H 0.1) deciding after warm-up, once
                   validation accuracy has left chance by ``READY_LEAD``
                   (:class:`normlab.gates.ReadyAutoNormS`): a real run, not composed
sample_at_<T>      AutoNorm whose gates stop learning at the end of epoch T but keep
                   sampling (:class:`StopSelector`): AutoNorm-S's freeze without its
                   removal of the forward noise
=================  ======================================================================

Why ``freeze_at_<T>`` rather than one run per AutoNorm-S setting: on the CPU the training
loop is deterministic, so an AutoNorm-S run *is* the ``autonorm`` run up to its decision
at the end of epoch T_freeze; after it, it is the ``freeze_at_<T>`` run when the rule
fires and the ``autonorm`` run when it does not. :func:`compose_schedule` assembles any
(T_freeze, eps_H, rule) from these two, taking the decision on the entropy that AutoNorm-S
itself recorded (the ``freeze_at_<T>`` run holds it). Sweeps of eps_H and both readings of
the rule then cost no extra training; chapter 12 checks the identity against a real
AutoNorm-S run. A ``freeze_at_<T>`` run is :class:`normlab.gates.AutoNormS` with
``eps_h=0`` under the paper's rule (every entropy is >= 0, so it always fires).

A run's configuration is a :class:`~normlab.experiments.gate_config.GateConfig`, built
once from its grid's dict; :func:`~normlab.experiments.gate_config.arm_settings` resolves
its arm (the table above, :data:`~normlab.experiments.gate_config.ARMS`) into the
:class:`~normlab.experiments.gate_config.ArmSettings` that :func:`gate_vit` and
:func:`gate_callbacks` read.

The selector's learning rate is a multiple (``selector_lr``) of the backbone's, applied by
:class:`SelectorLR`. Data come from :func:`normlab.data.for_profile`: ``mnist`` (a
stationary task: one style of grey digits; scikit-learn's 8x8 digits offline) and
``mnist_restyled`` (a diverse one: the same digits, each image with its own contrast,
brightness, polarity and noise, :func:`restyle`); the GPU profiles add Fashion-MNIST,
CIFAR-10 and CIFAR-100.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from .. import data
from .._runtime import seed_everything
from ..callbacks import Callback, TrainState
from ..data.sources import RESTYLED
from ..gates import (
    AutoNormS,
    GateTelemetry,
    ReadyAutoNormS,
    autonorm_layers,
    selector_parameters,
)
from ..layers._common import token_pool
from ..models import ViTLite
from ..models.vit import vit_config
from ..normalisers import norm_layer
from ..paper import EPS_H
from ..population_noise import GateNoise
from .gate_config import ArmSettings, GateConfig, arm_settings
from .populations import PopulationUnsupported
from .registry import RunContext
from .runner import train_and_test, train_and_test_population

__all__ = [
    "TASKS",
    "restyle",
    "task_splits",
    "SelectorLR",
    "train_gate_population",
    "SelectorSnapshots",
    "StopSelector",
    "ExactGateGrad",
    "gate_vit",
    "gate_callbacks",
    "head_input_scale",
    "epochs_to_specialise",
    "train_gate",
]

TASKS = {
    "mnist": "stationary",
    "mnist_restyled": "diverse",
    "fashion_mnist": "stationary",
    "cifar10": "diverse",
    "cifar100": "diverse",
}
_SPLIT_SEED = {"train": 0, "val": 1, "test": 2}


def restyle(split: data.DataSplit) -> data.DataSplit:
    r"""The same images, each in its own style: a diverse (non-stationary) version of a task.

    Image :math:`i` (pixels in [0, 1]) becomes :math:`g_i\, \tilde x_i + b_i + s_i \varepsilon`
    with :math:`\tilde x_i` the image or its negative :math:`1 - x_i` (probability 1/2), a gain
    :math:`g_i` log-uniform in [1/4, 4], an offset :math:`b_i \sim U(-1, 1)`, and pixel noise
    :math:`\varepsilon \sim N(0, 1)` of size :math:`s_i \sim U(0, 0.2)`. Labels are unchanged,
    so the task's content stays the same and only its input statistics vary from sample to
    sample: the regime in which the paper expects a per-sample choice of normaliser to matter
    (claim N14). Deterministic per split.
    """
    g = torch.Generator().manual_seed(1000 + _SPLIT_SEED[split.split])
    n, x = len(split), split.x
    shape = (n, *([1] * (x.dim() - 1)))
    invert = (torch.rand(n, generator=g) < 0.5).reshape(shape)
    gain = (
        torch.empty(n)
        .uniform_(math.log(0.25), math.log(4.0), generator=g)
        .exp()
        .reshape(shape)
    )
    offset = torch.empty(n).uniform_(-1.0, 1.0, generator=g).reshape(shape)
    noise = torch.empty(n).uniform_(0.0, 0.2, generator=g).reshape(shape)
    styled = (
        gain * torch.where(invert, 1.0 - x, x)
        + offset
        + noise * torch.randn(x.shape, generator=g)
    )
    return data.DataSplit(
        x=styled,
        y=split.y,
        task=split.task,
        name=f"{split.name}{RESTYLED}",
        split=split.split,
        meta={**split.meta, "restyled": True},
    )


def task_splits(
    task: str, data_profile: str, source: str | None = None
) -> dict[str, data.DataSplit]:
    """``train``/``val``/``test`` of a task of :data:`TASKS`: ``<name>_restyled`` is
    :func:`restyle` applied to every split of ``<name>``; ``source`` names one of the
    task's offline ``normlab.data.sources.CHOICES`` (``mnist_5k``: real MNIST)."""
    if task.endswith(RESTYLED):
        return {
            name: restyle(split)
            for name, split in data.for_profile(
                task.removesuffix(RESTYLED), data_profile, chosen=source
            ).items()
        }
    return data.for_profile(task, data_profile, chosen=source)


class SelectorLR(Callback):
    r"""Give every learned AutoNorm gate ``multiplier`` times the backbone's learning rate.

    Before each optimiser step it copies the selectors' parameters; after the step it
    replaces each move :math:`\Delta` by :math:`m \Delta`. For SGD and AdamW (whose decoupled
    weight decay is also proportional to the learning rate) this is exactly a separate
    parameter group with learning rate :math:`m \cdot \mathrm{lr}`, since Adam's moments do
    not depend on the learning rate. Unlike a new parameter group it changes neither the
    optimiser nor its saved state, so checkpoints resume. Frozen gates do not move, and
    stay bit-identical.
    """

    def __init__(self, multiplier: float) -> None:
        if (
            isinstance(multiplier, bool)
            or not isinstance(multiplier, (int, float))
            or not 0 < multiplier < math.inf
        ):
            raise ValueError(
                f"multiplier (the selector's learning-rate multiple) must be a finite float > 0, got {multiplier!r}"
            )
        self.multiplier = float(multiplier)
        self._before: list[tuple[nn.Parameter, torch.Tensor]] = []

    def on_after_backward(self, state: TrainState) -> None:
        self._before = [
            (p, p.detach().clone())
            for _, layer in autonorm_layers(state.model)
            for p in selector_parameters(layer)
            if p.requires_grad
        ]

    def on_step_end(self, state: TrainState) -> None:
        with torch.no_grad():
            for param, before in self._before:
                param.copy_(torch.lerp(before, param, self.multiplier))
        self._before = []


class SelectorSnapshots(Callback):
    """Keep a copy of every learned gate's parameters at the end of each epoch.

    ``snapshots[epoch][layer]`` is that layer's selector parameters by name (cloned
    tensors), so a chapter can check that a frozen gate stays bit-identical after the freeze.
    """

    def __init__(self) -> None:
        self.snapshots: dict[int, dict[str, dict[str, torch.Tensor]]] = {}

    def on_epoch_end(self, state: TrainState) -> None:
        self.snapshots[state.epoch] = {
            name: {
                key: value.detach().clone()
                for key, value in layer.selector.named_parameters()
            }
            for name, layer in autonorm_layers(state.model)
            if layer.selector is not None
        }

    def unchanged_since(self, epoch: int) -> bool:
        """True when every gate's parameters at every later epoch equal those at ``epoch`` bit for bit."""
        if epoch not in self.snapshots:
            raise ValueError(
                f"no snapshot at epoch {epoch}; have {sorted(self.snapshots)}"
            )
        reference = self.snapshots[epoch]
        return all(
            torch.equal(reference[name][key], value)
            for later, layers in self.snapshots.items()
            if later > epoch
            for name, params in layers.items()
            for key, value in params.items()
        )


class StopSelector(Callback):
    """Stop every learned gate's learning at the end of epoch ``stop_at`` but keep it
    sampling: AutoNorm-S's freeze with the forward noise left in (chapter 12's ablation).

    From epoch ``stop_at + 1`` on, the selectors' gradients are dropped after each backward
    pass, so AdamW (which skips a parameter without a gradient) leaves them bit-identical,
    while the gate still draws a fresh Gumbel-Softmax sample per image and step. Stateless:
    a resumed run reads the epoch from the training state.
    """

    def __init__(self, stop_at: int) -> None:
        if isinstance(stop_at, bool) or not isinstance(stop_at, int) or stop_at < 1:
            raise ValueError(f"stop_at must be an epoch >= 1, got {stop_at!r}")
        self.stop_at = stop_at

    def on_after_backward(self, state: TrainState) -> None:
        if state.epoch > self.stop_at:
            for _, layer in autonorm_layers(state.model):
                for param in selector_parameters(layer):
                    param.grad = None


class ExactGateGrad(Callback):
    r"""Train every learned gate with the exact gradient, its forward sample unchanged.

    A forward hook replaces each selector's training output, the Gumbel-Softmax sample
    :math:`w`, by :math:`w + p - \operatorname{sg}(p)` with :math:`p = \mathrm{softmax}(\ell)`
    and :math:`\operatorname{sg}` stop-gradient: the forward value is the same sample (the
    same noise in the network), and the gradient reaching the logits is that of
    :math:`\sum_i p_i v_i = \mathbb{E}_{i \sim p}[v_i]`, :math:`v_i` the loss linearised
    in candidate :math:`i`'s weight, i.e. :func:`normlab.gates.categorical_grad` (no
    sampling noise in the gradient). The N2 control of chapters 11 and 12.
    """

    def __init__(self) -> None:
        self._handles: list[Any] = []

    @staticmethod
    def _hook(module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> Any:
        if not module.training or module.frozen:
            return None
        x, mask = args[0], (args[1] if len(args) > 1 else None)
        logits = module.mlp(token_pool(x, len(module.normalized_shape), mask)).float()
        probs = torch.softmax(logits, dim=-1)
        return output.detach() + (probs - probs.detach())

    def on_train_start(self, state: TrainState) -> None:
        self._handles = [
            layer.selector.register_forward_hook(self._hook)
            for _, layer in autonorm_layers(state.model)
            if layer.selector is not None
        ]

    def on_train_end(self, state: TrainState) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


def gate_vit(train: data.DataSplit, settings: ArmSettings) -> ViTLite:
    """The study's ViT-Lite for the split's images, with the arm's normaliser in every slot."""
    config = settings.config
    kwargs: dict[str, Any] = (
        {"tau": config.tau, "hard": settings.hard}
        if settings.normaliser == "autonorm"
        else {}
    )
    if settings.selector is not None:
        kwargs["selector"] = settings.selector
    if config.alpha_init is not None:  # DyT's alpha, alone or in the mix
        kwargs["alpha_init"] = config.alpha_init
    _, channels, size, _ = train.x.shape
    vit = vit_config(
        "paper_vision",
        img_size=size,
        in_chans=channels,
        num_classes=train.num_classes,
        patch_size=config.patch_size,
        dim=config.dim,
        depth=config.depth,
        heads=config.heads,
        dropout=0.0,
        attn_dropout=0.0,
        drop_path=0.0,
        layer_scale_init=None,
        init=config.init,
        readout=config.readout,
    )
    return ViTLite(vit, norm_layer(settings.normaliser, **kwargs))


def gate_callbacks(
    settings: ArmSettings, chance: float | None = None
) -> list[Callback]:
    """Telemetry for any AutoNorm; the freeze and the selector's learning rate for a
    learned gate. ``chance`` (the accuracy of a guess, 1 / classes) is what
    ``autonorm_s_ready`` waits for validation accuracy to leave; other arms need none."""
    config = settings.config
    callbacks: list[Callback] = []
    if settings.normaliser.startswith("autonorm"):
        callbacks.append(GateTelemetry())
    if settings.normaliser == "autonorm":
        if settings.ready_lead:
            if chance is None:
                raise ValueError(
                    f"arm {config.arm!r} decides once validation accuracy has left "
                    "chance: give gate_callbacks the task's chance (1 / classes)"
                )
            callbacks.append(
                ReadyAutoNormS(
                    chance,
                    settings.ready_lead,
                    after=settings.ready_after,
                    tau=config.tau,
                )
            )
        elif settings.freeze_at:
            callbacks.append(
                AutoNormS(settings.freeze_at, 0.0, tau=config.tau, rule="high")
            )
        elif (
            config.rule is not None
        ):  # a real AutoNorm-S run, to check compose_schedule against
            callbacks.append(
                AutoNormS(
                    config.t_freeze, config.eps_h, tau=config.tau, rule=config.rule
                )
            )
        if settings.stop_at:
            callbacks.append(StopSelector(settings.stop_at))
        if settings.gate_grad == "exact":
            callbacks.append(ExactGateGrad())
        if config.selector_lr != 1.0:
            callbacks.append(SelectorLR(config.selector_lr))
    return callbacks


def head_input_scale(model: ViTLite, train: data.DataSplit, n: int = 256) -> float:
    """The std of what the head reads at initialisation (the class token, or the mean
    token, after the final norm) over the first ``n`` training images: the diagnostic of a
    start whose logits sit near zero (chapter 11). Draws no random numbers."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        x = model.encoder(model.tokens(train.x[:n]))
        read = x[:, 0] if model.cls_token is not None else x.mean(dim=1)
    model.train(was_training)
    return float(read.std())


def epochs_to_specialise(
    records: Iterable[dict[str, Any]], eps_h: float = EPS_H
) -> float:
    """The first epoch whose gate entropy, averaged over layers, falls below ``eps_h``
    (NaN when none does): the time the learned gates take to specialise."""
    by_epoch: dict[int, list[float]] = {}
    for record in records:
        by_epoch.setdefault(int(record["epoch"]), []).append(float(record["entropy"]))
    for epoch in sorted(by_epoch):
        if sum(by_epoch[epoch]) / len(by_epoch[epoch]) < eps_h:
            return float(epoch)
    return math.nan


class _GateStart(NamedTuple):
    """A gate run before training."""

    settings: ArmSettings
    splits: dict[str, data.DataSplit]
    model: ViTLite  # seeded by the run's seed
    scale: float  # the head's input std at initialisation (head_input_scale)
    callbacks: list[Callback]


def _gate_start(
    config: GateConfig, splits: dict[str, data.DataSplit] | None = None
) -> _GateStart:
    """A gate run before training: its settings, splits (``splits``, where another run of
    its task has loaded them), seeded model, the model's head input scale at
    initialisation, and its callbacks."""
    settings = arm_settings(config)
    if splits is None:
        splits = task_splits(config.data, config.data_profile, config.source)
    train = splits["train"]
    seed_everything(config.seed)
    model = gate_vit(train, settings)
    scale = head_input_scale(model, train)
    # a freeze decided on formed features: after warm-up, once val accuracy has left chance
    callbacks = gate_callbacks(settings, chance=1.0 / train.num_classes)
    return _GateStart(settings, splits, model, scale, callbacks)


def _gate_config(config: GateConfig | Mapping[str, Any]) -> GateConfig:
    """``config`` as a :class:`GateConfig`: the runner passes its grid's dict."""
    return config if isinstance(config, GateConfig) else GateConfig.from_config(config)


def train_gate(
    config: GateConfig | Mapping[str, Any], ctx: RunContext
) -> dict[str, Any]:
    """One gate-study run: build, train with AdamW (warm-up + cosine), test, record the
    gates. ``config`` is a :class:`GateConfig` or the grid's dict it is built from."""
    start = _gate_start(_gate_config(config))
    record = train_and_test(
        start.model,
        start.splits,
        ctx,
        **start.settings.config.recipe(start.splits["train"].task),
        callbacks=start.callbacks,
    )
    return _gate_record(record, start.callbacks, start.scale)


def train_gate_population(
    configs: Sequence[GateConfig | Mapping[str, Any]], ctx: RunContext
) -> list[dict[str, Any]]:
    """:func:`train_gate` for configurations that differ only in seed and learning rate,
    trained as one population (:mod:`normlab.population`): each member's gate noise from
    its own stream, its telemetry from its own gradients, AutoNorm-S's freeze decided per
    member. Arms with a selector learning rate of its own (:class:`SelectorLR`) or the
    exact gate gradient (:class:`ExactGateGrad`) are refused with
    :class:`PopulationUnsupported` (the runner then runs them one by one)."""
    first = _gate_start(_gate_config(configs[0]))  # the members share one task's data
    starts = [first, *(_gate_start(_gate_config(c), first.splits) for c in configs[1:])]
    for start in starts:
        if any(isinstance(c, (SelectorLR, ExactGateGrad)) for c in start.callbacks):
            raise PopulationUnsupported(
                f"arm {start.settings.config.arm!r}: a population runs gates whose "
                "callbacks read the run, freeze it (AutoNorm-S) or drop its gradients "
                "(StopSelector), not a selector's own rate or the exact gradient"
            )
    splits = starts[0].splits
    recipe = [s.settings.config.recipe(splits["train"].task) for s in starts]
    shared = {k: v for k, v in recipe[0].items() if k not in ("seed", "lr")}
    models = [start.model for start in starts]
    outcomes = train_and_test_population(
        models,
        splits,
        ctx,
        seeds=[r["seed"] for r in recipe],
        lrs=[r["lr"] for r in recipe],
        noise=GateNoise(models[0], [r["seed"] for r in recipe]),
        member_callbacks=[start.callbacks for start in starts],
        **shared,
    )
    return [
        _gate_record(record, start.callbacks, start.scale)
        for record, start in zip(outcomes, starts)
    ]


def _gate_record(
    record: dict[str, Any], callbacks: list[Callback], scale: float
) -> dict[str, Any]:
    """``record`` (:func:`~normlab.experiments.runner.train_and_test`'s) with the gate
    study's metrics and what the callbacks recorded."""
    metrics = record["metrics"]
    curve = [h[f"val_{record['metric']}"] for h in record["history"]]
    metrics["val_curve_mean"] = sum(curve) / len(
        curve
    )  # area under the learning curve, per epoch
    metrics["decision_entropy"] = metrics["gate_snr"] = metrics["final_entropy"] = (
        math.nan
    )
    metrics["head_input_std_init"] = scale
    metrics["epochs_to_specialise"] = math.nan
    for callback in callbacks:
        if isinstance(callback, GateTelemetry):
            record["gates"] = callback.records
            snr = sorted(r["snr"] for r in callback.records if math.isfinite(r["snr"]))
            metrics["gate_snr"] = (
                snr[len(snr) // 2] if snr else math.nan
            )  # median over layers and epochs
            last = [
                r["entropy"]
                for r in callback.records
                if r["epoch"] == record["history"][-1]["epoch"]
            ]
            metrics["final_entropy"] = sum(last) / len(last) if last else math.nan
            metrics["epochs_to_specialise"] = epochs_to_specialise(callback.records)
        if isinstance(callback, ReadyAutoNormS):
            metrics["decided_at"] = callback.decided_at
            metrics["accuracy_at"] = callback.accuracy_at
        if isinstance(callback, AutoNormS):
            record["frozen"] = callback.frozen
            record["entropy_records"] = callback.entropy_records
            # the mean gate entropy over layers at T_freeze, on which the rule decided
            metrics["decision_entropy"] = (
                callback.entropy_records[-1]["mean"]
                if callback.entropy_records
                else math.nan
            )
    return record


# ------------------------------------------------------------------- reading the runs
