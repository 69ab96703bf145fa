"""The gate studies' grids: the bottleneck and what it hinges on (chapter 11), AutoNorm-S
at work (chapter 12), the temperature sweep (chapter 11) and the runs behind chapter 10's
widget.

Budgets. On the CPU (the ``cpu`` profile, the saved sets) every run takes 26 epochs of 40
steps of 32 digits, 1,040 optimiser steps (1,014 in practice: the last batch is short),
by which FrozenLN has reached its plateau on both tasks (about epoch 12); AutoNorm-S
decides at the end of epoch :data:`T_FREEZE` ``["cpu"]`` = 8, 312 steps or 31 % of
training, once the learned gates' mean entropy has fallen from ln 2 to about 0.25 nats.
One torch thread runs a FrozenLN run in about 16 s and a gated one in about 45 s, so the
``cpu`` grids hold just the configurations the claims and chapters read, at one learning
rate (3e-3, the rate the earlier four-rate sets chose for most arms) and three seeds.

Initialisation. Every profile's small models start from torch's own fan-in default
(``init="torch_default"``): ViT's truncated normal with std 0.02 was chosen for width 768;
at width 32 it shrinks every linear map's output about tenfold (0.02 * sqrt(32) = 0.11),
the class token enters the final norm at std 0.025, and a DyT there passes it on almost
unscaled, so the logits start near zero and DyT-heavy arms sit at ln 10 for epochs.
``gate_bottleneck`` keeps the std-0.02 scheme as an axis (chapter 11). The GPU profiles
(the paper's width-128 ViT) keep the std-0.02 scheme.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..paper import TAU
from .gate_runs import FREEZE_PREFIX, train_gate
from .grid import Grid
from .registry import Experiment, register_experiment

DEFAULT_INIT = "torch_default"  # the book's initialisation for small models (see above)
DEFAULT_READOUT = "cls"  # the paper's ViT reads the class token


def _setup(
    *,
    dim: int,
    depth: int,
    heads: int,
    patch_size: int,
    epochs: int,
    batch_size: int,
    warmup: float,
    label_smoothing: float,
    data_profile: str,
    init: str,
    readout: str = DEFAULT_READOUT,
) -> dict[str, Any]:
    return {
        "dim": dim,
        "depth": depth,
        "heads": heads,
        "patch_size": patch_size,
        "epochs": epochs,
        "batch_size": batch_size,
        "weight_decay": 0.05,
        "warmup": warmup,
        "label_smoothing": label_smoothing,
        "data_profile": data_profile,
        "init": init,
        "readout": readout,
    }


# The backbone and budget per profile: quick (the chapters' own runs, seconds each) and cpu
# (the saved sets) a 2-block ViT-Lite of width 32 with patch 4 (a 2 x 2 grid on the 8 x 8
# digits); standard/paper the paper's ViT (8 layers, dim 128, 4 heads, patch 4) on a GPU.
_SMALL = {
    "dim": 32,
    "depth": 2,
    "heads": 4,
    "patch_size": 4,
    "warmup": 0.05,
    "label_smoothing": 0.0,
    "data_profile": "quick",
    "init": DEFAULT_INIT,
}
_PAPER = {
    "dim": 128,
    "depth": 8,
    "heads": 4,
    "patch_size": 4,
    "warmup": 0.1,
    "label_smoothing": 0.1,
    "init": "trunc_normal_0.02",
}
SETUP: dict[str, dict[str, Any]] = {
    "quick": _setup(**_SMALL, epochs=8, batch_size=64),
    "cpu": _setup(**_SMALL, epochs=26, batch_size=32),
    "standard": _setup(**_PAPER, epochs=12, batch_size=256, data_profile="standard"),
    "paper": _setup(**_PAPER, epochs=100, batch_size=128, data_profile="paper"),
}
REAL_TASKS = ["mnist", "mnist_restyled", "fashion_mnist", "cifar10", "cifar100"]
# The CIFAR-10 stand-in of every claim that names CIFAR-10 (N1, N3): the restyled digits,
# the diverse task; the plain digits stand in for MNIST.
CIFAR10_STANDIN = {"quick": "mnist_restyled", "cpu": "mnist_restyled"}
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
    "cpu": [3e-3],
    "standard": [3e-4, 1e-3],
    "paper": [3e-4, 5e-4, 1e-3],
}
SEEDS = {"quick": 3, "cpu": 3, "standard": 3, "paper": 5}
# AutoNorm-S's T_freeze in epochs per profile (the paper: 10 epochs of a long schedule);
# cpu: 312 of 1,014 steps (31 %).
T_FREEZE = {"quick": 2, "cpu": 8, "standard": 4, "paper": 10}
# seconds per run (a gated one; FrozenLN about a third): quick and cpu measured on one CPU
# thread; standard and paper estimated for one current GPU.
SECONDS = {"quick": 5.0, "cpu": 45.0, "standard": 36.0, "paper": 400.0}


def _grid(
    *,
    profile: str,
    axes: Mapping[str, list[Any]],
    fixed: Mapping[str, Any] | None = None,
    seeds: int | None = None,
    where: Any = None,
) -> Grid:
    """One profile's grid: its :data:`SETUP`, the gate's defaults and ``fixed`` under the
    swept ``axes`` (``lr`` from :data:`LRS` unless swept or fixed)."""
    settings = {**SETUP[profile], "tau": TAU, "selector_lr": 1.0, **(fixed or {})}
    if "lr" not in axes and "lr" not in settings:
        axes = {**axes, "lr": LRS[profile]}
    settings = {key: value for key, value in settings.items() if key not in axes}
    return Grid(
        axes=axes,
        fixed=settings,
        seeds=SEEDS[profile] if seeds is None else seeds,
        where=where,
    )


_COMPARED = ["frozen_ln", "autonorm_random", "autonorm"]
_FREEZE_CPU = f"{FREEZE_PREFIX}{T_FREEZE['cpu']}"


def _bottleneck_point(config: Mapping[str, Any]) -> bool:
    """The cpu bottleneck grid's points: every arm at the book's defaults, and on the CIFAR-10
    stand-in the compared arms (and the learned gate at x10 the selector's rate) with the
    std-0.02 initialisation and with the mean readout, one changed at a time."""
    arm, fast = config["arm"], config["selector_lr"] != 1.0
    changed = (config["init"] != DEFAULT_INIT) + (config["readout"] != DEFAULT_READOUT)
    if config["data"] != CIFAR10_STANDIN["cpu"]:  # the plain digits: N5 and N14
        return (
            not changed and not fast and arm in ("frozen_ln", "autonorm", _FREEZE_CPU)
        )
    if changed > 1:
        return False
    if fast:
        return arm == "autonorm"
    return arm in _COMPARED or not changed


GATE_BOTTLENECK = register_experiment(
    Experiment(
        name="gate_bottleneck",
        title="The stabilisation bottleneck: a learned gate against a random one, soft against "
        "hard, and what it hinges on (initialisation, readout, the selector's rate)",
        chapter="11",
        profiles={
            "quick": _grid(
                profile="quick",
                axes={"data": TASKS_BY_PROFILE["quick"], "arm": _COMPARED},
            ),
            "cpu": _grid(
                profile="cpu",
                axes={
                    "data": TASKS_BY_PROFILE["cpu"],
                    "arm": [*_COMPARED, "autonorm_hard", _FREEZE_CPU],
                    "init": [DEFAULT_INIT, "trunc_normal_0.02"],
                    "readout": [DEFAULT_READOUT, "mean"],
                    "selector_lr": [1.0, 10.0],
                },
                where=_bottleneck_point,
            ),
            **{
                p: _grid(
                    profile=p,
                    axes={
                        "data": TASKS_BY_PROFILE[p],
                        "arm": [
                            *_COMPARED,
                            "autonorm_hard",
                            f"{FREEZE_PREFIX}{T_FREEZE[p]}",
                        ],
                    },
                )
                for p in ("standard", "paper")
            },
        },
        run_one=train_gate,
        seconds_per_run=SECONDS,
        notes="ViT-Lite; AutoNorm-S (both readings of the rule) is composed from autonorm and "
        "freeze_at_<T> runs; cpu: init, readout and selector_lr are axes on the restyled digits.",
    )
)

GATE_TAU = register_experiment(
    Experiment(
        name="gate_tau",
        title="The gate's gradient noise against the Gumbel-Softmax temperature",
        chapter="11",
        profiles={
            p: _grid(
                profile=p,
                axes={
                    "data": ["mnist"] if p in ("quick", "cpu") else ["cifar10"],
                    # cpu: the coldest and the hottest only (the CPU budget)
                    "tau": [0.1, 2.0] if p == "cpu" else [0.1, 0.25, 0.5, 1.0, 2.0],
                },
                fixed={"arm": "autonorm"},
            )
            for p in SETUP
        },
        run_one=train_gate,
        seconds_per_run=SECONDS,
        notes="Learned AutoNorm at several temperatures; the gate telemetry records the "
        "selector's gradient variance and SNR.",
    )
)

# chapter 12: freeze runs at more epochs; the cpu set's autonorm and freeze_at_8 runs come
# from gate_bottleneck (same settings), the quick grid carries its own autonorm runs.
AUTONORM_S_SWEEP = register_experiment(
    Experiment(
        name="autonorm_s_sweep",
        title="AutoNorm-S at work: when the freeze fires, T_freeze and eps_H",
        chapter="12",
        profiles={
            p: _grid(
                profile=p,
                axes={"data": TASKS_BY_PROFILE[p], "arm": arms},
            )
            for p, arms in {
                "quick": ["autonorm", f"{FREEZE_PREFIX}{T_FREEZE['quick']}"],
                # an early and a late decision around gate_bottleneck's epoch 8 (of 26)
                "cpu": [f"{FREEZE_PREFIX}{t}" for t in (4, 14)],
                # an early and a late freeze within each schedule (12 and 100 epochs)
                "standard": [f"{FREEZE_PREFIX}{t}" for t in (2, 9)],
                "paper": [f"{FREEZE_PREFIX}{t}" for t in (3, 20)],
            }.items()
        },
        run_one=train_gate,
        seconds_per_run=SECONDS,
        notes="freeze_at_<T> runs; with gate_bottleneck's autonorm runs they give AutoNorm-S "
        "at any eps_H and either rule.",
    )
)

# The widget's grid: every freeze is composed from freeze_at in {0 (never), T, ...}. The
# selector at x10 the backbone's rate is where the gates collapse (entropy below eps_H); the
# quick grid (a pip or Colab reader without the saved set trains it) keeps only the
# selector's rate and one T_freeze, and the widget shows only the controls a grid serves.
WIDGET_AXES: dict[str, dict[str, list[Any]]] = {
    "quick": {
        "data": ["mnist"],
        "tau": [TAU],
        "selector_lr": [1.0, 10.0],
        "hard": [False],
        "freeze_at": [0, 2],
    },
    "cpu": {
        "data": ["mnist"],
        "tau": [TAU],
        "selector_lr": [1.0, 10.0],
        "hard": [False],
        "freeze_at": [0, 4, 8, 14],
    },
    **{
        p: {
            "data": ["mnist", "cifar10"],
            "tau": [TAU, 2.0],
            "selector_lr": [1.0, 10.0],
            "hard": [False, True],
            "freeze_at": [0, T_FREEZE[p] // 2, T_FREEZE[p], 2 * T_FREEZE[p]],
        }
        for p in ("standard", "paper")
    },
}
GATE_WIDGET = register_experiment(
    Experiment(
        name="gate_widget",
        title="The runs behind the gate-collapse widget",
        chapter="10",
        profiles={
            p: _grid(
                profile=p,
                axes=WIDGET_AXES[p],
                fixed={
                    "normaliser": "autonorm",
                    **({"epochs": 3} if p == "quick" else {}),
                    "lr": 3e-3 if p in ("quick", "cpu") else LRS[p][-1],
                },
                # the widget shows seed 0's run per setting; the saved cpu set keeps three
                # seeds a point, so that a re-run on other numerics has a band to fall in
                seeds=3 if p == "cpu" else 1,
            )
            for p in SETUP
        },
        run_one=train_gate,
        seconds_per_run=SECONDS,
        select=None,
        notes="The widget looks runs up and applies the freezing rule itself.",
    )
)
