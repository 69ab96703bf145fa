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
