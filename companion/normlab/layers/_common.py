"""Shape checks, token pooling and the pooled MLP shared by the Part II layers.

Inputs have shape ``(N, *tokens, *normalized_shape)``: a batch dimension first, any number
of token dimensions, then the normalised dimensions. Layers that look at a whole sample
pool over the token dimensions (:func:`token_pool`), optionally over real tokens only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from .._checks import positive_int

ShapeLike = int | Sequence[int] | torch.Size


def as_shape(normalized_shape: ShapeLike) -> tuple[int, ...]:
    """Validate ``normalized_shape`` the way ``nn.LayerNorm`` reads it."""
    if isinstance(normalized_shape, (bool, str)):
        raise TypeError(
            f"normalized_shape must be an int or a tuple of ints, got {normalized_shape!r}"
        )
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    try:
        shape = tuple(int(d) for d in normalized_shape)
    except TypeError as err:
        raise TypeError(
            f"normalized_shape must be an int or a tuple of ints, got {normalized_shape!r}"
        ) from err
    if not shape or any(d < 1 for d in shape):
        raise ValueError(
            f"normalized_shape must hold positive sizes, got {normalized_shape!r}"
        )
    return shape


def token_pool(
    x: torch.Tensor, ndim_normalized: int, token_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean over the token dimensions: ``(N, *tokens, *shape) -> (N, prod(shape))``.

    The token dimensions are all dimensions except the batch (first) and the
    ``ndim_normalized`` trailing ones; a 2-D input ``(N, D)`` has none and is returned as is.
    ``token_mask`` (bool, ``(N, *tokens)``, True = real token) restricts the mean to real
    tokens; a sample with no real token pools to zeros.
    """
    n, features = x.shape[0], math.prod(x.shape[x.dim() - ndim_normalized :])
    token_dims = tuple(range(1, x.dim() - ndim_normalized))
    if not token_dims:
        return x.reshape(n, features)
    if token_mask is None:
        return x.mean(dim=token_dims).reshape(n, features)
    if token_mask.shape != x.shape[: 1 + len(token_dims)]:
        raise ValueError(
            f"token_mask of shape {tuple(token_mask.shape)} does not match the batch and token "
            f"dimensions {tuple(x.shape[: 1 + len(token_dims)])} of the input"
        )
    weight = token_mask.to(x.dtype).reshape(*token_mask.shape, *([1] * ndim_normalized))
    total = (x * weight).sum(dim=token_dims)
    count = weight.sum(dim=token_dims).clamp_min(1.0)
    return (total / count).reshape(n, features)


def pooled_mlp(
    features: int,
    hidden: int | None,
    out_features: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> nn.Sequential:
    """``Linear(features, hidden) -> ReLU -> Linear(hidden, out_features)``: the small network
    that :class:`~normlab.layers.FiLMNorm` and :class:`~normlab.layers.NormSelector` apply to
    the token-pooled input. ``hidden`` defaults to ``max(1, features // 2)``, as in the
    AutoNorm code."""
    hidden = max(1, features // 2) if hidden is None else positive_int("hidden", hidden)
    return nn.Sequential(
        nn.Linear(features, hidden, device=device, dtype=dtype),
        nn.ReLU(),
        nn.Linear(hidden, out_features, device=device, dtype=dtype),
    )


def per_sample(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reshape a per-sample tensor ``(N,)`` to broadcast against ``x`` ``(N, ...)``."""
    return v.reshape(v.shape[0], *([1] * (x.dim() - 1)))
