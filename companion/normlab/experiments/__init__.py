"""Declared experiment grids and their resumable runner.

An experiment is a grid per profile (``quick``/``standard``/``paper``) of model x
normaliser x data x hyperparameters x seeds, and a function that performs one run::

    from normlab import experiments
    experiments.names()                                    # what is declared
    experiments.run("fc_normalisers", profile="quick", out="results")
    rep = experiments.report("fc_normalisers", profile="quick", out="results")
    rep.summary                                           # lr chosen on val, test mean/CI

The command line ``python -m normlab list|run|report`` calls the same functions. To add
experiments, write a module that calls :func:`register_experiment` and import it below.
"""

from __future__ import annotations

from . import (  # noqa: E402,F401  (register the experiments)
    gate_mix,
    gate_regime,
    gate_study,
    part1,
    part1_batch,
    part1_conv,
    part2,
    part2_tasks,
)
from .costs import larger_profiles
from .grid import Grid, Run, parse_shard, run_id, shard
from .registry import Experiment, RunContext, get, names, register_experiment
from .runner import (
    Report,
    RunReport,
    RunSettings,
    load_records,
    load_results,
    report,
    results_folder,
    run,
    summary_table,
    train_and_test,
)

__all__ = [
    "Experiment",
    "Grid",
    "Report",
    "Run",
    "RunContext",
    "RunReport",
    "RunSettings",
    "get",
    "larger_profiles",
    "load_records",
    "load_results",
    "names",
    "parse_shard",
    "register_experiment",
    "report",
    "results_folder",
    "run",
    "run_id",
    "shard",
    "summary_table",
    "train_and_test",
]
