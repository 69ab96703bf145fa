"""Part II normalisers: DyT, AdaNorm, FiLMNorm, NormSelector, AutoNorm and ``norm_layer`` by name."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from normlab.gates import gate_entropy
from normlab.layers import (
    AdaNorm,
    AutoNorm,
    DyT,
    FiLMNorm,
    NormSelector,
    gumbel_softmax,
    sample_gumbel,
    token_pool,
)
from normlab.normalisers import NORMALISERS, PART2, norm_layer
from scipy import stats
from torch import nn


def _randomise(module: nn.Module, seed: int = 0) -> None:
    """Give every parameter random values, so formula tests do not hide behind an identity init."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)


def _ln_ref(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


# --- DyT ---------------------------------------------------------------------------------


def test_dyt_initial_parameters_are_the_papers() -> None:
    layer = DyT(6)
    assert layer.alpha.shape == () and layer.alpha.item() == 0.5
    assert torch.equal(layer.weight, torch.ones(6)) and torch.equal(
        layer.bias, torch.zeros(6)
    )
    assert DyT((3, 4), alpha_init=2.0).weight.shape == (3, 4)


def test_dyt_matches_its_formula() -> None:
    layer = DyT((3, 4)).double()
    _randomise(layer)
    x = torch.randn(5, 7, 3, 4, dtype=torch.float64) * 3
    expected = layer.weight * torch.tanh(layer.alpha * x) + layer.bias
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "params"),
    [
        ({}, ["alpha", "weight", "bias"]),
        ({"bias": False}, ["alpha", "weight"]),
        ({"elementwise_affine": False}, ["alpha"]),
        ({"elementwise_affine": False, "bias": False}, ["alpha"]),
    ],
)
def test_dyt_switches_are_layernorms(kwargs: dict, params: list[str]) -> None:
    """``elementwise_affine`` and ``bias`` as in ``nn.LayerNorm``: absent parameters are None,
    and neither in ``parameters()`` nor in the ``state_dict``."""
    layer = DyT((3, 4), **kwargs).double()
    _randomise(layer)
    assert [n for n, _ in layer.named_parameters()] == params
    assert list(layer.state_dict()) == params
    ln = nn.LayerNorm((3, 4), **kwargs)
    assert (layer.weight is None) == (ln.weight is None)
    assert (layer.bias is None) == (ln.bias is None)
    x = torch.randn(5, 3, 4, dtype=torch.float64)
    expected = torch.tanh(layer.alpha * x)
    if layer.weight is not None:
        expected = expected * layer.weight
    if layer.bias is not None:
        expected = expected + layer.bias
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=1e-14)
    layer(x).sum().backward()
    assert all(p.grad is not None for p in layer.parameters())
    assert f"elementwise_affine={ln.elementwise_affine}" in repr(layer)


def test_dyt_switches_must_be_bools() -> None:
    with pytest.raises(TypeError, match="elementwise_affine"):
        DyT(4, elementwise_affine=1)
    with pytest.raises(TypeError, match="bias"):
        DyT(4, bias="no")


# --- AdaNorm -----------------------------------------------------------------------------


def test_adanorm_matches_its_formula() -> None:
    x = torch.randn(4, 9, 16, dtype=torch.float64) * 5 + 2
    layer = AdaNorm(16, k=0.1, scale=2.0)
    y = _ln_ref(x)
    torch.testing.assert_close(layer(x), 2.0 * (1 - 0.1 * y) * y, rtol=0, atol=1e-12)
    assert list(layer.parameters()) == []


def test_adanorm_with_k_zero_is_layernorm_without_affine() -> None:
    x = torch.randn(3, 10, 8)
    torch.testing.assert_close(
        AdaNorm(8, k=0.0)(x), F.layer_norm(x, (8,)), rtol=0, atol=0
    )


def _ln_vjp(y: torch.Tensor, std: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Analytic LayerNorm backward: J^T v = (v - mean(v) - y mean(v y)) / std."""
    return (v - v.mean(-1, keepdim=True) - y * (v * y).mean(-1, keepdim=True)) / std


def test_adanorm_gradient_has_the_stop_gradient() -> None:
    """d out/d y is C (1 - k y) with the stop-gradient, C (1 - 2 k y) without it."""
    k, c, eps = 0.3, 2.0, 1e-5
    x = (torch.randn(6, 32, dtype=torch.float64) * 3).requires_grad_(True)
    upstream = torch.randn(6, 32, dtype=torch.float64)
    AdaNorm(32, k=k, scale=c, eps=eps)(x).backward(upstream)

    xd = x.detach()
    std = torch.sqrt(xd.var(-1, unbiased=False, keepdim=True) + eps)
    y = (xd - xd.mean(-1, keepdim=True)) / std
    with_stop = _ln_vjp(y, std, c * (1 - k * y) * upstream)
    without_stop = _ln_vjp(y, std, c * (1 - 2 * k * y) * upstream)
    torch.testing.assert_close(x.grad, with_stop, rtol=1e-10, atol=1e-12)
    assert (x.grad - without_stop).abs().max() > 1e-2

    # The same two references from autograd: detach (ours) versus the plain cubic.
    x2 = xd.clone().requires_grad_(True)
    y2 = F.layer_norm(x2, (32,), eps=eps)
    (c * (y2 - k * y2 * y2)).backward(upstream)
    torch.testing.assert_close(x2.grad, without_stop, rtol=1e-10, atol=1e-12)


def test_adanorm_backward_is_the_derivative_with_the_factor_held_constant() -> None:
    """gradcheck cannot pass on AdaNorm itself (its backward is not the derivative of its
    forward, by design); it passes on the function with (1 - k y) frozen at the point, and the
    module's Jacobian there equals that function's."""
    layer = AdaNorm(5, k=0.2, scale=1.5)
    x0 = torch.randn(2, 5, dtype=torch.float64)
    factor = 1.5 * (1 - 0.2 * F.layer_norm(x0, (5,), eps=1e-5))

    def frozen_factor(x: torch.Tensor) -> torch.Tensor:
        return factor * F.layer_norm(x, (5,), eps=1e-5)

    assert torch.autograd.gradcheck(frozen_factor, (x0.clone().requires_grad_(True),))
    jac_module = torch.autograd.functional.jacobian(layer, x0)
    jac_frozen = torch.autograd.functional.jacobian(frozen_factor, x0)
    torch.testing.assert_close(jac_module, jac_frozen, rtol=1e-12, atol=1e-12)
    assert not torch.autograd.gradcheck(
        layer, (x0.clone().requires_grad_(True),), raise_exception=False
    )


# --- FiLMNorm ----------------------------------------------------------------------------


def test_film_starts_as_layernorm() -> None:
    x = torch.randn(3, 7, 12)
    torch.testing.assert_close(FiLMNorm(12)(x), F.layer_norm(x, (12,)), rtol=0, atol=0)


def test_film_matches_its_formula() -> None:
    layer = FiLMNorm(8, hidden=5).double()
    _randomise(layer)
    x = torch.randn(4, 6, 8, dtype=torch.float64)
    w1, b1 = layer.condition[0].weight, layer.condition[0].bias
    w2, b2 = layer.condition[2].weight, layer.condition[2].bias
    pooled = x.mean(dim=1)
    out = torch.relu(pooled @ w1.T + b1) @ w2.T + b2
    d_gamma, beta = out[:, :8], out[:, 8:]
    expected = _ln_ref(x) * (1 + d_gamma[:, None]) + beta[:, None]
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=1e-12)
    # 2-D input: no token dimension, each sample conditions itself.
    x2 = torch.randn(4, 8, dtype=torch.float64)
    out2 = torch.relu(x2 @ w1.T + b1) @ w2.T + b2
    torch.testing.assert_close(
        layer(x2), _ln_ref(x2) * (1 + out2[:, :8]) + out2[:, 8:], rtol=0, atol=1e-12
    )


def test_token_pool_ignores_masked_tokens() -> None:
    x = torch.randn(2, 5, 3)
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    pooled = token_pool(x, 1, mask)
    torch.testing.assert_close(pooled[0], x[0, :2].mean(0))
    torch.testing.assert_close(pooled[1], x[1].mean(0))
    with pytest.raises(ValueError, match="token_mask"):
        token_pool(x, 1, mask[:, :4])


def test_film_with_mask_ignores_padding_values() -> None:
    layer = FiLMNorm(8)
    _randomise(layer)
    x = torch.randn(2, 6, 8)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[:, 4:] = False
    y = x.clone()
    y[:, 4:] = 100 * torch.randn(2, 2, 8)
    torch.testing.assert_close(
        layer(x, mask)[:, :4], layer(y, mask)[:, :4], rtol=0, atol=0
    )


# --- Gumbel-Softmax and the selector -----------------------------------------------------


def test_gumbel_noise_is_standard_gumbel() -> None:
    """Kolmogorov-Smirnov against Gumbel(0, 1), 10^4 draws, alpha = 0.001."""
    g = sample_gumbel((10_000,), generator=torch.Generator().manual_seed(1))
    assert torch.isfinite(g).all()
    assert stats.kstest(g.numpy(), stats.gumbel_r.cdf).pvalue > 1e-3


@pytest.mark.parametrize("logits", [[0.3, -0.4, 1.0], [1.2, -0.7]])
def test_gumbel_samples_follow_the_softmax(logits: list[float]) -> None:
    """Chi-square goodness of fit of 10^4 hard samples to softmax(logits), fixed seed.

    Significance level 0.01. Power: against drawing from softmax(1.1 * logits) (a 10 %
    logit mis-scaling; for the 3-way case the noncentrality is 24.8) the test rejects with
    probability 0.98; against softmax(logits / tau) at tau = 0.5 (the classic bug of sampling
    the tempered distribution) the power is 1.0 to 6 digits.
    """
    n = 10_000
    logits_t = torch.tensor(logits)
    samples = gumbel_softmax(
        logits_t.expand(n, -1),
        tau=0.5,
        hard=True,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.equal(samples.sum(-1), torch.ones(n))
    counts = torch.bincount(samples.argmax(-1), minlength=len(logits)).double()
    expected = n * torch.softmax(logits_t.double(), 0)
    assert stats.chisquare(counts.numpy(), expected.numpy()).pvalue > 0.01
    # The same test rejects the tempered distribution: it is not vacuous.
    wrong = n * torch.softmax(logits_t.double() / 0.5, 0)
    assert stats.chisquare(counts.numpy(), wrong.numpy()).pvalue < 1e-6


def test_selector_samples_in_training_follow_its_softmax() -> None:
    """The NormSelector's own training-mode hard gate: chi-square, alpha 0.01, 10^4 samples."""
    selector = NormSelector(4, hard=True)
    with torch.no_grad():
        selector.mlp[2].weight.zero_()
        selector.mlp[2].bias.copy_(torch.tensor([0.8, -0.2]))
    torch.manual_seed(3)
    weights = selector.train()(torch.randn(10_000, 3, 4))
    counts = weights.detach().sum(0).double()
    expected = 10_000 * torch.softmax(torch.tensor([0.8, -0.2], dtype=torch.float64), 0)
    assert stats.chisquare(counts.numpy(), expected.numpy()).pvalue > 0.01
    torch.testing.assert_close(
        selector.last_probs,
        torch.softmax(torch.tensor([0.8, -0.2]), 0).expand(10_000, 2),
    )


def test_straight_through_forward_is_one_hot_and_gradient_is_soft() -> None:
    logits = torch.randn(64, 3, requires_grad=True)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    hard = gumbel_softmax(logits, 0.7, hard=True, generator=g1)
    soft = gumbel_softmax(logits, 0.7, hard=False, generator=g2)
    assert set(hard.detach().unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(hard.argmax(-1), soft.argmax(-1))
    upstream = torch.randn(64, 3)
    (grad_hard,) = torch.autograd.grad(hard, logits, upstream)
    (grad_soft,) = torch.autograd.grad(soft, logits, upstream)
    torch.testing.assert_close(grad_hard, grad_soft)


def test_selector_eval_is_deterministic() -> None:
    x = torch.randn(5, 3, 6)
    soft = NormSelector(6).eval()
    torch.testing.assert_close(
        soft(x), torch.softmax(soft.last_logits, -1), rtol=0, atol=0
    )
    assert torch.equal(soft(x), soft(x))
    hard = NormSelector(6, hard=True).eval()
    w = hard(x)
    assert torch.equal(w, F.one_hot(hard.last_logits.argmax(-1), 2).float())


# --- AutoNorm ----------------------------------------------------------------------------


@pytest.mark.parametrize("candidate", ["dyt", "ln"])
def test_pinned_autonorm_equals_the_candidate(candidate: str) -> None:
    layer = AutoNorm(10)
    _randomise(layer, seed=2)
    x = torch.randn(4, 5, 10) * 4
    reference = DyT(10) if candidate == "dyt" else nn.LayerNorm(10)
    reference.load_state_dict(getattr(layer, candidate).state_dict())
    layer.pin = candidate
    for mode in (layer.train, layer.eval):
        mode()
        assert torch.equal(layer(x), reference(x))


@pytest.mark.parametrize("candidate", [0, 1])
def test_a_one_hot_gate_selects_the_candidate_exactly(candidate: int) -> None:
    """Through the gate itself: a hard eval gate with decisive logits is exactly one candidate."""
    layer = AutoNorm(10, hard=True)
    _randomise(layer, seed=4)
    with torch.no_grad():
        layer.selector.mlp[2].weight.zero_()
        layer.selector.mlp[2].bias.copy_(
            torch.tensor([20.0, -20.0]) * (1 if candidate == 0 else -1)
        )
    x = torch.randn(3, 4, 10)
    expected = layer.dyt(x) if candidate == 0 else layer.ln(x)
    assert torch.equal(layer.eval()(x), expected)


def test_autonorm_mixes_with_per_sample_weights() -> None:
    layer = AutoNorm(6).eval()
    _randomise(layer, seed=6)
    x = torch.randn(5, 4, 6) * torch.arange(1, 6.0).reshape(5, 1, 1)
    out = layer(x)
    w = torch.softmax(layer.last_logits, -1)
    expected = w[:, 0, None, None] * layer.dyt(x) + w[:, 1, None, None] * layer.ln(x)
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
    assert w[:, 0].std() > 0  # per sample, not one weight for the batch
    torch.testing.assert_close(layer.last_probs.sum(-1), torch.ones(5))


def test_random_selector_draws_uniform_weights_per_sample() -> None:
    """Kolmogorov-Smirnov of the drawn w_DyT against U(0, 1), 4000 samples, alpha 0.001."""
    layer = AutoNorm(4, selector="random")
    assert list(layer.parameters()) and all(
        "selector" not in n for n, _ in layer.named_parameters()
    )
    torch.manual_seed(0)
    layer.train()(torch.randn(4000, 2, 4))
    w = layer.last_probs
    torch.testing.assert_close(w.sum(-1), torch.ones(4000))
    assert stats.kstest(w[:, 0].numpy(), "uniform").pvalue > 1e-3
    layer.eval()(torch.randn(3, 2, 4))
    assert torch.equal(layer.last_probs, torch.full((3, 2), 0.5))


def test_entropy_of_autonorm_gates_lies_in_zero_ln2() -> None:
    torch.manual_seed(0)
    for scale in (1e-3, 1.0, 1e3):
        layer = AutoNorm(16)
        _randomise(layer, seed=int(scale * 10))
        layer(torch.randn(256, 3, 16) * scale)
        h = gate_entropy(layer.last_probs)
        assert (h >= 0).all() and (h <= math.log(2) + 1e-6).all()
    assert gate_entropy(
        torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    ).tolist() == pytest.approx([0.0, math.log(2)], abs=1e-7)


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("autocast", [False, True])
def test_no_nan_at_small_tau_and_large_inputs(hard: bool, autocast: bool) -> None:
    torch.manual_seed(0)
    proj = nn.Linear(16, 16)
    for tau in (0.05, 0.1, 0.5):
        layer = AutoNorm(16, tau=tau, hard=hard)
        for scale in (1.0, 1e2, 1e4):
            x = (torch.randn(8, 5, 16) * scale).requires_grad_(True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = layer(proj(x))
            out.float().square().mean().backward()
            assert torch.isfinite(out).all(), (tau, scale)
            assert torch.isfinite(layer.last_probs).all()
            assert all(
                torch.isfinite(p.grad).all()
                for p in layer.parameters()
                if p.grad is not None
            )
            assert torch.isfinite(x.grad).all()
            layer.zero_grad()


# --- gradcheck ---------------------------------------------------------------------------


def test_gradcheck_dyt_film_autonorm() -> None:
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    dyt = DyT(4).double()
    _randomise(dyt)
    film = FiLMNorm(4).double()
    _randomise(film)
    auto = AutoNorm(4).double().eval()
    _randomise(auto)
    for layer in (dyt, film, auto):
        assert torch.autograd.gradcheck(layer, (x,))
    adanorm_k0 = AdaNorm(4, k=0.0, scale=2.0)
    assert torch.autograd.gradcheck(adanorm_k0, (x,))


def test_gradcheck_dyt_parameters() -> None:
    x = torch.randn(3, 4, dtype=torch.float64)
    params = (
        torch.tensor(0.7, dtype=torch.float64, requires_grad=True),
        torch.randn(4, dtype=torch.float64, requires_grad=True),
        torch.randn(4, dtype=torch.float64, requires_grad=True),
    )
    layer = DyT(4).double()

    def run(
        alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        return torch.func.functional_call(
            layer, {"alpha": alpha, "weight": weight, "bias": bias}, (x,)
        )

    assert torch.autograd.gradcheck(run, params)


# --- the name table and errors -----------------------------------------------------------


def test_norm_layer_by_name() -> None:
    drop_ins = {"layernorm", "rmsnorm", "l2", *PART2}
    assert {name for name, entry in NORMALISERS.items() if entry.drop_in} == drop_ins
    assert type(norm_layer("frozen_ln")(8)) is nn.LayerNorm
    assert norm_layer("autonorm_random")(8).selector is None
    assert norm_layer("autonorm", tau=0.2)(8).selector.tau == 0.2
    assert isinstance(
        norm_layer("autonorm_s")(8), AutoNorm
    )  # AutoNorm-S is a schedule on the autonorm layer
    for name in drop_ins:
        layer = norm_layer(name)((2, 3))
        assert layer(torch.randn(4, 5, 2, 3)).shape == (4, 5, 2, 3)
    for name in (
        "batchnorm",
        "none",
        "norm_like",
        "groupnorm",
    ):  # no drop-in norm layer, or not registered
        with pytest.raises(ValueError, match=f"norm_layer name='{name}' is not known"):
            norm_layer(name)


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="tau"):
        AutoNorm(4, tau=0.0)
    with pytest.raises(ValueError, match="tau"):
        AutoNorm(4, tau=-1.0, selector="random")
    with pytest.raises(ValueError, match="tau"):
        NormSelector(4, tau=float("nan"))
    with pytest.raises(ValueError, match="tau"):
        gumbel_softmax(torch.zeros(2), tau=0)
    layer = AutoNorm(4)
    with pytest.raises(ValueError, match="tau"):
        layer.selector.tau = 0.0
    with pytest.raises(ValueError, match="selector"):
        AutoNorm(4, selector="greedy")
    with pytest.raises(ValueError, match="pin"):
        layer.pin = "batchnorm"
    with pytest.raises(ValueError, match="normalized_shape"):
        layer(torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match="normalized_shape"):
        layer(torch.randn(4))  # no batch dimension
    for cls in (DyT, AdaNorm, FiLMNorm):
        with pytest.raises(ValueError, match="normalized_shape"):
            cls((3, 4))(torch.randn(2, 4, 3))
    with pytest.raises(ValueError, match="normalized_shape"):
        DyT(0)
    with pytest.raises(TypeError, match="normalized_shape"):
        DyT("8")
    with pytest.raises(ValueError, match="k"):
        AdaNorm(4, k=-0.1)
    with pytest.raises(ValueError, match="hidden"):
        FiLMNorm(4, hidden=0)
    with pytest.raises(TypeError, match="hard"):
        NormSelector(4, hard="yes")
