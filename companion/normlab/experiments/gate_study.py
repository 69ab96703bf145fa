"""Part II gate studies: the stabilisation bottleneck (chapter 11), AutoNorm-S at work
(chapter 12) and the runs behind chapter 10's gate-collapse widget.

This module gathers the names the chapters use from :mod:`.gate_runs` (the arms and one
run), :mod:`normlab.analysis.gates` (the runs' tables, AutoNorm-S composed from saved runs) and
:mod:`.gate_grids` (the grids and their budgets); their figures are in
:mod:`normlab.figures.gate_entropy` and :mod:`normlab.figures.gate_study`.
"""

from __future__ import annotations

from ..analysis.gates import (  # the runs' tables and AutoNorm-S composed, for the chapters
    CONFIG_AXES,
    arm_summary,
    at_defaults,
    at_lr_of,
    chosen,
    compose_schedule,
    freeze_epochs,
    gate_table,
    run_table,
    runs_behind,
    shared_seeds,
    with_schedules,
)
from ..analysis.runs import at_chosen_lr, summarise
from .gate_grids import (  # the grids, for the chapters
    AUTONORM_S_SWEEP,
    CPU_TASKS,
    DEFAULT_INIT,
    GATE_BOTTLENECK,
    GATE_MECHANISM,
    GATE_TAU,
    GATE_WIDGET,
    LRS,
    SEEDS,
    SETUP,
    T_FREEZE,
)
from .gate_runs import (  # one run, for the chapters
    ARMS,
    FREEZE_PREFIX,
    SAMPLE_PREFIX,
    TASKS,
    ExactGateGrad,
    SelectorLR,
    SelectorSnapshots,
    StopSelector,
    arm_settings,
    epochs_to_specialise,
    gate_callbacks,
    gate_vit,
    head_input_scale,
    restyle,
    task_splits,
    train_gate,
)
from .runner import load_records

__all__ = [
    # the grids (gate_grids)
    "AUTONORM_S_SWEEP",
    "GATE_BOTTLENECK",
    "GATE_MECHANISM",
    "GATE_TAU",
    "GATE_WIDGET",
    "CPU_TASKS",
    "DEFAULT_INIT",
    "LRS",
    "SEEDS",
    "SETUP",
    "T_FREEZE",
    # one run (gate_runs)
    "ARMS",
    "FREEZE_PREFIX",
    "SAMPLE_PREFIX",
    "TASKS",
    "ExactGateGrad",
    "SelectorLR",
    "SelectorSnapshots",
    "StopSelector",
    "arm_settings",
    "gate_callbacks",
    "gate_table",
    "gate_vit",
    "epochs_to_specialise",
    "head_input_scale",
    "restyle",
    "run_table",
    "task_splits",
    "train_gate",
    # the runs' tables and AutoNorm-S composed (normlab.analysis.gates)
    "CONFIG_AXES",
    "arm_summary",
    "at_defaults",
    "at_lr_of",
    "chosen",
    "compose_schedule",
    "freeze_epochs",
    "runs_behind",
    "shared_seeds",
    "with_schedules",
    # the runner's tables
    "at_chosen_lr",
    "load_records",
    "summarise",
]
