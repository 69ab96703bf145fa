"""Faults and bad input get a clear answer (issue 27): divergence, bad arguments, empty batches."""

from __future__ import annotations

import math
from pathlib import Path

import normlab
import pytest
import torch
from normlab import checkpoint, training
from normlab.checkpoint import CHECKPOINT_NAME
from normlab.data import DataSplit, load
from normlab.experiments.registry import RunContext
from normlab.experiments.runner import train_and_test
from normlab.functional import TAU_MIN
from normlab.gates import AutoNormS
from normlab.layers import AutoNorm, FiLMNorm, NormSelector, gumbel_softmax
from normlab.training import DivergenceError, FitConfig, evaluate, fit
from torch import nn

STEPS_PER_EPOCH = 1257 // 100  # digits/train with batch 100, drop_last


@pytest.fixture(scope="module")
def digits() -> tuple[DataSplit, DataSplit]:
    return load("digits", "train"), load("digits", "val")


class NaNAtStep(nn.Module):
    """A small MLP whose output turns NaN at one training forward (counted from 1)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        normlab.seed_everything(0)
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(64, 16), nn.Tanh(), nn.Linear(16, 10)
        )
        self.at, self.calls = at, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        if self.training and x.shape[0] > 2:  # not the dry run
            self.calls += 1
            if self.calls == self.at:
                out = out * math.nan
        return out


SETTINGS = dict(epochs=4, batch_size=100, lr=0.1, device="cpu", progress=False)


def test_one_nan_step_stops_fit_naming_the_epoch_and_step(
    digits, tmp_path: Path
) -> None:
    at = STEPS_PER_EPOCH + 3  # the third step of epoch 2
    model = NaNAtStep(at)
    with pytest.raises(
        DivergenceError, match=rf"epoch 2, step {at} \(batch 3 of"
    ) as err:
        fit(model, *digits, **SETTINGS, checkpoint_dir=tmp_path)
    assert (err.value.epoch, err.value.step) == (2, at)
    assert "on_divergence='stop'" in str(err.value)
    # the checkpoint is epoch 1's, not the NaN state of epoch 2
    saved = checkpoint.load(tmp_path / CHECKPOINT_NAME)
    assert saved["epoch"] == 1


def test_a_diverged_run_is_recorded_with_nan_metrics_never_a_nan_argmax(digits) -> None:
    model = NaNAtStep(STEPS_PER_EPOCH + 3)
    history = fit(model, *digits, **SETTINGS, on_divergence="stop")
    assert [r["epoch"] for r in history] == [1, 2]  # stopped after the diverging epoch
    assert math.isfinite(history[0]["val_accuracy"])
    last = history[-1]
    assert math.isnan(last["train_loss"]) and math.isnan(last["val_loss"])
    assert math.isnan(
        last["val_accuracy"]
    )  # argmax over NaN outputs would read class 0
    assert math.isnan(evaluate(model, digits[1])["accuracy"])


def test_the_grid_records_a_diverged_run(digits, tmp_path: Path) -> None:
    splits = {"train": digits[0], "val": digits[1], "test": digits[1]}
    ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path)
    record = train_and_test(NaNAtStep(5), splits, ctx, epochs=3, batch_size=100, lr=0.1)
    metrics = record["metrics"]
    assert metrics["diverged"] is True and metrics["epochs_run"] == 1
    assert math.isnan(metrics["val_metric"]) and math.isnan(metrics["test_metric"])


class ExplodeAtStep(NaNAtStep):
    """From one training forward on (counted from 1), a finite offset of 1e8 on the first
    logit, in training and on val: the loss explodes to about 1e8 and stays finite, and
    the gradients stay bounded (a softmax's), so the parameters stay finite too."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        if x.shape[0] > 2 and self.training:  # not the dry run
            self.calls += 1
        if self.calls >= self.at:
            out = out + torch.tensor([1e8] + [0.0] * 9)
        return out


BOUND = 1e4 * math.log(10)  # DIVERGENCE_FACTOR times the chance level of ten classes


def test_divergence_bound_is_a_multiple_of_the_chance_level_loss(digits) -> None:
    assert training.DIVERGENCE_FACTOR == 1e4
    assert training.divergence_bound(digits[0]) == pytest.approx(BOUND)
    y = torch.tensor([[0.0, 10.0], [4.0, 30.0], [2.0, 20.0]])
    spread = DataSplit(torch.zeros(3, 1), y, "regression", "toy", "train", {})
    # the variances of the two targets are 8/3 and 200/3: their mean, the MSE of their means
    assert training.divergence_bound(spread) == pytest.approx(1e4 * 104 / 3)
    flat = DataSplit(torch.zeros(3, 1), torch.ones(3), "regression", "toy", "train", {})
    two = DataSplit(
        torch.zeros(2, 1),
        torch.tensor([0, 1]),
        "classification",
        "toy",
        "train",
        {"classes": ["a", "b"]},
    )
    assert training.divergence_bound(flat) == training.divergence_bound(two) == 1e4


@pytest.mark.parametrize(
    ("losses", "diverged"),
    [
        ((2.3, 2.2), False),
        ((BOUND, 0.5), False),
        ((2.6e8, 2.2), True),  # explodes but stays finite
        ((2.3, 3e4), True),
        ((math.nan, 2.2), True),
        ((2.3, math.inf), True),
    ],
)
def test_is_diverged_is_one_rule_for_finite_and_non_finite_losses(
    losses: tuple[float, float], diverged: bool
) -> None:
    assert training.is_diverged(losses, BOUND) is diverged


def test_a_finite_explosion_stops_fit_naming_the_epoch(digits) -> None:
    at = STEPS_PER_EPOCH + 3  # the third step of epoch 2
    with pytest.raises(
        DivergenceError,
        match=r"the mean training loss is [0-9.e+]+ after epoch 2, step 24, above 2\.3e\+04 "
        r"\(10000 times the chance-level loss\)",
    ) as err:
        fit(ExplodeAtStep(at), *digits, **SETTINGS)
    assert (err.value.epoch, err.value.step) == (2, 2 * STEPS_PER_EPOCH)
    history = fit(ExplodeAtStep(at), *digits, **SETTINGS, on_divergence="stop")
    assert [r["epoch"] for r in history] == [1, 2]  # stopped after the exploding epoch
    assert history[0]["train_loss"] < 3  # an ordinary first epoch
    assert BOUND < history[-1]["train_loss"] < math.inf


def test_the_grid_records_a_finite_explosion_as_diverged(
    digits, tmp_path: Path
) -> None:
    """Before, a loss of ~1e8 was recorded as a run that did not diverge."""
    splits = {"train": digits[0], "val": digits[1], "test": digits[1]}
    ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path)
    record = train_and_test(
        ExplodeAtStep(5), splits, ctx, epochs=3, batch_size=100, lr=0.1
    )
    metrics = record["metrics"]
    assert metrics["diverged"] is True and metrics["epochs_run"] == 1
    assert BOUND < metrics["train_loss"] < math.inf  # recorded as measured
    calm = train_and_test(
        NaNAtStep(10**6),
        splits,
        RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path / "calm"),
        epochs=2,
        batch_size=100,
        lr=0.1,
    )
    assert calm["metrics"]["diverged"] is False


def test_on_divergence_is_checked() -> None:
    with pytest.raises(
        ValueError, match="on_divergence='carry_on' is not known.*raise, stop"
    ):
        FitConfig(epochs=1, batch_size=8, lr=0.1, on_divergence="carry_on")


# ------------------------------------------------------------ AutoNorm-S, tau, eps, seeds


def _autonorm_net() -> nn.Module:
    normlab.seed_everything(0)
    return nn.Sequential(nn.Flatten(), AutoNorm(64), nn.Linear(64, 10))


def test_autonorm_s_that_would_never_decide_is_refused_before_training(digits) -> None:
    model = _autonorm_net()
    before = [p.clone() for p in model.parameters()]
    with pytest.raises(
        ValueError, match=r"t_freeze=10\) with epochs=3 would never decide"
    ):
        fit(
            model,
            *digits,
            **{**SETTINGS, "epochs": 3},
            callbacks=[AutoNormS(t_freeze=10)],
        )
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("eps", [0, -1.0, float("nan")])
def test_autonorm_rejects_a_non_positive_eps(eps: float) -> None:
    with pytest.raises(ValueError, match="eps must be a positive finite number"):
        AutoNorm(8, eps=eps)


@pytest.mark.parametrize(
    "make",
    [
        lambda tau: AutoNorm(8, tau=tau),
        lambda tau: AutoNorm(8, tau=tau, selector="random"),
        lambda tau: NormSelector(8, tau=tau),
        lambda tau: AutoNormS(tau=tau),
        lambda tau: gumbel_softmax(torch.zeros(2, 2), tau),
    ],
)
def test_tau_below_its_stated_lower_bound_is_refused(make) -> None:
    with pytest.raises(ValueError, match=rf"tau must be a finite number >= {TAU_MIN}"):
        make(1e-30)
    make(TAU_MIN)  # the bound itself is accepted


def test_tau_at_its_lower_bound_still_has_selector_gradients() -> None:
    torch.manual_seed(0)
    logits = torch.randn(256, 2, requires_grad=True)
    gumbel_softmax(logits, TAU_MIN)[:, 0].sum().backward()
    assert (logits.grad != 0).any()


@pytest.mark.parametrize("seed", [2**70, -1, 2**64])
def test_a_seed_out_of_range_names_the_range(seed: int) -> None:
    for call in (
        lambda: normlab.seed_everything(seed),
        lambda: FitConfig(epochs=1, batch_size=8, lr=0.1, seed=seed),
    ):
        with pytest.raises(
            ValueError, match=r"seed must be an int in \[0, 2\*\*64 - 1\]"
        ):
            call()
    normlab.seed_everything(2**64 - 1)  # the largest valid seed works


# ----------------------------------------------------------------- a batch of size zero


@pytest.mark.parametrize(
    "make", [lambda: AutoNorm(8), lambda: FiLMNorm(8), lambda: NormSelector(8)]
)
@pytest.mark.parametrize("shape", [(0, 8), (0, 5, 8)])
def test_an_empty_batch_works_as_layernorm_does(make, shape: tuple) -> None:
    layer = make()
    x = torch.zeros(shape, requires_grad=True)
    out = layer(x)
    expected = (
        nn.LayerNorm(8)(x).shape if not isinstance(layer, NormSelector) else (0, 2)
    )
    assert out.shape == expected
    out.sum().backward()
    assert x.grad.shape == x.shape


# ------------------------------------------------------------------------ make lab as root


def test_make_lab_allows_root_exactly_when_run_as_root(tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        ["make", "-n", "lab", f"VENV={tmp_path / 'venv'}"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    command = next(line for line in done.stdout.splitlines() if "jupyter-lab" in line)
    assert ("--allow-root" in command) == (os.geteuid() == 0)


@pytest.mark.parametrize("normaliser", ["affine_like", "norm_like", "l2"])
def test_fit_on_inputs_near_1e20_learns_as_on_the_plain_inputs(normaliser: str) -> None:
    """Before the layers scaled their norms, |x|^2 overflowed and this trained at chance."""
    from normlab.models import mlp_for

    train, val = load("digits", "train"), load("digits", "val")
    big = [
        DataSplit(s.x * 1e20, s.y, s.task, s.name, s.split, s.meta)
        for s in (train, val)
    ]
    scores = []
    for splits in ((train, val), big):
        normlab.seed_everything(0)
        model = mlp_for(normaliser, in_features=64, num_classes=10, width=32, depth=1)
        history = fit(
            model,
            *splits,
            epochs=3,
            batch_size=32,
            lr=0.05,
            device="cpu",
            progress=False,
        )
        scores.append(history[-1]["val_accuracy"])
    assert scores[1] > 0.6  # chance is 0.1
    if (
        normaliser != "affine_like"
    ):  # a scale-invariant first layer: the same run, to rounding
        assert abs(scores[1] - scores[0]) < 0.03
