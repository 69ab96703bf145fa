"""The functional forms of the layers in :mod:`normlab.layers`, as ``torch.nn.functional``
is to ``torch.nn``.

Each layer's ``forward`` checks its input and calls its function here with its parameters,
so a layer and its function are one implementation: ``AffineLikeLinear(...)(x)`` is
``affine_like_linear(x, layer.weight, layer.bias)`` bit for bit.

The norms are taken at a power-of-two scale (:func:`power_of_two_scale`), so that they stay
finite for any finite input, float16 at 60000 and float32 near its largest value included.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import one_of, positive_number

__all__ = [
    "Dims",
    "Pair",
    "PATCHNORM_MODES",
    "PATCHNORM_FLOOR",
    "affine_like_linear",
    "norm_like_linear",
    "l2_normalize",
    "patch_norm_conv2d",
    "patch_sq_norm",
    "dyt",
    "power_of_two_scale",
]

PATCHNORM_MODES: tuple[str, ...] = ("affine_like", "norm_like")
# PatchNorm's norm-mode floor: 1, the norm of the constant input behind the bias, so that
# P / max(|P|, 1) is 1-Lipschitz like affine mode's P / sqrt(|P|^2 + 1) and a blank patch
# passes back W^T g, a plain convolution's gradient, not W^T g / eps (chapter 8)
PATCHNORM_FLOOR = 1.0

Dims = int | tuple[int, ...]
Pair = int | tuple[int, int]


def power_of_two_scale(x: Tensor, dim: Dims, floor: float) -> Tensor:
    """A power of two above each sample's largest magnitude over ``dim`` (and above
    ``floor``), kept dims, detached; in the top binade of ``x``'s dtype (float16 from 32768,
    float32 and bfloat16 from 2**127), where the next power of two is not finite, the power
    of two at or below it.

    Dividing by it before squaring keeps a norm's square finite for any finite input (float32
    near 1e38, float16 at std 10 over 784 features, or at 60000), the way LAPACK's ``nrm2``
    scales. A power of two changes no rounding, so a result computed on ``x / scale`` and
    rescaled equals the unscaled one bit for bit wherever that one neither overflows nor
    underflows; and a norm does not depend on the scale it is taken at, so the scale needs no
    gradient. Callers compute on ``x / scale`` throughout (the product with a weight too),
    never ``x`` times a factor divided by ``scale``: that factor would be subnormal, and so
    imprecise, for inputs near the dtype's largest value.
    """
    # the largest magnitude as max(max x, -min x): the same number as vector_norm(x, inf),
    # which on the CPU is a slow generic reduction (1.2 ms against 0.07 ms at 256 x 1024)
    x = x.detach()
    largest = torch.maximum(x.amax(dim, keepdim=True), x.amin(dim, keepdim=True).neg())
    largest = largest.clamp_min(floor)
    # largest = mantissa * 2**e with mantissa in [0.5, 1): half = 2**(e - 1) is always
    # finite, 2**e = largest / mantissa is not in the top binade (it would make x / scale 0)
    mantissa, _ = torch.frexp(largest)
    half = largest / (2 * mantissa)
    return torch.where(half <= torch.finfo(x.dtype).max / 2, half * 2, half)


class _SquaredNorm(torch.autograd.Function):
    """``vector_norm(x, dim=-1, keepdim=True).square()`` with the gradient autograd gives it
    (``pow``'s backward, then ``linalg_vector_norm``'s, operation for operation, so bit for
    bit for every finite ``x``) in fewer passes: the zero-norm rows cleared by
    ``nan_to_num_`` instead of a broadcast ``masked_fill_`` (five times slower on the CPU),
    the last product in place. For finite ``x`` the two agree: ``x / norm`` is finite where
    the norm is not zero and never finite where it is (``x / 0`` is infinite or NaN)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        return norm.square(), norm

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:  # type: ignore[override]
        ctx.save_for_backward(inputs[0], output[1])
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, grad: Tensor, _: Tensor) -> Tensor:  # type: ignore[override]
        x, norm = ctx.saved_tensors
        grad_norm = grad * (2.0 * norm)  # pow's backward: grad * (2 * norm ** 1)
        # linalg_vector_norm's: grad * (x / norm).masked_fill_(norm == 0, 0)
        return (x / norm).nan_to_num_(0.0, 0.0, 0.0).mul_(grad_norm)


class _SumOfSquares(torch.autograd.Function):
    """``x.square().sum(dim, keepdim=True)`` with the gradient autograd gives it (``sum``'s
    expand, then ``pow``'s ``grad * (2 * x ** 1)``, bit for bit), without the copy that
    ``x ** 1`` makes, the product in place."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, dim: Dims) -> Tensor:  # type: ignore[override]
        return x.square().sum(dim, keepdim=True)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:  # type: ignore[override]
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return (2.0 * x).mul_(grad), None


def _norm_floor(eps: float, dtype: torch.dtype) -> float:
    """``eps``, raised to the dtype's smallest normal number where it would underflow."""
    return max(eps, torch.finfo(dtype).tiny)


def _scaled_inverse_norm(x: Tensor, dim: Dims, eps: float) -> tuple[Tensor, Tensor]:
    """``(x / scale, 1 / max(|x / scale|, eps / scale))`` over ``dim`` (kept), ``scale`` a
    power of two: their product is ``x / max(|x|, eps)``, finite with a finite gradient for
    any finite ``x``, zero included. The two factors are returned apart because ``1 / |x|``
    itself is subnormal, or zero, for ``x`` near the dtype's largest value."""
    floor = _norm_floor(eps, x.dtype)
    scale = power_of_two_scale(x, dim, floor)
    scaled = x / scale
    sq_norm = _SumOfSquares.apply(scaled, dim)
    return scaled, torch.rsqrt(sq_norm.clamp_min((floor / scale).square()))


def _inverse_homogeneous(sq_norm: Tensor, scale: Tensor) -> Tensor:
    """``scale / sqrt(|x|^2 + 1)`` from ``sq_norm`` = ``|x / scale|^2`` (``scale >= 1``): the
    factor for a product taken of ``x / scale``."""
    return torch.rsqrt(sq_norm + scale.reciprocal().square())


def _scaled_linear(
    scaled: Tensor, weight: Tensor, bias: Tensor | None, scale: Tensor
) -> Tensor:
    """``F.linear(x, weight, bias) / scale`` from ``scaled = x / scale`` (``scale`` per sample,
    ``(*, 1)``), finite wherever the result is. The bias is divided per sample and added in
    one ``addmm``, the call ``F.linear`` makes, so the rounding is that of ``F.linear(x, ...)``
    (a separate addition would round once more)."""
    if bias is None:
        return F.linear(scaled, weight)
    flat = scaled.reshape(-1, scaled.shape[-1])
    out = torch.addmm((bias / scale).reshape(-1, bias.shape[0]), flat, weight.T)
    return out.reshape(*scaled.shape[:-1], weight.shape[0])


def affine_like_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    r""":math:`(W x + b) / \sqrt{\lVert x \rVert^2 + 1}`, the norm over the last dimension.

    See :class:`~normlab.layers.AffineLikeLinear`; ``weight`` is ``(out, in)``, ``bias``
    ``(out,)`` or None.
    """
    # everything at a power-of-two scale: W x overflows float16 at |x| ~ 1e4, and
    # 1 / sqrt(|x|^2 + 1) is subnormal for float32 near its largest value
    scale = power_of_two_scale(x, -1, 1.0)
    scaled = x / scale
    sq_norm, _ = _SquaredNorm.apply(scaled)
    z = _scaled_linear(scaled, weight, bias, scale)
    return z * _inverse_homogeneous(sq_norm, scale)


def norm_like_linear(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, eps: float = 1e-12
) -> Tensor:
    r""":math:`W x / \max(\lVert x \rVert, \epsilon) + b`, the norm over the last dimension.

    See :class:`~normlab.layers.NormLikeLinear`.
    """
    scaled, inv_norm = _scaled_inverse_norm(x, -1, eps)
    z = F.linear(scaled, weight)
    if bias is None:
        return z * inv_norm
    return torch.addcmul(bias, z, inv_norm)


def l2_normalize(x: Tensor, dim: Dims = -1, eps: float = 1e-12) -> Tensor:
    r""":math:`x / \max(\lVert x \rVert, \epsilon)`, the norm over ``dim``.

    See :class:`~normlab.layers.L2Norm`.
    """
    scaled, inv_norm = _scaled_inverse_norm(x, dim, eps)
    return scaled * inv_norm


def patch_sq_norm(
    x: Tensor,
    kernel_size: Pair,
    stride: Pair = 1,
    padding: Pair | str = 0,
    dilation: Pair = 1,
) -> Tensor:
    r""":math:`\lVert P_p \rVert^2` at every output position of a convolution of ``x``
    ``(N, C, H, W)`` with zero padding: ``(N, 1, H_out, W_out)``.

    The channel sum of squares, convolved with a ones kernel at the convolution's stride,
    padding and dilation: one extra single-channel convolution, the input never unfolded.
    """
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    ones = torch.ones(1, 1, kh, kw, device=x.device, dtype=x.dtype)
    return F.conv2d(_SumOfSquares.apply(x, 1), ones, None, stride, padding, dilation)


def patch_norm_conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Pair = 1,
    padding: Pair | str = 0,
    dilation: Pair = 1,
    *,
    mode: str = "affine_like",
    eps: float = PATCHNORM_FLOOR,
) -> Tensor:
    r"""A convolution of ``x`` ``(N, C_in, H, W)`` with every patch :math:`P_p` corrected:
    :math:`(W * P_p + b) / \sqrt{\lVert P_p \rVert^2 + 1}` (``mode="affine_like"``) or
    :math:`(W * P_p) / \max(\lVert P_p \rVert, \epsilon) + b` (``"norm_like"``, ``eps``
    the floor, a positive finite number).

    Zero padding, as :func:`torch.nn.functional.conv2d`; see
    :class:`~normlab.layers.PatchNormConv2d`.
    """
    one_of("mode", mode, PATCHNORM_MODES)
    positive_number("eps", eps)
    geometry = (stride, padding, dilation)
    # each image at a power-of-two scale: its convolution and its patch norms stay finite
    floor = 1.0 if mode == "affine_like" else _norm_floor(eps, x.dtype)
    scale = power_of_two_scale(x, (1, 2, 3), floor)
    scaled = x / scale
    sq_norm = patch_sq_norm(scaled, weight.shape[-2:], *geometry)
    out = F.conv2d(scaled, weight, None, *geometry)
    if mode == "affine_like":
        if bias is not None:  # (W x + b) / scale, as the bias is added after the sum
            # in place: the convolution's backward does not read its output
            out = out.add_(bias.view(1, -1, 1, 1) / scale)
        return out * _inverse_homogeneous(sq_norm, scale)
    out = out * torch.rsqrt(sq_norm.clamp_min((floor / scale).square()))
    # in place: the product's backward reads its factors, not the product
    return out if bias is None else out.add_(bias.view(1, -1, 1, 1))


def dyt(
    x: Tensor, alpha: Tensor, weight: Tensor | None = None, bias: Tensor | None = None
) -> Tensor:
    r""":math:`\gamma \odot \tanh(\alpha x) + \beta`, without :math:`\gamma` (``weight``) or
    :math:`\beta` (``bias``) where they are None. See :class:`~normlab.layers.DyT`."""
    y = torch.tanh(alpha * x)
    if weight is None:
        return y if bias is None else y + bias
    return y * weight if bias is None else torch.addcmul(bias, weight, y)
