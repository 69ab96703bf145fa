"""FitConfig: one validated config for fit, and the checkpoint record derived from it (issue 9)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import normlab
import pytest
import torch
from normlab.augment import Augment
from normlab.checkpoint import CHECKPOINT_NAME
from normlab.data import DataSplit, load
from normlab.training import CheckpointError, FitConfig, fit
from torch import nn

BASE = dict(
    epochs=2,
    batch_size=64,
    lr=0.05,
    optimizer="sgd",
    optimizer_kwargs={"momentum": 0.9},
    seed=2,
    device="cpu",
    progress=False,
)


@pytest.fixture(scope="module")
def digits() -> tuple[DataSplit, DataSplit]:
    return load("digits", "train"), load("digits", "val")


def small_model(seed: int = 0) -> nn.Module:
    normlab.seed_everything(seed)
    return nn.Sequential(
        nn.Flatten(), nn.Linear(64, 16), nn.Tanh(), nn.Dropout(0.1), nn.Linear(16, 10)
    )


def test_a_config_and_keywords_are_the_same_call(digits) -> None:
    runs = []
    for call in ("keywords", "config", "config+override"):
        model = small_model()
        if call == "keywords":
            history = fit(model, *digits, **BASE)
        elif call == "config":
            history = fit(model, *digits, FitConfig(**BASE))
        else:
            history = fit(model, *digits, FitConfig(**{**BASE, "lr": 0.5}), lr=0.05)
        runs.append((history.without_timing(), model.state_dict()))
    for history, params in runs[1:]:
        assert history == runs[0][0]
        assert all(torch.equal(params[k], v) for k, v in runs[0][1].items())


@pytest.mark.parametrize(
    ("settings", "error", "match"),
    [
        ({"lr": float("inf")}, ValueError, "lr"),
        ({"weight_decay": float("nan")}, ValueError, "weight_decay"),
        ({"label_smoothing": 1.0}, ValueError, "label_smoothing"),
        ({"max_steps": 0}, ValueError, "max_steps"),
        ({"eval_batch_size": 0}, ValueError, "eval_batch_size"),
        ({"drop_last": "yes"}, TypeError, "drop_last"),
        ({"on_divergence": None}, ValueError, "on_divergence"),
        ({"amp": 1}, TypeError, "amp"),
        ({"optimizer_kwargs": [("momentum", 0.9)]}, TypeError, "optimizer_kwargs"),
        ({"augment": "crop"}, TypeError, "augment"),
        ({"device": "tpu:x"}, ValueError, "device"),
        ({"checkpoint_dir": 3}, TypeError, "checkpoint_dir"),
    ],
)
def test_every_setting_is_checked_by_the_config(
    settings: dict, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        FitConfig(**{"epochs": 1, "batch_size": 8, "lr": 0.1, **settings})


def test_unknown_settings_and_wrong_config_are_refused(digits) -> None:
    with pytest.raises(
        TypeError, match=r"unknown setting\(s\) lrate.*FitConfig has .*\blr\b"
    ):
        fit(small_model(), *digits, epochs=1, batch_size=8, lrate=0.1)
    with pytest.raises(TypeError, match="config must be a normlab.training.FitConfig"):
        fit(small_model(), *digits, {"epochs": 1})


def test_the_config_is_frozen_and_normalised() -> None:
    config = FitConfig(epochs=1, batch_size=8, lr=1, optimizer_kwargs=None)
    assert isinstance(config.lr, float) and config.optimizer_kwargs == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.lr = 2.0


def test_the_config_is_hashable_and_its_optimizer_kwargs_read_only() -> None:
    kwargs = {"momentum": 0.9}
    config = FitConfig(**{**BASE, "optimizer_kwargs": kwargs})
    assert config == FitConfig(**BASE) and hash(config) == hash(FitConfig(**BASE))
    other = dataclasses.replace(config, lr=0.1)
    assert len({config, FitConfig(**BASE), other}) == 2
    full = {
        **BASE,
        "augment": Augment(hflip=True),
        "device": torch.device("cpu"),
        "checkpoint_dir": Path("runs"),
    }
    assert hash(FitConfig(**full)) == hash(FitConfig(**full))
    kwargs["momentum"] = 0.5  # the config keeps its own copy
    assert config.optimizer_kwargs == {"momentum": 0.9}
    assert FitConfig(**{**BASE, "optimizer_kwargs": kwargs}) != config
    with pytest.raises(TypeError):
        config.optimizer_kwargs["momentum"] = 0.5  # type: ignore[index]


def test_the_run_record_is_every_field_but_the_runtime_ones() -> None:
    """Derived, not listed: a new field is in the record unless declared as a runtime choice."""
    record = FitConfig(**BASE).run_record()
    runtime = {"device", "compile", "checkpoint_dir", "progress", "eval_batch_size"}
    assert set(record) == {f.name for f in dataclasses.fields(FitConfig)} - runtime
    assert (
        record["on_divergence"] == "raise"
        and record["optimizer_kwargs"] == "[('momentum', 0.9)]"
    )
    others = dict(
        epochs=3,
        batch_size=32,
        lr=0.1,
        optimizer="adam",
        weight_decay=0.1,
        optimizer_kwargs={"momentum": 0.5},
        schedule="cosine",
        warmup=0.1,
        seed=3,
        label_smoothing=0.1,
        augment=Augment(hflip=True),
        max_steps=7,
        drop_last=False,
        on_divergence="stop",
        amp=True,
    )
    assert set(others) == set(record)
    for name, value in others.items():  # each recorded setting shows up in the record
        changed = FitConfig(**{**BASE, name: value}).run_record()
        assert {k for k in record if record[k] != changed[k]} == {name}
    assert (
        FitConfig(**{**BASE, "eval_batch_size": 7, "progress": True}).run_record()
        == record
    )


def test_resume_with_another_on_divergence_is_refused(digits, tmp_path: Path) -> None:
    fit(small_model(), *digits, **{**BASE, "epochs": 1}, checkpoint_dir=tmp_path)
    assert (tmp_path / CHECKPOINT_NAME).exists()
    with pytest.raises(
        CheckpointError,
        match=r"other settings \(on_divergence: checkpoint .raise. vs now .stop.\)",
    ):
        fit(
            small_model(),
            *digits,
            **{**BASE, "epochs": 1},
            checkpoint_dir=tmp_path,
            on_divergence="stop",
        )
    # runtime choices may change between an interrupted run and its resume
    fit(
        small_model(),
        *digits,
        **{**BASE, "epochs": 1},
        checkpoint_dir=tmp_path,
        eval_batch_size=50,
    )


class _WithIdleLayer(nn.Module):
    """A classifier beside a layer whose gradient is exactly zero (it enters the loss times
    zero), so weight decay is the only thing that can move that layer's parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.head = small_model()
        self.idle = nn.Linear(64, 8)
        self.gain = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idle = self.gain(self.idle(x.flatten(1))).sum()
        return self.head(x) + 0.0 * idle


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_weight_decay_shrinks_matrices_and_spares_biases_and_gains(
    digits, optimizer: str
) -> None:
    model = _WithIdleLayer()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    settings = {**BASE, "optimizer": optimizer, "optimizer_kwargs": {}, "epochs": 1}
    fit(model, *digits, **settings, weight_decay=0.5)
    after = model.state_dict()
    # the matrix decays ...
    assert after["idle.weight"].norm() < 0.99 * before["idle.weight"].norm()
    # ... the bias and the LayerNorm's gain and bias do not move at all
    for name in ("idle.bias", "gain.weight", "gain.bias"):
        assert torch.equal(after[name], before[name]), name
