"""Part I layers: the structural corrections of the affine divergence.

A plain affine layer ``z = W x + b`` moves its output, after one SGD step, by
``-eta (|x|^2 + 1) g`` instead of the ideal ``-eta g`` (``g = dL/dz``). The layers here change
the map so that the factor cancels:

- :class:`AffineLikeLinear`: ``z = (W x + b) / sqrt(|x|^2 + 1)``, one-sample update exactly ``-eta g``;
- :class:`NormLikeLinear`: ``z = W (x / |x|) + b``, one-sample update exactly ``-2 eta g``;
- :class:`PatchNormConv2d`: either correction applied to every receptive field of a convolution;
- :class:`L2Norm`: the parameter-free normaliser ``x / |x|`` behind the norm-like correction;
- :class:`Gain`: a learned per-feature scale, to show what a scale after a correction does.

RMSNorm is torch's own :class:`torch.nn.RMSNorm`; nothing is re-implemented here.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import one_of, positive_ints, positive_number
from ._common import power_of_two_scale

__all__ = [
    "AffineLikeLinear",
    "NormLikeLinear",
    "PatchNormConv2d",
    "L2Norm",
    "Gain",
    "PATCHNORM_MODES",
]

PATCHNORM_MODES: tuple[str, ...] = ("affine_like", "norm_like")


def _norm_floor(eps: float, dtype: torch.dtype) -> float:
    """``eps``, raised to the dtype's smallest normal number where it would underflow."""
    return max(eps, torch.finfo(dtype).tiny)


def _scaled_inverse_norm(
    x: Tensor, dim: int | tuple[int, ...], eps: float
) -> tuple[Tensor, Tensor]:
    """``(x / scale, 1 / max(|x / scale|, eps / scale))`` over ``dim`` (kept), ``scale`` a
    power of two: their product is ``x / max(|x|, eps)``, finite with a finite gradient for
    any finite ``x``, zero included. The two factors are returned apart because ``1 / |x|``
    itself is subnormal, or zero, for ``x`` near the dtype's largest value."""
    floor = _norm_floor(eps, x.dtype)
    scale = power_of_two_scale(x, dim, floor)
    scaled = x / scale
    sq_norm = scaled.square().sum(dim, keepdim=True)
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


def _check_features(x: Tensor, in_features: int) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"input must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0 or x.shape[-1] != in_features:
        raise ValueError(
            f"input must have shape (*, in_features={in_features}), got {tuple(x.shape)}"
        )


class _CheckedLinear(nn.Linear):
    """:class:`torch.nn.Linear` whose sizes must be positive ints, the base of the corrections."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        positive_ints(in_features=in_features, out_features=out_features)
        super().__init__(
            in_features, out_features, bias=bias, device=device, dtype=dtype
        )


class AffineLikeLinear(_CheckedLinear):
    r"""Affine-like correction of a linear layer.

    .. math::
        z = \frac{W x + b}{\sqrt{\lVert x \rVert^2 + 1}}

    The norm is taken over the last dimension (the features of one sample). This is
    L2-normalising the homogeneous vector :math:`[x; 1]` and applying :math:`[W\; b]`, so one
    SGD step on a single sample moves :math:`z` by exactly :math:`-\eta\, \partial L/\partial z`.
    The denominator is at least 1, so no epsilon is needed.

    Arguments, parameters and initialisation are those of :class:`torch.nn.Linear`.

    Shape:
        - Input: :math:`(*, H_{in})`, any number of leading dimensions.
        - Output: :math:`(*, H_{out})`.

    Examples::

        >>> layer = AffineLikeLinear(20, 30)
        >>> layer(torch.randn(128, 20)).shape
        torch.Size([128, 30])
        >>> torch.equal(layer(torch.zeros(20)), layer.bias)  # x = 0: z = b / 1
        True
    """

    def forward(self, x: Tensor) -> Tensor:
        _check_features(x, self.in_features)
        # everything at a power-of-two scale: W x overflows float16 at |x| ~ 1e4, and
        # 1 / sqrt(|x|^2 + 1) is subnormal for float32 near its largest value
        scale = power_of_two_scale(x, -1, 1.0)
        scaled = x / scale
        sq_norm = torch.linalg.vector_norm(scaled, dim=-1, keepdim=True).square()
        z = _scaled_linear(scaled, self.weight, self.bias, scale)
        return z * _inverse_homogeneous(sq_norm, scale)


class NormLikeLinear(_CheckedLinear):
    r"""Norm-like correction of a linear layer.

    .. math::
        z = W \frac{x}{\lVert x \rVert} + b

    The norm is over the last dimension. Because the map is linear, it is computed as
    :math:`(W x) / \lVert x \rVert + b`. At :math:`x = 0` the norm is floored at ``eps``, so
    the output is :math:`b` and the gradient is finite. One SGD step on a single sample moves
    :math:`z` by exactly :math:`-2\eta\, \partial L/\partial z`.

    Arguments, parameters and initialisation are those of :class:`torch.nn.Linear`, plus:

    Args:
        eps: floor on :math:`\lVert x \rVert`. Default: ``1e-12``.

    Shape:
        - Input: :math:`(*, H_{in})`.
        - Output: :math:`(*, H_{out})`.

    Examples::

        >>> layer = NormLikeLinear(20, 30)
        >>> x = torch.randn(128, 20)
        >>> layer(x).shape
        torch.Size([128, 30])
        >>> torch.allclose(layer(x), layer(3.0 * x), atol=1e-6)  # only x / norm(x) counts
        True
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        eps: float = 1e-12,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        positive_number("eps", eps)
        super().__init__(in_features, out_features, bias, device, dtype)
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        _check_features(x, self.in_features)
        scaled, inv_norm = _scaled_inverse_norm(x, -1, self.eps)
        z = F.linear(scaled, self.weight)
        if self.bias is None:
            return z * inv_norm
        return torch.addcmul(self.bias, z, inv_norm)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, eps={self.eps}"


class L2Norm(nn.Module):
    r"""Parameter-free L2 normalisation of each sample.

    .. math::
        y = \frac{x}{\max(\lVert x \rVert, \epsilon)}

    The norm is over ``dim`` (default: the last dimension, i.e. the features of one sample;
    pass a tuple such as ``(1, 2, 3)`` to normalise a whole image per sample). Zero inputs map
    to zero with a finite gradient.

    Args:
        dim: the dimension or dimensions that form one sample. Default: ``-1``.
        eps: floor on the norm. Default: ``1e-12``.

    Shape:
        - Input: any shape with the dimensions in ``dim``.
        - Output: same shape as the input.

    Examples::

        >>> x = torch.randn(8, 20)
        >>> torch.allclose(torch.linalg.vector_norm(L2Norm()(x), dim=-1), torch.ones(8))
        True
        >>> images = L2Norm(dim=(1, 2, 3))(torch.randn(8, 3, 32, 32))
        >>> torch.allclose(torch.linalg.vector_norm(images, dim=(1, 2, 3)), torch.ones(8))
        True
    """

    def __init__(self, dim: int | Sequence[int] = -1, eps: float = 1e-12) -> None:
        super().__init__()
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if not dims or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in dims
        ):
            raise TypeError(
                f"dim must be an int or a non-empty sequence of ints, got {dim!r}"
            )
        positive_number("eps", eps)
        self.dim = dims
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() == 0 or any(not -x.dim() <= d < x.dim() for d in self.dim):
            raise ValueError(
                f"input of shape {tuple(x.shape)} has no dimension(s) dim={self.dim}"
            )
        scaled, inv_norm = _scaled_inverse_norm(x, self.dim, self.eps)
        return scaled * inv_norm

    def extra_repr(self) -> str:
        dim = self.dim[0] if len(self.dim) == 1 else self.dim
        return f"dim={dim}, eps={self.eps}"


class Gain(nn.Module):
    r"""A learned per-feature scale, :math:`y = \gamma \odot x` (:math:`\gamma` starts at ``init``).

    This is the "parameterised scale" half of a normaliser. Placed after a corrected layer it
    adds its own parameter update, so the exact cancellation of the correction no longer holds.

    Args:
        num_features: size of the last dimension.
        init: initial value of every entry of :math:`\gamma`. Default: ``1.0``.

    Shape:
        - Input: :math:`(*, \text{num\_features})`.
        - Output: same shape as the input.

    Examples::

        >>> Gain(4, init=2.0)(torch.ones(2, 4)).tolist()
        [[2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]]
    """

    def __init__(
        self,
        num_features: int,
        init: float = 1.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        positive_ints(num_features=num_features)
        self.num_features = num_features
        self.init = float(init)
        self.weight = nn.Parameter(
            torch.empty(num_features, device=device, dtype=dtype)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.weight, self.init)

    def forward(self, x: Tensor) -> Tensor:
        _check_features(x, self.num_features)
        return x * self.weight

    def extra_repr(self) -> str:
        return f"{self.num_features}, init={self.init}"


class PatchNormConv2d(nn.Conv2d):
    r"""A 2-D convolution with the affine-divergence correction applied to every patch.

    Let :math:`P_p` be the receptive field (patch) of output position :math:`p`: all
    :math:`C_{in} \times k_h \times k_w` input values, padding zeros included.

    - ``mode="affine_like"``: :math:`z_p = (W * P_p + b) / \sqrt{\lVert P_p \rVert^2 + 1}`
      (the tangent kernel between a position and itself is exactly 1);
    - ``mode="norm_like"``: :math:`z_p = W * (P_p / \lVert P_p \rVert) + b`, computed as
      :math:`(W * P_p)/\lVert P_p \rVert + b` since the convolution is linear.

    :math:`\lVert P_p \rVert^2` comes from one extra single-channel convolution: the channel
    sum of squares :math:`\sum_c x_c^2`, convolved with a ones kernel at the layer's stride,
    padding and dilation. The input is never unfolded.

    Arguments (in :class:`torch.nn.Conv2d`'s positional order), parameters and
    initialisation are those of :class:`torch.nn.Conv2d` (``groups`` must be 1), plus two
    keyword-only ones:

    Args:
        mode: ``"affine_like"`` or ``"norm_like"``. Default: ``"affine_like"``.
        eps: floor on :math:`\lVert P_p \rVert` in norm_like mode. Default: ``1e-12``.

    Shape:
        - Input: :math:`(N, C_{in}, H, W)` or :math:`(C_{in}, H, W)`.
        - Output: :math:`(N, C_{out}, H_{out}, W_{out})` or :math:`(C_{out}, H_{out}, W_{out})`,
          as for :class:`torch.nn.Conv2d`.

    Examples::

        >>> layer = PatchNormConv2d(3, 16, 3, 1, 1, mode="norm_like")  # nn.Conv2d's order
        >>> layer(torch.randn(8, 3, 32, 32)).shape
        torch.Size([8, 16, 32, 32])
        >>> layer
        PatchNormConv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), mode='norm_like', eps=1e-12)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        mode: str = "affine_like",
        eps: float = 1e-12,
    ) -> None:
        positive_ints(in_channels=in_channels, out_channels=out_channels)
        one_of("mode", mode, PATCHNORM_MODES)
        if groups != 1:
            raise ValueError(
                f"groups must be 1 (a patch spans every input channel), got {groups!r}"
            )
        positive_number("eps", eps)
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=1,
            bias=bias,
            padding_mode=padding_mode,
            device=device,
            dtype=dtype,
        )
        self.mode = mode
        self.eps = eps
        ones = torch.ones(1, 1, *self.kernel_size, device=device, dtype=dtype)
        self.register_buffer("patch_kernel", ones, persistent=False)

    def patch_sq_norm(self, x: Tensor) -> Tensor:
        """:math:`\\lVert P_p \\rVert^2` at every output position, shape ``(N, 1, H_out, W_out)``."""
        channel_sq = x.square().sum(1, keepdim=True)
        return self._conv_forward(channel_sq, self.patch_kernel.to(x.dtype), None)

    def inverse_patch_norm(self, x: Tensor) -> Tensor:
        """The scaling of every output position, ``(N, 1, H_out, W_out)``:
        :math:`1/\\sqrt{\\lVert P_p \\rVert^2 + 1}` (affine_like) or
        :math:`1/\\max(\\lVert P_p \\rVert, \\epsilon)` (norm_like).

        :meth:`patch_sq_norm` is taken of each image divided by a power of two above its
        largest value, so it is finite for any finite input; a patch far smaller than its
        image's largest value may round to zero, where the floor ``eps`` applies.
        """
        _, scale, inv_norm = self._scaled(x)
        return inv_norm / scale

    def _scaled(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(x / scale, scale, scale * inverse_patch_norm(x))``, ``scale`` a power of two per
        image: the forward pass convolves ``x / scale``, which stays finite where ``x`` would
        overflow, and multiplies by the last, which is not subnormal where the plain inverse
        norm would be."""
        if self.mode == "affine_like":
            scale = power_of_two_scale(x, (1, 2, 3), 1.0)
            scaled = x / scale
            return (
                scaled,
                scale,
                _inverse_homogeneous(self.patch_sq_norm(scaled), scale),
            )
        floor = _norm_floor(self.eps, x.dtype)
        scale = power_of_two_scale(x, (1, 2, 3), floor)
        scaled = x / scale
        sq_norm = self.patch_sq_norm(scaled).clamp_min((floor / scale).square())
        return scaled, scale, torch.rsqrt(sq_norm)

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() not in (3, 4) or x.shape[-3] != self.in_channels:
            raise ValueError(
                f"input must have shape (N, C_in={self.in_channels}, H, W) or (C_in, H, W), "
                f"got {tuple(x.shape)}"
            )
        unbatched = x.dim() == 3
        if unbatched:
            x = x.unsqueeze(0)
        scaled, scale, inv_norm = self._scaled(x)
        out = self._conv_forward(scaled, self.weight, None)
        if self.mode == "affine_like":
            if (
                self.bias is not None
            ):  # (W x + b) / scale, as the bias is added after the sum
                out = out + self.bias.view(1, -1, 1, 1) / scale
            out = out * inv_norm
        else:
            out = out * inv_norm
            if self.bias is not None:
                out = out + self.bias.view(1, -1, 1, 1)
        return out.squeeze(0) if unbatched else out

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mode={self.mode!r}, eps={self.eps}"
