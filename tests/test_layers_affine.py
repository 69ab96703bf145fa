"""Part I layers: formulas, drop-in behaviour, gradients, numerical safety and errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from normlab import functional as NF
from normlab.layers import (
    AffineLikeLinear,
    Gain,
    L2Norm,
    NormLikeLinear,
    PatchNormConv2d,
)
from torch import nn

F64 = torch.float64


def unfold_patches(x: torch.Tensor, conv: nn.Conv2d) -> torch.Tensor:
    """(N, L, C_in*kh*kw) patches of every output position; the test's independent reference."""
    cols = F.unfold(
        x,
        conv.kernel_size,
        dilation=conv.dilation,
        padding=conv.padding,
        stride=conv.stride,
    )
    return cols.transpose(1, 2)


def patchnorm_reference(layer: PatchNormConv2d, x: torch.Tensor) -> torch.Tensor:
    patches = unfold_patches(x, layer)  # (N, L, D)
    w = layer.weight.reshape(layer.out_channels, -1)  # (C_out, D)
    sq = patches.square().sum(-1, keepdim=True)  # (N, L, 1)
    if layer.mode == "affine_like":
        out = (patches @ w.T + layer.bias) / torch.sqrt(sq + 1)
    else:
        out = (patches / torch.sqrt(sq).clamp_min(layer.eps)) @ w.T + layer.bias
    n = x.shape[0]
    h_out = (
        x.shape[2]
        + 2 * layer.padding[0]
        - layer.dilation[0] * (layer.kernel_size[0] - 1)
        - 1
    ) // layer.stride[0] + 1
    w_out = (
        x.shape[3]
        + 2 * layer.padding[1]
        - layer.dilation[1] * (layer.kernel_size[1] - 1)
        - 1
    ) // layer.stride[1] + 1
    return out.transpose(1, 2).reshape(n, layer.out_channels, h_out, w_out)


# ---------------------------------------------------------------- formulas


def test_affine_like_formula_with_leading_dims() -> None:
    torch.manual_seed(0)
    layer = AffineLikeLinear(5, 3, dtype=F64)
    x = torch.randn(2, 4, 5, dtype=F64) * 3
    expected = (x @ layer.weight.T + layer.bias) / torch.sqrt(
        (x * x).sum(-1, keepdim=True) + 1
    )
    assert layer(x).shape == (2, 4, 3)
    torch.testing.assert_close(layer(x), expected, rtol=1e-12, atol=1e-12)


def test_norm_like_formula_with_leading_dims() -> None:
    torch.manual_seed(1)
    layer = NormLikeLinear(6, 2, dtype=F64)
    x = torch.randn(3, 2, 6, dtype=F64) * 0.1
    expected = (x / x.norm(dim=-1, keepdim=True)) @ layer.weight.T + layer.bias
    torch.testing.assert_close(layer(x), expected, rtol=1e-12, atol=1e-12)
    no_bias = NormLikeLinear(6, 2, bias=False, dtype=F64)
    torch.testing.assert_close(
        no_bias(x), (x / x.norm(dim=-1, keepdim=True)) @ no_bias.weight.T
    )


def test_norm_like_is_scale_invariant_and_affine_like_is_not() -> None:
    torch.manual_seed(2)
    x = torch.randn(4, 8, dtype=F64)
    norm_like, affine_like = (
        NormLikeLinear(8, 3, dtype=F64),
        AffineLikeLinear(8, 3, dtype=F64),
    )
    torch.testing.assert_close(norm_like(7.0 * x), norm_like(x))
    assert not torch.allclose(affine_like(7.0 * x), affine_like(x))


def test_affine_like_is_l2_normalised_homogeneous_input() -> None:
    torch.manual_seed(3)
    layer = AffineLikeLinear(5, 4, dtype=F64)
    x = torch.randn(6, 5, dtype=F64) * 2
    homogeneous = torch.cat([x, torch.ones(6, 1, dtype=F64)], dim=1)
    w_b = torch.cat([layer.weight, layer.bias[:, None]], dim=1)
    torch.testing.assert_close(
        layer(x), L2Norm()(homogeneous) @ w_b.T, rtol=1e-12, atol=1e-12
    )


def test_l2norm_over_several_dims_and_rmsnorm_relation() -> None:
    torch.manual_seed(4)
    x = torch.randn(3, 2, 4, 4, dtype=F64)
    y = L2Norm(dim=(1, 2, 3))(x)
    torch.testing.assert_close(y.flatten(1).norm(dim=1), torch.ones(3, dtype=F64))
    v = torch.randn(5, 16, dtype=F64)
    rms = nn.RMSNorm(16, eps=0.0, elementwise_affine=False, dtype=F64)
    torch.testing.assert_close(rms(v), math.sqrt(16) * L2Norm()(v))


def test_gain_scales_each_feature() -> None:
    gain = Gain(3, init=2.0, dtype=F64)
    x = torch.randn(4, 3, dtype=F64)
    torch.testing.assert_close(gain(x), 2.0 * x)
    assert "init=2.0" in repr(gain)


@pytest.mark.parametrize("mode", ["affine_like", "norm_like"])
@pytest.mark.parametrize(
    "stride,padding,dilation", [(1, 0, 1), (1, 1, 1), (2, 1, 1), (1, 2, 2), (2, 0, 2)]
)
def test_patchnorm_matches_unfold_reference(
    mode: str, stride: int, padding: int, dilation: int
) -> None:
    torch.manual_seed(5)
    layer = PatchNormConv2d(
        3, 4, 3, stride=stride, padding=padding, dilation=dilation, mode=mode, dtype=F64
    )
    x = torch.randn(2, 3, 9, 8, dtype=F64)
    torch.testing.assert_close(
        layer(x), patchnorm_reference(layer, x), rtol=1e-11, atol=1e-12
    )


def test_patchnorm_rectangular_kernel_and_unbatched_input() -> None:
    torch.manual_seed(6)
    layer = PatchNormConv2d(2, 3, (3, 2), stride=(1, 2), padding=(1, 0), dtype=F64)
    x = torch.randn(2, 7, 6, dtype=F64)
    out = layer(x)
    assert out.shape == (3, 7, 3)
    torch.testing.assert_close(
        out, patchnorm_reference(layer, x[None])[0], rtol=1e-11, atol=1e-12
    )


# ---------------------------------------------------------------- drop-in


def test_linear_layers_initialise_like_nn_linear() -> None:
    for cls in (AffineLikeLinear, NormLikeLinear):
        torch.manual_seed(7)
        ours = cls(20, 10)
        torch.manual_seed(7)
        ref = nn.Linear(20, 10)
        assert torch.equal(ours.weight, ref.weight) and torch.equal(ours.bias, ref.bias)
        ref.load_state_dict(ours.state_dict())  # same parameter names and shapes
        assert cls(4, 2, bias=False).bias is None


def test_patchnorm_initialises_like_nn_conv2d() -> None:
    torch.manual_seed(8)
    ours = PatchNormConv2d(3, 5, 3, padding=1)
    torch.manual_seed(8)
    ref = nn.Conv2d(3, 5, 3, padding=1)
    assert torch.equal(ours.weight, ref.weight) and torch.equal(ours.bias, ref.bias)
    assert set(ours.state_dict()) == set(ref.state_dict())
    assert "mode='affine_like', eps=1.0" in repr(ours)


def test_patchnorm_takes_nn_conv2d_positional_order() -> None:
    # in, out, kernel, stride, padding, dilation, groups, bias, padding_mode
    args = (3, 4, 3, 2, 1, 1, 1, False, "reflect")
    ours, ref = PatchNormConv2d(*args), nn.Conv2d(*args)
    for name in (
        "in_channels",
        "out_channels",
        "kernel_size",
        "stride",
        "padding",
        "dilation",
        "groups",
        "padding_mode",
    ):
        assert getattr(ours, name) == getattr(ref, name), name
    assert ours.bias is None and ours.mode == "affine_like"
    assert repr(ours) == (
        f"PatchNormConv2d({ref.extra_repr()}, mode='affine_like', eps=1.0)"
    )
    with pytest.raises(TypeError):
        PatchNormConv2d(*args, None, None, "norm_like")  # mode is keyword-only
    assert PatchNormConv2d(3, 4, 3, mode="norm_like", eps=1e-6).eps == 1e-6


def test_extra_repr_names_the_settings() -> None:
    assert "in_features=4" in repr(AffineLikeLinear(4, 2))
    assert "eps=1e-12" in repr(NormLikeLinear(4, 2))
    assert "dim=(1, 2)" in repr(L2Norm(dim=(1, 2)))


# ---------------------------------------------------------------- gradients


def _generic_linear_input() -> torch.Tensor:
    torch.manual_seed(9)
    return (torch.randn(3, 5, dtype=F64) + 0.5).requires_grad_()


@pytest.mark.parametrize("cls", [AffineLikeLinear, NormLikeLinear])
def test_linear_layers_gradcheck(cls: type) -> None:
    layer = cls(5, 3, dtype=F64)
    x = _generic_linear_input()
    w = layer.weight.detach().clone().requires_grad_()
    b = layer.bias.detach().clone().requires_grad_()

    def fn(inp, weight, bias):
        return torch.func.functional_call(
            layer, {"weight": weight, "bias": bias}, (inp,)
        )

    assert torch.autograd.gradcheck(fn, (x, w, b))


def test_l2norm_and_gain_gradcheck() -> None:
    x = _generic_linear_input()
    assert torch.autograd.gradcheck(L2Norm(), (x,))
    x4 = torch.randn(2, 2, 3, 3, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(L2Norm(dim=(1, 2, 3)), (x4,))
    gain = Gain(5, init=1.5, dtype=F64)
    assert torch.autograd.gradcheck(gain, (x,))


@pytest.mark.parametrize("mode", ["affine_like", "norm_like"])
def test_patchnorm_gradcheck(mode: str) -> None:
    torch.manual_seed(10)
    layer = PatchNormConv2d(
        2, 2, 3, stride=2, padding=1, dilation=1, mode=mode, dtype=F64
    )
    x = (torch.randn(1, 2, 5, 5, dtype=F64) + 0.3).requires_grad_()
    w = layer.weight.detach().clone().requires_grad_()
    b = layer.bias.detach().clone().requires_grad_()

    def fn(inp, weight, bias):
        return torch.func.functional_call(
            layer, {"weight": weight, "bias": bias}, (inp,)
        )

    assert torch.autograd.gradcheck(fn, (x, w, b))


@pytest.mark.parametrize("eps", [1.0, 0.1])
def test_patchnorm_gradcheck_around_the_floor(eps: float) -> None:
    """Norm mode on patches below the floor (mapped linearly) and above it (normalised),
    the functional twin with its ``eps`` included."""
    torch.manual_seed(12)
    layer = PatchNormConv2d(2, 3, 2, stride=2, mode="norm_like", eps=eps, dtype=F64)
    x = torch.randn(1, 2, 6, 6, dtype=F64)
    x[..., :2, :] *= 0.2 * eps  # the top row of tiles: patch norms well below the floor
    x[..., 2:4, :2] = 0.0  # one blank tile
    norms = _tile_norms(x, 2)
    assert (norms < 0.9 * eps).any() and (norms > 1.1 * eps).any()
    assert not ((norms - eps).abs() < 1e-3).any()  # finite differences avoid the kink
    w = layer.weight.detach().clone().requires_grad_()
    b = layer.bias.detach().clone().requires_grad_()

    def fn(inp, weight, bias):
        return NF.patch_norm_conv2d(
            inp, weight, bias, stride=2, mode="norm_like", eps=eps
        )

    inputs = (x.requires_grad_(), w, b)
    assert torch.autograd.gradcheck(fn, inputs)
    torch.testing.assert_close(fn(*inputs), layer(x), rtol=0, atol=0)


def _tile_norms(x: torch.Tensor, k: int) -> torch.Tensor:
    """The norms of the disjoint k x k tiles of ``x`` (the patches at stride k), (N, L)."""
    return F.unfold(x, k, stride=k).norm(dim=1)


@pytest.mark.parametrize("eps", [1e-12, 1e-3, 0.1, 1.0])
def test_patchnorm_gradient_at_a_blank_patch_is_bounded_by_the_floor(
    eps: float,
) -> None:
    """The docstring's formula: below the floor dL/dP_p = W^T g_p / eps exactly, and
    |dL/dP_p| <= |W|_2 |g_p| / eps everywhere. Disjoint tiles (stride = kernel) make each
    input pixel belong to one patch, so the input gradient of a tile is dL/dP_p."""
    torch.manual_seed(13)
    k, c_in, c_out = 2, 3, 4
    layer = PatchNormConv2d(c_in, c_out, k, stride=k, mode="norm_like", eps=eps)
    layer = layer.double()
    x = torch.randn(2, c_in, 8, 8, dtype=F64)
    x[:, :, :4, :4] = 0.0  # blank tiles
    x[:, :, 4:, :4] *= 1e-3 * eps  # tiles far below the floor, not blank
    x.requires_grad_()
    out = layer(x)
    g = torch.randn_like(out)
    (grad,) = torch.autograd.grad((out * g).sum(), x)
    grad_p = F.unfold(grad, k, stride=k).transpose(1, 2)  # (N, L, C_in k k)
    g_p = g.flatten(2).transpose(1, 2)  # (N, L, C_out)
    w = layer.weight.detach().flatten(1)  # (C_out, C_in k k)
    norms = _tile_norms(x.detach(), k)
    below = norms < eps
    assert below.sum() >= 16 and (~below).sum() >= 16
    torch.testing.assert_close(grad_p[below], g_p[below] @ w / eps, rtol=1e-12, atol=0)
    bound = torch.linalg.matrix_norm(w, 2) * g_p.norm(dim=-1) / eps
    assert (grad_p.norm(dim=-1) <= bound * (1 + 1e-12)).all()
    # the floor's whole effect: 1e-12 passes back 1e12 times a plain convolution's gradient
    blank = norms == 0
    assert blank.any()
    torch.testing.assert_close(
        grad_p[blank].norm(dim=-1),
        (g_p[blank] @ w).norm(dim=-1) / eps,
        rtol=1e-12,
        atol=0,
    )


def test_patchnorm_default_floor_passes_back_a_plain_convolutions_gradient() -> None:
    torch.manual_seed(14)
    layer = PatchNormConv2d(3, 5, 3, padding=1, mode="norm_like", dtype=F64)
    assert layer.eps == 1.0
    conv = nn.Conv2d(3, 5, 3, padding=1, dtype=F64)
    conv.load_state_dict(layer.state_dict())
    blank = torch.zeros(2, 3, 6, 6, dtype=F64, requires_grad=True)
    g = torch.randn(2, 5, 6, 6, dtype=F64)
    ours = torch.autograd.grad((layer(blank) * g).sum(), blank)[0]
    plain = torch.autograd.grad((conv(blank) * g).sum(), blank)[0]
    torch.testing.assert_close(ours, plain, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("eps", [0.0, -1.0, math.nan, math.inf, True, "1"])
def test_patchnorm_floor_is_validated(eps: object) -> None:
    with pytest.raises(ValueError, match="eps must be a positive finite number"):
        PatchNormConv2d(3, 4, 3, mode="norm_like", eps=eps)
    with pytest.raises(ValueError, match="eps must be a positive finite number"):
        NF.patch_norm_conv2d(
            torch.randn(1, 3, 5, 5), torch.randn(4, 3, 3, 3), mode="norm_like", eps=eps
        )
    with pytest.raises(TypeError):  # keyword-only, after mode
        PatchNormConv2d(
            3, 4, 3, 1, 0, 1, 1, True, "zeros", None, None, "norm_like", 1.0
        )


def _all_layers(dtype: torch.dtype) -> list[tuple[nn.Module, tuple[int, ...]]]:
    return [
        (AffineLikeLinear(16, 8, dtype=dtype), (4, 16)),
        (NormLikeLinear(16, 8, dtype=dtype), (4, 16)),
        (L2Norm(), (4, 16)),
        (L2Norm(dim=(1, 2, 3)), (2, 3, 6, 6)),
        (PatchNormConv2d(3, 4, 3, padding=1, dtype=dtype), (2, 3, 6, 6)),
        (
            PatchNormConv2d(3, 4, 3, padding=1, mode="norm_like", dtype=dtype),
            (2, 3, 6, 6),
        ),
    ]


@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_finite_gradients_at_zero(dtype: torch.dtype) -> None:
    for layer, shape in _all_layers(dtype):
        x = torch.zeros(shape, dtype=dtype, requires_grad=True)
        out = layer(x)
        out.sum().backward()
        assert torch.isfinite(out).all() and torch.isfinite(x.grad).all(), layer
        for p in layer.parameters():
            assert torch.isfinite(p.grad).all(), layer


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scale", [0.0, 1e-8, 1e-4, 1.0, 1e3, 1e6])
def test_no_nan_or_inf_across_scales(dtype: torch.dtype, scale: float) -> None:
    torch.manual_seed(11)
    for layer, shape in _all_layers(dtype):
        x = (torch.randn(shape) * scale).to(dtype).requires_grad_()
        out = layer(x)
        out.float().square().mean().backward()
        assert torch.isfinite(out).all(), (layer, scale)
        assert torch.isfinite(x.grad).all(), (layer, scale)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "make",
    [
        lambda: AffineLikeLinear(0, 3),
        lambda: AffineLikeLinear(3, -1),
        lambda: NormLikeLinear(0, 3),
        lambda: NormLikeLinear(3, 2, eps=0.0),
        lambda: PatchNormConv2d(0, 3, 3),
        lambda: PatchNormConv2d(3, 3, 3, mode="batch"),
        lambda: PatchNormConv2d(4, 4, 3, groups=2),
        lambda: L2Norm(eps=-1.0),
        lambda: Gain(0),
    ],
)
def test_bad_constructor_arguments_raise(make) -> None:
    with pytest.raises(ValueError):
        make()


def test_unknown_mode_message_lists_the_modes() -> None:
    with pytest.raises(ValueError, match="mode="):
        PatchNormConv2d(3, 3, 3, mode="batch")


def test_wrong_input_shapes_raise() -> None:
    with pytest.raises(ValueError, match="in_features=4"):
        AffineLikeLinear(4, 2)(torch.randn(3, 5))
    with pytest.raises(ValueError, match="in_features=4"):
        NormLikeLinear(4, 2)(torch.tensor(1.0))
    with pytest.raises(ValueError, match="C_in=3"):
        PatchNormConv2d(3, 2, 3)(torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match="C_in=3"):
        PatchNormConv2d(3, 2, 3)(torch.randn(1, 2, 3, 5, 5))
    with pytest.raises(ValueError, match="dim"):
        L2Norm(dim=(1, 2))(torch.randn(3, 4))
    with pytest.raises(TypeError):
        L2Norm(dim="last")
    with pytest.raises(TypeError):
        AffineLikeLinear(4, 2)([1.0, 2.0, 3.0, 4.0])
