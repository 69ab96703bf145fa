"""Part I layers: the structural corrections of the affine divergence.

A plain affine layer ``z = W x + b`` moves its output, after one SGD step, by
``-eta (|x|^2 + 1) g`` instead of the ideal ``-eta g`` (``g = dL/dz``). The layers here change
the map so that the factor cancels:

- :class:`AffineLikeLinear`: ``z = (W x + b) / sqrt(|x|^2 + 1)``, one-sample update exactly ``-eta g``;
- :class:`NormLikeLinear`: ``z = W (x / |x|) + b``, one-sample update exactly ``-2 eta g``;
- :class:`PatchNormConv2d`: either correction applied to every receptive field of a convolution;
- :class:`L2Norm`: the parameter-free normaliser ``x / |x|`` behind the norm-like correction;
- :class:`RMSNorm2d`: RMSNorm over a whole feature map, chapter 8's RMSNorm in a CNN;
- :class:`Gain`: a learned per-feature scale, to show what a scale after a correction does.

RMSNorm over features is torch's own :class:`torch.nn.RMSNorm`; nothing is re-implemented here.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import functional as NF
from .._checks import one_of, positive_int, positive_ints, positive_number
from ..functional import PATCHNORM_FLOOR, PATCHNORM_MODES

__all__ = [
    "AffineLikeLinear",
    "NormLikeLinear",
    "PatchNormConv2d",
    "L2Norm",
    "RMSNorm2d",
    "Gain",
    "PATCHNORM_MODES",
]


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

    Args:
        in_features: size of each input sample.
        out_features: size of each output sample.
        bias: if ``False``, the layer learns no :math:`b` (then :math:`z = W x /
            \sqrt{\lVert x \rVert^2 + 1}`). Default: ``True``.
        device, dtype: where and in which dtype the parameters are made.

    Attributes:
        weight: :math:`W`, the learnable weights of shape
            :math:`(\text{out\_features}, \text{in\_features})`, initialised as in
            :class:`torch.nn.Linear`: :math:`\mathcal{U}(-\sqrt{k}, \sqrt{k})`,
            :math:`k = 1 / \text{in\_features}`.
        bias: :math:`b`, the learnable bias of shape :math:`(\text{out\_features})`,
            initialised from the same :math:`\mathcal{U}(-\sqrt{k}, \sqrt{k})`; None when
            ``bias=False``.

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
        return NF.affine_like_linear(x, self.weight, self.bias)


class NormLikeLinear(_CheckedLinear):
    r"""Norm-like correction of a linear layer.

    .. math::
        z = W \frac{x}{\lVert x \rVert} + b

    The norm is over the last dimension. Because the map is linear, it is computed as
    :math:`(W x) / \lVert x \rVert + b`. At :math:`x = 0` the norm is floored at ``eps``, so
    the output is :math:`b` and the gradient is finite. One SGD step on a single sample moves
    :math:`z` by exactly :math:`-2\eta\, \partial L/\partial z`.

    Args:
        in_features: size of each input sample.
        out_features: size of each output sample.
        bias: if ``False``, the layer learns no :math:`b`. Default: ``True``.
        eps: floor on :math:`\lVert x \rVert` (keyword-only). Default: ``1e-12``.
        device, dtype: where and in which dtype the parameters are made.

    Attributes:
        weight: :math:`W`, the learnable weights of shape
            :math:`(\text{out\_features}, \text{in\_features})`, initialised as in
            :class:`torch.nn.Linear`: :math:`\mathcal{U}(-\sqrt{k}, \sqrt{k})`,
            :math:`k = 1 / \text{in\_features}`.
        bias: :math:`b`, the learnable bias of shape :math:`(\text{out\_features})`,
            initialised from the same :math:`\mathcal{U}(-\sqrt{k}, \sqrt{k})`; None when
            ``bias=False``.

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
        return NF.norm_like_linear(x, self.weight, self.bias, self.eps)

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

    Attributes:
        dim: the tuple of dimensions normalised over; ``eps``: the floor. The layer has no
            learnable parameters.

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
        return NF.l2_normalize(x, self.dim, self.eps)

    def extra_repr(self) -> str:
        dim = self.dim[0] if len(self.dim) == 1 else self.dim
        return f"dim={dim}, eps={self.eps}"


class RMSNorm2d(nn.Module):
    r"""RMS normalisation of each sample over channels and positions, with a per-channel gain.

    .. math::
        y_{c,h,w} = \gamma_c\, \frac{x_{c,h,w}}{\sqrt{\frac{1}{CHW}\sum_{c',h',w'} x_{c',h',w'}^2 + \epsilon}}

    The RMS counterpart of ``nn.GroupNorm(1, C)`` (LayerNorm over a whole feature map): the
    same statistics' support, no mean subtracted, no bias.

    Args:
        num_channels: :math:`C`.
        eps: added to the mean square. Default: ``1e-6``.

    Attributes:
        weight: :math:`\gamma`, the learnable per-channel gain of shape :math:`(C)`,
            initialised to ones.

    Shape:
        - Input: :math:`(N, C, H, W)`.
        - Output: same shape as the input.

    Examples::

        >>> y = RMSNorm2d(3)(torch.randn(2, 3, 5, 5))
        >>> torch.allclose(y.square().mean(dim=(1, 2, 3)), torch.ones(2), atol=1e-4)
        True
    """

    def __init__(self, num_channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.num_channels = positive_int("num_channels", num_channels)
        self.eps = positive_number("eps", eps)
        self.weight = nn.Parameter(torch.empty(num_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return NF.rms_norm2d(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_channels}, eps={self.eps}"


class Gain(nn.Module):
    r"""A learned per-feature scale, :math:`y = \gamma \odot x` (:math:`\gamma` starts at ``init``).

    This is the "parameterised scale" half of a normaliser. Placed after a corrected layer it
    adds its own parameter update, so the exact cancellation of the correction no longer holds.

    Args:
        num_features: size of the last dimension.
        init: initial value of every entry of :math:`\gamma`. Default: ``1.0``.
        device, dtype: where and in which dtype the parameter is made.

    Attributes:
        weight: :math:`\gamma`, the learnable scale of shape :math:`(\text{num\_features})`,
            every entry initialised to ``init``.

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
        if not isinstance(x, Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(x).__name__}")
        return NF.gain(x, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_features}, init={self.init}"


class PatchNormConv2d(nn.Conv2d):
    r"""A 2-D convolution with the affine-divergence correction applied to every patch.

    Let :math:`P_p` be the receptive field (patch) of output position :math:`p`: all
    :math:`C_{in} \times k_h \times k_w` input values, padding zeros included.

    - ``mode="affine_like"``: :math:`z_p = (W * P_p + b) / \sqrt{\lVert P_p \rVert^2 + 1}`
      (the tangent kernel between a position and itself is exactly 1);
    - ``mode="norm_like"``: :math:`z_p = W * (P_p / \max(\lVert P_p \rVert, \epsilon)) + b`,
      computed as :math:`(W * P_p)/\max(\lVert P_p \rVert, \epsilon) + b` since the
      convolution is linear.

    :math:`\lVert P_p \rVert^2` comes from one extra single-channel convolution: the channel
    sum of squares :math:`\sum_c x_c^2`, convolved with a ones kernel at the layer's stride,
    padding and dilation. The input is never unfolded.

    The floor :math:`\epsilon` bounds what norm mode passes back. With :math:`W` the
    :math:`(C_{out}, C_{in} k_h k_w)` matrix of the kernels and :math:`g_p = \partial L /
    \partial z_p`, a patch below the floor (a blank one included) is mapped linearly, so

    .. math::
        \frac{\partial L}{\partial P_p} = \frac{W^\top g_p}{\epsilon}
        \quad (\lVert P_p \rVert < \epsilon), \qquad
        \Big\lVert \frac{\partial L}{\partial P_p} \Big\rVert
        \le \frac{\lVert W \rVert_2 \lVert g_p \rVert}{\epsilon} \quad \text{always}.

    A floor of ``1e-12`` multiplies a blank patch's gradient by :math:`10^{12}`; the default,
    1, is the norm of the constant input behind the bias, so :math:`P \mapsto P/\max(\lVert P
    \rVert, 1)` is 1-Lipschitz like affine mode's :math:`P \mapsto P/\sqrt{\lVert P
    \rVert^2 + 1}`, and no patch passes back more than a plain convolution's
    :math:`W^\top g_p`. Patches at least as large as the floor are normalised exactly.

    Args:
        in_channels, out_channels, kernel_size, stride, padding, dilation: as for
            :class:`torch.nn.Conv2d`, in its positional order.
        bias, padding_mode, device, dtype: as for :class:`torch.nn.Conv2d`.
        groups: must be 1 (a patch spans every input channel). Default: ``1``.
        mode: ``"affine_like"`` or ``"norm_like"`` (keyword-only). Default: ``"affine_like"``.
        eps: the floor :math:`\epsilon` on :math:`\lVert P_p \rVert` in norm_like mode, a
            positive finite number (keyword-only). Default: ``1.0``.

    Attributes:
        weight: :math:`W`, the learnable kernels of shape
            :math:`(C_{out}, C_{in}, k_h, k_w)`, initialised as in :class:`torch.nn.Conv2d`:
            :math:`\mathcal{U}(-\sqrt{k}, \sqrt{k})`, :math:`k = 1 / (C_{in} k_h k_w)`.
        bias: :math:`b`, the learnable bias of shape :math:`(C_{out})`, initialised from the
            same distribution; None when ``bias=False``.

    Shape:
        - Input: :math:`(N, C_{in}, H, W)` or :math:`(C_{in}, H, W)`.
        - Output: :math:`(N, C_{out}, H_{out}, W_{out})` or :math:`(C_{out}, H_{out}, W_{out})`,
          as for :class:`torch.nn.Conv2d`.

    Examples::

        >>> layer = PatchNormConv2d(3, 16, 3, 1, 1, mode="norm_like")  # nn.Conv2d's order
        >>> layer(torch.randn(8, 3, 32, 32)).shape
        torch.Size([8, 16, 32, 32])
        >>> layer
        PatchNormConv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), mode='norm_like', eps=1.0)
        >>> conv = nn.Conv2d(3, 16, 3, 1, 1)
        >>> _ = conv.load_state_dict(layer.state_dict())  # the same W and b
        >>> blank = torch.zeros(1, 3, 5, 5, requires_grad=True)  # every patch below the floor
        >>> grad = torch.autograd.grad(layer(blank).sum(), blank)[0]
        >>> plain = torch.autograd.grad(conv(blank).sum(), blank)[0]
        >>> torch.allclose(grad, plain)  # W^T g / eps with eps = 1: a plain conv's gradient
        True
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
        eps: float = PATCHNORM_FLOOR,
    ) -> None:
        positive_ints(in_channels=in_channels, out_channels=out_channels)
        one_of("mode", mode, PATCHNORM_MODES)
        if groups != 1:
            raise ValueError(
                f"groups must be 1 (a patch spans every input channel), got {groups!r}"
            )
        eps = positive_number("eps", eps)
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

    def _pad(self, x: Tensor) -> tuple[Tensor, tuple[int, int] | str]:
        """``x`` padded as ``padding_mode`` says, and the zero padding left to the convolution."""
        if self.padding_mode == "zeros":
            return x, self.padding
        padded = F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode)
        return padded, (0, 0)

    def patch_sq_norm(self, x: Tensor) -> Tensor:
        """:math:`\\lVert P_p \\rVert^2` at every output position, shape ``(N, 1, H_out, W_out)``."""
        padded, padding = self._pad(x)
        return NF.patch_sq_norm(
            padded, self.kernel_size, self.stride, padding, self.dilation
        )

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() not in (3, 4) or x.shape[-3] != self.in_channels:
            raise ValueError(
                f"input must have shape (N, C_in={self.in_channels}, H, W) or (C_in, H, W), "
                f"got {tuple(x.shape)}"
            )
        unbatched = x.dim() == 3
        padded, padding = self._pad(x.unsqueeze(0) if unbatched else x)
        out = NF.patch_norm_conv2d(
            padded,
            self.weight,
            self.bias,
            self.stride,
            padding,
            self.dilation,
            mode=self.mode,
            eps=self.eps,
        )
        return out.squeeze(0) if unbatched else out

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mode={self.mode!r}, eps={self.eps}"
