"""Analysis of run records: tables, summaries across seeds, the choices made on validation.

One place for what turns records into numbers: :mod:`~normlab.analysis.runs` (the run
table, summaries, the learning rate chosen on validation), :mod:`~normlab.analysis.part1`
(Part I's per-seed scores, kernel coupling, plateaus) and :mod:`~normlab.analysis.batch`
(steps to a target against the batch size). Statistics are :mod:`normlab.stats`; verdicts
and their pairing, :mod:`normlab.claims`. The experiments (:mod:`normlab.experiments`)
declare grids and run functions only: no table is built there.
"""

from __future__ import annotations

from . import batch, part1, runs
from .runs import at_chosen_lr, records_table, select_best, summarise

__all__ = [
    "at_chosen_lr",
    "batch",
    "part1",
    "records_table",
    "runs",
    "select_best",
    "summarise",
]
