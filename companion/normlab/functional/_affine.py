"""Part I's functions: the corrections (affine-like, norm-like), L2, PatchNorm's
convolution, the gain and RMSNorm over a feature map (:mod:`normlab.layers.affine`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from .._checks import one_of, positive_number
from ._common import (
    PATCHNORM_FLOOR,
    PATCHNORM_MODES,
    Dims,
    Pair,
    _composite,
    _flat,
    _inverse_homogeneous,
    _norm_floor,
    _row_sum,
    _scaled_inverse_norm,
    _spare,
    _sum_to,
    _SumOfSquares,
    _unless_held,
    power_of_two_scale,
)

__all__ = [
    "affine_like_linear",
    "norm_like_linear",
    "l2_normalize",
    "patch_sq_norm",
    "patch_norm_conv2d",
    "gain",
    "rms_norm2d",
]


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
