"""Chapter 9 (the candidates): the numbers its prose quotes about LayerNorm and DyT on
real activations.

- :func:`numbers`: from the tokens a trained model's norm sees, the largest standardised
  entry against the bound ``sqrt(D - 1)``, the spread of the tokens' own ``sigma``, and
  the largest off-diagonal entry of LayerNorm's Jacobian on one token (DyT's is 0);
- :func:`saturated_share`: the share of entries where DyT's slope has fallen below a
  fraction of its largest, the exercise on its saturation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F

__all__ = ["numbers", "saturated_share"]


def numbers(tokens: torch.Tensor, eps: float = 1e-5) -> Mapping[str, float]:
    """Facts about LayerNorm on ``tokens`` (``(N, D)``, the inputs of a norm): ``largest``
    (the largest ``|(x - mu) / sigma|`` entry, with ``eps`` inside ``sigma`` as
    LayerNorm has it), ``bound`` (``sqrt(D - 1)``), ``sigma_min``, ``sigma_median`` and
    ``sigma_max`` (each token's own spread), ``alpha_typical`` (``1 / median sigma``,
    the slope LayerNorm gives a typical token) and ``jac_ln`` (the largest off-diagonal
    entry of LayerNorm's Jacobian at the first token, in float64)."""
    if tokens.ndim != 2 or tokens.shape[1] < 2:
        raise ValueError(
            f"tokens must be (N, D) with D >= 2, got {tuple(tokens.shape)}"
        )
    x = tokens.detach().double()
    width = x.shape[1]
    sigma = torch.sqrt(x.var(dim=1, unbiased=False) + eps)
    standardised = (x - x.mean(dim=1, keepdim=True)) / sigma[:, None]
    jacobian = torch.autograd.functional.jacobian(
        lambda v: F.layer_norm(v, (width,), eps=eps), x[0]
    )
    off = ~torch.eye(width, dtype=torch.bool)
    return {
        "largest": float(standardised.abs().max()),
        "bound": math.sqrt(width - 1),
        "sigma_min": float(sigma.min()),
        "sigma_median": float(sigma.median()),
        "sigma_max": float(sigma.max()),
        "alpha_typical": float(1 / sigma.median()),
        "jac_ln": float(jacobian[off].abs().max()),
    }


def saturated_share(x: torch.Tensor, alpha: float, below: float = 0.5) -> float:
    """The share of entries of ``x`` where DyT's slope ``alpha (1 - tanh^2(alpha x))``
    is under ``below`` times its largest, ``alpha``: where ``|alpha x| >
    artanh(sqrt(1 - below))``."""
    if not 0 < below < 1:
        raise ValueError(f"below must lie in (0, 1), got {below!r}")
    slope = 1 - torch.tanh(alpha * x.detach().double()) ** 2
    return float((slope < below).double().mean())
