"""The mix or the gate? (chapter 11): AutoNorm's candidates without its gate.

On the CIFAR-10 stand-in every gated arm of ``gate_bottleneck`` ends well under plain
LayerNorm, the learned gate and the Random Selector alike. Two readings fit: the *gate*
costs (its choice, learned or random, is noise the backbone pays for), or the *mix* does
(any share of DyT in the normalisation slots costs, chosen or not). This grid runs the arms
that tell them apart, beside ``gate_bottleneck``'s runs of the same settings (FrozenLN, the
learned gate, the Random Selector), which it does not repeat:

==================  =====================================================================
arm                 what runs
==================  =====================================================================
dyt                 DyT alone, the other candidate (its alpha at the paper's 0.5, and on
                    the CIFAR-10 stand-in also at 0.1: a DyT that saturates less)
autonorm_fixed      both candidates mixed 50/50 in every slot, no gate (what the Random
                    Selector is in evaluation, and on average in training)
==================  =====================================================================

If the fixed mix costs as much as the gates, the cost is the mix's; if it sits near
LayerNorm, it is the gate's. The design is ``gate_bottleneck``'s: a pilot of
:data:`MIX_PILOT_SEEDS` seeds at each of the three rates on the CIFAR-10 stand-in (the
set's three on real MNIST), the rate chosen on validation accuracy, then the arms the
main contrasts read at their chosen rate on more seeds (:data:`MIX_CONFIRM_RATES`, up to
:data:`MIX_SEEDS`). Same seeds as ``gate_bottleneck``'s, so every contrast is paired.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..paper import DYT_ALPHA_INIT
from .gate_grids import (
    CPU_TASKS,
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
from .gate_runs import train_gate
from .registry import Experiment, register_experiment

__all__ = [
    "MIX_ARMS",
    "MIX_ALPHAS",
    "MIX_TASK",
    "MIX_DATA",
    "MIX_PILOT_SEEDS",
    "MIX_SEEDS",
    "MIX_CONFIRM_RATES",
    "GATE_MIX",
]

MIX_ARMS = ("dyt", "autonorm_fixed")
# DyT's initial alpha: the paper's 0.5 for every arm; 0.1 for DyT alone on the CIFAR-10
# stand-in, whose images come in gains up to 4 (a smaller alpha saturates less)
MIX_ALPHAS = (DYT_ALPHA_INIT, 0.1)
MIX_TASK = N3_TASK
# the tasks: the CIFAR-10 stand-in, and real MNIST (the stationary task) on the set's
# three seeds at every rate (a run there costs about two and a half times as much)
MIX_DATA = (MIX_TASK, "mnist")
MIX_PILOT_SEEDS = N3_PILOT_SEEDS
MIX_SEEDS = 30
# per arm, the rate its pilot chose on the CIFAR-10 stand-in: the fixed mix, which both
# main contrasts read (the pilot chose 3e-3, inside the grid)
MIX_CONFIRM_RATES: dict[str, tuple[float, ...]] = {"autonorm_fixed": (3e-3,)}


def _mix_point(config: Mapping[str, Any]) -> bool:
    """A task of :data:`MIX_DATA`; the smaller alpha for DyT alone on the CIFAR-10
    stand-in only."""
    if config["data"] not in MIX_DATA:
        return False
    if config["alpha_init"] != DYT_ALPHA_INIT:
        return config["arm"] == "dyt" and config["data"] == MIX_TASK
    return True


def _cpu_mix_seeds(config: Mapping[str, Any]) -> int:
    """:data:`MIX_SEEDS` at an arm's chosen rate on the CIFAR-10 stand-in (at the paper's
    alpha), the pilot's :data:`MIX_PILOT_SEEDS` elsewhere on it, the set's three on MNIST."""
    if config["data"] != MIX_TASK:
        return SEEDS["cpu"]
    confirmed = config["alpha_init"] == DYT_ALPHA_INIT and config[
        "lr"
    ] in MIX_CONFIRM_RATES.get(config["arm"], ())
    return MIX_SEEDS if confirmed else MIX_PILOT_SEEDS


GATE_MIX = register_experiment(
    Experiment(
        name="gate_mix",
        title="The mix or the gate? DyT alone and a fixed 50/50 mix beside the gates",
        chapter="11",
        profiles={
            "quick": gate_grid(
                profile="quick",
                axes={"data": TASKS_BY_PROFILE["quick"], "arm": list(MIX_ARMS)},
                seeds=1,
            ),
            "cpu": gate_grid(
                profile="cpu",
                axes={
                    **task_axes(),
                    "arm": list(MIX_ARMS),
                    "alpha_init": list(MIX_ALPHAS),
                },
                where=lambda c: task_point(c) and _mix_point(c),
                seeds=max(SEEDS["cpu"], MIX_PILOT_SEEDS, MIX_SEEDS),
                seeds_of=_cpu_mix_seeds,
            ),
            **{
                p: gate_grid(
                    profile=p,
                    axes={"data": TASKS_BY_PROFILE[p], "arm": list(MIX_ARMS)},
                )
                for p in ("standard", "paper")
            },
        },
        run_one=train_gate,
        seconds_per_run=SECONDS,
        notes="DyT alone and the fixed 50/50 mix; FrozenLN, the learned gate and the "
        "Random Selector are gate_bottleneck's runs of the same settings and seeds. cpu: "
        f"{', '.join(CPU_TASKS)}; {SETUP['cpu']['epochs']} epochs.",
    )
)
