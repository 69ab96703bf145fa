"""Normalisers and corrected layers, each a drop-in for its torch counterpart.

Part I (the affine divergence): ``AffineLikeLinear`` and ``NormLikeLinear`` (for
``nn.Linear``), ``PatchNormConv2d`` (for ``nn.Conv2d``), ``L2Norm`` and ``Gain``; RMSNorm is
torch's own ``nn.RMSNorm``.

Part II (AutoNorm): ``DyT``, ``AdaNorm``, ``FiLMNorm``, ``NormSelector`` and ``AutoNorm``
(for ``nn.LayerNorm``); ``norm_layer(name)`` returns any of them by the name experiment
tables use.
"""
from __future__ import annotations

from .adaptive import (
    CANDIDATES,
    NORM_LAYERS,
    AdaNorm,
    AutoNorm,
    DyT,
    FiLMNorm,
    NormSelector,
    gumbel_softmax,
    norm_layer,
    resolve_norm_layer,
    sample_gumbel,
    token_pool,
)
from .affine import PATCHNORM_MODES, AffineLikeLinear, Gain, L2Norm, NormLikeLinear, PatchNormConv2d

__all__ = [
    "AffineLikeLinear", "NormLikeLinear", "PatchNormConv2d", "PATCHNORM_MODES", "L2Norm", "Gain",
    "DyT", "AdaNorm", "FiLMNorm", "NormSelector", "AutoNorm", "CANDIDATES", "NORM_LAYERS",
    "norm_layer", "resolve_norm_layer", "gumbel_softmax", "sample_gumbel", "token_pool",
]
