"""The layers that take a norm stay finite and correct at any input scale and in low precision.

Each layer in float32 (and in float16 and bfloat16 at input std 10, where a squared norm over
784 features overflows float16) is compared with a float64 reference written from the
formula: the norm is squared there, which float64 survives at every scale tested.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from normlab.layers import (
    AffineLikeLinear,
    L2Norm,
    NormLikeLinear,
    PatchNormConv2d,
    RMSNorm2d,
)
from torch import Tensor, nn

F64 = torch.float64
FEATURES = 784
SCALES = [1e-30, 1e-20, 1e-10, 1.0, 1e10, 1e20, 1e30]
# A floor far below the smallest norm tested, so that the sweep measures the norm itself.
EPS = 1e-36


def _sq_norm(x: Tensor, dim: int | tuple[int, ...] = -1) -> Tensor:
    return x.square().sum(dim, keepdim=True)


def _affine_like_ref(layer: nn.Module, x: Tensor) -> Tensor:
    w, b = layer.weight.double(), layer.bias.double()
    return (x @ w.T + b) / torch.sqrt(_sq_norm(x) + 1)


def _norm_like_ref(layer: nn.Module, x: Tensor) -> Tensor:
    w, b = layer.weight.double(), layer.bias.double()
    return x @ w.T / torch.sqrt(_sq_norm(x)).clamp_min(layer.eps) + b


def _l2_ref(layer: nn.Module, x: Tensor) -> Tensor:
    return x / torch.sqrt(_sq_norm(x)).clamp_min(layer.eps)


def _patch_ref(layer: PatchNormConv2d, x: Tensor) -> Tensor:
    patches = F.unfold(x, layer.kernel_size, padding=layer.padding).transpose(1, 2)
    w = layer.weight.double().reshape(layer.out_channels, -1)
    sq = _sq_norm(patches)
    if layer.mode == "affine_like":
        out = (patches @ w.T + layer.bias.double()) / torch.sqrt(sq + 1)
    else:
        out = patches @ w.T / torch.sqrt(sq).clamp_min(layer.eps) + layer.bias.double()
    side = x.shape[-1] - layer.kernel_size[0] + 1 + 2 * layer.padding[0]
    return out.transpose(1, 2).reshape(x.shape[0], layer.out_channels, side, side)


def _rms2d_ref(layer: RMSNorm2d, x: Tensor) -> Tensor:
    ms = x.square().mean(dim=(1, 2, 3), keepdim=True)
    return x / torch.sqrt(ms + layer.eps) * layer.weight.double().view(1, -1, 1, 1)


Case = tuple[str, Callable[[], nn.Module], tuple[int, ...], Callable[..., Tensor]]
CASES: list[Case] = [
    (
        "affine_like",
        lambda: AffineLikeLinear(FEATURES, 10),
        (4, FEATURES),
        _affine_like_ref,
    ),
    (
        "norm_like",
        lambda: NormLikeLinear(FEATURES, 10, eps=EPS),
        (4, FEATURES),
        _norm_like_ref,
    ),
    ("l2", lambda: L2Norm(eps=EPS), (4, FEATURES), _l2_ref),
    (
        "patchnorm_affine",
        lambda: PatchNormConv2d(3, 4, 3, padding=1),
        (2, 3, 8, 8),
        _patch_ref,
    ),
    (
        "patchnorm_norm",
        lambda: PatchNormConv2d(3, 4, 3, padding=1, mode="norm_like", eps=EPS),
        (2, 3, 8, 8),
        _patch_ref,
    ),
    ("rmsnorm2d", lambda: RMSNorm2d(3), (2, 3, 8, 8), _rms2d_ref),
]
IDS = [case[0] for case in CASES]


def _compare(out: Tensor, ref: Tensor, rtol: float) -> None:
    """``out`` is finite and within ``rtol`` of ``ref``, relative to each sample's largest value."""
    assert torch.isfinite(out).all()
    err = (out.double() - ref).abs().flatten(1).amax(1)
    size = ref.abs().flatten(1).amax(1)
    assert (err <= rtol * size).all(), (err / size).max().item()


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize(("name", "make", "shape", "reference"), CASES, ids=IDS)
def test_float32_matches_float64_at_every_scale(
    name: str, make: Callable, shape: tuple, reference: Callable, scale: float
) -> None:
    torch.manual_seed(3)
    layer = make()
    x64 = torch.randn(shape, dtype=F64) * scale
    x = x64.float()
    _compare(layer(x), reference(layer, x.double()), rtol=1e-5)
    if (
        scale >= 1e-10
    ):  # below, a scale-invariant layer's gradient (~1 / |x|^2 inside) overflows
        x.requires_grad_(True)
        layer(x).square().sum().backward()
        assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize(
    ("dtype", "rtol"), [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)]
)
@pytest.mark.parametrize(("name", "make", "shape", "reference"), CASES, ids=IDS)
def test_half_precision_at_input_std_10(
    name: str,
    make: Callable,
    shape: tuple,
    reference: Callable,
    dtype: torch.dtype,
    rtol: float,
) -> None:
    torch.manual_seed(5)
    layer = make().to(dtype)
    x = (torch.randn(shape) * 10).to(dtype)
    ref = reference(layer, x.double())
    _compare(layer(x), ref, rtol=rtol)
    if dtype == torch.float16 and shape[-1] == FEATURES:
        # what made the fix necessary: the squared norm itself overflows float16
        assert math.isinf(float(_sq_norm(x.float()).max().to(dtype)))


def _plain_float32(name: str, layer: nn.Module, x: Tensor) -> Tensor:
    """The unscaled formula in the input's dtype: what the layers computed before scaling."""
    if name == "affine_like":
        sq = torch.linalg.vector_norm(x, dim=-1, keepdim=True).square()
        return F.linear(x, layer.weight, layer.bias) * torch.rsqrt(sq + 1)
    if name == "norm_like":
        inv = torch.rsqrt(_sq_norm(x).clamp_min(layer.eps**2))
        return torch.addcmul(layer.bias, F.linear(x, layer.weight), inv)
    if name == "l2":
        return x * torch.rsqrt(_sq_norm(x).clamp_min(layer.eps**2))
    if name == "rmsnorm2d":
        inv = torch.rsqrt(x.square().mean(dim=(1, 2, 3), keepdim=True) + layer.eps)
        return x * inv * layer.weight.view(1, -1, 1, 1)
    sq = layer.patch_sq_norm(x)
    if layer.mode == "affine_like":
        return layer._conv_forward(x, layer.weight, layer.bias) * torch.rsqrt(sq + 1)
    inv = torch.rsqrt(sq.clamp_min(layer.eps**2))
    return layer._conv_forward(x, layer.weight, None) * inv + layer.bias.view(
        1, -1, 1, 1
    )


@pytest.mark.parametrize("scale", [1e-3, 0.3, 1.0, 7.0, 1e3])
@pytest.mark.parametrize(("name", "make", "shape", "reference"), CASES, ids=IDS)
def test_ordinary_scales_are_bit_identical_to_the_plain_formula(
    name: str, make: Callable, shape: tuple, reference: Callable, scale: float
) -> None:
    """The scale is a power of two, which changes no rounding: results (and so the shipped
    result sets) are exactly those of the unscaled formula wherever it is finite."""
    torch.manual_seed(7)
    layer = make()
    x = torch.randn(shape) * scale
    assert torch.equal(layer(x), _plain_float32(name, layer, x))


@pytest.mark.parametrize(
    ("dtype", "largest", "rtol"),
    [
        (torch.float16, 4e4, 5e-3),  # float16's top binade: [32768, 65504]
        (torch.float32, 2e38, 1e-5),  # float32's and bfloat16's: [2**127, 3.4e38]
        (torch.bfloat16, 2e38, 3e-2),
    ],
    ids=["float16", "float32", "bfloat16"],
)
@pytest.mark.parametrize("spread", ["random", "constant"])
@pytest.mark.parametrize(("name", "make", "shape", "reference"), CASES, ids=IDS)
def test_inputs_in_the_dtypes_top_binade_stay_finite_and_correct(
    name: str,
    make: Callable,
    shape: tuple,
    reference: Callable,
    spread: str,
    dtype: torch.dtype,
    largest: float,
    rtol: float,
) -> None:
    """Each sample's largest magnitude in the top binade (the next power of two is not
    finite): the output is finite and within ``rtol`` of the float64 formula, as at
    ordinary scales (before, the scale overflowed and the output was NaN). ``constant``
    fills a sample with that value, so that ``W x`` itself would overflow float16."""
    torch.manual_seed(11)
    layer = make().to(dtype)
    x = (
        torch.randn(shape, dtype=F64)
        if spread == "random"
        else torch.ones(shape, dtype=F64)
    )
    x = (x / x.abs().flatten(1).amax(1).view(-1, *[1] * (x.dim() - 1)) * largest).to(
        dtype
    )
    assert largest > torch.finfo(dtype).max / 2  # the power of two above is not finite
    _compare(layer(x), reference(layer, x.double()), rtol=rtol)
