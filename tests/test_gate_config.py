"""A gate run's configuration (normlab.experiments.gate_config): built once from its grid's
dict, checked key by key, and the same dict (and run id) again."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from normlab import experiments
from normlab.experiments import RunContext
from normlab.experiments.gate_config import (
    ARMS,
    ArmSettings,
    GateConfig,
    arm_settings,
)
from normlab.experiments.gate_runs import gate_callbacks, train_gate
from normlab.experiments.grid import run_id

SAVED = Path(__file__).resolve().parents[1] / "companion" / "normlab" / "saved"
GATE_EXPERIMENTS = [
    name for name in experiments.names() if experiments.get(name).run_one is train_gate
]


def _quick() -> dict:
    return dict(experiments.get("gate_bottleneck").grid("quick").configs()[0])


def test_every_gate_experiment_is_found() -> None:
    assert {
        "gate_bottleneck",
        "gate_tau",
        "autonorm_s_sweep",
        "gate_widget",
        "gate_mechanism",
        "gate_regime",
        "gate_mix",
    } <= set(GATE_EXPERIMENTS)


@pytest.mark.parametrize("profile", ["quick", "cpu"])
@pytest.mark.parametrize("name", GATE_EXPERIMENTS)
def test_from_config_round_trips_every_grid_config(name: str, profile: str) -> None:
    """Every config of the grid: the same dict back, so the same run id, and an arm."""
    for config in experiments.get(name).grid(profile).configs():
        built = GateConfig.from_config(config)
        assert built.as_config() == config
        assert run_id(name, built.as_config()) == run_id(name, config)
        assert isinstance(arm_settings(built), ArmSettings)


@pytest.mark.parametrize(
    "path", sorted(SAVED.glob("gate_*/*/runs.jsonl")), ids=lambda p: p.parts[-3]
)
def test_from_config_round_trips_every_saved_record(path: Path) -> None:
    """The shipped sets' records, re-run by ``verify``, build their configs too."""
    for line in path.read_text().splitlines():
        config = json.loads(line)["config"]
        assert GateConfig.from_config(config).as_config() == config


def test_an_unknown_key_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown gate-run setting\(s\) 'lrate'"):
        GateConfig.from_config({**_quick(), "lrate": 1e-3})


@pytest.mark.parametrize("key", ["lr", "seed", "tau", "data"])
def test_a_missing_key_is_named(key: str) -> None:
    config = _quick()
    del config[key]
    with pytest.raises(ValueError, match=rf"missing gate-run setting\(s\) '{key}'"):
        GateConfig.from_config(config)


def test_a_value_of_the_wrong_type_is_named() -> None:
    with pytest.raises(TypeError, match=r"GateConfig\.lr must be float, got '3e-3'"):
        GateConfig.from_config({**_quick(), "lr": "3e-3"})
    with pytest.raises(TypeError, match=r"GateConfig\.epochs must be int, got True"):
        GateConfig.from_config({**_quick(), "epochs": True})
    with pytest.raises(TypeError, match=r"GateConfig\.hard must be bool or None"):
        GateConfig.from_config({**_quick(), "hard": 1})
    with pytest.raises(TypeError, match="mapping"):
        GateConfig.from_config([("lr", 1e-3)])  # type: ignore[arg-type]
    # JSON writes a whole float as an int: a float field takes it
    assert GateConfig.from_config({**_quick(), "weight_decay": 0}).weight_decay == 0


def test_an_optional_key_is_left_out_rather_than_none() -> None:
    with pytest.raises(ValueError, match="'source': None"):
        GateConfig.from_config({**_quick(), "source": None})


def test_a_real_autonorm_s_schedule_needs_all_three_settings() -> None:
    with pytest.raises(ValueError, match="without t_freeze, eps_h"):
        GateConfig.from_config({**_quick(), "rule": "high"})
    config = GateConfig.from_config(
        {**_quick(), "rule": "low", "t_freeze": 1, "eps_h": 0.3}
    )
    assert (config.rule, config.t_freeze, config.eps_h) == ("low", 1, 0.3)


def test_a_config_is_frozen() -> None:
    config = GateConfig.from_config(_quick())
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.lr = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("arm", [*ARMS, "freeze_at_2", "sample_at_2"])
def test_every_arm_resolves(arm: str) -> None:
    settings = arm_settings(GateConfig.from_config({**_quick(), "arm": arm}))
    assert settings.normaliser == (ARMS[arm][0] if arm in ARMS else "autonorm")
    for key, value in (ARMS[arm][1] if arm in ARMS else {}).items():
        assert getattr(settings, key) == value
    assert settings.freeze_at == (2 if arm == "freeze_at_2" else 0)
    assert settings.stop_at == (2 if arm == "sample_at_2" else 0)


def test_the_ready_arm_needs_the_task_chance() -> None:
    config = GateConfig.from_config({**_quick(), "arm": "autonorm_s_ready"})
    settings = arm_settings(config)
    assert settings.ready_after == 1  # warm-up 0.05 of 8 epochs
    with pytest.raises(ValueError, match="chance"):
        gate_callbacks(settings)
    assert len(gate_callbacks(settings, chance=0.1)) == 2  # telemetry and the decision


def test_train_gate_takes_the_dataclass_or_its_dict(tmp_path: Path) -> None:
    """The runner passes its grid's dict; a chapter may pass the GateConfig: one run."""
    config = {
        **_quick(),
        "arm": "autonorm",
        "dim": 16,
        "depth": 1,
        "heads": 2,
        "epochs": 1,
    }
    cpu = torch.device("cpu")
    from_dict = train_gate(config, RunContext(cpu, tmp_path / "dict"))
    from_dataclass = train_gate(
        GateConfig.from_config(config), RunContext(cpu, tmp_path / "dataclass")
    )
    same = json.dumps(from_dict["metrics"], sort_keys=True)  # NaN as NaN
    assert same == json.dumps(from_dataclass["metrics"], sort_keys=True)
