"""Part II: the candidate normalisers AutoNorm chooses among or is compared with.

:class:`DyT`, :class:`AdaNorm` and :class:`FiLMNorm` take the same ``normalized_shape`` as
:class:`torch.nn.LayerNorm` (an int or a tuple: the trailing dimensions they normalise) plus
``device``/``dtype``, so each drops into a timm-style model as ``norm_layer=``. The gate that
mixes candidates is in :mod:`normlab.layers.gate`; names live in :mod:`normlab.normalisers`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: F401  (the Examples compare with F.layer_norm)
from torch import nn

from .. import functional as NF
from .._checks import positive_number
from ..functional._common import _check_input as check_input
from ..paper import DYT_ALPHA_INIT
from ._common import ShapeLike, as_shape, pooled_mlp, token_pool

__all__ = ["DyT", "AdaNorm", "FiLMNorm"]


class DyT(nn.Module):
    r"""Dynamic Tanh (Zhu et al., 2025), a normaliser without statistics.

    .. math::
        \mathrm{DyT}(x) = \gamma \odot \tanh(\alpha x) + \beta

    :math:`\alpha` is one learnable scalar; :math:`\gamma` and :math:`\beta` are per channel
    over ``normalized_shape``. The switches are those of :class:`torch.nn.LayerNorm`: without
    ``elementwise_affine`` there is neither :math:`\gamma` nor :math:`\beta`
    (:math:`\tanh(\alpha x)`), without ``bias`` no :math:`\beta`.

    Args:
        normalized_shape: the trailing dimensions, an int or a tuple, as for
            :class:`torch.nn.LayerNorm`.
        alpha_init: the initial :math:`\alpha`. Default: ``0.5``, the paper's value for
            non-LLM models.
        elementwise_affine: whether to learn :math:`\gamma` and :math:`\beta`.
            Default: ``True``.
        bias: whether to learn :math:`\beta` (with ``elementwise_affine``). Default: ``True``.
        device, dtype: where and in which dtype the parameters are made.

    Attributes:
        alpha: :math:`\alpha`, the learnable scalar (shape ``()``), initialised to
            ``alpha_init``.
        weight: :math:`\gamma`, the learnable gain of shape ``normalized_shape``,
            initialised to ones; None without ``elementwise_affine``.
        bias: :math:`\beta`, the learnable shift of shape ``normalized_shape``, initialised
            to zeros; None without ``elementwise_affine`` or ``bias``.

    Shape:
        - Input: :math:`(*, \text{normalized\_shape})`
        - Output: same shape as the input

    Examples::

        >>> layer = DyT(64)
        >>> x = torch.randn(8, 10, 64)
        >>> layer(x).shape
        torch.Size([8, 10, 64])
        >>> torch.equal(layer(x), torch.tanh(0.5 * x))  # at initialisation
        True
        >>> [name for name, _ in DyT(64, bias=False).named_parameters()]
        ['alpha', 'weight']
    """

    def __init__(
        self,
        normalized_shape: ShapeLike,
        alpha_init: float = DYT_ALPHA_INIT,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not math.isfinite(alpha_init):
            raise ValueError(f"alpha_init must be a finite float, got {alpha_init!r}")
        for name, flag in (("elementwise_affine", elementwise_affine), ("bias", bias)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {flag!r}")
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = as_shape(normalized_shape)
        self.alpha_init = float(alpha_init)
        self.elementwise_affine = elementwise_affine
        self.alpha = nn.Parameter(torch.empty((), **factory))
        shape = self.normalized_shape
        if elementwise_affine:
            self.weight = nn.Parameter(torch.empty(shape, **factory))
            self.bias = nn.Parameter(torch.empty(shape, **factory)) if bias else None
        else:
            self.weight = self.bias = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.alpha, self.alpha_init)
        if self.weight is not None:
            nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.normalized_shape)
        return NF.dyt(x, self.alpha, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, alpha_init={self.alpha_init}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class AdaNorm(nn.Module):
    r"""AdaNorm (Xu et al., 2019): LayerNorm without gain or bias, with an adaptive scale.

    .. math::
        y = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad
        \mathrm{AdaNorm}(x) = C \,\bigl(1 - k\, \mathrm{sg}(y)\bigr) \odot y

    :math:`\mu, \sigma^2` are the mean and biased variance over ``normalized_shape`` (the
    LayerNorm convention, so ``k=0, scale=1`` is exactly LayerNorm without affine; Xu et
    al.'s script divides by the unbiased std plus eps instead). ``sg`` is stop-gradient: the
    factor :math:`1 - k y` is treated as a constant in the backward pass, which is what makes
    the gradient of AdaNorm differ from that of the plain cubic :math:`C(y - k y^2)`.
    ``k`` defaults to the paper's 0.1. ``scale`` (:math:`C`) defaults to 1 (our choice: it
    keeps the output at LayerNorm's unit scale, like the gain LN starts with; Xu et al.'s
    IWSLT script uses 2).

    Args:
        normalized_shape: the trailing dimensions, as for :class:`torch.nn.LayerNorm`.
        k: the adaptive factor's slope :math:`k \ge 0`. Default: ``0.1``.
        scale: :math:`C > 0`. Default: ``1.0``.
        eps: added to :math:`\sigma^2`. Default: ``1e-5``.
        device, dtype: accepted for the common factory signature; nothing is made.

    Attributes:
        normalized_shape, k, scale, eps: as given. The layer has no learnable parameters.

    Shape:
        - Input: :math:`(*, \text{normalized\_shape})`
        - Output: same shape as the input

    Examples::

        >>> x = torch.randn(8, 10, 64)
        >>> AdaNorm(64)(x).shape
        torch.Size([8, 10, 64])
        >>> torch.equal(AdaNorm(64, k=0.0)(x), F.layer_norm(x, (64,)))  # k = 0: plain LN
        True
    """

    def __init__(
        self,
        normalized_shape: ShapeLike,
        k: float = 0.1,
        scale: float = 1.0,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not math.isfinite(k) or k < 0:
            raise ValueError(f"k must be a finite float >= 0, got {k!r}")
        self.normalized_shape = as_shape(normalized_shape)
        self.k = float(k)
        self.scale = positive_number("scale", scale)
        self.eps = positive_number("eps", eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return NF.ada_norm(x, self.normalized_shape, self.k, self.scale, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, k={self.k}, scale={self.scale}, eps={self.eps}"
        )


class FiLMNorm(nn.Module):
    r"""FiLM-style adaptive LayerNorm, conditioned on the sample's own pooled input.

    .. math::
        \bar x = \mathrm{pool}(x), \qquad
        [\Delta\gamma, \beta] = W_2\, \mathrm{ReLU}(W_1 \bar x + b_1) + b_2, \qquad
        \mathrm{FiLMNorm}(x) = \mathrm{LN}(x) \odot (1 + \Delta\gamma) + \beta

    ``LN`` has no affine parameters; ``pool`` is the mean over the token dimensions (none
    for a 2-D input, real tokens only when ``token_mask`` is given). Perez et al.'s FiLM
    predicts :math:`\gamma, \beta` from an external condition; with none, the input itself
    conditions (the adaLN form). The last layer starts at zero, so the layer starts as plain
    LayerNorm.

    Args:
        normalized_shape: the trailing dimensions, as for :class:`torch.nn.LayerNorm`.
        hidden: width of the conditioning MLP. Default: ``max(1, D // 2)``,
            :math:`D = \prod \text{normalized\_shape}`.
        eps: added to the variance. Default: ``1e-5``.
        device, dtype: where and in which dtype the parameters are made.

    Attributes:
        condition: the MLP ``Linear(D, hidden) -> ReLU -> Linear(hidden, 2 D)``. Its first
            layer (:math:`W_1` of shape ``(hidden, D)``, :math:`b_1`) is initialised as
            :class:`torch.nn.Linear`; its last (:math:`W_2` of shape ``(2 D, hidden)``,
            :math:`b_2`) to zeros.

    Shape:
        - Input: :math:`(N, *, \text{normalized\_shape})`
        - Output: same shape as the input

    Examples::

        >>> layer = FiLMNorm(64)
        >>> x = torch.randn(8, 10, 64)
        >>> layer(x).shape
        torch.Size([8, 10, 64])
        >>> torch.allclose(layer(x), F.layer_norm(x, (64,)))  # it starts as LayerNorm
        True
    """

    pools_tokens = True

    def __init__(
        self,
        normalized_shape: ShapeLike,
        hidden: int | None = None,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = as_shape(normalized_shape)
        features = math.prod(self.normalized_shape)
        self.eps = positive_number("eps", eps)
        self.condition = pooled_mlp(features, hidden, 2 * features, **factory)
        self.hidden = self.condition[0].out_features
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.condition[0].reset_parameters()
        nn.init.zeros_(self.condition[2].weight)
        nn.init.zeros_(self.condition[2].bias)

    def forward(
        self, x: torch.Tensor, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        check_input(x, self.normalized_shape, min_extra_dims=1)
        pooled = token_pool(x, len(self.normalized_shape), token_mask)
        d_gamma, beta = self.condition(pooled).chunk(2, dim=-1)
        return NF.film_norm(x, d_gamma, beta, self.normalized_shape, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, hidden={self.hidden}, eps={self.eps}"
