"""Analysis of run records: tables, summaries across seeds, the choices made on validation.

One place for what turns records into numbers: :mod:`~normlab.analysis.runs` (the run
table, summaries, the learning rate chosen on validation), :mod:`~normlab.analysis.part1`
(Part I's per-seed scores, kernel coupling, plateaus), :mod:`~normlab.analysis.batch`
(steps to a target against the batch size), :mod:`~normlab.analysis.gates` (the gate
studies' tables) and :mod:`~normlab.analysis.mechanism` (chapter 11's mechanism sweep:
learned minus random per cell, the time to specialise). Statistics are :mod:`normlab.stats`; verdicts
and their pairing, :mod:`normlab.claims`. The experiments (:mod:`normlab.experiments`)
declare grids and run functions only: no table is built there.
"""

from __future__ import annotations

from . import batch, mechanism, part1, runs
from .runs import at_chosen_lr, choice_edges, records_table, select_best, summarise

__all__ = [
    "at_chosen_lr",
    "batch",
    "choice_edges",
    "mechanism",
    "part1",
    "records_table",
    "runs",
    "select_best",
    "summarise",
]
