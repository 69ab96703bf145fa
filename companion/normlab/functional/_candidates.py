"""Part II's candidates: DyT, AdaNorm and FiLM-conditioned LayerNorm
(:mod:`normlab.layers.candidates`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import (
    _check_input,
)

__all__ = ["dyt", "ada_norm", "film_norm"]


def dyt(
    x: Tensor, alpha: Tensor, weight: Tensor | None = None, bias: Tensor | None = None
) -> Tensor:
    r""":math:`\gamma \odot \tanh(\alpha x) + \beta`, without :math:`\gamma` (``weight``) or
    :math:`\beta` (``bias``) where they are None. See :class:`~normlab.layers.DyT`."""
    y = torch.tanh(alpha * x)
    if weight is None:
        return y if bias is None else y + bias
    return y * weight if bias is None else torch.addcmul(bias, weight, y)


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
