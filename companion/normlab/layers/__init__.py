"""Normalisers and corrected layers.

Part I (the affine divergence): ``AffineLikeLinear``, ``NormLikeLinear``, ``L2Norm``,
``PatchNormConv2d``; RMSNorm is torch's own ``nn.RMSNorm``.

Part II (AutoNorm): ``DyT``, ``AdaNorm``, ``FiLMNorm``, ``NormSelector``, ``AutoNorm``.
"""
from __future__ import annotations
