"""Part II experiment declarations: every backbone builds, and AutoNorm runs record their gates."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from normlab import data, experiments
from normlab.experiments import RunContext, part2

PART2 = ("autonorm_vision", "autonorm_language", "autonorm_tabular")


def quick_config(
    experiment: str, task: str, normaliser: str, **overrides: object
) -> dict:
    config = {
        **experiments.get(experiment).grid("quick").fixed,
        "data": task,
        "normaliser": normaliser,
        "lr": 3e-3,
        "seed": 0,
    }
    config.update(overrides)
    return config


@pytest.mark.parametrize("name", PART2)
def test_declared_for_every_profile_with_every_normaliser(name: str) -> None:
    experiment = experiments.get(name)
    for profile in ("standard", "paper"):
        grid = experiment.grid(profile)
        assert grid.axes["normaliser"] == list(part2.NORMALISERS)
        assert len(grid.axes["lr"]) >= 2  # the lr is chosen on val per configuration
        assert grid.fixed["data_profile"] == profile
    # quick may trim the normalisers (a CPU budget), but always keeps the FrozenLN baseline
    quick = experiment.grid("quick")
    assert "frozen_ln" in quick.axes["normaliser"] and set(
        quick.axes["normaliser"]
    ) <= set(part2.NORMALISERS)
    assert quick.fixed["data_profile"] == "quick" and quick.seeds >= 2
    assert experiment.select == "lr"


@pytest.mark.parametrize(
    ("experiment", "task"),
    [
        ("autonorm_vision", "mnist"),
        ("autonorm_language", "ptb_pos"),
        ("autonorm_language", "sst2"),
        ("autonorm_tabular", "energy_efficiency"),
    ],
)
def test_backbone_fits_the_task(experiment: str, task: str) -> None:
    train = data.for_profile(task, "quick")["train"]
    model = part2.build_model(train, quick_config(experiment, task, "autonorm"))
    out = model(train.x[:3])
    if train.task == "regression":
        assert out.shape == (3,)
    elif train.task == "tagging":
        assert out.shape == (3, train.x.shape[1], train.num_classes)
    else:
        assert out.shape == (3, train.num_classes)


def run_one(tmp_path: Path, normaliser: str, **overrides: object) -> dict:
    config = quick_config(
        "autonorm_language", "sst2", normaliser, epochs=2, **overrides
    )
    return part2.train_autonorm(
        config, RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path)
    )


def test_autonorm_s_records_gates_and_freezes(tmp_path: Path) -> None:
    # eps_H = 0 with the paper's rule: any entropy is >= 0, so every selector must freeze.
    record = run_one(tmp_path, "autonorm_s", t_freeze=1, eps_h=0.0)
    layers = {row["layer"] for row in record["gates"]}
    assert record["frozen"] and set(record["frozen"]) == layers
    assert {row["epoch"] for row in record["gates"]} == {1, 2}
    assert all(0.0 <= row["entropy"] <= math.log(2) + 1e-6 for row in record["gates"])
    assert record["entropy_records"][0]["epoch"] == 1 and record["stand_in"] is True


def test_opposite_rule_freezes_decided_gates_only(tmp_path: Path) -> None:
    # eps_H = 0 with the opposite rule: no entropy is < 0, so nothing may freeze.
    record = run_one(tmp_path, "autonorm_s_low", t_freeze=1, eps_h=0.0)
    assert record["frozen"] == []


def test_static_normaliser_has_no_gate_record(tmp_path: Path) -> None:
    record = run_one(tmp_path, "frozen_ln")
    assert "gates" not in record and "frozen" not in record
    assert 0.0 <= record["metrics"]["test_metric"] <= 1.0
