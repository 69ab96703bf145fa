"""Analysis of run records: what turns a study's records into numbers, above the experiments.

:mod:`~normlab.analysis.part1` (Part I's per-seed scores, plateaus),
:mod:`~normlab.analysis.batch` (steps to a target against the batch size),
:mod:`~normlab.analysis.gates` (the gate studies' tables), :mod:`~normlab.analysis.tasks`
(the task studies' tables) and :mod:`~normlab.analysis.mechanism` (chapter 11's mechanism
sweep: learned minus random per cell, the time to specialise). The run table, summaries
across seeds and the rate chosen on validation are :mod:`normlab.run_tables`, which the
runner uses too (its functions are importable from here for the chapters); statistics are
:mod:`normlab.stats`; verdicts and their pairing, :mod:`normlab.claims`. The experiments
(:mod:`normlab.experiments`) declare grids and run functions and import nothing from here.
"""

from __future__ import annotations

from ..run_tables import (
    at_chosen_lr,
    choice_edges,
    records_table,
    select_best,
    summarise,
)
from . import batch, mechanism, part1

__all__ = [
    "at_chosen_lr",
    "batch",
    "choice_edges",
    "mechanism",
    "part1",
    "records_table",
    "select_best",
    "summarise",
]
