"""Gate telemetry, the Gumbel gradient estimator and the AutoNorm-S schedule.

The schedule is a callback for ``normlab.training.fit``; here a tiny hand-made loop drives
its hooks in the documented order.
"""

from __future__ import annotations

import io
import math

import pytest
import torch
from normlab.callbacks import Callback, TrainState
from normlab.gates import (
    AutoNormS,
    GateTelemetry,
    autonorm_layers,
    categorical_grad,
    freeze_selector,
    gate_entropy,
    gumbel_grad_moments,
    selector_parameters,
)
from normlab.layers import AutoNorm
from torch import nn


def tiny_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(6, 8),
        AutoNorm(8),
        nn.GELU(),
        nn.Linear(8, 8),
        AutoNorm(8),
        nn.Linear(8, 3),
    )


def run(
    model: nn.Module,
    callbacks: list[Callback],
    epochs: int,
    steps: int = 4,
    *,
    seed: int = 1,
    set_to_none: bool = False,
    state: TrainState | None = None,
    weight_decay: float = 0.1,
) -> TrainState:
    """A minimal loop calling the hooks as ``normlab.callbacks`` documents them."""
    g = torch.Generator().manual_seed(seed)
    if state is None:
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=1e-2, weight_decay=weight_decay
        )
        state = TrainState(
            model=model, optimizer=optimizer, scheduler=None, epochs=epochs
        )
    for cb in callbacks:
        cb.on_train_start(state)
    for epoch in range(state.epoch + 1, epochs + 1):
        state.epoch = epoch
        for cb in callbacks:
            cb.on_epoch_start(state)
        for _ in range(steps):
            x = torch.randn(16, 5, 6, generator=g)
            y = torch.randint(0, 3, (16, 5), generator=g)
            state.optimizer.zero_grad(set_to_none=set_to_none)
            loss = nn.functional.cross_entropy(model(x).reshape(-1, 3), y.reshape(-1))
            loss.backward()
            for cb in callbacks:
                cb.on_after_backward(state)
            state.optimizer.step()
            state.step += 1
            state.loss = loss.item()
            for cb in callbacks:
                cb.on_step_end(state)
        state.history.append({"epoch": epoch})
        for cb in callbacks:
            cb.on_epoch_end(state)
    for cb in callbacks:
        cb.on_train_end(state)
    return state


def selector_snapshot(model: nn.Module) -> list[torch.Tensor]:
    return [
        p.detach().clone()
        for _, layer in autonorm_layers(model)
        for p in selector_parameters(layer)
    ]


def backbone_snapshot(model: nn.Module) -> list[torch.Tensor]:
    selector_ids = {
        id(p) for _, layer in autonorm_layers(model) for p in selector_parameters(layer)
    }
    return [p.detach().clone() for p in model.parameters() if id(p) not in selector_ids]


# --- plain functions ---------------------------------------------------------------------


def test_gate_entropy_values_and_bounds() -> None:
    probs = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.9, 0.1]])
    expected = [0.0, math.log(2), -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))]
    assert gate_entropy(probs).tolist() == pytest.approx(expected, abs=1e-6)
    dirichlet = torch.distributions.Dirichlet(torch.full((3,), 0.3)).sample((1000,))
    h = gate_entropy(dirichlet)
    assert (h >= 0).all() and (h <= math.log(3) + 1e-6).all()


def test_autonorm_layers_in_module_order() -> None:
    model = tiny_model()
    assert [name for name, _ in autonorm_layers(model)] == ["1", "4"]


# --- the Gumbel-Softmax gradient estimator -----------------------------------------------


def test_gumbel_gradient_variance_grows_like_one_over_tau() -> None:
    """Var ~ p(1-p)/(6 tau) as tau -> 0 for two candidates; 10^5 samples per tau."""
    logits = torch.tensor([0.5, -0.3])
    taus = [0.05, 0.1, 0.2, 0.5, 1.0, 2.0]
    variances = [  # the total variance: the trace of the gradient's covariance
        gumbel_grad_moments(
            logits, t, 100_000, generator=torch.Generator().manual_seed(0)
        )[1]
        .sum()
        .item()
        for t in taus
    ]
    assert all(a > b for a, b in zip(variances, variances[1:]))
    assert 1.7 < variances[0] / variances[1] < 2.3
    # The analytic small-tau limit: trace = 2 * p(1-p)/(6 tau) (two logits, opposite gradients).
    p = torch.softmax(logits, 0)[0].item()
    assert variances[0] == pytest.approx(2 * p * (1 - p) / (6 * 0.05), rel=0.15)


def test_gumbel_gradient_mean_tends_to_the_exact_gradient() -> None:
    logits = torch.tensor([0.5, -0.3, 0.1])
    values = torch.tensor([1.0, -2.0, 0.5])
    exact = categorical_grad(logits, values)
    mean, var = gumbel_grad_moments(
        logits, 0.05, 200_000, values=values, generator=torch.Generator().manual_seed(2)
    )
    standard_error = (var / 200_000).sqrt()
    assert ((mean - exact).abs() < 5 * standard_error + 0.01).all()
    mean_hot, _ = gumbel_grad_moments(
        logits, 5.0, 20_000, values=values, generator=torch.Generator().manual_seed(2)
    )
    assert (mean_hot - exact).abs().max() > 0.1  # at high tau the estimator is biased


def test_gumbel_moments_validate() -> None:
    with pytest.raises(ValueError, match="logits"):
        gumbel_grad_moments(torch.zeros(2, 2), 0.5, 10)
    with pytest.raises(ValueError, match="n must"):
        gumbel_grad_moments(torch.zeros(2), 0.5, 1)
    with pytest.raises(ValueError, match="tau"):
        gumbel_grad_moments(torch.zeros(2), 0.0, 10)


# --- AutoNorm-S --------------------------------------------------------------------------


def test_freezing_keeps_the_selector_bit_identical_under_adamw() -> None:
    model = tiny_model()
    schedule = AutoNormS(
        t_freeze=2, eps_h=0.0
    )  # rule "high": H >= 0 always, so it freezes
    telemetry = GateTelemetry()
    start = selector_snapshot(model)
    state = run(model, [schedule, telemetry], epochs=2)
    assert schedule.frozen == ["1", "4"]
    after_warmup = selector_snapshot(model)
    assert any(
        not torch.equal(a, b) for a, b in zip(start, after_warmup)
    )  # it was learning
    backbone = backbone_snapshot(model)
    # Further epochs, with zero_grad(set_to_none=False) and weight decay 0.1.
    state.epochs = 4
    run(model, [schedule, telemetry], epochs=4, state=state, set_to_none=False)
    assert all(
        torch.equal(a, b) for a, b in zip(after_warmup, selector_snapshot(model))
    )
    grad_vars = [(r["epoch"], math.isnan(r["grad_var"])) for r in telemetry.records]
    assert all(
        is_nan == (epoch > 2) for epoch, is_nan in grad_vars
    )  # no selector gradient once frozen
    assert all(
        not torch.equal(a, b) for a, b in zip(backbone, backbone_snapshot(model))
    )
    assert all(
        not p.requires_grad and p.grad is None for p in model[1].selector.parameters()
    )


def test_without_the_schedule_weight_decay_moves_the_selector() -> None:
    """Control for the test above: the same loop, no freezing, and the selector keeps moving."""
    model = tiny_model()
    state = run(model, [], epochs=2)
    before = selector_snapshot(model)
    state.epochs = 4
    run(model, [], epochs=4, state=state, set_to_none=False)
    assert all(not torch.equal(a, b) for a, b in zip(before, selector_snapshot(model)))


def test_frozen_selector_is_deterministic_in_training_mode() -> None:
    layer = AutoNorm(8, hard=True)
    freeze_selector(layer)
    layer.train()
    x = torch.randn(32, 4, 8)
    w1 = layer.selector(x)
    w2 = layer.selector(x)
    assert torch.equal(w1, w2)
    assert torch.equal(
        w1, nn.functional.one_hot(layer.selector.last_logits.argmax(-1), 2).float()
    )
    with pytest.raises(ValueError, match="random"):
        freeze_selector(AutoNorm(8, selector="random"))


def test_entropy_record_is_the_mean_over_steps() -> None:
    model = tiny_model()
    schedule = AutoNormS(
        t_freeze=1, eps_h=math.log(2)
    )  # high rule: never freezes (H < ln 2)

    class Spy(Callback):
        def __init__(self) -> None:
            self.values: dict[str, list[float]] = {"1": [], "4": []}

        def on_step_end(self, state: TrainState) -> None:
            for name, layer in autonorm_layers(state.model):
                self.values[name].append(gate_entropy(layer.last_probs).mean().item())

    spy = Spy()
    run(model, [schedule, spy], epochs=2, steps=5)
    assert len(schedule.entropy_records) == 1  # only warm-up epochs are recorded
    record = schedule.entropy_records[0]
    for name in ("1", "4"):
        assert record["layers"][name] == pytest.approx(
            sum(spy.values[name][:5]) / 5, rel=1e-6
        )
        assert 0 <= record["layers"][name] <= math.log(2)
    assert record["mean"] == pytest.approx(
        (record["layers"]["1"] + record["layers"]["4"]) / 2
    )
    assert schedule.frozen == [] and schedule.decided


def _decided_and_undecided() -> nn.Module:
    """Layer "1" has a decisive gate (entropy ~0), layer "4" a uniform one (entropy ln 2)."""
    model = tiny_model()
    with torch.no_grad():
        for name, layer in autonorm_layers(model):
            last = layer.selector.mlp[2]
            last.weight.zero_()
            last.bias.copy_(
                torch.tensor([30.0, -30.0]) if name == "1" else torch.zeros(2)
            )
    return model


@pytest.mark.parametrize(
    ("rule", "per_layer", "expected"),
    [
        ("high", True, ["4"]),
        ("low", True, ["1"]),
        ("high", False, ["1", "4"]),  # mean entropy ~ ln2 / 2 = 0.35 >= 0.3
        ("low", False, []),
    ],
)
def test_freezing_rules(rule: str, per_layer: bool, expected: list[str]) -> None:
    model = _decided_and_undecided()
    schedule = AutoNormS(
        t_freeze=1, eps_h=0.3, rule=rule, per_layer=per_layer, tau=None
    )
    run(model, [schedule], epochs=1, steps=1)
    assert schedule.frozen == expected
    for name, layer in autonorm_layers(model):
        assert layer.selector.frozen == (name in expected)


def _collapsed(both: bool) -> nn.Module:
    """Layer "1" (and "4" when ``both``) has a fully collapsed gate: probabilities exactly
    ``(1, 0)`` in float32, so its entropy is exactly 0; otherwise "4" is uniform (ln 2)."""
    model = tiny_model()
    with torch.no_grad():
        for name, layer in autonorm_layers(model):
            last = layer.selector.mlp[2]
            last.weight.zero_()
            collapsed = both or name == "1"
            last.bias.copy_(
                torch.tensor([1000.0, -1000.0]) if collapsed else torch.zeros(2)
            )
    return model


@pytest.mark.parametrize(
    ("rule", "per_layer", "both", "expected"),
    [
        # "high" freezes at H >= eps_h: a gate at exactly 0 = eps_h freezes
        ("high", True, False, ["1", "4"]),
        ("high", False, True, ["1", "4"]),
        # "low" freezes at H < eps_h: a gate at exactly 0 = eps_h does not
        ("low", True, False, []),
        ("low", False, True, []),
    ],
)
def test_freezing_rules_at_the_boundary_entropy_equal_to_eps_h(
    rule: str, per_layer: bool, both: bool, expected: list[str]
) -> None:
    model = _collapsed(both)
    schedule = AutoNormS(
        t_freeze=1, eps_h=0.0, rule=rule, per_layer=per_layer, tau=None
    )
    run(model, [schedule], epochs=1, steps=1)
    assert schedule.entropy_records[0]["layers"]["1"] == 0.0
    assert (schedule.entropy_records[0]["mean"] == 0.0) == both
    assert schedule.frozen == expected
    for name, layer in autonorm_layers(model):
        assert layer.selector.frozen == (name in expected)


def test_schedule_sets_tau_and_resumes_exactly() -> None:
    model = tiny_model()
    schedule = AutoNormS(t_freeze=2, eps_h=0.0, tau=0.3)
    run(model, [schedule], epochs=2, steps=2)
    assert all(layer.selector.tau == 0.3 for _, layer in autonorm_layers(model))
    saved = schedule.state_dict()

    fresh_model = tiny_model(seed=5)
    fresh_model.load_state_dict(model.state_dict())
    restored = AutoNormS(t_freeze=2, eps_h=0.0, tau=0.3)
    restored.load_state_dict(saved)
    optimizer = torch.optim.AdamW(fresh_model.parameters(), lr=1e-2, weight_decay=0.1)
    restored.on_train_start(TrainState(fresh_model, optimizer, None, epochs=3, epoch=2))
    assert restored.frozen == schedule.frozen and restored.decided
    assert restored.entropy_records == schedule.entropy_records
    assert all(
        layer.selector.frozen
        and not any(p.requires_grad for p in layer.selector.parameters())
        for _, layer in autonorm_layers(fresh_model)
    )


def test_a_reloaded_frozen_autonorm_s_stays_frozen() -> None:
    model = tiny_model()
    schedule = AutoNormS(t_freeze=1, eps_h=0.0)  # rule "high" at 0: always freezes
    run(model, [schedule], epochs=1, steps=1)
    assert schedule.frozen == ["1", "4"]
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    assert saved["1.selector._extra_state"] == {"frozen": True}

    fresh = tiny_model(seed=5)
    assert not any(layer.selector.frozen for _, layer in autonorm_layers(fresh))
    fresh.load_state_dict(saved)
    fresh.train()
    x = torch.randn(16, 5, 6)
    for _, layer in autonorm_layers(fresh):
        assert layer.selector.frozen
        assert not any(p.requires_grad for p in layer.selector.parameters())
    torch.testing.assert_close(fresh(x), fresh(x), rtol=0, atol=0)  # no Gumbel noise
    torch.testing.assert_close(fresh(x), model(x), rtol=0, atol=0)

    unfrozen = tiny_model(seed=6)
    fresh.load_state_dict(unfrozen.state_dict())  # an unfrozen state unfreezes the flag
    assert not any(layer.selector.frozen for _, layer in autonorm_layers(fresh))


def test_schedule_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="eps_h"):
        AutoNormS(eps_h=-0.01)
    with pytest.raises(ValueError, match="eps_h"):
        AutoNormS(eps_h=math.log(2) + 1e-3)
    with pytest.raises(ValueError, match="t_freeze"):
        AutoNormS(t_freeze=0)
    with pytest.raises(ValueError, match="rule"):
        AutoNormS(rule="medium")
    with pytest.raises(ValueError, match="tau"):
        AutoNormS(tau=0.0)
    schedule = AutoNormS()
    assert (schedule.t_freeze, schedule.eps_h, schedule.tau) == (10, 0.1, 0.5)
    plain = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    state = TrainState(plain, torch.optim.AdamW(plain.parameters()), None, epochs=1)
    with pytest.raises(ValueError, match="AutoNorm"):
        schedule.on_train_start(state)


# --- telemetry ---------------------------------------------------------------------------


def test_telemetry_records_per_layer_rows() -> None:
    model = tiny_model()
    telemetry = GateTelemetry()
    run(model, [telemetry], epochs=2, steps=3)
    assert [(r["epoch"], r["layer"]) for r in telemetry.records] == [
        (1, "1"),
        (1, "4"),
        (2, "1"),
        (2, "4"),
    ]
    for row in telemetry.records:
        assert row["p_dyt"] + row["p_ln"] == pytest.approx(1.0, abs=1e-6)
        assert 0 <= row["entropy"] <= math.log(2)
        assert row["grad_var"] >= 0 and row["snr"] >= 0


def test_telemetry_gradient_statistics_match_the_ema_formula() -> None:
    model = tiny_model()
    telemetry = GateTelemetry(beta=0.5)
    state = TrainState(
        model, torch.optim.SGD(model.parameters(), lr=0.0), None, epochs=1
    )
    params = selector_parameters(model[1])
    sequence = [1.0, 3.0, -1.0]
    for value in sequence:
        for p in params:
            p.grad = torch.full_like(p, value)
        telemetry.on_after_backward(state)
    m1 = m2 = 0.0
    for value in sequence:
        m1, m2 = 0.5 * m1 + 0.5 * value, 0.5 * m2 + 0.5 * value**2
    correction = 1 - 0.5**3
    mean, second = m1 / correction, m2 / correction
    var, snr = telemetry.gradient_stats("1")
    assert var == pytest.approx(second - mean**2)
    assert snr == pytest.approx(mean**2 / (second - mean**2))
    assert all(math.isnan(v) for v in telemetry.gradient_stats("4"))  # no gradient seen


def test_telemetry_state_round_trip() -> None:
    model = tiny_model()
    telemetry = GateTelemetry()
    run(model, [telemetry], epochs=1, steps=2)
    copy = GateTelemetry()
    copy.load_state_dict(telemetry.state_dict())
    assert copy.records == telemetry.records
    assert copy.gradient_stats("1") == telemetry.gradient_stats("1")


def test_gumbel_grad_snr_is_the_moments_ratio_and_grows_with_tau() -> None:
    from normlab.gates import gumbel_grad_moments, gumbel_grad_snr

    logits = torch.tensor([0.5, -0.3])
    mean, var = gumbel_grad_moments(
        logits, 0.5, 20_000, generator=torch.Generator().manual_seed(3)
    )
    snr = gumbel_grad_snr(
        logits, 0.5, 20_000, generator=torch.Generator().manual_seed(3)
    )
    assert snr == pytest.approx(float((mean**2).sum() / var.sum()), rel=1e-12)
    cold, hot = (
        gumbel_grad_snr(logits, tau, 20_000, generator=torch.Generator().manual_seed(0))
        for tau in (0.1, 2.0)
    )
    decided = gumbel_grad_snr(
        torch.tensor([2.0, -2.0]),
        0.1,
        20_000,
        generator=torch.Generator().manual_seed(0),
    )
    assert hot > 5 * cold and decided < cold
