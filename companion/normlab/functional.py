"""The functional forms of the layers in :mod:`normlab.layers`, as ``torch.nn.functional``
is to ``torch.nn``.

Each layer's ``forward`` checks its input and calls its function here with its parameters,
so a layer and its function are one implementation: ``AffineLikeLinear(...)(x)`` is
``affine_like_linear(x, layer.weight, layer.bias)`` bit for bit.

The norms are taken at a power-of-two scale (:func:`power_of_two_scale`), so that they stay
finite for any finite input, float16 at 60000 and float32 near its largest value included.

The corrections and AutoNorm's mix have hand-written backward passes (one autograd node
each) that give autograd's gradients of the plain expressions bit for bit in fewer passes;
they are once differentiable (a second derivative raises). Under a ``torch.func`` transform
or autocast the plain expressions run instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

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
    "gain",
    "ada_norm",
    "film_norm",
    "rms_norm2d",
    "autonorm_mix",
    "TAU_MIN",
    "check_tau",
    "at_least_float32",
    "sample_gumbel",
    "gumbel_softmax",
    "norm_selector",
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


def _affine_like_terms(
    x: Tensor, weight: Tensor, bias: Tensor | None, inplace: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(scale, x / scale, |x / scale|, z, factor)`` of :func:`affine_like_linear` for a
    matrix ``x``, its output ``z * factor``. ``z`` is ``(W x + b) / scale``: the bias divided
    per sample and added in the one ``addmm`` that ``F.linear`` makes (a separate addition
    would round once more), in place of the divided bias when ``inplace``."""
    # everything at a power-of-two scale: W x overflows float16 at |x| ~ 1e4, and
    # 1 / sqrt(|x|^2 + 1) is subnormal for float32 near its largest value
    scale = power_of_two_scale(x, -1, 1.0)
    scaled = x / scale
    norm = torch.linalg.vector_norm(scaled, dim=-1, keepdim=True)
    if bias is None:
        z = scaled.mm(weight.t())
    elif inplace:
        z = torch.div(bias, scale).addmm_(scaled, weight.t())
    else:
        z = torch.addmm(torch.div(bias, scale), scaled, weight.t())
    return scale, scaled, norm, z, _inverse_homogeneous(norm.square(), scale)


class _AffineLikeLinear(torch.autograd.Function):
    """:func:`affine_like_linear` of a matrix with one backward node whose gradients are
    autograd's for the plain expressions, operation for operation (so bit for bit), in fewer
    passes and allocations: no copies for ``x ** 1`` or a broadcast ``masked_fill_``, the
    input's two gradient terms summed and divided by the scale in place."""

    @staticmethod
    def forward(ctx, x, weight, bias):  # type: ignore[override]
        scale, scaled, norm, z, factor = _affine_like_terms(x, weight, bias, True)
        ctx.save_for_backward(weight, scaled, norm, scale, z, factor)
        ctx.has_bias = bias is not None
        return z * factor

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        weight, scaled, norm, scale, z, factor = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        gz = g * factor
        gx = gw = gb = None
        if need_w:
            gw = gz.t().mm(scaled)
        # one full-size temporary, reused by each product that is only summed or added
        # (a fresh 1 MB tensor costs page faults, once the heap is trimmed, on top of its pass)
        tmp = None
        if need_b and ctx.has_bias:
            tmp = torch.div(gz, scale)
            gb = tmp.sum(0)  # at::sum_to's reduction, without its kept dimension
        if need_x:
            # rsqrt's backward, then vector_norm(.).square()'s: x / norm, read as 0 where
            # the norm is 0 (a blank sample, or one whose squares underflow)
            g_sq = (
                _row_sum(torch.mul(g, z, out=_spare(tmp, g, z)))
                .mul_(-0.5)
                .mul_(factor.pow(3))
            )
            safe = norm.masked_fill(norm == 0, float("inf"))
            g_norm = torch.div(scaled, safe, out=_spare(tmp, scaled, safe))
            g_norm = g_norm.mul_(g_sq.mul_(2.0 * norm))
            gx = gz.mm(weight).add_(g_norm).div_(scale)
        return gx, gw, gb


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


def affine_like_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    r""":math:`(W x + b) / \sqrt{\lVert x \rVert^2 + 1}`, the norm over the last dimension.

    See :class:`~normlab.layers.AffineLikeLinear`; ``weight`` is ``(out, in)``, ``bias``
    ``(out,)`` or None.
    """
    flat = _flat(x)
    if _composite(x):
        _, _, _, z, factor = _affine_like_terms(flat, weight, bias, False)
        out = z * factor
    else:
        out = _AffineLikeLinear.apply(flat, weight, bias)
    return out.view(*x.shape[:-1], weight.shape[0])


def _norm_like_terms(
    x: Tensor, weight: Tensor, eps: float
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(scale, x / scale, its squares, |x / scale|^2, its floor, W x / scale, factor)``
    of :func:`norm_like_linear` for a matrix ``x``: the output is ``(W x / scale) * factor``
    plus the bias."""
    floor = _norm_floor(eps, x.dtype)
    scale = power_of_two_scale(x, -1, floor)
    scaled = x / scale
    squares = scaled.square()
    sq_norm = squares.sum(-1, keepdim=True)
    lowest = (floor / scale).square()
    z = scaled.mm(weight.t())
    factor = torch.rsqrt(sq_norm.clamp_min(lowest))
    return scale, scaled, squares, sq_norm, lowest, z, factor


def _with_bias(
    z: Tensor, factor: Tensor, bias: Tensor | None, out: Tensor | None = None
) -> Tensor:
    """``z * factor + bias`` (``addcmul``), written into ``out`` where given."""
    if bias is None:
        return torch.mul(z, factor, out=out)
    return torch.addcmul(bias, z, factor, out=out)


def _clamp_min_backward(grad: Tensor, value: Tensor, lowest: Tensor) -> Tensor:
    """The gradient ``value.clamp_min(lowest)`` passes to ``value``, as autograd gives it:
    none below the floor, half of it at the floor (ties split)."""
    return torch.where(value == lowest, grad / 2, grad).masked_fill_(value < lowest, 0)


class _NormLikeLinear(torch.autograd.Function):
    """:func:`norm_like_linear` of a matrix with one backward node, autograd's gradients
    operation for operation (as :class:`_AffineLikeLinear`)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):  # type: ignore[override]
        terms = _norm_like_terms(x, weight, eps)
        scale, scaled, squares, sq_norm, lowest, z, factor = terms
        ctx.save_for_backward(weight, scaled, sq_norm, lowest, scale, z, factor)
        # the squares are spent: the output is written into them where the shapes agree
        spare = _spare(squares, z, factor, *([] if bias is None else [bias]))
        return _with_bias(z, factor, bias, out=spare)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        weight, scaled, sq_norm, lowest, scale, z, factor = ctx.saved_tensors
        need_x, need_w, need_b, _ = ctx.needs_input_grad
        gz = g * factor
        gx = gw = gb = None
        if need_w:
            gw = gz.t().mm(scaled)
        if need_b:
            gb = g.sum(0)  # at::sum_to's reduction, without its kept dimension
        if need_x:
            # rsqrt's backward, clamp_min's, then the sum of squares' (2 x g)
            tmp = torch.mul(g, z)
            g_sq = _row_sum(tmp).mul_(-0.5).mul_(factor.pow(3))
            g_sq = _clamp_min_backward(g_sq, sq_norm, lowest)
            g_norm = _twice_times(scaled, g_sq, out=_spare(tmp, scaled, g_sq))
            gx = gz.mm(weight).add_(g_norm).div_(scale)
        return gx, gw, gb, None


def norm_like_linear(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, eps: float = 1e-12
) -> Tensor:
    r""":math:`W x / \max(\lVert x \rVert, \epsilon) + b`, the norm over the last dimension.

    See :class:`~normlab.layers.NormLikeLinear`.
    """
    flat = _flat(x)
    if _composite(x):
        _, _, _, _, _, z, factor = _norm_like_terms(flat, weight, eps)
        out = _with_bias(z, factor, bias)
    else:
        out = _NormLikeLinear.apply(flat, weight, bias, eps)
    return out.view(*x.shape[:-1], weight.shape[0])


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


def _pair(value: Pair) -> list[int]:
    return [value, value] if isinstance(value, int) else list(value)


def _patch_terms(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    geometry: tuple[Pair, Pair | str, Pair],
    mode: str,
    eps: float,
    one_node: bool = False,
) -> tuple[Tensor, ...]:
    """``(scale, x / scale, sumsq, ones, sq_norm, lowest, z, factor, out)`` of
    :func:`patch_norm_conv2d`: ``sumsq`` the channel sum of squares of ``x / scale``, ``ones``
    the kernel it is convolved with into the patches' squared norms ``sq_norm``, ``lowest``
    their floor (norm mode), ``z`` the product ``factor`` multiplies (``(W x + b) / scale``,
    or ``W x / scale`` in norm mode) and ``out`` the result. ``one_node``: for
    :class:`_PatchNormConv2d` (no graph is recorded), the output written into the spent
    squares where the shapes agree."""
    # each image at a power-of-two scale: its convolution and its patch norms stay finite
    floor = 1.0 if mode == "affine_like" else _norm_floor(eps, x.dtype)
    scale = power_of_two_scale(x, (1, 2, 3), floor)
    scaled = x / scale
    squares = scaled.square() if one_node else None
    if squares is None:
        sumsq = _SumOfSquares.apply(scaled, 1)
    else:  # _SumOfSquares's forward
        sumsq = squares.sum(1, keepdim=True)
    kh, kw = weight.shape[-2:]
    ones = torch.ones(1, 1, kh, kw, device=x.device, dtype=x.dtype)
    sq_norm = F.conv2d(sumsq, ones, None, *geometry)
    z = F.conv2d(scaled, weight, None, *geometry)
    if mode == "affine_like":
        lowest = sq_norm  # unused: no floor
        if bias is not None:  # (W x + b) / scale, as the bias is added after the sum
            # in place: the convolution's backward does not read its output
            z = z.add_(bias.view(1, -1, 1, 1) / scale)
        factor = _inverse_homogeneous(sq_norm, scale)
        out = torch.mul(z, factor, out=_spare(squares, z, factor))
        return scale, scaled, sumsq, ones, sq_norm, lowest, z, factor, out
    lowest = (floor / scale).square()
    factor = torch.rsqrt(sq_norm.clamp_min(lowest))
    out = torch.mul(z, factor, out=_spare(squares, z, factor))
    # in place: the product's backward reads its factors, not the product
    out = out if bias is None else out.add_(bias.view(1, -1, 1, 1))
    return scale, scaled, sumsq, ones, sq_norm, lowest, z, factor, out


class _PatchNormConv2d(torch.autograd.Function):
    """:func:`patch_norm_conv2d` (numeric padding) with one backward node, autograd's
    gradients operation for operation (as :class:`_AffineLikeLinear`): no copy for
    ``x ** 1``, ``2 x g`` taken as ``x (2 g)`` (the doubling is exact) on the small factor,
    the input's two gradient terms summed and divided by the scale in place."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, mode, eps):  # type: ignore[override]
        geometry = (stride, padding, dilation)
        terms = _patch_terms(x, weight, bias, geometry, mode, eps, one_node=True)
        scale, scaled, sumsq, ones, sq_norm, lowest, z, factor, out = terms
        ctx.save_for_backward(
            weight, scale, scaled, sumsq, ones, sq_norm, lowest, z, factor
        )
        ctx.geometry = [_pair(stride), _pair(padding), _pair(dilation)]
        ctx.mode, ctx.has_bias = mode, bias is not None
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        weight, scale, scaled, sumsq, ones, sq_norm, lowest, z, factor = (
            ctx.saved_tensors
        )
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        conv_backward = torch.ops.aten.convolution_backward
        gz = g * factor
        gb = None
        if need_b and ctx.has_bias:
            shape = (1, weight.shape[0], 1, 1)
            if ctx.mode == "affine_like":  # through (b / scale) added to z
                per_image = _sum_to(gz, (g.shape[0], *shape[1:])) / scale
                gb = _sum_to(per_image, shape).reshape(-1)
            else:
                gb = _sum_to(g, shape).reshape(-1)
        g_sq = None
        if need_x:
            # rsqrt's backward (and clamp_min's in norm mode), then the patch sums'
            tmp = torch.mul(g, z)  # spent once summed: reused for the last product
            g_sq = _sum_to(tmp, factor.shape)
            tmp = _unless_held(tmp, g_sq)
            g_sq = g_sq.mul_(-0.5).mul_(factor.pow(3))
            if ctx.mode != "affine_like":
                g_sq = _clamp_min_backward(g_sq, sq_norm, lowest)
        gx, gw, _ = conv_backward(
            gz,
            scaled,
            weight,
            None,
            *ctx.geometry,
            False,
            [0, 0],
            1,
            [need_x, need_w, False],
        )
        if need_x:
            g_sumsq = conv_backward(
                g_sq,
                sumsq,
                ones,
                None,
                *ctx.geometry,
                False,
                [0, 0],
                1,
                [True, False, False],
            )[0]
            g_norm = _twice_times(scaled, g_sumsq, out=_spare(tmp, scaled, g_sumsq))
            gx = gx.add_(g_norm).div_(scale)
        return gx, gw, gb, None, None, None, None, None


def _twice_times(x: Tensor, g: Tensor, out: Tensor | None = None) -> Tensor:
    """``(2 x) g``, the sum of squares' backward, as ``x (2 g)`` where the doubling of the
    smaller ``g`` cannot overflow (not float16): the same number, one pass fewer; written
    into ``out`` where given (a temporary of ``x``'s shape whose values are spent)."""
    if x.dtype == torch.float16:
        return torch.mul(x, 2.0, out=out).mul_(g)
    return torch.mul(x, 2.0 * g, out=out)


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
    :class:`~normlab.layers.PatchNormConv2d`. Float16 is computed in float32 and the
    result cast back (a patch's small values would underflow beside one large pixel).
    """
    one_of("mode", mode, PATCHNORM_MODES)
    positive_number("eps", eps)
    if x.dtype == torch.float16:
        return _patch_norm_in_float32(
            x, weight, bias, stride, padding, dilation, mode, eps
        )
    if _composite(x) or isinstance(padding, str):
        return _patch_terms(x, weight, bias, (stride, padding, dilation), mode, eps)[-1]
    return _PatchNormConv2d.apply(x, weight, bias, stride, padding, dilation, mode, eps)


def _patch_norm_in_float32(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Pair,
    padding: Pair | str,
    dilation: Pair,
    mode: str,
    eps: float,
) -> Tensor:
    """:func:`patch_norm_conv2d` of float16 tensors, computed in float32 (autocast off) and
    cast back. Unlike a linear layer's sample, a patch need not hold the image's largest
    value: at the image's power-of-two scale a patch far from one pixel of 8192 holds
    values near 2**-14, whose squares underflow float16 to a zero norm (and 0 / 0)."""
    wide = torch.float32
    with torch.autocast(x.device.type, enabled=False):
        out = patch_norm_conv2d(
            x.to(wide),
            weight.to(wide),
            None if bias is None else bias.to(wide),
            stride,
            padding,
            dilation,
            mode=mode,
            eps=eps,
        )
    return out.to(x.dtype)


class _AutoNormMix(torch.autograd.Function):
    """:func:`autonorm_mix` with one backward node whose gradients are autograd's for the
    plain expression, operation for operation (so bit for bit), without the copies
    ``addcmul``'s backward makes (``tanh(alpha x) * 1``, ``LN(x) * 1``) and with the
    products of the input's gradient taken in place."""

    @staticmethod
    def forward(ctx, x, x_ln, alpha, scale_dyt, scale_ln, shift, normalized_shape, eps):  # type: ignore[override]
        y, mean, rstd = torch.native_layer_norm(x, normalized_shape, None, None, eps)
        t = torch.mul(alpha, x).tanh_()  # tanh in place on the spent product
        out = torch.addcmul(shift, scale_ln, y).addcmul_(scale_dyt, t)
        ctx.save_for_backward(x, alpha, scale_dyt, scale_ln, y, mean, rstd, t)
        ctx.normalized_shape = normalized_shape
        ctx.shapes = (shift.shape,)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        x, alpha, scale_dyt, scale_ln, y, mean, rstd, t = ctx.saved_tensors
        need = ctx.needs_input_grad
        (shift_shape,) = ctx.shapes
        gx_dyt = gx_ln = g_alpha = g_dyt = g_ln = g_shift = None
        # full-size temporaries whose values are spent are reused (out=): each fresh 2 MB
        # tensor costs page faults, once the heap is trimmed, on top of its pass
        tmp = None
        if need[3]:
            tmp = torch.mul(g, t)
            g_dyt = _sum_to(tmp, scale_dyt.shape)
            tmp = _unless_held(tmp, g_dyt)
        if need[4]:
            tmp = torch.mul(g, y, out=_spare(tmp, g, y))
            g_ln = _sum_to(tmp, scale_ln.shape)
            tmp = _unless_held(tmp, g_ln)
        if need[5]:
            g_shift = _sum_to(g, shift_shape)
        if need[0] or need[2]:
            # DyT's branch: addcmul's, tanh's and the product alpha * x's backward passes
            g_ax = torch.mul(g, scale_dyt, out=_spare(tmp, g, scale_dyt))
            if _spare(g_ax, g_ax, t) is None:
                g_ax = torch.ops.aten.tanh_backward(g_ax, t)
            else:  # in place: the product is spent
                g_ax = torch.ops.aten.tanh_backward.grad_input(g_ax, t, grad_input=g_ax)
            tmp = None
            if need[2]:
                tmp = torch.mul(g_ax, x)
                g_alpha = tmp.sum()
            if need[0]:
                gx_dyt = g_ax.mul_(alpha)
        if need[1]:
            gx_ln = torch.ops.aten.native_layer_norm_backward(
                torch.mul(g, scale_ln, out=_spare(tmp, g, scale_ln)),
                x,
                ctx.normalized_shape,
                mean,
                rstd,
                None,
                None,
                [True, False, False],
            )[0]
        return gx_dyt, gx_ln, g_alpha, g_dyt, g_ln, g_shift, None, None


def autonorm_mix(
    x: Tensor,
    alpha: Tensor,
    scale_dyt: Tensor,
    scale_ln: Tensor,
    shift: Tensor,
    normalized_shape: tuple[int, ...],
    eps: float = 1e-5,
) -> Tensor:
    r""":math:`s_{\mathrm{DyT}} \odot \tanh(\alpha x) + s_{\mathrm{LN}} \odot
    \mathrm{LN}(x) + \beta`, LN without affine over ``normalized_shape``: AutoNorm's output
    once the gate weights and both candidates' affines are folded into per-sample
    coefficients ``scale_dyt``, ``scale_ln`` and ``shift`` (each broadcast against ``x``).
    See :class:`~normlab.layers.AutoNorm`."""
    if _composite(x):
        y = F.layer_norm(x, normalized_shape, eps=eps)
        return torch.addcmul(
            torch.addcmul(shift, scale_ln, y), scale_dyt, torch.tanh(alpha * x)
        )
    # x twice: its two gradients reach autograd's sum for x one after the other, DyT's
    # first, as the plain expression's two nodes send them (floating-point addition is
    # not associative, and x's gradient may already hold, say, a residual branch's)
    return _AutoNormMix.apply(
        x, x, alpha, scale_dyt, scale_ln, shift, tuple(normalized_shape), eps
    )


def dyt(
    x: Tensor, alpha: Tensor, weight: Tensor | None = None, bias: Tensor | None = None
) -> Tensor:
    r""":math:`\gamma \odot \tanh(\alpha x) + \beta`, without :math:`\gamma` (``weight``) or
    :math:`\beta` (``bias``) where they are None. See :class:`~normlab.layers.DyT`."""
    y = torch.tanh(alpha * x)
    if weight is None:
        return y if bias is None else y + bias
    return y * weight if bias is None else torch.addcmul(bias, weight, y)


def gain(x: Tensor, weight: Tensor) -> Tensor:
    r""":math:`\gamma \odot x`, the scale broadcast over ``x``'s last dimension.

    Args:
        x: input of shape :math:`(*, \text{num\_features})`.
        weight: :math:`\gamma`, of shape :math:`(\text{num\_features})`.

    See :class:`~normlab.layers.Gain`.

    Examples::

        >>> gain(torch.ones(2, 3), torch.tensor([1.0, 2.0, 3.0])).tolist()
        [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    """
    if x.dim() == 0 or x.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"input must have shape (*, num_features={weight.shape[-1]}), "
            f"got {tuple(x.shape)}"
        )
    return x * weight


def ada_norm(
    x: Tensor,
    normalized_shape: tuple[int, ...],
    k: float = 0.1,
    scale: float = 1.0,
    eps: float = 1e-5,
) -> Tensor:
    r""":math:`C\,(1 - k\,\mathrm{sg}(y)) \odot y`, :math:`y = \mathrm{LN}(x)` without affine
    over ``normalized_shape``; ``sg`` stops the gradient. See :class:`~normlab.layers.AdaNorm`.

    Args:
        x: input of shape :math:`(*, \text{normalized\_shape})`.
        normalized_shape: the trailing dimensions normalised over.
        k, scale, eps: :math:`k`, :math:`C` and the variance's :math:`\epsilon`.

    Examples::

        >>> x = torch.randn(4, 8)
        >>> torch.equal(ada_norm(x, (8,), k=0.0), F.layer_norm(x, (8,)))
        True
    """
    _check_input(x, normalized_shape)
    y = F.layer_norm(x, normalized_shape, eps=eps)
    return scale * (1.0 - k * y.detach()) * y


def film_norm(
    x: Tensor,
    d_gamma: Tensor,
    beta: Tensor,
    normalized_shape: tuple[int, ...],
    eps: float = 1e-5,
) -> Tensor:
    r""":math:`\mathrm{LN}(x) \odot (1 + \Delta\gamma) + \beta`, LN without affine over
    ``normalized_shape``, with one :math:`\Delta\gamma` and :math:`\beta` per sample (from
    :class:`~normlab.layers.FiLMNorm`'s conditioning MLP).

    Args:
        x: input of shape :math:`(N, *, \text{normalized\_shape})`.
        d_gamma, beta: per-sample scale offset and shift, each of shape :math:`(N, D)`,
            :math:`D = \prod \text{normalized\_shape}`.
        normalized_shape: the trailing dimensions normalised over.
        eps: added to the variance.

    Examples::

        >>> x, zero = torch.randn(4, 3, 8), torch.zeros(4, 8)
        >>> torch.equal(film_norm(x, zero, zero, (8,)), F.layer_norm(x, (8,)))
        True
    """
    _check_input(x, normalized_shape, min_extra_dims=1)
    view = (
        x.shape[0],
        *([1] * (x.dim() - 1 - len(normalized_shape))),
        *normalized_shape,
    )
    y = F.layer_norm(x, normalized_shape, eps=eps)
    return torch.addcmul(beta.reshape(view), y, 1.0 + d_gamma.reshape(view))


def rms_norm2d(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    r""":math:`\gamma_c\, x / \sqrt{\mathrm{mean}_{c,h,w}(x^2) + \epsilon}` per sample, the
    mean square taken at a power-of-two scale. See :class:`~normlab.layers.RMSNorm2d`.

    Args:
        x: input of shape :math:`(N, C, H, W)`.
        weight: :math:`\gamma`, of shape :math:`(C)`.
        eps: added to the mean square.

    Examples::

        >>> y = rms_norm2d(torch.randn(2, 3, 4, 4), torch.ones(3))
        >>> torch.allclose(y.square().mean(dim=(1, 2, 3)), torch.ones(2), atol=1e-4)
        True
    """
    if x.dim() != 4 or x.shape[1] != weight.shape[0]:
        raise ValueError(
            f"input must have shape (N, C={weight.shape[0]}, H, W), got {tuple(x.shape)}"
        )
    # the mean square at a power-of-two scale: finite for any finite input
    scale = power_of_two_scale(x, (1, 2, 3), 1.0)
    scaled = x / scale
    mean_sq = scaled.square().mean(dim=(1, 2, 3), keepdim=True)
    # x / scale times rsqrt, not x times rsqrt / scale: that factor is subnormal near
    # the dtype's largest value
    inv_rms = torch.rsqrt(mean_sq + eps / scale.square())
    return scaled * inv_rms * weight.view(1, -1, 1, 1)


def at_least_float32(t: Tensor) -> Tensor:
    """Upcast bf16/fp16 to float32 (float64 stays float64)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


TAU_MIN = 1e-3
"""The smallest Gumbel-Softmax temperature accepted. Below it, float32's softmax of
``(logits + G) / tau`` is one-hot to rounding for any gap above about 0.1 between the
candidates, so the selector's gradients are exactly zero for almost every sample."""


def check_tau(value: float) -> float:
    """``value`` as a float if it is a finite temperature ``>= TAU_MIN``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < TAU_MIN
    ):
        raise ValueError(
            f"tau must be a finite number >= {TAU_MIN} (TAU_MIN: below it the selector's "
            f"gradients vanish in float32), got {value!r}"
        )
    return float(value)


def sample_gumbel(
    shape: Sequence[int] | torch.Size,
    *,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    r"""Standard Gumbel noise :math:`G = -\log E`, :math:`E \sim \mathrm{Exp}(1)`, in float32.

    Sampling :math:`E` directly (rather than :math:`-\log(-\log U)`) needs one logarithm; it
    is clamped away from zero so that :math:`G` is always finite (at most about 87).
    """
    e = torch.empty(tuple(shape), device=device, dtype=torch.float32).exponential_(
        generator=generator
    )
    return -e.clamp_min_(torch.finfo(torch.float32).tiny).log()


def gumbel_softmax(
    logits: Tensor,
    tau: float,
    hard: bool = False,
    generator: torch.Generator | None = None,
    noise: Tensor | None = None,
) -> Tensor:
    r"""Gumbel-Softmax (Jang et al. 2017; Maddison et al. 2017) over the last dimension.

    .. math::
        w = \mathrm{softmax}\bigl((\ell + G) / \tau\bigr), \qquad G_i \sim \mathrm{Gumbel}(0, 1)

    As :math:`\tau \to 0`, :math:`w` tends to the one-hot vector of
    :math:`\arg\max(\ell + G)`, which is distributed as :math:`\mathrm{softmax}(\ell)` (the
    Gumbel-max trick). ``hard=True`` is the straight-through estimator: the forward value is
    that one-hot vector, the gradient is the soft one. Computed in float32 whatever the
    dtype of ``logits`` is lower (bf16 or fp16 overflow at small ``tau``); returns float32
    (float64 for float64 logits). ``noise`` (optional): the Gumbel noise, drawn by the
    caller (:mod:`normlab.population` draws each member's from its own stream).
    """
    tau = check_tau(tau)
    if noise is None:
        noise = sample_gumbel(logits.shape, device=logits.device, generator=generator)
    soft = torch.softmax((at_least_float32(logits) + noise) / tau, dim=-1)
    if not hard:
        return soft
    index = soft.argmax(dim=-1, keepdim=True)
    one_hot = torch.zeros_like(soft).scatter_(-1, index, 1.0)
    return one_hot - soft.detach() + soft


def norm_selector(
    logits: Tensor,
    tau: float,
    hard: bool = False,
    training: bool = False,
    *,
    noise: Tensor | None = None,
    frozen: bool = False,
    frozen_members: Tensor | None = None,
) -> Tensor:
    r"""AutoNorm's gate weights from its logits :math:`\ell`: sampled in training, else the
    probabilities the samples follow.

    .. math::
        w = \begin{cases}
            \mathrm{GumbelSoftmax}(\ell, \tau) & \text{training, not frozen} \\
            \mathrm{softmax}(\ell) & \text{otherwise}
        \end{cases}

    With ``hard``, the straight-through one-hot weights in training and the one-hot
    :math:`\arg\max \ell` otherwise. See :class:`~normlab.layers.NormSelector`, which
    predicts :math:`\ell` from the sample's pooled input.

    Args:
        logits: :math:`\ell`, one row per sample, float32 or float64.
        tau: the Gumbel-Softmax temperature, at least :data:`TAU_MIN`.
        hard: one-hot weights instead of soft ones. Default: ``False``.
        training: whether to sample. Default: ``False``.
        noise: the Gumbel noise to sample with, drawn by the caller; None: drawn here.
        frozen: whether the weights are deterministic in training too. Default: ``False``.
        frozen_members: per sample, whether its weights are deterministic in training
            (a population's members whose gate is frozen); None: none is.

    Shape:
        - logits: :math:`(N, k)`
        - Output: :math:`(N, k)`, in the dtype of ``logits``

    Examples::

        >>> logits = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
        >>> torch.equal(norm_selector(logits, 0.5), torch.softmax(logits, dim=-1))
        True
        >>> norm_selector(logits, 0.5, hard=True).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        >>> norm_selector(logits, 0.5, training=True).sum(-1).tolist()
        [1.0, 1.0]
    """
    probs = torch.softmax(logits, dim=-1)
    if training and not frozen:
        weights = gumbel_softmax(logits, tau, hard, noise=noise)
        if frozen_members is not None:
            # population members whose gate AutoNorm-S froze: as a frozen gate, below
            weights = torch.where(
                frozen_members, _selected(logits, probs, hard), weights
            )
        return weights
    return _selected(logits, probs, hard)


def _selected(logits: Tensor, probs: Tensor, hard: bool) -> Tensor:
    """The deterministic gate weights: the one-hot argmax of ``logits`` when ``hard``, else
    ``probs``."""
    if hard:
        return F.one_hot(logits.argmax(dim=-1), logits.shape[-1]).to(logits.dtype)
    return probs
