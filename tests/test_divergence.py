"""Measured activation updates equal the affine-divergence formulas (float64, 1e-10 relative)."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from normlab.divergence import (
    augmented_unit,
    kernel_sgd_least_squares,
    l1_over_l2_augmented,
    label_gradients,
    largest_stable_rate,
    least_squares_study,
    measure_each_sample,
    measure_update,
    sgd_least_squares,
    single_sample_ratios,
    tangent_kernel,
)
from normlab.layers import AffineLikeLinear, NormLikeLinear, PatchNormConv2d
from torch import nn

F64 = torch.float64
RTOL = 1e-10


def assert_rel(
    actual: torch.Tensor, expected: torch.Tensor, rtol: float = RTOL
) -> None:
    err = (actual - expected).norm() / expected.norm()
    assert err < rtol, f"relative error {err:.3e}"


@pytest.mark.parametrize("seed", range(6))
def test_linear_single_sample_update_is_amplified(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    n_in, n_out = (int(v) for v in torch.randint(1, 40, (2,), generator=gen))
    scale = float(10 ** torch.empty(1).uniform_(-3, 2, generator=gen))
    lr = float(10 ** torch.empty(1).uniform_(-4, -1, generator=gen))
    torch.manual_seed(seed)
    x = torch.randn(1, n_in, dtype=F64, generator=gen) * scale
    g = torch.randn(1, n_out, dtype=F64, generator=gen)
    expected = {
        nn.Linear: -lr * (x.square().sum() + 1) * g,
        AffineLikeLinear: -lr * g,
        NormLikeLinear: -2 * lr * g,
    }
    for cls, update in expected.items():
        m = measure_update(cls(n_in, n_out, dtype=F64), x, g, lr=lr, kernel=False)
        assert_rel(m.effective, update)
        assert_rel(m.ideal, -lr * g)
        assert abs(float(m.cosine) - 1) < 1e-10


def _batch_kernels(x: torch.Tensor) -> dict[type, torch.Tensor]:
    ones = torch.ones(x.shape[0], 1, dtype=x.dtype)
    aug = F.normalize(torch.cat([x, ones], dim=1), dim=1)
    xh = F.normalize(x, dim=1)
    return {
        nn.Linear: x @ x.T + 1,
        AffineLikeLinear: aug @ aug.T,
        NormLikeLinear: xh @ xh.T + 1,
    }


@pytest.mark.parametrize(
    "batch,n_in,n_out,scale", [(2, 3, 2, 1.0), (7, 5, 4, 3.0), (16, 10, 3, 0.1)]
)
def test_linear_batch_update_follows_kernel(
    batch: int, n_in: int, n_out: int, scale: float
) -> None:
    torch.manual_seed(batch)
    x = torch.randn(batch, n_in, dtype=F64) * scale
    g = torch.randn(batch, n_out, dtype=F64)
    lr = 0.03
    for cls, K in _batch_kernels(x).items():
        m = measure_update(cls(n_in, n_out, dtype=F64), x, g, lr=lr)
        torch.testing.assert_close(m.kernel, K, rtol=1e-12, atol=1e-12)
        assert_rel(m.effective, -(lr / batch) * K @ g)
        assert_rel(m.predicted(), m.effective)


def _conv_kernel(layer: nn.Conv2d, x: torch.Tensor, mode: str) -> torch.Tensor:
    """Kernel over all (sample, position) sites, from unfolded patches (test-only reference)."""
    cols = F.unfold(
        x,
        layer.kernel_size,
        dilation=layer.dilation,
        padding=layer.padding,
        stride=layer.stride,
    )
    patches = cols.transpose(1, 2).reshape(
        -1, cols.shape[1]
    )  # sites in (n, h, w) order
    if mode == "none":
        return patches @ patches.T + 1
    if mode == "norm_like":
        ph = F.normalize(patches, dim=1)
        return ph @ ph.T + 1
    aug = F.normalize(
        torch.cat([patches, torch.ones(len(patches), 1, dtype=x.dtype)], 1), dim=1
    )
    return aug @ aug.T


@pytest.mark.parametrize("mode", ["none", "affine_like", "norm_like"])
@pytest.mark.parametrize(
    "stride,padding,dilation", [(1, 0, 1), (1, 1, 1), (2, 1, 1), (1, 2, 2)]
)
def test_conv_update_follows_patch_kernel(
    mode: str, stride: int, padding: int, dilation: int
) -> None:
    torch.manual_seed(stride * 10 + padding + dilation)
    if mode == "none":
        layer = nn.Conv2d(
            2, 3, 3, stride=stride, padding=padding, dilation=dilation, dtype=F64
        )
    else:
        layer = PatchNormConv2d(
            2,
            3,
            3,
            stride=stride,
            padding=padding,
            dilation=dilation,
            mode=mode,
            dtype=F64,
        )
    x = torch.randn(2, 2, 7, 6, dtype=F64)
    with torch.no_grad():
        g = torch.randn_like(layer(x))
    lr = 0.01
    m = measure_update(layer, x, g, lr=lr)
    K = _conv_kernel(layer, x, mode)
    torch.testing.assert_close(m.kernel, K, rtol=1e-11, atol=1e-12)
    g_sites = g.permute(0, 2, 3, 1).reshape(-1, g.shape[1])
    expected = (-(lr / x.shape[0]) * K @ g_sites).reshape(
        g.shape[0], g.shape[2], g.shape[3], -1
    )
    assert_rel(m.effective, expected.permute(0, 3, 1, 2))
    if mode == "affine_like":
        torch.testing.assert_close(
            m.kernel.diagonal(), torch.ones(len(K), dtype=F64), rtol=0, atol=1e-12
        )
    if mode == "norm_like":
        torch.testing.assert_close(
            m.kernel.diagonal(),
            torch.full((len(K),), 2.0, dtype=F64),
            rtol=0,
            atol=1e-12,
        )


def test_layer_and_optimizer_are_left_untouched() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(4, 3, dtype=F64)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    opt = torch.optim.SGD(layer.parameters(), lr=0.2, momentum=0.9)
    x, g = torch.randn(5, 4, dtype=F64), torch.randn(5, 3, dtype=F64)
    m = measure_update(layer, x, g, opt, steps=2)
    assert m.lr == 0.2 and m.steps == 2 and len(m.per_step) == 2
    assert all(torch.equal(before[k], v) for k, v in layer.state_dict().items())
    assert opt.state == {} or all(not s for s in opt.state.values())


def test_first_momentum_step_equals_sgd_and_later_steps_accumulate() -> None:
    torch.manual_seed(1)
    layer = nn.Linear(6, 2, dtype=F64)
    x, g = torch.randn(4, 6, dtype=F64), torch.randn(4, 2, dtype=F64)
    sgd = measure_update(layer, x, g, lr=0.01, kernel=False)
    mom = measure_update(
        layer, x, g, torch.optim.SGD, lr=0.01, momentum=0.9, steps=3, kernel=False
    )
    assert_rel(mom.per_step[0], sgd.effective)
    # linear layer, fixed g: the gradient never changes, so step k is (1 + 0.9 + ... ) times step 1
    assert_rel(mom.per_step[2], (1 + 0.9 + 0.81) * sgd.effective)


def test_adam_first_step_is_sign_like() -> None:
    """With eps=0, Adam's first step moves each weight by -lr*sign(grad), so for one sample
    dz = -lr (|x|_1 + 1) sign(g) for nn.Linear."""
    torch.manual_seed(2)
    layer = nn.Linear(5, 3, dtype=F64)
    x, g = torch.randn(1, 5, dtype=F64), torch.randn(1, 3, dtype=F64)
    m = measure_update(layer, x, g, torch.optim.Adam, lr=1e-3, eps=0.0, kernel=False)
    assert_rel(m.effective, -1e-3 * (x.abs().sum() + 1) * g.sign())


def test_tangent_kernel_for_a_sequential_stack() -> None:
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x = torch.randn(5, 3, dtype=F64)
    K = tangent_kernel(net, x)
    assert K.shape == (5, 5)
    torch.testing.assert_close(K, K.T)
    assert torch.linalg.eigvalsh(K).min() > -1e-12


def test_single_sample_ratios_equal_norm_factor() -> None:
    torch.manual_seed(4)
    x, g = torch.randn(6, 4, dtype=F64) * 2, torch.randn(6, 3, dtype=F64)
    ratios = single_sample_ratios(nn.Linear(4, 3, dtype=F64), x, g, lr=0.01)
    assert_rel(ratios, x.square().sum(1) + 1)


def test_partial_factory_is_accepted() -> None:
    torch.manual_seed(5)
    layer = AffineLikeLinear(3, 2, dtype=F64)
    x, g = torch.randn(1, 3, dtype=F64), torch.randn(1, 2, dtype=F64)
    m = measure_update(
        layer, x, g, functools.partial(torch.optim.SGD, momentum=0.5), lr=0.05
    )
    assert_rel(m.effective, -0.05 * g)


def test_bad_arguments_raise() -> None:
    layer = nn.Linear(3, 2)
    x, g = torch.randn(4, 3), torch.randn(4, 2)
    with pytest.raises(ValueError, match="g must be"):
        measure_update(layer, x, torch.randn(4, 3))
    with pytest.raises(ValueError, match="steps"):
        measure_update(layer, x, g, steps=0)
    with pytest.raises(ValueError, match="already constructed"):
        measure_update(layer, x, g, torch.optim.SGD(layer.parameters(), lr=0.1), lr=0.1)
    with pytest.raises(ValueError, match="not the layer's"):
        measure_update(
            layer, x, g, torch.optim.SGD(nn.Linear(3, 2).parameters(), lr=0.1)
        )
    with pytest.raises(TypeError, match="nn.Module"):
        measure_update(lambda t: t, x, g)
    with pytest.raises(ValueError, match="no kernel"):
        measure_update(layer, x, g, kernel=False).predicted()


def test_measure_each_sample_is_one_measurement_per_sample() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(6, 3, dtype=torch.float64)
    x, g = (
        torch.randn(4, 6, dtype=torch.float64),
        torch.randn(4, 3, dtype=torch.float64),
    )
    each = measure_each_sample(
        layer, x, g, torch.optim.SGD, lr=0.1, momentum=0.9, steps=3
    )
    assert len(each) == 4 and all(m.kernel is None for m in each)
    for i, m in enumerate(each):
        alone = measure_update(
            layer,
            x[i : i + 1],
            g[i : i + 1],
            torch.optim.SGD,
            lr=0.1,
            momentum=0.9,
            steps=3,
            kernel=False,
        )
        assert torch.equal(m.effective, alone.effective)
    # momentum with a fixed gradient: step k is (1 + b + ... + b^(k-1)) SGD steps, summed over 3 steps
    expected = -0.1 * (1 + 1.9 + 2.71) * (x.square().sum(1, keepdim=True) + 1) * g
    assert torch.allclose(torch.cat([m.effective for m in each]), expected, rtol=1e-10)


@pytest.mark.parametrize("unit", [0, 2])
def test_augmented_unit_gram_is_the_affine_like_kernel(unit: int) -> None:
    """u_i . u_j, with u = [x; 1] / |[x; 1]|, is the affine-like layer's exact tangent kernel
    for every output unit: 1 on the diagonal, the cosines of [x_i; 1] off it."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(9, 5, dtype=F64, generator=gen) * 3
    u = augmented_unit(x)
    assert u.shape == (9, 6) and u.dtype == F64
    torch.testing.assert_close(
        u.norm(dim=1), torch.ones(9, dtype=F64), rtol=0, atol=1e-15
    )
    kernel = tangent_kernel(AffineLikeLinear(5, 3, dtype=F64), x, unit=unit)
    assert_rel(u @ u.T, kernel)
    plain = tangent_kernel(nn.Linear(5, 3, dtype=F64), x, unit=unit)  # x_i . x_j + 1
    d = plain.diagonal().sqrt()
    assert_rel(u @ u.T, plain / d[:, None] / d[None, :])


def test_l1_over_l2_augmented_is_the_closed_form_within_its_bounds() -> None:
    gen = torch.Generator().manual_seed(8)
    d = 12
    x = (
        torch.randn(50, d, dtype=F64, generator=gen)
        * torch.logspace(-3, 3, 50, dtype=F64)[:, None]
    )
    rho = l1_over_l2_augmented(x)
    closed = (x.abs().sum(1) + 1) / torch.sqrt(x.square().sum(1) + 1)
    torch.testing.assert_close(rho, closed, rtol=1e-14, atol=0)
    assert (rho >= 1).all() and (rho <= (d + 1) ** 0.5 * (1 + 1e-15)).all()
    # the bounds are attained: x = 0 (one non-zero entry of [x; 1]) and |x_k| = 1 for every k
    signs = torch.randint(0, 2, (4, d), generator=gen).to(F64) * 2 - 1
    ends = l1_over_l2_augmented(torch.cat([torch.zeros(1, d, dtype=F64), signs]))
    torch.testing.assert_close(ends[0], torch.tensor(1.0, dtype=F64), rtol=0, atol=0)
    torch.testing.assert_close(
        ends[1:], torch.full((4,), (d + 1) ** 0.5, dtype=F64), rtol=1e-15, atol=0
    )
    # the scale limits: -> 1 as |x| -> 0, -> |x|_1 / |x|_2 as |x| -> infinity
    direction = x / x.norm(dim=1, keepdim=True)
    assert (l1_over_l2_augmented(1e-8 * direction) - 1).abs().max() < 1e-7
    torch.testing.assert_close(
        l1_over_l2_augmented(1e8 * direction), direction.abs().sum(1), rtol=1e-7, atol=0
    )


def test_l1_over_l2_augmented_is_adams_first_step_factor() -> None:
    """Adam's first step (eps = 0) moves the affine-like layer's output by
    -lr rho(x) sign(g), measured on a real optimiser step for each sample."""
    torch.manual_seed(9)
    layer = AffineLikeLinear(7, 4, dtype=F64)
    x = (
        torch.randn(6, 7, dtype=F64)
        * torch.tensor([0.01, 0.1, 1, 3, 10, 100], dtype=F64)[:, None]
    )
    g = torch.randn(6, 4, dtype=F64)
    run = measure_each_sample(layer, x, g, torch.optim.Adam, lr=1e-3, eps=0.0)
    effective = torch.cat([m.effective for m in run])
    assert_rel(effective, -1e-3 * l1_over_l2_augmented(x)[:, None] * g.sign())


@pytest.mark.parametrize(
    "x",
    [
        torch.ones(3),
        torch.ones(2, 3, 4),
        torch.ones(2, 3, dtype=torch.long),
        [[1.0, 2.0]],
    ],
    ids=["1-D", "3-D", "integer", "list"],
)
def test_augmented_helpers_reject_what_is_not_a_batch_of_vectors(x: object) -> None:
    for helper in (augmented_unit, l1_over_l2_augmented):
        with pytest.raises(ValueError, match="x must be a 2-D floating tensor"):
            helper(x)


def test_label_gradients_are_cross_entropys_gradient() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 5, dtype=F64, generator=gen, requires_grad=True)
    labels = torch.randint(0, 5, (7,), generator=gen)
    F.cross_entropy(logits, labels, reduction="sum").backward()
    got = label_gradients(logits, labels)
    assert torch.allclose(got, logits.grad, rtol=1e-12, atol=1e-14)
    assert torch.allclose(got.sum(1), torch.zeros(7, dtype=F64), atol=1e-14)
    with pytest.raises(ValueError, match="labels"):
        label_gradients(logits, labels[:3])


@pytest.mark.parametrize(
    ("cls", "cap"),
    [(nn.Linear, None), (NormLikeLinear, 1.0), (AffineLikeLinear, 2.0)],
)
def test_largest_stable_rate_is_two_over_the_largest_kernel_diagonal(cls, cap) -> None:
    gen = torch.Generator().manual_seed(1)
    x = 3 * torch.randn(9, 6, dtype=F64, generator=gen)
    expected = 2 / float((x.square().sum(1) + 1).max()) if cap is None else cap
    got = largest_stable_rate(cls(6, 3, dtype=F64), x)
    assert abs(got - expected) < 1e-12 * expected


def _regression(n: int = 12, d: int = 20, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = 2 * torch.rand(n, d, dtype=F64, generator=gen)
    return x, torch.randn(n, 3, dtype=F64, generator=gen)


@pytest.mark.parametrize("cls", [nn.Linear, NormLikeLinear, AffineLikeLinear])
@pytest.mark.parametrize("per_step", [False, True])
def test_kernel_sgd_is_the_real_sgd_run_on_the_outputs(cls, per_step: bool) -> None:
    x, y = _regression()
    torch.manual_seed(0)
    layer = cls(20, 3, dtype=F64)
    lr = 0.5 * largest_stable_rate(layer, x)
    real = sgd_least_squares(layer, x, y, lr=lr, epochs=4, per_step=per_step)
    with torch.no_grad():
        start = layer(x) - y
    via_kernel = kernel_sgd_least_squares(
        tangent_kernel(layer, x), start, lr=lr, epochs=4, per_step=per_step
    )
    assert len(real) == (4 * 12 + 1 if per_step else 5)
    assert torch.allclose(real, via_kernel, rtol=1e-10, atol=0)
    assert float(real[0]) == pytest.approx(0.5 * float(start.square().sum(1).mean()))


def test_one_step_on_one_sample_scales_its_residual_by_one_minus_eta_k() -> None:
    x, y = _regression(n=1)
    for cls, k in (
        (nn.Linear, float(x.square().sum() + 1)),
        (NormLikeLinear, 2.0),
        (AffineLikeLinear, 1.0),
    ):
        torch.manual_seed(0)
        layer = cls(20, 3, dtype=F64)
        loss = sgd_least_squares(layer, x, y, lr=0.3 / k * 2, epochs=1)
        # loss ~ r^2, so one step multiplies it by (1 - eta k)^2 = 0.4^2
        assert float(loss[1] / loss[0]) == pytest.approx(0.16, rel=1e-10)


def test_sgd_blows_up_above_the_cap_and_layer_is_untouched() -> None:
    x, y = _regression(n=1)
    layer = nn.Linear(20, 3, dtype=F64)
    before = layer.weight.clone()
    cap = largest_stable_rate(layer, x)
    losses = sgd_least_squares(layer, x, y, lr=1.5 * cap, epochs=60)
    assert torch.isinf(losses[-1]) and torch.isfinite(losses[0])
    assert torch.equal(layer.weight, before)
    with pytest.raises(ValueError, match="one row per sample"):
        sgd_least_squares(layer, x, y[:0], lr=0.1)


def test_least_squares_study_runs_each_kind_at_each_rate() -> None:
    x, y = _regression()
    study = least_squares_study(
        x, y, kinds=("none", "affine_like"), shared_lr=1.0, lrs=(0.01, 1.0), epochs=3
    )
    assert study.caps["affine_like"] == pytest.approx(2.0, rel=1e-12)
    assert study.caps["none"] == pytest.approx(
        2 / float((x.square().sum(1) + 1).max()), rel=1e-12
    )
    assert study.caps["none"] < 1.0  # the shared rate is above the plain layer's cap
    assert len(study.curves["none"]) == 3 * 12 + 1 and study.epochs == 3
    assert torch.isinf(study.curves["none"][-1])
    assert torch.isfinite(study.curves["affine_like"]).all()
    assert study.final["affine_like"].shape == (2,)


def test_on_the_digits_the_plain_layer_blows_up_where_affine_like_trains() -> None:
    """Chapter 1's toy: the heaviest digit caps the plain layer's rate, not the corrected."""
    from normlab import data

    digits = data.load("digits", "train")
    x = digits.x[:32].flatten(1).double()
    y = F.one_hot(digits.y[:32], 10).double()
    study = least_squares_study(x, y, shared_lr=0.5, lrs=(0.05, 0.5, 1.0), epochs=3)
    assert study.caps["none"] < 0.1 < study.shared_lr < study.caps["affine_like"]
    assert torch.isinf(study.curves["none"][-1])
    assert study.curves["affine_like"][-1] < study.curves["affine_like"][0]
    assert torch.isfinite(study.final["none"][0]) and torch.isinf(
        study.final["none"][1]
    )
    assert torch.isfinite(study.final["affine_like"]).all()
