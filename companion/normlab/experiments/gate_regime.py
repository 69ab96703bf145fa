"""A regime that can test AutoNorm-S (chapter 12; issue 51): trained past the plateau,
the freeze decided on formed features.

``gate_bottleneck``'s cpu runs take 8 epochs: its gated arms end with a training loss about
twice FrozenLN's, still gaining validation accuracy, and AutoNorm-S decides at epoch 3,
when they have barely left chance, so the rule fires on every seed. This grid is the
regime the paper's schedule implies, declared before any run:

- **past the plateau**: :data:`REGIME_EPOCHS` (three times the short budget on both
  tasks: at twice, the Random Selector on real MNIST still gained just over half a
  point in its last quarter), checked on the runs by
  :func:`normlab.analysis.gates.regime` (a gated arm's final training loss within
  ``LOSS_REACH`` = 1.5 x FrozenLN's, or under ``PLATEAU_GAIN`` = half a point of
  validation accuracy gained over the last quarter of its epochs);
- **the freeze after warm-up**: ``autonorm_s_ready`` (:class:`normlab.gates.ReadyAutoNormS`)
  decides, by the paper's rule at eps_H 0.1, at the first epoch after warm-up whose
  validation accuracy has left chance by ``READY_LEAD`` = 0.3;
- N1's, N3's and N5's arms (FrozenLN, the learned gate, the Random Selector, AutoNorm-S),
  N2's and N13's controls (the gate trained with the exact gradient, the hard gate) and
  chapter 11's arms without a gate (the fixed 50/50 mix, DyT alone): a pilot of five
  seeds at each of the three rates (three on real MNIST), stepped half a decade past an
  edge the pilot chose (:data:`REGIME_WIDER`), the rate chosen on validation accuracy,
  then every arm at its chosen rate to :data:`REGIME_SEEDS` on both tasks (real MNIST is N1's and N5's stationary task).

What it costs on one thread (from ``gate_bottleneck``'s records: a gated run about 13 s per
8 epochs on the stand-in, 30 s on real MNIST; FrozenLN about half): the pilot about 75
CPU-minutes, the confirmation about 65 more, run one by one. Trained as populations
(:func:`train_gate_population` decides each member's freeze from its own validation
accuracy), one epoch on the stand-in took 5.2 s for fifteen members against 2.8 s for one
single run (one thread): about an eighth per run. The exact-gradient control cannot run
as a population (its hook reads each run's own selector), so its runs, one by one, are
most of the set's cost: a median 17 s each on the stand-in, 29 s on real MNIST.
``python -m normlab save gate_regime --profile cpu --threads 1 --population 16
--population-rates`` runs it;
``gate_bottleneck``'s short-budget verdicts then stand as its sensitivity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .gate_grids import (
    LRS,
    N3_PILOT_SEEDS,
    N3_TASK,
    SECONDS,
    SEEDS,
    SETUP,
    TASKS_BY_PROFILE,
    gate_grid,
    task_axes,
    task_point,
)
from .gate_runs import train_gate, train_gate_population
from .registry import Experiment, register_experiment

__all__ = [
    "REGIME_ARMS",
    "REGIME_EPOCHS",
    "REGIME_SEEDS",
    "REGIME_PILOT_SEEDS",
    "REGIME_CONFIRM_RATES",
    "REGIME_WIDER",
    "GATE_REGIME",
]

REGIME_ARMS = (
    "frozen_ln",
    "autonorm",
    "autonorm_random",
    "autonorm_s_ready",
    "autonorm_exact",
    "autonorm_hard",
    "autonorm_fixed",
    "dyt",
)
# epochs per cpu task: three times the short budget on both, so that every gated arm is
# past its plateau (at twice, the Random Selector on real MNIST was not)
REGIME_EPOCHS = {
    "mnist_restyled": 3 * SETUP["cpu"]["epochs"],
    "mnist": 3 * SETUP["cpu"]["epochs"],
}
REGIME_SEEDS = 30
# the pilot's seeds per task, at every rate: N3's five on the stand-in, the gate sets' three
# on real MNIST
REGIME_PILOT_SEEDS = {"mnist_restyled": N3_PILOT_SEEDS, "mnist": SEEDS["cpu"]}
# per (task, arm), the half-decade rates beyond LRS["cpu"] its pilot also tries: the
# three-rate pilot chose an edge (FrozenLN 1e-3 on the stand-in; the Random Selector, the
# fixed mix and DyT alone 1e-2 on real MNIST, DyT again 3e-2), so the search steps past
# it until the choice is interior
REGIME_WIDER: dict[tuple[str, str], tuple[float, ...]] = {
    ("mnist_restyled", "frozen_ln"): (3e-4,),
    ("mnist", "autonorm_random"): (3e-2,),
    ("mnist", "autonorm_fixed"): (3e-2,),
    ("mnist", "dyt"): (3e-2, 1e-1),
}
# per (task, arm), the rate its pilot chose on validation accuracy (five seeds on the
# CIFAR-10 stand-in, three on real MNIST, the stationary task of N1 and N5), inside its
# (widened) grid
REGIME_CONFIRM_RATES: dict[tuple[str, str], tuple[float, ...]] = {
    ("mnist_restyled", "frozen_ln"): (1e-3,),
    ("mnist_restyled", "autonorm"): (3e-3,),
    ("mnist_restyled", "autonorm_random"): (3e-3,),
    ("mnist_restyled", "autonorm_s_ready"): (3e-3,),
    ("mnist", "frozen_ln"): (3e-3,),
    ("mnist", "autonorm"): (3e-3,),
    ("mnist", "autonorm_random"): (1e-2,),
    ("mnist", "autonorm_s_ready"): (3e-3,),
    ("mnist_restyled", "autonorm_exact"): (3e-3,),
    ("mnist_restyled", "autonorm_hard"): (3e-3,),
    ("mnist", "autonorm_exact"): (3e-3,),
    ("mnist", "autonorm_hard"): (3e-3,),
    ("mnist_restyled", "autonorm_fixed"): (3e-3,),
    ("mnist_restyled", "dyt"): (3e-3,),
    ("mnist", "autonorm_fixed"): (1e-2,),
    ("mnist", "dyt"): (3e-2,),
}


def _regime_point(config: Mapping[str, Any]) -> bool:
    """A task's own source, patch, batch and epochs, at the grid's rates or the ones
    :data:`REGIME_WIDER` adds for its arm."""
    rates = (*LRS["cpu"], *REGIME_WIDER.get((config["data"], config["arm"]), ()))
    return (
        task_point(config)
        and config["epochs"] == REGIME_EPOCHS[config["data"]]
        and config["lr"] in rates
    )


# the arms of N1, N3, N5 and N14, on every task of a GPU profile; the others (N2's and
# N13's controls, chapter 11's arms without a gate) on CIFAR-10 alone, so that the
# standard grid fits one GPU's budget
_GPU_EVERY_TASK = ("frozen_ln", "autonorm", "autonorm_random", "autonorm_s_ready")


def _gpu_point(config: Mapping[str, Any]) -> bool:
    """On a GPU profile: the claims' core arms on every task, the rest on CIFAR-10."""
    return config["arm"] in _GPU_EVERY_TASK or config["data"] == "cifar10"


def _wider_rates() -> set[float]:
    return {lr for rates in REGIME_WIDER.values() for lr in rates}


def _cpu_regime_seeds(config: Mapping[str, Any]) -> int:
    """:data:`REGIME_SEEDS` at an arm's chosen rate on each task; elsewhere its pilot's:
    five on the CIFAR-10 stand-in, the set's three on real MNIST."""
    if config["lr"] in REGIME_CONFIRM_RATES.get((config["data"], config["arm"]), ()):
        return REGIME_SEEDS
    return REGIME_PILOT_SEEDS[config["data"]]


GATE_REGIME = register_experiment(
    Experiment(
        name="gate_regime",
        title="AutoNorm-S where it can be tested: past the plateau, the freeze after "
        "warm-up",
        chapter="12",
        profiles={
            "quick": gate_grid(
                profile="quick",
                axes={"data": TASKS_BY_PROFILE["quick"], "arm": list(REGIME_ARMS)},
                fixed={"epochs": 4},
                seeds=1,
            ),
            "cpu": gate_grid(
                profile="cpu",
                axes={
                    **task_axes(),
                    "epochs": sorted(set(REGIME_EPOCHS.values())),
                    "arm": list(REGIME_ARMS),
                    "lr": sorted({*LRS["cpu"], *_wider_rates()}),
                },
                where=_regime_point,
                seeds=max(SEEDS["cpu"], N3_PILOT_SEEDS, REGIME_SEEDS),
                seeds_of=_cpu_regime_seeds,
            ),
            **{
                p: gate_grid(
                    profile=p,
                    axes={"data": TASKS_BY_PROFILE[p], "arm": list(REGIME_ARMS)},
                    fixed={"epochs": 2 * SETUP[p]["epochs"]},
                    where=_gpu_point,
                )
                for p in ("standard", "paper")
            },
        },
        run_one=train_gate,
        run_population=train_gate_population,
        seconds_per_run={
            **SECONDS,
            "cpu": SECONDS["cpu"] * REGIME_EPOCHS[N3_TASK] / SETUP["cpu"]["epochs"],
        },
        notes="FrozenLN, the learned gate, the Random Selector and AutoNorm-S deciding "
        "after warm-up, trained past the plateau; N1, N3 and N5 re-judged there.",
    )
)
