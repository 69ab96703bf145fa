"""A small convolutional network whose convolution and normalisation layers are factory arguments.

Chapter 8 compares normalisers in convolutions the way chapter 6 does in fully-connected
nets, by swapping two factories: ``conv_layer`` (a 3x3 ``nn.Conv2d`` or a
:class:`~normlab.layers.PatchNormConv2d`) and ``norm_layer`` (a normaliser after each
convolution, before the activation)::

    x -> [conv 3x3 -> norm -> activation] x depth -> average pool to 4x4 -> flatten -> linear -> logits

The first convolution may be strided (``stride=2`` halves a 28x28 image's map to 14x14, a
quarter of the cost); the others keep the resolution.

The head is a plain ``nn.Linear`` for every normaliser, so the comparison isolates the
convolutions (where PatchNorm acts).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields

from torch import Tensor, nn

from .. import normalisers
from .._checks import one_of, positive_ints
from ..normalisers import CONV3X3, ConvFactory, NormFactory
from .mlp import ACTIVATIONS, INITS, config_or_fields, hidden_blocks, initialise

__all__ = ["CNN", "CNNConfig", "cnn_for"]

POOLED_SIZE = 4  # the head sees a 4x4 map whatever the image size


@dataclass
class CNNConfig:
    """Shape and parts of a :class:`CNN`.

    ``conv_layer(in_channels, out_channels)`` builds each 3x3, padding-1 convolution;
    ``norm_layer(channels)`` (or None) follows each one. ``stride`` is the first
    convolution's stride. ``init`` is one of ``normlab.models.mlp.INITS``.
    """

    in_channels: int
    num_classes: int
    channels: int = 16
    depth: int = 2
    activation: str = "tanh"
    conv_layer: ConvFactory = CONV3X3
    norm_layer: NormFactory | None = None
    init: str = "default"
    stride: int = 1

    def __post_init__(self) -> None:
        one_of("init", self.init, INITS)
        positive_ints(
            in_channels=self.in_channels,
            num_classes=self.num_classes,
            channels=self.channels,
            depth=self.depth,
            stride=self.stride,
        )
        one_of("activation", self.activation, ACTIVATIONS)


class CNN(nn.Module):
    r"""Convolutional classifier with pluggable convolution and norm layers.

    Each block computes :math:`h_l = \phi(\mathrm{norm}(\mathrm{conv}(h_{l-1})))`, the first
    at the config's ``stride`` and the others at full resolution; an adaptive average pool
    then brings the map to 4x4 for a linear head.

    Shape:
        - Input: :math:`(N, C_{in}, H, W)` with :math:`H, W \ge 4 \cdot \text{stride}`.
        - Output: :math:`(N, \text{num\_classes})`.
    """

    def __init__(self, config: CNNConfig | None = None, **fields_: object) -> None:
        super().__init__()
        self.config = config = config_or_fields(CNNConfig, config, fields_)
        self.features = hidden_blocks(
            config.conv_layer,
            config.norm_layer,
            config.activation,
            config.depth,
            config.in_channels,
            config.channels,
            # only a strided net asks its factory for a stride (a custom one need not take it)
            first=functools.partial(config.conv_layer, stride=config.stride)
            if config.stride != 1
            else None,
        )
        self.pool = nn.AdaptiveAvgPool2d(POOLED_SIZE)
        self.head = nn.Linear(config.channels * POOLED_SIZE**2, config.num_classes)
        initialise(self, config.init)

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = self.pool(x).flatten(1)
        return self.head(x)

    def convolutions(self) -> list[nn.Conv2d]:
        """The network's convolution layers, in order (PatchNorm layers included)."""
        return [m for m in self.features if isinstance(m, nn.Conv2d)]

    def extra_repr(self) -> str:
        c = self.config
        stride = f", stride={c.stride}" if c.stride != 1 else ""
        return (
            f"channels={c.channels}, depth={c.depth}{stride}, activation={c.activation}"
        )


def cnn_for(normaliser: str, **config: object) -> CNN:
    """Build a :class:`CNN` with one of chapter 8's normalisers by name: its registered
    ``conv`` pair (:func:`normlab.normalisers.conv_names`).

    ``config`` holds the other :class:`CNNConfig` fields (``in_channels``, ``num_classes``,
    ``channels``, ``depth``, ``activation``, ``init``, ``stride``).
    """
    one_of("normaliser", normaliser, normalisers.conv_names())
    known = {f.name for f in fields(CNNConfig)} - {"conv_layer", "norm_layer"}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown CNN settings: {', '.join(sorted(unknown))}")
    conv_layer, norm_layer = normalisers.get(normaliser).conv  # type: ignore[misc]
    return CNN(CNNConfig(conv_layer=conv_layer, norm_layer=norm_layer, **config))  # type: ignore[arg-type]
