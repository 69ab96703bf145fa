"""A fully-connected network whose linear and normalisation layers are factory arguments.

Part I compares normalisers by swapping two factories: ``linear_layer`` (``nn.Linear`` or a
corrected layer such as ``normlab.layers.AffineLikeLinear``) and ``norm_layer`` (a
normaliser placed after each hidden linear layer, before the activation)::

    x -> flatten -> [linear -> norm -> activation] x depth -> linear -> logits
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TypeVar

import torch
from torch import nn

from .. import normalisers
from .._checks import non_negative_int, one_of, positive_ints
from ..normalisers import LinearFactory, NormFactory

__all__ = [
    "ACTIVATIONS",
    "HEADS",
    "INITS",
    "MLP",
    "MLPConfig",
    "config_or_fields",
    "hidden_blocks",
    "initialise",
    "mlp_for",
]

Config = TypeVar("Config")

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "tanh": nn.Tanh,
    "leaky_relu": nn.LeakyReLU,
    "relu": nn.ReLU,
    "gelu": nn.GELU,
}
# Weight initialisations of Part I's models: torch's default (Kaiming-uniform weights,
# uniform biases) or Xavier-normal weights with zero biases, the choice of the paper's
# author's public code.
INITS: tuple[str, ...] = ("default", "xavier_normal")
# The output layer of an MLP: built like the hidden ones ("same", so corrected for the
# corrections) or a plain ``nn.Linear`` ("plain").
HEADS: tuple[str, ...] = ("same", "plain")


def initialise(model: nn.Module, init: str) -> nn.Module:
    """Apply ``init`` (one of :data:`INITS`) to every linear and convolution layer of
    ``model`` (corrected layers included), in place; ``"default"`` leaves torch's own."""
    one_of("init", init, INITS)
    if init == "xavier_normal":
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                nn.init.xavier_normal_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
    return model


@dataclass
class MLPConfig:
    """Shape and parts of an :class:`MLP`.

    ``depth`` counts hidden blocks ``linear -> norm -> activation``; the output layer comes
    on top, so ``depth=3`` has four linear layers. ``linear_layer`` builds every linear
    layer, the output layer too unless ``head="plain"`` (an ``nn.Linear``); ``norm_layer``
    (or None) follows each hidden one. ``init`` is one of :data:`INITS`.
    """

    in_features: int
    num_classes: int
    width: int = 128
    depth: int = 3
    activation: str = "tanh"
    linear_layer: LinearFactory = nn.Linear
    norm_layer: NormFactory | None = None
    init: str = "default"
    head: str = "same"

    def __post_init__(self) -> None:
        positive_ints(
            in_features=self.in_features, num_classes=self.num_classes, width=self.width
        )
        non_negative_int("depth", self.depth)
        one_of("activation", self.activation, ACTIVATIONS)
        one_of("init", self.init, INITS)
        one_of("head", self.head, HEADS)


def hidden_blocks(
    layer: Callable[[int, int], nn.Module],
    norm_layer: NormFactory | None,
    activation: str,
    depth: int,
    in_size: int,
    size: int,
    *,
    first: Callable[[int, int], nn.Module] | None = None,
) -> nn.Sequential:
    """``[layer -> norm -> activation] x depth``, the first layer from ``in_size`` to ``size``
    (made by ``first`` where given) and the others ``size`` to ``size``: the hidden part of
    Part I's MLP and CNN."""
    layers: list[nn.Module] = []
    for i in range(depth):
        make = first if i == 0 and first is not None else layer
        layers.append(make(in_size if i == 0 else size, size))
        if norm_layer is not None:
            layers.append(norm_layer(size))
        layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def config_or_fields(
    kind: Callable[..., Config], config: Config | None, fields_: Mapping[str, object]
) -> Config:
    """``config``, or a ``kind`` built from ``fields_``: the two ways to build a Part I model."""
    if config is None:
        return kind(**fields_)
    if fields_:
        raise TypeError("pass either a config or its fields, not both")
    return config


class MLP(nn.Module):
    r"""Fully-connected classifier (or regressor) with pluggable linear and norm layers.

    Each hidden block computes :math:`h_{l} = \phi(\mathrm{norm}(\mathrm{linear}(h_{l-1})))`.
    Images are flattened first.

    Shape:
        - Input: :math:`(N, *)` with :math:`\prod * =` ``in_features``.
        - Output: :math:`(N, \text{num\_classes})`.

    Build from a config or from its fields: ``MLP(MLPConfig(64, 10))`` or
    ``MLP(in_features=64, num_classes=10, norm_layer=nn.LayerNorm)``.
    """

    def __init__(self, config: MLPConfig | None = None, **fields_: object) -> None:
        super().__init__()
        self.config = config = config_or_fields(MLPConfig, config, fields_)
        self.hidden = hidden_blocks(
            config.linear_layer,
            config.norm_layer,
            config.activation,
            config.depth,
            config.in_features,
            config.width,
        )
        head = nn.Linear if config.head == "plain" else config.linear_layer
        self.head = head(
            config.width if config.depth else config.in_features, config.num_classes
        )
        initialise(self, config.init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        x = self.hidden(x)
        return self.head(x)

    def extra_repr(self) -> str:
        c = self.config
        return f"width={c.width}, depth={c.depth}, activation={c.activation}"


def mlp_for(normaliser: str, **config: object) -> MLP:
    """Build an :class:`MLP` using one of Part I's normalisers by name.

    ``normaliser`` is one of :data:`normlab.normalisers.PART1`; its registered
    ``(linear_layer, norm_layer)`` pair builds the layers. ``config`` holds the other :class:`MLPConfig` fields (``in_features``,
    ``num_classes``, ``width``, ``depth``, ``activation``, ``init``, ``head``).
    """
    one_of("normaliser", normaliser, normalisers.PART1)
    known = {f.name for f in fields(MLPConfig)} - {"linear_layer", "norm_layer"}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown MLP settings: {', '.join(sorted(unknown))}")
    linear_layer, norm_layer = normalisers.get(normaliser).pair
    return MLP(MLPConfig(linear_layer=linear_layer, norm_layer=norm_layer, **config))  # type: ignore[arg-type]
