"""Normalisers and corrected layers.

Part I (the affine divergence): ``AffineLikeLinear``, ``NormLikeLinear``, ``L2Norm``,
``PatchNormConv2d``; RMSNorm is torch's own ``nn.RMSNorm``.

Part II (AutoNorm): ``DyT``, ``AdaNorm``, ``FiLMNorm``, ``NormSelector``, ``AutoNorm``.
"""
from __future__ import annotations
from .affine import AffineLikeLinear, Gain, L2Norm, NormLikeLinear, PATCHNORM_MODES, PatchNormConv2d
from .adaptive import (
    CANDIDATES, NORM_LAYERS, AdaNorm, AutoNorm, DyT, FiLMNorm, NormSelector, gumbel_softmax, norm_layer,
    resolve_norm_layer, sample_gumbel, token_pool,
)
