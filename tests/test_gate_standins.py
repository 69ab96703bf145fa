"""The gate studies' vision stand-ins: one table (``data.sources.STAND_INS``) maps each of
the paper's datasets to the dataset that serves it on the CPU, and every gate claim's
effects read exactly the stand-in it names."""

from __future__ import annotations

import pytest
from normlab import claims, results
from normlab.analysis import gates as ag
from normlab.claims.judging import evaluate, primary_source
from normlab.claims.pairing import chance_level
from normlab.data import REAL, served_by
from normlab.data.sources import STAND_INS
from normlab.experiments import gate_study as gs

GATE_CLAIMS = ("N1", "N2", "N3", "N5", "N13", "N14")


@pytest.fixture(scope="module")
def saved():
    found = results.largest("gate_bottleneck")
    assert found is not None
    return found


def test_the_table_covers_every_dataset_the_gate_claims_name() -> None:
    named = {d for c in GATE_CLAIMS for d in claims.get(c).datasets}
    assert named <= set(STAND_INS) and set(STAND_INS) <= set(REAL)
    # the grids' tasks are the table's: one stand-in per paper dataset, no other
    served = {s.task: s for s in STAND_INS.values() if s.task is not None}
    assert set(served) == set(gs.CPU_TASKS)
    for task, stand_in in served.items():
        assert gs.CPU_TASKS[task]["source"] == stand_in.source
        assert served_by(task, "cpu", stand_in.source) == stand_in.dataset


@pytest.mark.parametrize("claim_id", GATE_CLAIMS)
def test_every_gate_claims_effects_read_the_stand_in_the_table_names(
    claim_id: str, saved
) -> None:
    claim = claims.get(claim_id)
    outcome = evaluate(claim)
    assert outcome.data, outcome.verdict
    chosen = primary_source(claim, saved.results)
    by_task = {s.task: s for s in STAND_INS.values() if s.task is not None}
    for task in outcome.data:
        stand_in = by_task[task]  # a task the table does not name fails here
        assert served_by(task, "cpu", chosen) == stand_in.dataset
    if claim.datasets:  # what it reads stands in for a dataset the claim names
        wanted = {STAND_INS[d].task for d in claim.datasets}
        if claim.id == "N1":  # N1 is also judged on a stationary task (real MNIST)
            wanted.add(STAND_INS["mnist"].task)
        assert set(outcome.data) <= wanted


def test_every_stand_in_trains_at_cpu_scale(saved) -> None:
    """FrozenLN (and every compared arm at its chosen rate) between chance + 0.1 and 0.97."""
    best = ag.chosen(ag.with_schedules(saved.results))
    for stand_in in STAND_INS.values():
        if stand_in.task is None:
            continue
        rows = best[best["data"] == stand_in.task]
        means = rows.groupby("arm")["test_metric"].mean()
        assert {"frozen_ln", "autonorm_random", "autonorm"} <= set(means.index)
        assert means.between(chance_level(rows) + 0.1, 0.97).all(), means
