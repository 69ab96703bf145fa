"""Part II gate studies: the stabilisation bottleneck (chapter 11), AutoNorm-S at work
(chapter 12) and the runs behind chapter 10's gate-collapse widget.

This module gathers the names the chapters use from :mod:`.gate_config` (a run's
configuration and its arm), :mod:`.gate_runs` (one run) and :mod:`.gate_grids` (the grids
and their budgets). The runs' tables and AutoNorm-S composed from saved runs are :mod:`normlab.analysis.gates`, above the experiments; the
figures are in :mod:`normlab.figures.gate_entropy` and :mod:`normlab.figures.gate_study`.
"""

from __future__ import annotations

from ..gates import FREEZE_PREFIX, SAMPLE_PREFIX
from .gate_config import (  # a run's configuration and its arm
    ARMS,
    ArmSettings,
    GateConfig,
    arm_settings,
)
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
    TASKS,
    ExactGateGrad,
    SelectorLR,
    SelectorSnapshots,
    StopSelector,
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
    # a run's configuration and its arm (gate_config)
    "ARMS",
    "ArmSettings",
    "GateConfig",
    "arm_settings",
    # one run (gate_runs)
    "FREEZE_PREFIX",
    "SAMPLE_PREFIX",
    "TASKS",
    "ExactGateGrad",
    "SelectorLR",
    "SelectorSnapshots",
    "StopSelector",
    "gate_callbacks",
    "gate_vit",
    "epochs_to_specialise",
    "head_input_scale",
    "restyle",
    "task_splits",
    "train_gate",
    # the runner's tables
    "load_records",
]
