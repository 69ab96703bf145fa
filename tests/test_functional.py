"""``normlab.functional``: each function is its layer's forward, bit for bit, with exact
float64 gradients."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from normlab import functional as NF
from normlab.layers import (
    AffineLikeLinear,
    DyT,
    L2Norm,
    NormLikeLinear,
    PatchNormConv2d,
)
from torch import Tensor, nn

F64 = torch.float64


def _randomise(module: nn.Module) -> nn.Module:
    """Random parameters, so that no identity initialisation hides a difference."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


# (layer, the same computation through normlab.functional, input shape)
Pair = tuple[nn.Module, Callable[[nn.Module, Tensor], Tensor], tuple[int, ...]]


def _pairs(dtype: torch.dtype) -> dict[str, Pair]:
    conv = dict(stride=2, padding=1, dilation=1)
    return {
        "affine_like": (
            AffineLikeLinear(7, 5, dtype=dtype),
            lambda m, x: NF.affine_like_linear(x, m.weight, m.bias),
            (3, 4, 7),
        ),
        "affine_like_no_bias": (
            AffineLikeLinear(7, 5, bias=False, dtype=dtype),
            lambda m, x: NF.affine_like_linear(x, m.weight),
            (3, 7),
        ),
        "norm_like": (
            NormLikeLinear(7, 5, eps=1e-3, dtype=dtype),
            lambda m, x: NF.norm_like_linear(x, m.weight, m.bias, eps=1e-3),
            (3, 4, 7),
        ),
        "norm_like_no_bias": (
            NormLikeLinear(7, 5, bias=False, dtype=dtype),
            lambda m, x: NF.norm_like_linear(x, m.weight),
            (3, 7),
        ),
        "l2": (
            L2Norm(dim=(1, 2)),
            lambda m, x: NF.l2_normalize(x, (1, 2)),
            (3, 4, 5),
        ),
        "patch_affine": (
            PatchNormConv2d(2, 3, 3, **conv, dtype=dtype),
            lambda m, x: NF.patch_norm_conv2d(x, m.weight, m.bias, **conv),
            (2, 2, 5, 5),
        ),
        "patch_norm": (
            PatchNormConv2d(2, 3, 3, **conv, mode="norm_like", dtype=dtype),
            lambda m, x: NF.patch_norm_conv2d(
                x, m.weight, m.bias, **conv, mode="norm_like"
            ),
            (2, 2, 5, 5),
        ),
        "dyt": (
            DyT((3, 4), dtype=dtype),
            lambda m, x: NF.dyt(x, m.alpha, m.weight, m.bias),
            (2, 5, 3, 4),
        ),
        "dyt_no_bias": (
            DyT(4, bias=False, dtype=dtype),
            lambda m, x: NF.dyt(x, m.alpha, m.weight),
            (2, 5, 4),
        ),
        "dyt_no_affine": (
            DyT(4, elementwise_affine=False, dtype=dtype),
            lambda m, x: NF.dyt(x, m.alpha),
            (2, 5, 4),
        ),
    }


NAMES = list(_pairs(torch.float32))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("name", NAMES)
def test_each_function_is_its_layer_bit_for_bit(name: str, scale: float) -> None:
    torch.manual_seed(0)
    layer, fn, shape = _pairs(torch.float32)[name]
    _randomise(layer)
    x = torch.randn(shape) * scale
    assert torch.equal(fn(layer, x), layer(x))


@pytest.mark.parametrize("name", NAMES)
def test_each_function_gradchecks_in_float64(name: str) -> None:
    torch.manual_seed(2)
    layer, fn, shape = _pairs(F64)[name]
    _randomise(layer)
    names = [n for n, _ in layer.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in layer.parameters()]
    x = (torch.randn(shape, dtype=F64) + 0.3).requires_grad_()

    def through_function(inp: Tensor, *values: Tensor) -> Tensor:
        return fn(_View(dict(zip(names, values, strict=True))), inp)

    assert torch.autograd.gradcheck(through_function, (x, *params))


class _View:
    """Stands in for a layer in the pairs above: its attributes are the given tensors, so
    that gradcheck differentiates the function with respect to each parameter."""

    def __init__(self, values: dict[str, Tensor]) -> None:
        self.__dict__.update(values)


def test_reflect_padding_is_the_layers_own() -> None:
    """Other padding modes pad first, then convolve with no padding, as ``nn.Conv2d`` does."""
    torch.manual_seed(3)
    layer = _randomise(PatchNormConv2d(2, 3, 3, padding=1, padding_mode="reflect"))
    x = torch.randn(2, 2, 6, 6)
    padded = torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect")
    assert torch.equal(layer(x), NF.patch_norm_conv2d(padded, layer.weight, layer.bias))


def test_dyt_without_its_affine_is_tanh() -> None:
    x, alpha = torch.randn(4, 6), torch.tensor(0.7)
    assert torch.equal(NF.dyt(x, alpha), torch.tanh(alpha * x))
    bias = torch.randn(6)
    assert torch.equal(NF.dyt(x, alpha, bias=bias), torch.tanh(alpha * x) + bias)


def test_patch_norm_refuses_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="affine_like"):
        NF.patch_norm_conv2d(torch.randn(1, 1, 3, 3), torch.randn(1, 1, 3, 3), mode="x")


# ------------------------------------------ the fast paths are autograd's formulas, bit for bit

_BITS = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.float16: torch.int16,
}


def _same_bits(a: Tensor, b: Tensor) -> bool:
    return torch.equal(a.view(_BITS[a.dtype]), b.view(_BITS[b.dtype]))


def _rows(dtype: torch.dtype) -> Tensor:
    """Samples at many scales, a blank one and, but in float16 (whose norms accumulate in
    float32), one whose squares underflow, so that its norm is 0."""
    torch.manual_seed(3)
    x = torch.randn(8, 37, dtype=torch.float64) * torch.logspace(-3, 3, 8)[:, None]
    x[2] = 0.0
    x[5] = 0.0
    tiny = {torch.float32: 1e-30, torch.float64: 1e-170, torch.float16: 1e-7}[dtype]
    x[5, :3] = torch.tensor([tiny, -tiny, tiny / 10])
    return x.to(dtype)


def _value_and_grad(fn: Callable[[Tensor], Tensor], x: Tensor) -> tuple[Tensor, Tensor]:
    x = x.clone().requires_grad_()
    out = fn(x)
    upstream = torch.linspace(-2.0, 3.0, out.numel(), dtype=out.dtype).view(out.shape)
    return out.detach(), torch.autograd.grad(out, x, upstream)[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_the_squared_norms_have_autograds_gradients_bit_for_bit(
    dtype: torch.dtype,
) -> None:
    """The custom backward passes (fewer passes over the input) return exactly what autograd
    returns for the plain expressions, zero-norm rows included."""
    x = _rows(dtype)
    pairs = [
        (
            lambda v: NF._SquaredNorm.apply(v)[0],
            lambda v: torch.linalg.vector_norm(v, dim=-1, keepdim=True).square(),
        ),
        (
            lambda v: NF._SumOfSquares.apply(v, -1),
            lambda v: v.square().sum(-1, keepdim=True),
        ),
        (
            lambda v: NF._SumOfSquares.apply(v.view(2, 4, 37), (1, 2)),
            lambda v: v.view(2, 4, 37).square().sum((1, 2), keepdim=True),
        ),
    ]
    for fast, plain in pairs:
        for got, want in zip(_value_and_grad(fast, x), _value_and_grad(plain, x)):
            assert _same_bits(got, want)
    if dtype != torch.float16:  # the norm-0 row passes back zeros
        assert (_value_and_grad(pairs[0][0], x)[1][5] == 0).all()


def test_the_scale_is_the_largest_magnitudes_power_of_two() -> None:
    """``power_of_two_scale`` reads the largest magnitude as max(max x, -min x): the same
    number as ``vector_norm(x, inf)``, so the same scale."""
    x = _rows(torch.float32)
    x[0, 4] = -7.5e3  # a negative entry is the largest
    largest = torch.linalg.vector_norm(x, float("inf"), -1, keepdim=True).clamp_min(1.0)
    scale = NF.power_of_two_scale(x, -1, 1.0)
    assert torch.equal(torch.frexp(scale)[0], torch.full_like(scale, 0.5))
    assert (scale > largest).all() and (scale <= 2 * largest).all()
    assert scale[0].item() == 8192.0
