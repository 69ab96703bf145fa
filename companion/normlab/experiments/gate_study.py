"""Part II gate studies: the stabilisation bottleneck (chapter 11), AutoNorm-S at work
(chapter 12) and the runs behind chapter 10's gate-collapse widget.

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

The selector's learning rate is a multiple (``selector_lr``) of the backbone's, applied by
:class:`SelectorLR`. Data come from :func:`normlab.data.for_profile`: ``mnist`` (a
stationary task: one style of grey digits; scikit-learn's 8x8 digits offline) and
``mnist_restyled`` (a diverse one: the same digits, each image with its own contrast,
brightness, polarity and noise, :func:`restyle`); the GPU profiles add Fashion-MNIST,
CIFAR-10 and CIFAR-100.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import pandas as pd
import torch
from torch import nn

from .. import data
from .._runtime import seed_everything
from ..callbacks import Callback, TrainState
from ..gates import AutoNormS, GateTelemetry, autonorm_layers, selector_parameters
from ..interactive import Interactive, LiveAndStatic, choice
from ..models import ViTLite
from ..models.vit import vit_config
from ..normalisers import colour, norm_layer
from ..paper import EPS_H, TAU
from .grid import Grid
from .part2 import adamw_recipe
from .registry import Experiment, RunContext, register_experiment
from .runner import (  # load_records: re-exported for the chapters and the widget
    at_chosen_lr,
    load_records,  # noqa: F401
    mean_ci,
    summarise,
    train_and_test,
)

FREEZE_PREFIX = "freeze_at_"
# arm -> (normaliser, gate settings it overrides)
ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    "frozen_ln": ("frozen_ln", {}),
    "autonorm_random": ("autonorm_random", {}),
    "autonorm": ("autonorm", {}),
    "autonorm_hard": ("autonorm", {"hard": True}),
}
RESTYLED_SUFFIX = "_restyled"
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
        name=f"{split.name}{RESTYLED_SUFFIX}",
        split=split.split,
        meta={**split.meta, "restyled": True},
    )


def task_splits(task: str, data_profile: str) -> dict[str, data.DataSplit]:
    """``train``/``val``/``test`` of a task of :data:`TASKS`: ``<name>_restyled`` is
    :func:`restyle` applied to every split of ``<name>``."""
    if task.endswith(RESTYLED_SUFFIX):
        return {
            name: restyle(split)
            for name, split in data.for_profile(
                task[: -len(RESTYLED_SUFFIX)], data_profile
            ).items()
        }
    return data.for_profile(task, data_profile)


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


def arm_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The run's normaliser and gate settings: the config with its ``arm`` (if any) applied.

    Returns the config plus ``normaliser``, ``hard`` (default False), ``freeze_at`` (0:
    never), ``tau`` (default 0.5) and ``selector_lr`` (default 1). A config with ``rule``,
    ``t_freeze`` and ``eps_h`` (and no ``freeze_at``) runs a real AutoNorm-S schedule.
    """
    settings = {"hard": False, "freeze_at": 0, "tau": TAU, "selector_lr": 1.0, **config}
    arm = settings.get("arm")
    if arm is not None:
        if arm.startswith(FREEZE_PREFIX) and arm[len(FREEZE_PREFIX) :].isdigit():
            settings.update(
                normaliser="autonorm", freeze_at=int(arm[len(FREEZE_PREFIX) :])
            )
        elif arm in ARMS:
            normaliser, overrides = ARMS[arm]
            settings.update(normaliser=normaliser, **overrides)
        else:
            raise ValueError(
                f"arm={arm!r} is not known; expected one of {', '.join(ARMS)} or {FREEZE_PREFIX}<epoch>"
            )
    if settings.get("normaliser") is None:
        raise ValueError("a gate-study config needs an 'arm' or a 'normaliser'")
    if settings["freeze_at"] and settings["normaliser"] != "autonorm":
        raise ValueError(
            f"freeze_at needs the learned gate (normaliser 'autonorm'), got {settings['normaliser']!r}"
        )
    return settings


def gate_vit(train: data.DataSplit, settings: dict[str, Any]) -> ViTLite:
    """The study's ViT-Lite for the split's images, with the arm's normaliser in every slot."""
    kwargs = (
        {"tau": settings["tau"], "hard": settings["hard"]}
        if settings["normaliser"] == "autonorm"
        else {}
    )
    _, channels, size, _ = train.x.shape
    patch_size = settings["patch_size"] or size // 2  # None: a 2 x 2 grid of patches
    config = vit_config(
        "paper_vision",
        img_size=size,
        in_chans=channels,
        num_classes=train.num_classes,
        patch_size=patch_size,
        dim=settings["dim"],
        depth=settings["depth"],
        heads=settings["heads"],
        dropout=0.0,
        attn_dropout=0.0,
        drop_path=0.0,
        layer_scale_init=None,
    )
    return ViTLite(config, norm_layer(settings["normaliser"], **kwargs))


def gate_callbacks(settings: dict[str, Any]) -> list[Callback]:
    """Telemetry for any AutoNorm; the freeze and the selector's learning rate for a learned gate."""
    callbacks: list[Callback] = []
    if settings["normaliser"].startswith("autonorm"):
        callbacks.append(GateTelemetry())
    if settings["normaliser"] == "autonorm":
        if settings["freeze_at"]:
            callbacks.append(
                AutoNormS(settings["freeze_at"], 0.0, tau=settings["tau"], rule="high")
            )
        elif (
            settings.get("rule") is not None
        ):  # a real AutoNorm-S run, to check compose_schedule against
            callbacks.append(
                AutoNormS(
                    settings["t_freeze"],
                    settings["eps_h"],
                    tau=settings["tau"],
                    rule=settings["rule"],
                )
            )
        if settings["selector_lr"] != 1.0:
            callbacks.append(SelectorLR(settings["selector_lr"]))
    return callbacks


def train_gate(config: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """One gate-study run: build, train with AdamW (warm-up + cosine), test, record the gates."""
    settings = arm_settings(config)
    splits = task_splits(settings["data"], settings["data_profile"])
    train = splits["train"]
    seed_everything(settings["seed"])
    model = gate_vit(train, settings)
    callbacks = gate_callbacks(settings)
    record = train_and_test(
        model, splits, ctx, **adamw_recipe(settings, train.task), callbacks=callbacks
    )
    metrics = record["metrics"]
    curve = [h[f"val_{record['metric']}"] for h in record["history"]]
    metrics["val_curve_mean"] = sum(curve) / len(
        curve
    )  # area under the learning curve, per epoch
    metrics["decision_entropy"] = metrics["gate_snr"] = metrics["final_entropy"] = (
        math.nan
    )
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


def run_table(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per run: its config and metrics, as :func:`normlab.experiments.load_results`
    has them (with ``val_curve_mean``, ``decision_entropy``, ``gate_snr`` and ``final_entropy``)."""
    return pd.DataFrame(
        [{"run_id": r["run_id"], **r["config"], **r["metrics"]} for r in records]
    )


def gate_table(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per run, epoch and gated layer: entropy, ``p_dyt``, ``p_ln``, ``grad_var``, ``snr``,
    the layer's position (0 = first), and whether the gate was frozen by the end of that epoch."""
    rows = []
    for record in records:
        config = record["config"]
        freeze_at = arm_settings(config)["freeze_at"]
        layers = list(dict.fromkeys(g["layer"] for g in record.get("gates", [])))
        for gate in record.get("gates", []):
            rows.append(
                {
                    "run_id": record["run_id"],
                    **config,
                    **gate,
                    "position": layers.index(gate["layer"]),
                    "frozen": bool(freeze_at) and gate["epoch"] >= freeze_at,
                }
            )
    return pd.DataFrame(rows)


_KEYS = ("data", "lr", "seed")


def compose_schedule(
    runs: pd.DataFrame, t_freeze: int, eps_h: float, rule: str = "high"
) -> pd.DataFrame:
    """The AutoNorm-S outcome of every (data, lr, seed), assembled from two runs (module docstring).

    ``runs`` is a :func:`run_table` holding ``autonorm`` runs and ``freeze_at_<t_freeze>``
    runs with otherwise equal settings. The rule is applied to the mean entropy over layers
    that the freeze run's AutoNorm-S recorded at epoch ``t_freeze``: ``"high"`` (the paper)
    freezes when it is >= ``eps_h``, ``"low"`` when it is < ``eps_h``. Returns the chosen
    rows with ``fired`` (bool), ``decision_entropy``, and ``arm`` set to ``autonorm_s`` (rule
    high) or ``autonorm_s_low``.
    """
    if rule not in ("high", "low"):
        raise ValueError(
            f"rule={rule!r} is not a freezing rule; expected 'high' or 'low'"
        )
    if not 0.0 <= eps_h <= math.log(2):
        raise ValueError(f"eps_h must lie in [0, ln 2], got {eps_h!r}")
    never = runs[runs["arm"] == "autonorm"].set_index(list(_KEYS))
    frozen = runs[runs["arm"] == f"{FREEZE_PREFIX}{t_freeze}"].set_index(list(_KEYS))
    if frozen.empty:
        raise ValueError(
            f"no {FREEZE_PREFIX}{t_freeze} runs to compose T_freeze={t_freeze} from"
        )
    missing = frozen.index.difference(never.index)
    if len(missing):
        raise ValueError(
            f"{len(missing)} {FREEZE_PREFIX}{t_freeze} run(s) have no autonorm partner, e.g. {missing[0]}"
        )
    rows = []
    for key, freeze_row in frozen.iterrows():
        entropy = freeze_row["decision_entropy"]
        fired = entropy >= eps_h if rule == "high" else entropy < eps_h
        chosen = (freeze_row if fired else never.loc[key]).copy()
        chosen["fired"], chosen["decision_entropy"] = bool(fired), entropy
        chosen["t_freeze"], chosen["eps_h"], chosen["rule"] = t_freeze, eps_h, rule
        chosen["arm"] = "autonorm_s" if rule == "high" else "autonorm_s_low"
        rows.append(chosen.rename(None).to_frame().T.assign(**dict(zip(_KEYS, key))))
    return pd.concat(rows, ignore_index=True).infer_objects()


_ARM = ("data", "arm")


def chosen(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run at the learning rate chosen on validation data per task and arm.

    With ``at_edge`` (the choice is the grid's smallest or largest rate) and
    ``candidates`` (how many rates were tried); a set with one rate per arm is returned
    whole.
    """
    return at_chosen_lr(runs, _ARM, higher_is_better=True)


def at_lr_of(runs: pd.DataFrame, arm: str) -> pd.DataFrame:
    """Every run at the learning rate chosen on validation data for ``arm``, per task: the
    arms compared at one rate, as a mechanism (not a method) comparison needs."""
    if arm not in set(runs["arm"]):
        raise ValueError(
            f"arm={arm!r} has no runs; expected one of {sorted(set(runs['arm']))}"
        )
    rates = chosen(runs[runs["arm"] == arm])[["data", "lr"]].drop_duplicates()
    return runs.merge(rates, on=["data", "lr"])


def paired_differences(
    runs: pd.DataFrame, a: str, b: str, value: str = "test_metric"
) -> pd.DataFrame:
    """Per task, ``value`` of arm ``a`` minus arm ``b``, paired by seed, each arm at its own
    learning rate chosen on validation data (:func:`chosen`): mean, 95 % CI, n.

    Columns: ``data``, ``a``, ``b``, ``mean``, ``ci95`` (t-interval half-width), ``low``,
    ``high``, ``n`` (pairs).
    """
    best = chosen(runs[runs["arm"].isin([a, b])])
    rows = []
    for task, part in best.groupby("data", sort=False):
        left = part[part["arm"] == a].set_index("seed")[value]
        right = part[part["arm"] == b].set_index("seed")[value]
        diff = (left - right).dropna()
        mean, half, n = mean_ci(diff)
        rows.append(
            {
                "data": task,
                "a": a,
                "b": b,
                "mean": mean,
                "ci95": half,
                "low": mean - half,
                "high": mean + half,
                "n": n,
            }
        )
    return pd.DataFrame(rows)


def arm_summary(runs: pd.DataFrame, value: str = "test_metric") -> pd.DataFrame:
    """Mean, 95 % CI and n of ``value`` per task and arm, each arm at its learning rate chosen
    on validation data (``lr``, ``at_edge``); ``fired``: the share of seeds where AutoNorm-S's
    rule fired (composed arms only)."""
    best = chosen(runs)
    summary = summarise(best, ["data", "arm"], value)
    rates = best.groupby(["data", "arm"], sort=False)[["lr", "at_edge"]].first()
    summary = summary.merge(rates.reset_index(), on=["data", "arm"])
    if "fired" in best:
        fired = best.groupby(["data", "arm"], sort=False)["fired"].mean()
        summary = summary.merge(fired.reset_index(), on=["data", "arm"], how="left")
    return summary


def freeze_epochs(arms: Iterable[str]) -> list[int]:
    """The epochs T of the ``freeze_at_<T>`` arms, sorted."""
    return sorted(
        int(m.group(1))
        for a in arms
        if (m := re.fullmatch(rf"{FREEZE_PREFIX}(\d+)", a))
    )


# --------------------------------------------------------------------- declarations

# The study's backbone and budget per profile. quick: FrozenLN reaches >= 85 % on the digits
# in about 5 s per run on one CPU thread. cpu (the saved sets): twice the depth, more epochs,
# 5 seeds, a second task and more arms, about 8 s per run. standard/paper: a GPU with the real
# datasets and the paper's ViT (8 layers, dim 128, 4 heads, patch 4). Every profile but quick
# chooses the lr per (task, arm) on val. ``patch_size`` None: a 2 x 2 grid of patches.
_RECIPE = {
    "dim": 32,
    "heads": 4,
    "patch_size": None,
    "batch_size": 64,
    "weight_decay": 0.05,
    "warmup": 0.05,
    "label_smoothing": 0.0,
    "data_profile": "quick",
}
SETUP: dict[str, dict[str, Any]] = {
    "quick": {**_RECIPE, "depth": 2, "epochs": 8},
    "cpu": {**_RECIPE, "depth": 4, "epochs": 10},
    "standard": {
        "dim": 128,
        "depth": 8,
        "heads": 4,
        "patch_size": 4,
        "epochs": 12,
        "batch_size": 256,
        "weight_decay": 0.05,
        "warmup": 0.1,
        "label_smoothing": 0.1,
        "data_profile": "standard",
    },
    "paper": {
        "dim": 128,
        "depth": 8,
        "heads": 4,
        "patch_size": 4,
        "epochs": 100,
        "batch_size": 128,
        "weight_decay": 0.05,
        "warmup": 0.1,
        "label_smoothing": 0.1,
        "data_profile": "paper",
    },
}
REAL_TASKS = ["mnist", "mnist_restyled", "fashion_mnist", "cifar10", "cifar100"]
# standard: one GPU in about half an hour per experiment: a stationary and a diverse task,
# two learning rates, 12 epochs; paper: every task, three rates, the full schedule.
TASKS_BY_PROFILE = {
    "quick": ["mnist"],
    "cpu": ["mnist", "mnist_restyled"],
    "standard": ["mnist", "cifar10"],
    "paper": REAL_TASKS,
}
LRS = {
    "quick": [3e-3],
    "cpu": [1e-3, 3e-3, 1e-2, 3e-2],
    "standard": [3e-4, 1e-3],
    "paper": [3e-4, 5e-4, 1e-3],
}
SEEDS = {"quick": 3, "cpu": 5, "standard": 3, "paper": 5}
# AutoNorm-S's T_freeze in chapter 11, per profile (the paper: 10 epochs of a long schedule).
T_FREEZE = {"quick": 2, "cpu": 3, "standard": 4, "paper": 10}
# seconds per run: quick and cpu measured on one CPU thread (AutoNorm costs about twice
# LayerNorm); standard and paper estimated for one current GPU.
SECONDS = {"quick": 5.0, "cpu": 8.0, "standard": 36.0, "paper": 400.0}


def _grids(
    arms: dict[str, list[str]], tasks: dict[str, list[str]] = TASKS_BY_PROFILE
) -> dict[str, Grid]:
    return {
        p: Grid(
            axes={"data": tasks[p], "arm": arms[p], "lr": LRS[p]},
            fixed={**SETUP[p], "tau": TAU, "selector_lr": 1.0},
            seeds=SEEDS[p],
        )
        for p in SETUP
    }


_COMPARED = ["frozen_ln", "autonorm_random", "autonorm"]
GATE_BOTTLENECK = register_experiment(
    Experiment(
        name="gate_bottleneck",
        title="The stabilisation bottleneck: a learned gate against a random one, soft against hard",
        chapter="11",
        profiles=_grids(
            {
                "quick": _COMPARED,
                **{
                    p: [*_COMPARED, "autonorm_hard", f"{FREEZE_PREFIX}{T_FREEZE[p]}"]
                    for p in ("cpu", "standard", "paper")
                },
            }
        ),
        run_one=train_gate,
        seconds_per_run=SECONDS,
        notes="ViT-Lite; AutoNorm-S (both readings of the rule) is composed from autonorm and freeze_at_<T> runs.",
    )
)

GATE_TAU = register_experiment(
    Experiment(
        name="gate_tau",
        title="The gate's gradient noise against the Gumbel-Softmax temperature",
        chapter="11",
        profiles={
            p: Grid(
                axes={
                    "data": ["mnist"] if p in ("quick", "cpu") else ["cifar10"],
                    "tau": [0.1, 0.5, 2.0]
                    if p == "cpu"
                    else [0.1, 0.25, 0.5, 1.0, 2.0],
                    "lr": LRS[p],
                },
                fixed={**SETUP[p], "arm": "autonorm", "selector_lr": 1.0},
                seeds=SEEDS[p],
            )
            for p in SETUP
        },
        run_one=train_gate,
        seconds_per_run=SECONDS,
        notes="Learned AutoNorm at five temperatures; the gate telemetry records the selector's gradient variance and SNR.",
    )
)

# chapter 12: freeze runs at more epochs; the cpu set's autonorm and freeze_at_3 runs come
# from gate_bottleneck (same settings), the quick grid carries its own autonorm runs.
AUTONORM_S_SWEEP = register_experiment(
    Experiment(
        name="autonorm_s_sweep",
        title="AutoNorm-S at work: when the freeze fires, T_freeze and eps_H",
        chapter="12",
        profiles=_grids(
            {
                "quick": ["autonorm", f"{FREEZE_PREFIX}{T_FREEZE['quick']}"],
                "cpu": [f"{FREEZE_PREFIX}{t}" for t in (1, 2, 5, 8)],
                # an early and a late freeze within each schedule (12 and 100 epochs)
                "standard": [f"{FREEZE_PREFIX}{t}" for t in (2, 9)],
                "paper": [f"{FREEZE_PREFIX}{t}" for t in (3, 20)],
            }
        ),
        run_one=train_gate,
        seconds_per_run=SECONDS,
        notes="freeze_at_<T> runs; with gate_bottleneck's autonorm runs they give AutoNorm-S at any eps_H and either rule.",
    )
)

# The widget's grid: the quick model (the widget shows gate dynamics,
# not accuracy); every freeze is composed from freeze_at in {0 (never), T}.
WIDGET_AXES: dict[str, dict[str, list[Any]]] = {
    "quick": {
        "data": ["mnist"],
        "tau": [0.5, 2.0],
        "selector_lr": [1.0],
        "hard": [False],
        "freeze_at": [0, 2],
    },
    **{
        p: {
            "data": ["mnist", "mnist_restyled"],
            "tau": [0.5, 2.0],
            "selector_lr": [1.0, 10.0],
            "hard": [False, True],
            "freeze_at": [0, T_FREEZE[p]],
        }
        for p in ("cpu", "standard", "paper")
    },
}
WIDGET_SETUP: dict[str, dict[str, Any]] = {
    "quick": {**SETUP["quick"], "epochs": 3},
    "cpu": SETUP["quick"],
    "standard": SETUP["standard"],
    "paper": SETUP["paper"],
}
GATE_WIDGET = register_experiment(
    Experiment(
        name="gate_widget",
        title="The runs behind the gate-collapse widget",
        chapter="10",
        profiles={
            p: Grid(
                axes=WIDGET_AXES[p],
                fixed={
                    **WIDGET_SETUP[p],
                    "normaliser": "autonorm",
                    "lr": 3e-3 if p in ("quick", "cpu") else LRS[p][-1],
                },
                # the saved set has five seeds, so the widget can show a band and a re-run
                # on another machine has a seed spread to be compared against
                seeds=5 if p == "cpu" else 1,
            )
            for p in SETUP
        },
        run_one=train_gate,
        seconds_per_run=SECONDS,
        select=None,
        notes="The widget looks runs up and applies the freezing rule itself.",
    )
)


# ------------------------------------------------------------------------- figures

ARM_ORDER = [
    "frozen_ln",
    "autonorm_random",
    "autonorm",
    "autonorm_hard",
    "autonorm_s",
    "autonorm_s_low",
]


def with_schedules(runs: pd.DataFrame, eps_h: float = EPS_H) -> pd.DataFrame:
    """``runs`` with AutoNorm-S under both rules composed in at the set's first ``freeze_at_<T>``
    (and those freeze runs left out); unchanged when the set has no freeze run."""
    epochs = freeze_epochs(runs["arm"].unique())
    if not epochs:
        return runs
    composed = [
        compose_schedule(runs, epochs[0], eps_h, rule) for rule in ("high", "low")
    ]
    arms = pd.concat([runs, *composed], ignore_index=True)
    return arms[~arms["arm"].str.startswith(FREEZE_PREFIX)]


def draw_arms(runs: pd.DataFrame, ax: Any) -> None:
    """Test accuracy (mean, 95 % CI) per task and arm on one axis; AutoNorm-S composed in."""
    from .. import plots

    summary = arm_summary(with_schedules(runs))
    colours = plots.colours(ARM_ORDER)
    tasks = list(dict.fromkeys(summary["data"]))
    for _, row in summary.iterrows():
        x = tasks.index(row["data"]) * (len(ARM_ORDER) + 1) + ARM_ORDER.index(
            row["arm"]
        )
        ax.errorbar(
            x,
            row["mean"],
            yerr=row["ci95"],
            fmt="o",
            capsize=3,
            color=colours[row["arm"]],
            label=plots.label(row["arm"]) if row["data"] == tasks[0] else None,
        )
    ax.set_xticks(
        [
            i * (len(ARM_ORDER) + 1) + (len(ARM_ORDER) - 1) / 2
            for i in range(len(tasks))
        ],
        [f"{d} ({TASKS.get(d, d)})" for d in tasks],
    )
    ax.set_ylabel("test accuracy (mean, 95 % CI)")
    ax.legend(fontsize=7, ncol=2)


def entropy_figure(gates: pd.DataFrame, title: str, eps_h: float = EPS_H) -> Any:
    """Gate entropy per layer over training, one panel per task: the mean over seeds and a band of
    one standard deviation (``gates``: a :func:`gate_table`)."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    from .. import plots

    tasks = list(dict.fromkeys(gates["data"]))
    with plots.style():
        figure = Figure(figsize=(5 * len(tasks), 3.4), layout="constrained")
        axes = np.atleast_1d(figure.subplots(1, len(tasks), sharey=True))
        for ax, task in zip(axes, tasks):
            part = gates[gates["data"] == task]
            positions = sorted(part["position"].unique())
            for shade, position in zip(
                colormaps["viridis"](np.linspace(0, 0.9, len(positions))), positions
            ):
                layer = part[part["position"] == position]
                curve = (
                    layer.groupby("epoch")["entropy"].agg(["mean", "std"]).fillna(0.0)
                )
                ax.plot(
                    curve.index,
                    curve["mean"],
                    "o-",
                    ms=3,
                    color=shade,
                    label=layer["layer"].iloc[0],
                )
                ax.fill_between(
                    curve.index,
                    curve["mean"] - curve["std"],
                    curve["mean"] + curve["std"],
                    color=shade,
                    alpha=0.15,
                    lw=0,
                )
            ax.axhline(math.log(2), color="grey", ls=":")
            ax.axhline(eps_h, color="black", ls="--", lw=1)
            ax.set(
                title=f"{task} ({TASKS.get(task, task)})",
                xlabel="epoch",
                ylim=(0, math.log(2) + 0.05),
            )
        axes[0].set_ylabel("gate entropy (nats)")
        axes[-1].legend(fontsize=7, title="layer")
        figure.suptitle(title)
    return figure


def entropy_twin(
    gates: pd.DataFrame, by: str, title: str, eps_h: float = EPS_H
) -> Interactive:
    """:func:`entropy_figure` for the HTML book, with controls: the task, the value of the
    column ``by`` (e.g. ``tau``), and one seed or the mean over seeds with a band of one
    standard deviation (``gates``: a :func:`gate_table`; numbers rounded to 3 decimals)."""
    import altair as alt

    data = pd.DataFrame(
        {
            "d": gates["data"],
            "v": gates[by],
            "s": gates["seed"],
            "l": gates["layer"],
            "e": gates["epoch"],
            "H": gates["entropy"].round(3),
        }
    )
    tasks, values = list(dict.fromkeys(data["d"])), sorted(data["v"].unique())
    seeds = sorted(data["s"].unique())
    layers = list(dict.fromkeys(data["l"]))
    params = [
        choice("task", tasks[0], tasks, "task ", [TASKS.get(t, t) for t in tasks]),
        choice("v", values[len(values) // 2], values, f"{by} "),
        choice(  # one seed: nothing to choose
            "seed",
            "mean",
            ["mean", *map(int, seeds)] if len(seeds) > 1 else ["mean"],
            "seed ",
            ["mean ± sd", *(f"seed {s}" for s in seeds)],
        ),
    ]
    chosen = alt.Chart(data, width=480, height=240).transform_filter(
        "datum.d == task && datum.v == v && (seed == 'mean' || datum.s == seed)"
    )
    x = alt.X("e:Q", title="epoch", axis=alt.Axis(tickMinStep=1))
    colour = alt.Color(
        "l:N", title="layer", sort=layers, scale=alt.Scale(scheme="tableau10")
    )
    axis = "gate entropy (nats)"
    y = alt.Y("mean(H):Q", title=axis, scale=alt.Scale(domain=[0, 0.72]))
    lines = chosen.mark_line(point=True).encode(x=x, y=y, color=colour)
    band = chosen.mark_errorband(extent="stdev", opacity=0.15).encode(
        x=x, y=alt.Y("H:Q", title=axis), color=colour
    )
    levels = pd.DataFrame(
        {"y": [round(math.log(2), 3), eps_h], "what": ["ln 2", "eps_H"]}
    )
    rules = (
        alt.Chart(levels)
        .mark_rule(color="grey")
        .encode(
            y="y:Q",
            strokeDash=alt.StrokeDash(
                "what:N",
                scale=alt.Scale(domain=["ln 2", "eps_H"], range=[[2, 3], [6, 3]]),
                legend=None,
            ),
        )
    )
    chart = (
        alt.layer(band, lines, rules)
        .add_params(*params)
        .properties(title=f"{title} (dotted: ln 2; dashed: eps_H = {eps_h:g})")
    )
    return Interactive(
        chart, f"{title}: gate entropy per layer, by task, {by} and seed"
    )


def entropy_explorer(
    gates: pd.DataFrame, by: str, title: str, eps_h: float = EPS_H
) -> LiveAndStatic:
    """:func:`entropy_figure` of one task, one value of ``by`` and one seed or the mean over
    seeds, with controls: live ipywidgets in Jupyter and Colab, :func:`entropy_twin` in the
    HTML book (``gates``: a :func:`gate_table`)."""
    import ipywidgets as widgets

    def draw(task: str, value: float, seed: Any) -> Any:
        rows = (gates["data"] == task) & (gates[by] == value)
        if seed != "mean":
            rows &= gates["seed"] == seed
        label = "mean ± sd over seeds" if seed == "mean" else f"seed {seed}"
        return entropy_figure(gates[rows], f"{title}: {by} {value:g}, {label}", eps_h)

    values = sorted(gates[by].unique())
    live = widgets.interactive(
        draw,
        task=widgets.ToggleButtons(
            options=[(TASKS.get(t, t), t) for t in dict.fromkeys(gates["data"])]
        ),
        value=widgets.SelectionSlider(
            options=values, value=values[len(values) // 2], description=by
        ),
        seed=widgets.Dropdown(
            options=["mean", *map(int, sorted(gates["seed"].unique()))]
        ),
    )
    return LiveAndStatic(live, entropy_twin(gates, by, title, eps_h))


EPS_GRID: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)


def sweep_table(
    runs: pd.DataFrame, eps_grid: Iterable[float] = EPS_GRID
) -> pd.DataFrame:
    """AutoNorm-S at every ``freeze_at_<T>`` of ``runs``, every eps_H and both rules.

    Per task and cell: ``fired``, the share of seeds where the rule fired, and ``lead``, the
    mean over seeds of AutoNorm-S's test accuracy minus FrozenLN's, each at its own learning
    rate chosen on validation data (:func:`paired_differences`). ``runs`` needs ``frozen_ln``,
    ``autonorm`` and the freeze runs.
    """
    reference = runs[runs["arm"] == "frozen_ln"]
    cells = []
    for t in freeze_epochs(runs["arm"].unique()):
        for eps in eps_grid:
            for rule in ("high", "low"):
                arm = compose_schedule(runs, t, eps, rule)
                name = arm["arm"].iloc[0]
                lead = paired_differences(
                    pd.concat([arm, reference], ignore_index=True), name, "frozen_ln"
                ).set_index("data")["mean"]
                fired = chosen(arm).groupby("data")["fired"].mean()
                cells.extend(
                    {
                        "data": task,
                        "rule": rule,
                        "t_freeze": t,
                        "eps_h": eps,
                        "fired": fired[task],
                        "lead": lead[task],
                    }
                    for task in lead.index
                )
    return pd.DataFrame(cells)


def sweep_figure(table: pd.DataFrame) -> Any:
    """Heat maps of a :func:`sweep_table`, a row of panels per task and a column per rule:
    rows T_freeze, columns eps_H, colour AutoNorm-S's lead over FrozenLN, numbers the share
    of seeds where the rule fired."""
    import numpy as np
    from matplotlib.figure import Figure

    from .. import plots

    tasks = list(table["data"].unique())
    limit = float(np.nanmax(np.abs(table["lead"])))
    with plots.style():
        figure = Figure(figsize=(10, 3.0 * len(tasks)), layout="constrained")
        axes = np.atleast_2d(figure.subplots(len(tasks), 2, sharex=True, sharey=True))
        for row, task in zip(axes, tasks):
            for ax, rule in zip(row, ("high", "low")):
                part = table[(table["data"] == task) & (table["rule"] == rule)]
                lead = part.pivot(index="t_freeze", columns="eps_h", values="lead")
                fired = part.pivot(index="t_freeze", columns="eps_h", values="fired")
                image = ax.imshow(
                    lead.to_numpy(), cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto"
                )
                for (i, j), share in np.ndenumerate(fired.to_numpy()):
                    dark = abs(lead.iloc[i, j]) > 0.6 * limit
                    ax.text(
                        j,
                        i,
                        f"{share:.1f}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if dark else "black",
                    )
                ax.set_xticks(
                    range(len(lead.columns)), [f"{e:g}" for e in lead.columns]
                )
                ax.set_yticks(range(len(lead.index)), lead.index)
                sign = ">=" if rule == "high" else "<"
                ax.set_title(
                    f"{task} ({TASKS.get(task, task)}): freeze if H {sign} eps_H"
                )
                ax.grid(False)
            row[0].set_ylabel(r"$T_\mathrm{freeze}$")
        for ax in axes[-1]:
            ax.set_xlabel(r"$\epsilon_H$")
        figure.colorbar(image, ax=axes, label="test accuracy minus FrozenLN's (mean)")
        figure.suptitle("numbers: share of seeds where the rule fired")
    return figure


def freeze_figure(gates: pd.DataFrame, t_freeze: int) -> Any:
    """Mean gate entropy over layers and seeds per epoch, the plain learned gate against the
    gate frozen at the end of epoch ``t_freeze`` (``gates``: a :func:`gate_table`), a panel
    per task."""
    import numpy as np
    from matplotlib.figure import Figure

    from .. import plots

    frozen = f"{FREEZE_PREFIX}{t_freeze}"
    pair = gates[gates["arm"].isin(["autonorm", frozen])]
    tasks = list(dict.fromkeys(pair["data"]))
    with plots.style():
        figure = Figure(figsize=(5 * len(tasks), 3.4), layout="constrained")
        axes = np.atleast_1d(figure.subplots(1, len(tasks), sharey=True))
        for ax, task in zip(axes, tasks):
            part = pair[pair["data"] == task]
            for arm, line, shade in (
                ("autonorm", "-", colour("autonorm")),
                (frozen, "--", colour("autonorm_s")),
            ):
                curve = part[part["arm"] == arm].groupby("epoch")["entropy"].mean()
                ax.plot(
                    curve.index,
                    curve.values,
                    line,
                    marker="o",
                    ms=3,
                    label=arm,
                    color=shade,
                )
            ax.axvline(t_freeze, color="#d62728", alpha=0.3, lw=5)
            ax.set(
                title=f"{task} ({TASKS.get(task, task)})",
                xlabel="epoch",
                ylim=(0, math.log(2) + 0.05),
            )
        axes[0].set_ylabel("mean gate entropy (nats)")
        axes[0].legend(fontsize=8)
    return figure


def tau_figure(
    estimator: pd.DataFrame, in_net: pd.DataFrame, accuracy: pd.DataFrame
) -> Any:
    """The Gumbel-Softmax gradient against tau: the estimator's variance and SNR for one gate
    (``estimator``: columns ``tau``, ``variance``, ``SNR``), the SNR inside the network
    (``in_net``: indexed by tau, column ``("snr", "mean")``) and test accuracy (``accuracy``:
    ``tau``, ``mean``, ``ci95``)."""
    from matplotlib.figure import Figure

    from .. import plots

    with plots.style():
        figure = Figure(figsize=(12, 3.4), layout="constrained")
        variance, snr, acc = figure.subplots(1, 3)
        variance.loglog(estimator["tau"], estimator["variance"], "o-")
        variance.set(xlabel=r"$\tau$", ylabel="gradient variance", title="variance")
        snr.loglog(
            estimator["tau"], estimator["SNR"], "o-", label="estimator, one gate"
        )
        snr.loglog(in_net.index, in_net[("snr", "mean")], "s--", label="in the network")
        snr.set(xlabel=r"$\tau$", ylabel="SNR", title="signal-to-noise ratio")
        snr.legend(fontsize=8)
        acc.errorbar(
            accuracy["tau"],
            accuracy["mean"],
            yerr=accuracy["ci95"],
            fmt="o-",
            capsize=3,
        )
        acc.set(
            xscale="log",
            xlabel=r"$\tau$",
            ylabel="test accuracy",
            title="learned gate, lr chosen on val per tau",
        )
    return figure
