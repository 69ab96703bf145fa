"""What the functions share: input checks, norms at a power-of-two scale, and the
helpers of the hand-written backward passes."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "Dims",
    "Pair",
    "PATCHNORM_MODES",
    "PATCHNORM_FLOOR",
    "power_of_two_scale",
]

PATCHNORM_MODES: tuple[str, ...] = ("affine_like", "norm_like")
# PatchNorm's norm-mode floor: 1, the norm of the constant input behind the bias, so that
# P / max(|P|, 1) is 1-Lipschitz like affine mode's P / sqrt(|P|^2 + 1) and a blank patch
# passes back W^T g, a plain convolution's gradient, not W^T g / eps (chapter 8)
PATCHNORM_FLOOR = 1.0

Dims = int | tuple[int, ...]
Pair = int | tuple[int, int]


def _check_input(x: Tensor, shape: tuple[int, ...], min_extra_dims: int = 0) -> None:
    """Raise a clear error when ``x`` does not end with ``shape``."""
    if (
        x.dim() < len(shape) + min_extra_dims
        or tuple(x.shape[x.dim() - len(shape) :]) != shape
    ):
        lead = "(N, *tokens, " if min_extra_dims else "(*, "
        raise ValueError(
            f"input of shape {tuple(x.shape)} does not match normalized_shape {shape}; "
            f"expected {lead}{', '.join(map(str, shape))})"
        )


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
    largest = torch.maximum(x.amax(dim, keepdim=True), x.amin(dim, keepdim=True).neg_())
    largest = largest.clamp_min_(floor)
    # largest = mantissa * 2**e with mantissa in [0.5, 1): largest / mantissa is 2**e
    # exactly, or inf in the top binade, where the power of two at or below is taken (2**e
    # would make x / scale 0); NaN where largest is not finite
    mantissa, _ = torch.frexp(largest)
    return largest.div_(mantissa).clamp_max_(_top_power_of_two(x.dtype))


def _top_power_of_two(dtype: torch.dtype) -> float:
    """The largest finite power of two of ``dtype``: 2**127 in float32 and bfloat16, 2**15
    in float16, 2**1023 in float64."""
    return math.ldexp(1.0, math.frexp(torch.finfo(dtype).max)[1] - 1)


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


def _sum_to(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``t`` summed down to ``shape`` as autograd sums a broadcast operand's gradient
    (``at::sum_to``: the leading dimensions and those of size 1 in ``shape``, kept, then
    viewed), so that the sum is the same reduction, bit for bit."""
    lead = t.dim() - len(shape)
    dims = list(range(lead)) + [
        i for i in range(lead, t.dim()) if shape[i - lead] == 1 and t.shape[i] != 1
    ]
    if dims:
        t = t.sum(dims, keepdim=True)
    return t.view(shape) if lead > 0 else t


def _composite(x: Tensor) -> bool:
    """Whether to run the plain expressions under autograd rather than the hand-written
    backward passes below: under a ``torch.func`` transform (``jacrev``, ``vmap``), whose
    rules autograd's formulas have, and under autocast, which casts each operation of the
    plain expressions (its backward passes included) as its own lists say."""
    return torch._C._are_functorch_transforms_active() or torch.is_autocast_enabled(
        x.device.type
    )


def _flat(x: Tensor) -> Tensor:
    """``x`` as a contiguous ``(samples, features)`` matrix."""
    return x.reshape(-1, x.shape[-1]).contiguous()


def _spare(tmp: Tensor | None, full: Tensor, *others: Tensor) -> Tensor | None:
    """``tmp``, a temporary whose values are spent, where the element-wise result of
    ``full`` (of ``tmp``'s shape) and ``others`` (broadcast to it) can be written into it
    (``out=``) exactly as into a new tensor: the same shape and dtype (no resize, no cast),
    and contiguous, as the new one would be since each operand is contiguous or a broadcast
    scalar (so that a later reduction of it sums in the same order); else None (a new
    tensor). Shapes are compared by hand: ``torch.broadcast_shapes`` costs 0.3 ms."""
    if tmp is None or not tmp.is_contiguous() or full.shape != tmp.shape:
        return None
    for t in (full, *others):
        if t.dtype != tmp.dtype or not (t.is_contiguous() or not any(t.stride())):
            return None
        if t.dim() > tmp.dim() or any(
            n not in (1, m) for n, m in zip(reversed(t.shape), reversed(tmp.shape))
        ):
            return None
    return tmp


def _unless_held(tmp: Tensor, result: Tensor) -> Tensor | None:
    """``tmp``, unless ``result`` (a sum of it) is ``tmp`` itself or a view of it, as
    :func:`_sum_to` returns where there is nothing to sum."""
    held = result.untyped_storage().data_ptr() == tmp.untyped_storage().data_ptr()
    return None if held else tmp


def _row_sum(t: Tensor) -> Tensor:
    """``t.sum(-1, keepdim=True)``: at::sum_to's reduction of a row-broadcast operand's
    gradient (the same kernel, so the same bits)."""
    return t.sum(-1, keepdim=True)
