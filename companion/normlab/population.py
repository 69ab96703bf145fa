"""Seeds as a batch: :func:`fit_population` trains K copies of one model as one batched model.

The models are tiny, so a single run's step is mostly per-operation overhead; K members
stacked along a leading dimension share that overhead, and K runs cost little more than one.

Design, in short:

- **Members built as single runs build them.** The caller builds K models, each after
  seeding as its single run does (e.g. :func:`normlab.experiments.part1.seeded_mlp`), so a
  member's initial weights are its single run's by construction. Their parameters and
  buffers are stacked (``torch.func.stack_module_state``) and the forward pass is
  ``torch.func.functional_call`` under ``torch.vmap`` over the member dimension.
- **Each member's own data order.** Member k's shuffling generator is seeded with its seed,
  as :func:`normlab.training.fit` seeds its own, so its batches are its single run's; a step
  gathers a ``(K, B, ...)`` batch.
- **Without vmap where it can**: a model whose layers all have a stacked form
  (:mod:`normlab._population_ensemble`: the Part I MLPs; :mod:`normlab._population_vit`:
  the gate studies' ViT-Lite, its gates' noise, freezes and probabilities included) runs
  them on the stacked tensors directly (its step two to three times as fast as under
  ``vmap``, whose per-operation cost dominates on these tiny models); any other model runs
  under ``vmap``.
- **Randomness inside the model** (AutoNorm's Gumbel noise): drawn per member, outside
  ``vmap``, from each member's own stream, and passed in (:mod:`normlab.population_noise`).
- **Per-member optimiser** (:mod:`normlab._population_opt`): SGD, Adam or AdamW with each
  member's own state and, where given, its own learning rate, so a rate sweep is one
  population too.
- **Divergence per member.** A member whose epoch diverged (:func:`normlab.training.is_diverged`)
  is recorded as a single run with ``on_divergence="stop"`` records it, then stops: its
  updates are masked, and the others go on.
- **Checkpoints per population**: the whole state at each epoch end, atomically, with its
  digest (:mod:`normlab.checkpoint`'s format); a resumed population ends with exactly the
  numbers of an uninterrupted one.

A population's numbers are not bit-identical to its single runs' (batched matmuls sum in
another order): a member's first loss and gradients agree to float rounding, and the final
metrics agree in distribution (``tests/test_population.py``).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state

from . import checkpoint
from ._evaluation import METRICS, _autocast, _check_data, _task_loss
from ._fit_config import FitConfig, _resolve_config
from ._population_ensemble import EnsembleForward, ensemble_forward
from ._population_opt import StackedOptimizer, check_rates
from ._runtime import device as default_device
from ._runtime import seed_everything
from .callbacks import Callback
from .checkpoint import CheckpointError, model_signature
from .data.types import DataSplit
from .layers.gate import NormSelector
from .population_noise import MemberCallbacks
from .training import (
    History,
    _check_splits,
    _schedule,
    _steps_per_epoch,
    _total_steps,
    divergence_bound,
    is_diverged,
)

__all__ = ["ENGINES", "Population", "fit_population", "member_model", "stack_models"]

POPULATION_CHECKPOINT = "population.pt"
#: How a population's forward pass runs (:func:`stack_models`); a record names its own.
ENGINES: tuple[str, ...] = ("stacked", "vmap")
#: Draws the per-member randomness of one training forward pass: ``(population, batch size)
#: -> {module name: (K, ...) tensor}``, each member's from its own stream
#: (:class:`normlab.population_noise.GateNoise`).
NoiseHook = Callable[["Population", int], dict[str, torch.Tensor]]
#: Called at every step before the update: ``(step, x, losses, grads)``, the step counted
#: from 0, the ``(K, B, ...)`` batch, the ``(K,)`` losses and the stacked gradients.
StepHook = Callable[[int, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]], None]


@dataclass
class Population:
    """K models stacked: a template module, and the stacked parameters and buffers."""

    template: nn.Module
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    probed: dict[str, torch.Tensor] = field(default_factory=dict)
    #: per learned gate (a NormSelector's name), which members' gates are frozen
    frozen: dict[str, torch.Tensor] = field(default_factory=dict)
    #: the template's forward over the member dimension, where it has one (else vmap's)
    ensemble: EnsembleForward | None = None

    @property
    def size(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def forward(
        self,
        x: torch.Tensor,
        *,
        shared_input: bool = False,
        noise: dict[str, torch.Tensor] | None = None,
        probes: Sequence[str] = (),
    ) -> torch.Tensor:
        """Every member's output: ``x`` is ``(K, B, ...)``, or ``(B, ...)`` for all with
        ``shared_input``; the output is ``(K, B, ...)``. ``noise`` maps a module's name to
        each member's draw for it, ``(K, ...)`` (set as the module's ``noise`` for the
        call); ``probes`` names modules whose ``last_probs`` is kept, stacked, in
        :attr:`probed` (what :class:`normlab.gates.GateTelemetry` reads)."""
        masks = {n: m for n, m in self.frozen.items() if bool(m.any())}
        if self.ensemble is not None:
            if shared_input:
                x = x.expand(self.size, *x.shape)
            out, self.probed = self.ensemble(
                self.params, self.buffers, x, noise or {}, masks, probes
            )
            return out
        template = self.template

        def one(p: dict, b: dict, xb: torch.Tensor, drawn: dict, masks: dict) -> tuple:
            for name, value in drawn.items():
                template.get_submodule(name).noise = value
            for name, value in masks.items():
                template.get_submodule(name).frozen_members = value
            try:
                out = functional_call(template, (p, b), (xb,))
            finally:
                for name in drawn:
                    template.get_submodule(name).noise = None
                for name in masks:
                    template.get_submodule(name).frozen_members = None
            seen = {n: template.get_submodule(n).last_probs for n in probes}
            return out, {n: v for n, v in seen.items() if v is not None}

        dims = (0, 0, None if shared_input else 0, 0, 0)
        out, probed = torch.vmap(one, in_dims=dims, randomness="error")(
            self.params, self.buffers, x, noise or {}, masks
        )
        self.probed = probed
        return out


def stack_models(
    models: Sequence[nn.Module], device: torch.device, *, engine: str = "stacked"
) -> Population:
    """The :class:`Population` of ``models`` (all of one architecture), on ``device``.

    ``engine`` (:data:`ENGINES`): ``"stacked"`` runs the forward pass over the member
    dimension where the model has a stacked form (the Part I MLP, the gate ViT), ``vmap``
    elsewhere; ``"vmap"`` runs the ViT under ``vmap`` too, as populations ran before it
    had a stacked form (what ``verify`` re-runs a record made so with; the MLP's stacked
    form is older than the records). Frozen parameters (``requires_grad`` False) are
    stacked too and never updated."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if not models:
        raise ValueError("a population needs at least one model")
    signature = model_signature(models[0])
    for k, m in enumerate(models[1:], start=1):
        if model_signature(m) != signature:
            raise ValueError(f"model {k} differs in architecture from model 0")
    for m in models:
        m.to(device)
    params, buffers = stack_module_state(list(models))
    frozen = {n for n, p in models[0].named_parameters() if not p.requires_grad}
    for name, p in params.items():
        p.requires_grad_(name not in frozen)
    # the template's own tensors are never used: functional_call swaps in the stacked ones
    template = copy.deepcopy(models[0]).to("meta")
    gates = [n for n, m in template.named_modules() if isinstance(m, NormSelector)]
    frozen = {n: torch.zeros(len(models), dtype=torch.bool) for n in gates}
    return Population(
        template,
        dict(params),
        dict(buffers),
        frozen=frozen,
        ensemble=ensemble_forward(template, vit=engine == "stacked"),
    )


def member_model(
    population: Population, k: int, like: nn.Module, *, in_place: bool = False
) -> nn.Module:
    """Member ``k`` as a plain module: a copy of ``like`` (a model of the same
    architecture) holding the member's parameters and buffers; ``like`` itself with
    ``in_place`` (e.g. the model member k was built as, no longer needed)."""
    model = like if in_place else copy.deepcopy(like)
    state = {n: t[k].detach() for n, t in population.params.items()}
    state.update({n: t[k] for n, t in population.buffers.items()})
    # a module's extra state (a gate's frozen flag) is the copy's own: it is no tensor
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or any(not m.endswith("_extra_state") for m in missing):
        raise ValueError(
            f"member {k} does not fit {type(like).__name__}: {missing, unexpected}"
        )
    model.to(next(iter(population.params.values())).device)
    return model


# ------------------------------------------------------------------------- the loop


@dataclass
class _PopRun:
    """What :func:`fit_population` prepares before the first step and each epoch uses."""

    cfg: FitConfig
    train: DataSplit
    val: DataSplit
    pop: Population
    seeds: list[int]
    lrs: torch.Tensor
    generators: list[torch.Generator]
    optimizer: StackedOptimizer
    multiplier: Callable[[int], float]
    steps_per_epoch: int
    total_steps: int
    bound: float
    histories: list[History]
    active: torch.Tensor
    path: Path | None
    run_record: dict[str, Any]
    noise: NoiseHook | None = None
    on_step: StepHook | None = None
    members: MemberCallbacks | None = None
    probes: list[str] = field(default_factory=list)
    step: int = 0
    epoch: int = 0
    stopped_at: list[int] = field(default_factory=list)


def _member_losses(
    task: str,
    out: torch.Tensor,
    y: torch.Tensor,
    label_smoothing: float,
    batched: bool = False,
) -> torch.Tensor:
    """``(K,)`` training losses: each member's :func:`_task_loss` on its own batch; with
    ``batched``, a classification's as one ``cross_entropy`` over all members' samples,
    each member's mean taken after (the same loss to rounding, without vmap's cost)."""
    if batched and task == "classification":
        flat = F.cross_entropy(
            out.flatten(0, 1),
            y.flatten(),
            reduction="none",
            label_smoothing=label_smoothing,
        )
        return flat.view(y.shape).mean(1)
    return torch.vmap(lambda o, t: _task_loss(task, o, t, label_smoothing))(out, y)


def _train_steps(run: _PopRun) -> tuple[torch.Tensor, int]:
    """One epoch's optimiser steps for every member: ((K,) mean training losses, seen)."""
    cfg, train, pop = run.cfg, run.train, run.pop
    device = train.x.device
    orders = torch.stack(
        [torch.randperm(len(train), generator=g) for g in run.generators]
    ).to(device)
    names = [n for n, p in pop.params.items() if p.requires_grad]
    loss_sum = torch.zeros(pop.size, dtype=torch.float32, device=device)
    seen = 0
    autocast = _autocast(device, cfg.amp)
    for batch in range(run.steps_per_epoch):
        if run.step >= run.total_steps:
            break
        index = orders[:, batch * cfg.batch_size : (batch + 1) * cfg.batch_size]
        x, y = train.x[index], train.y[index]  # (K, B, ...): each member's own batch
        drawn = run.noise(pop, index.shape[1]) if run.noise is not None else None
        with autocast():
            out = pop.forward(x, noise=drawn, probes=run.probes)
            losses = _member_losses(
                train.task, out, y, cfg.label_smoothing, pop.ensemble is not None
            )
        # members are independent, so the gradient of the sum is each member's own
        grads = torch.autograd.grad(losses.sum(), [pop.params[n] for n in names])
        by_name = dict(zip(names, grads))
        if run.on_step is not None:
            run.on_step(run.step, x, losses.detach(), by_name)
        skip = {}
        if run.members:  # a callback that drops a member's gradient stops that update
            skip = run.members.after_backward(pop, by_name, losses.detach(), run.active)
        rate = run.lrs * run.multiplier(run.step)
        run.optimizer.step(pop.params, by_name, rate, run.active, skip)
        run.step += 1
        if run.members:
            run.members.call("on_step_end", run.step, run.active)
        loss_sum += losses.detach().float() * index.shape[1]
        seen += index.shape[1]
    return loss_sum / max(seen, 1), seen


@torch.no_grad()
def _evaluate(run: _PopRun, split: DataSplit) -> tuple[list[float], list[float]]:
    """Every member's (losses, metrics) on ``split``, as :func:`normlab.training.evaluate`
    computes them (float64 sums over batches of ``eval_batch_size``)."""
    from ._evaluation import _eval_sums, _target_scale

    pop, size = run.pop, run.cfg.eval_batch_size
    scale = _target_scale(split, split.x.device)
    sums = torch.zeros(pop.size, 3, dtype=torch.float64, device=split.x.device)
    autocast = _autocast(split.x.device, run.cfg.amp)
    for start in range(0, len(split), size):
        x, y = split.x[start : start + size], split.y[start : start + size]
        with autocast():
            out = pop.forward(x, shared_input=True)
        sums += torch.vmap(_eval_sums, in_dims=(None, 0, None, None))(
            split.task, out, y, scale
        )
    losses, values = [], []
    for loss_sum, metric_sum, count in sums.tolist():
        count = max(count, 1.0)
        if not math.isfinite(loss_sum):
            losses.append(math.nan), values.append(math.nan)
            continue
        mean = metric_sum / count
        values.append(math.sqrt(mean) if split.task == "regression" else mean)
        losses.append(loss_sum / count)
    return losses, values


def _epoch(run: _PopRun, epoch: int) -> None:
    """One epoch: the steps, each member's evaluation on val, history and divergence."""
    run.epoch = epoch
    run.pop.template.train()
    if run.members:
        run.members.epoch = epoch
        run.members.call("on_epoch_start", run.step, run.active)
    started = time.perf_counter()
    train_losses, seen = _train_steps(run)
    train_time = time.perf_counter() - started
    run.pop.template.eval()
    val_losses, val_metrics = _evaluate(run, run.val)
    elapsed = (time.perf_counter() - started) / run.pop.size  # each member's share
    metric = run.histories[0].metric
    for k, history in enumerate(run.histories):
        if not bool(run.active[k]):
            continue
        train_loss = float(train_losses[k])
        history.append(
            {
                "epoch": epoch,
                "step": run.step,
                "lr": float(run.lrs[k]) * run.multiplier(run.step),
                "train_loss": train_loss,
                "val_loss": val_losses[k],
                f"val_{metric}": val_metrics[k],
                "epoch_time_s": elapsed,
                "samples_per_s": seen * run.pop.size / train_time
                if train_time > 0
                else math.nan,
            }
        )
        if run.members:
            run.members.epoch_end(k, run.step, train_loss)
            run.members.sync_frozen(run.pop, k)
        if is_diverged((train_loss, val_losses[k]), run.bound):
            run.active[k] = False  # recorded as diverged; its updates stop from here
    if run.path is not None:
        _save(run)


# -------------------------------------------------------------------- checkpoints


def _save(run: _PopRun) -> None:
    """The whole population state after epoch ``run.epoch``, atomically, with its digest."""
    assert run.path is not None
    payload = {
        "format": checkpoint.CHECKPOINT_FORMAT,
        "population": run.pop.size,
        "run_config": run.run_record,
        "params": {n: p.detach().cpu() for n, p in run.pop.params.items()},
        "buffers": {n: b.cpu() for n, b in run.pop.buffers.items()},
        "optimizer": run.optimizer.state_dict(),
        "generators": [g.get_state() for g in run.generators],
        "histories": [h.to_dict()["epochs"] for h in run.histories],
        "active": run.active.cpu(),
        "epoch": run.epoch,
        "step": run.step,
    }
    if run.noise is not None and hasattr(run.noise, "state_dict"):
        payload["noise"] = run.noise.state_dict()
    if run.members:
        payload["callbacks"] = run.members.state_dict()
    checkpoint._write(run.path, payload)


def _resume(run: _PopRun) -> bool:
    """Restore ``run`` from its checkpoint when there is one; say whether it did."""
    if run.path is None or not run.path.exists():
        return False
    saved = checkpoint.read(run.path)
    if (
        saved.get("run_config") != run.run_record
        or saved.get("population") != run.pop.size
    ):
        raise CheckpointError(
            f"{run.path} was written by another population or with other settings; "
            f"delete its folder {run.path.parent} to start afresh"
        )
    device = next(iter(run.pop.params.values())).device
    with torch.no_grad():
        for n, p in run.pop.params.items():
            p.copy_(saved["params"][n].to(device))
        for n, b in run.pop.buffers.items():
            b.copy_(saved["buffers"][n].to(device))
    state = saved["optimizer"]["state"]
    run.optimizer.load_state_dict(
        {
            "steps": saved["optimizer"]["steps"],
            "state": {
                n: {k: v.to(device) if k != "step" else v for k, v in s.items()}
                for n, s in state.items()
            },
        }
    )
    for g, s in zip(run.generators, saved["generators"]):
        g.set_state(s)
    for history, records in zip(run.histories, saved["histories"]):
        history[:] = [dict(r) for r in records]
    run.active = saved["active"].clone()
    run.epoch, run.step = int(saved["epoch"]), int(saved["step"])
    if run.noise is not None and "noise" in saved:
        run.noise.load_state_dict(saved["noise"])
    if run.members and "callbacks" in saved:
        run.members.load_state_dict(saved["callbacks"])
    return True


# ------------------------------------------------------------------------------ fit


def _prepare(
    models: Sequence[nn.Module],
    train: DataSplit,
    val: DataSplit,
    cfg: FitConfig,
    seeds: Sequence[int],
    lrs: Sequence[float] | None,
    noise: NoiseHook | None,
    engine: str,
) -> _PopRun:
    """Check the settings and splits, stack the models, seed each member's data order,
    and resume from a checkpoint where there is one."""
    if len(seeds) != len(models):
        raise ValueError(f"{len(models)} models but {len(seeds)} seeds")
    if cfg.augment is not None or cfg.compile:
        raise ValueError("a population trains without augment and compile")
    _check_splits(train, val, cfg)
    steps_per_epoch = _steps_per_epoch(cfg, len(train))
    total_steps = _total_steps(cfg, steps_per_epoch)
    device = torch.device(cfg.device) if cfg.device is not None else default_device()
    train, val = train.to(device), val.to(device)
    _check_data(models[0].to(device), train, val, _autocast(device, cfg.amp))
    rates = torch.tensor(
        [cfg.lr] * len(models) if lrs is None else list(lrs), dtype=torch.float64
    )
    if len(rates) != len(models):
        raise ValueError(f"{len(models)} models but {len(rates)} learning rates")
    check_rates(rates)
    metric, higher = METRICS[train.task]
    record = {
        **cfg.run_record(),
        "n_train": len(train),
        "seeds": list(seeds),
        "lrs": rates.tolist(),
    }
    warmup_steps = max(1, round(cfg.warmup * total_steps))
    path = None
    if cfg.checkpoint_dir is not None:
        path = Path(cfg.checkpoint_dir) / POPULATION_CHECKPOINT
        path.parent.mkdir(parents=True, exist_ok=True)
    return _PopRun(
        cfg=cfg,
        train=train,
        val=val,
        pop=stack_models(models, device, engine=engine),
        seeds=list(seeds),
        lrs=rates.to(device),
        generators=[torch.Generator().manual_seed(int(s)) for s in seeds],
        optimizer=StackedOptimizer(
            cfg.optimizer, cfg.weight_decay, dict(cfg.optimizer_kwargs or {})
        ),
        multiplier=_schedule(cfg.schedule, total_steps, warmup_steps),
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
        bound=divergence_bound(train),
        histories=[History(metric=metric, higher_is_better=higher) for _ in seeds],
        active=torch.ones(len(models), dtype=torch.bool),
        path=path,
        run_record=record,
        noise=noise,
    )


def fit_population(
    models: Sequence[nn.Module],
    train: DataSplit,
    val: DataSplit,
    config: FitConfig | None = None,
    *,
    seeds: Sequence[int],
    lrs: Sequence[float] | None = None,
    noise: NoiseHook | None = None,
    on_step: StepHook | None = None,
    member_callbacks: Sequence[Sequence[Callback]] | None = None,
    engine: str = "stacked",
    **settings: Any,
) -> tuple[Population, list[History]]:
    """Train ``models`` (one per seed, each built as its single run builds it) as one
    population; return it and each member's :class:`~normlab.training.History`.

    The settings are :class:`~normlab.training.FitConfig`'s, as :func:`~normlab.training.fit`
    takes them, except ``seed`` (``seeds`` gives each member's) and ``lr`` where ``lrs``
    gives each member its own. ``optimizer`` is ``"sgd"``, ``"adam"`` or ``"adamw"``. A
    diverged member is recorded and stops as a single run does with
    ``on_divergence="stop"``, whatever ``on_divergence`` says; the others go on.
    ``noise`` (optional) feeds per-member randomness into the model before each forward
    pass (:mod:`normlab.population_noise`); ``on_step`` sees each step's batch, losses and
    gradients before the update. ``member_callbacks`` (optional, one list per member) are
    callbacks that read what :class:`normlab.gates.GateTelemetry` reads: each sees its
    member's own model (``models[k]``, holding that member's gradients and gate
    probabilities at each step; its weights are not the trained ones) and history.
    ``engine`` is how the forward pass runs (:func:`stack_models`).

    Examples::

        models = [seeded_mlp({**config, "seed": s}, train) for s in range(16)]
        population, histories = fit_population(
            models, train, val, epochs=3, batch_size=64, lr=0.1, optimizer="sgd",
            seeds=range(16),
        )
        member = member_model(population, 3, models[0])  # a plain nn.Module
    """
    if lrs is not None and config is None:
        settings.setdefault("lr", float(list(lrs)[0]))  # the config's lr; lrs rules
    cfg = _resolve_config(config, settings)
    run = _prepare(models, train, val, cfg, list(seeds), lrs, noise, engine)
    run.on_step = on_step
    if member_callbacks is not None:
        run.members = MemberCallbacks(
            list(models), member_callbacks, run.histories, cfg
        )
        run.probes = run.members.probes
    if not _resume(run):
        seed_everything(int(run.seeds[0]))  # no member reads the global RNGs
    if run.members:
        run.members.call("on_train_start", run.step, run.active)
        for k in range(run.pop.size):
            run.members.sync_frozen(run.pop, k)
    for epoch in range(run.epoch + 1, cfg.epochs + 1):
        if not bool(run.active.any()) or run.step >= run.total_steps:
            break
        _epoch(run, epoch)
    return run.pop, run.histories
