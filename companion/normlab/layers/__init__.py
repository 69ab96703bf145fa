"""Normalisers and corrected layers, each a drop-in for its torch counterpart.

Part I (the affine divergence), :mod:`~normlab.layers.affine`: ``AffineLikeLinear`` and
``NormLikeLinear`` (for ``nn.Linear``), ``PatchNormConv2d`` (for ``nn.Conv2d``), ``L2Norm``,
``RMSNorm2d`` (RMSNorm over a feature map) and ``Gain``; RMSNorm over features is torch's
own ``nn.RMSNorm``.

Part II (AutoNorm): the candidates ``DyT``, ``AdaNorm`` and ``FiLMNorm``
(:mod:`~normlab.layers.candidates`) and the gate ``NormSelector`` and ``AutoNorm``
(:mod:`~normlab.layers.gate`), each a drop-in for ``nn.LayerNorm``.

Every normaliser's name, label and colour live in :mod:`normlab.normalisers`, whose
``norm_layer(name)`` returns a layer factory by the name experiment tables use.
"""

from __future__ import annotations

from ..functional import TAU_MIN, gumbel_softmax, sample_gumbel
from ._common import ShapeLike, token_pool
from .affine import (
    PATCHNORM_MODES,
    AffineLikeLinear,
    Gain,
    L2Norm,
    NormLikeLinear,
    PatchNormConv2d,
    RMSNorm2d,
)
from .candidates import AdaNorm, DyT, FiLMNorm
from .gate import CANDIDATES, SELECTOR_MODES, AutoNorm, NormSelector

__all__ = [
    "AffineLikeLinear",
    "NormLikeLinear",
    "PatchNormConv2d",
    "PATCHNORM_MODES",
    "L2Norm",
    "RMSNorm2d",
    "Gain",
    "DyT",
    "AdaNorm",
    "FiLMNorm",
    "NormSelector",
    "AutoNorm",
    "CANDIDATES",
    "SELECTOR_MODES",
    "TAU_MIN",
    "ShapeLike",
    "gumbel_softmax",
    "sample_gumbel",
    "token_pool",
]
