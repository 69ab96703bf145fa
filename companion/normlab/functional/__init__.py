"""The functional forms of the layers in :mod:`normlab.layers`, as ``torch.nn.functional``
is to ``torch.nn``.

Each layer's ``forward`` checks its input and calls its function here with its parameters,
so a layer and its function are one implementation: ``AffineLikeLinear(...)(x)`` is
``affine_like_linear(x, layer.weight, layer.bias)`` bit for bit.

The norms are taken at a power-of-two scale (:func:`power_of_two_scale`), so that they stay
finite for any finite input, float16 at 60000 and float32 near its largest value included.

The corrections and AutoNorm's mix have hand-written backward passes (one autograd node
each) that give autograd's gradients of the plain expressions bit for bit in fewer passes;
they are once differentiable (a second derivative raises). Under a ``torch.func`` transform
or autocast the plain expressions run instead.
"""

from __future__ import annotations

from ._affine import (
    affine_like_linear,
    gain,
    l2_normalize,
    norm_like_linear,
    patch_norm_conv2d,
    patch_sq_norm,
    rms_norm2d,
)
from ._candidates import ada_norm, dyt, film_norm
from ._common import PATCHNORM_FLOOR, PATCHNORM_MODES, Dims, Pair, power_of_two_scale
from ._gate import (
    TAU_MIN,
    at_least_float32,
    autonorm_mix,
    check_tau,
    gumbel_softmax,
    norm_selector,
    sample_gumbel,
)

__all__ = [
    "Dims",
    "Pair",
    "PATCHNORM_MODES",
    "PATCHNORM_FLOOR",
    "affine_like_linear",
    "norm_like_linear",
    "l2_normalize",
    "patch_norm_conv2d",
    "patch_sq_norm",
    "dyt",
    "gain",
    "ada_norm",
    "film_norm",
    "rms_norm2d",
    "autonorm_mix",
    "TAU_MIN",
    "check_tau",
    "at_least_float32",
    "sample_gumbel",
    "gumbel_softmax",
    "norm_selector",
    "power_of_two_scale",
]
