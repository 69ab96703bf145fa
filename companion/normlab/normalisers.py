"""The one normaliser registry: every normaliser name the book uses, and what it means.

Each name maps to a :class:`Normaliser`: the layers it builds, the label figures and tables
show, its colour, and the part of the book it belongs to. Experiments, models, figures and
chapters all read this table, so a name is spelled one way everywhere.

Part I compares normalisers on fully-connected nets as a (linear layer, norm layer) pair:

==============  ======================  =========================================
name            linear layer            norm layer after it
==============  ======================  =========================================
none            ``nn.Linear``           none (a plain affine layer)
batchnorm       ``nn.Linear``           ``nn.BatchNorm1d``
layernorm       ``nn.Linear``           ``nn.LayerNorm``
rmsnorm         ``nn.Linear``           ``nn.RMSNorm``
l2              ``nn.Linear``           ``L2Norm`` over the features, ``x / |x|``
norm_like       ``NormLikeLinear``      none (the correction is in the layer)
affine_like     ``AffineLikeLinear``    none
==============  ======================  =========================================

Part II puts one normaliser in every normalisation slot of a Transformer:
``frozen_ln`` (plain LayerNorm, the paper's "FrozenLN"), ``dyt``, ``adanorm``, ``film``,
``autonorm`` (learned gate), ``autonorm_random`` (the Random Selector), and ``autonorm_s`` /
``autonorm_s_low``: the ``autonorm`` layer trained under :class:`normlab.gates.AutoNormS`
with the paper's freezing rule (``"high"``) or its opposite reading (``"low"``).

Colours come from one colour-blind-safe palette, :data:`PALETTE` (Okabe and Ito, 2008).
Parts never share a figure, so a colour repeats across parts but never within one; a
normaliser that plays the same role in both parts (LayerNorm, FrozenLN) keeps one colour.
An entry that names no colour gets the first (line style, colour) pair, line styles from
:data:`LINESTYLES` outermost, that no earlier entry of its part has: a ninth name of a part
is drawn dashed, so a part holds up to ``len(PALETTE) * len(LINESTYLES)`` names.

A new normaliser is one layer class and one entry in :data:`NORMALISERS`; an entry with a
``conv`` pair also joins chapter 8's CNNs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from ._checks import one_of
from .layers import (
    AdaNorm,
    AffineLikeLinear,
    AutoNorm,
    DyT,
    FiLMNorm,
    L2Norm,
    NormLikeLinear,
    PatchNormConv2d,
    RMSNorm2d,
)
from .layers._common import ShapeLike, as_shape
from .paper import FREEZE_RULES

__all__ = [
    "PALETTE",
    "LINESTYLES",
    "PARTS",
    "NORMALISERS",
    "PART1",
    "PART2",
    "Normaliser",
    "LinearFactory",
    "NormFactory",
    "ConvFactory",
    "ConvPair",
    "CONV3X3",
    "get",
    "names",
    "conv_names",
    "label",
    "colour",
    "linestyle",
    "norm_layer",
    "resolve_norm_layer",
    "l2_norm",
]

LinearFactory = Callable[..., nn.Module]
"""``(in_features, out_features) -> nn.Module``, like ``nn.Linear``."""
NormFactory = Callable[..., nn.Module]
"""``normalized_shape -> nn.Module``, like ``nn.LayerNorm`` (``num_features`` for BatchNorm)."""
ConvFactory = Callable[..., nn.Module]
"""``(in_channels, out_channels) -> nn.Module``, like a 3x3 ``nn.Conv2d``."""
ConvPair = tuple[ConvFactory, NormFactory | None]
"""Chapter 8's ``(conv_layer, norm_layer)`` pair; ``norm_layer`` takes the channel count."""

#: The convolution of chapter 8's CNNs: 3x3, padding 1 (the map keeps its size).
CONV3X3: ConvFactory = functools.partial(nn.Conv2d, kernel_size=3, padding=1)

# Okabe-Ito: black, orange, sky blue, bluish green, yellow, blue, vermillion, reddish purple.
PALETTE: tuple[str, ...] = (
    "#000000",
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#F0E442",
    "#0072B2",
    "#D55E00",
    "#CC79A7",
)
_BLACK, _ORANGE, _SKY, _GREEN, _YELLOW, _BLUE, _VERMILLION, _PURPLE = PALETTE
#: Matplotlib line styles; an entry's default style takes the next one once its part has
#: used every colour of :data:`PALETTE` with the one before.
LINESTYLES: tuple[str, ...] = ("-", "--", ":", "-.")

PARTS: tuple[int, ...] = (1, 2)


def l2_norm(
    normalized_shape: ShapeLike,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> L2Norm:
    """:class:`~normlab.layers.L2Norm` over the trailing ``normalized_shape`` dimensions.

    A drop-in for ``nn.LayerNorm(normalized_shape)``: in an MLP of width ``d``, ``l2_norm(d)``
    divides each sample's ``d`` features by their norm. ``device`` and ``dtype`` are accepted
    for the common factory signature; the layer has no parameters.
    """
    return L2Norm(dim=tuple(range(-len(as_shape(normalized_shape)), 0)))


@dataclass(frozen=True, kw_only=True)
class Normaliser:
    """One registered normaliser.

    ``norm_layer`` builds the normalisation layer (None: there is none); ``linear_layer``
    is the linear layer it goes with in Part I's MLPs. ``drop_in`` says that ``norm_layer``
    takes a ``normalized_shape`` like ``nn.LayerNorm``, so it fits a Transformer's
    normalisation slots. ``conv`` is its ``(conv_layer, norm_layer)`` pair in chapter 8's
    CNNs (None: it has none there). ``colour`` and ``linestyle`` draw it in every figure;
    left None, the registry gives the entry its part's next free pair (module docstring).
    ``freeze_rule`` is the AutoNorm-S rule trained with it (Part II), ``gated`` whether its
    layers have an AutoNorm gate to record.
    """

    name: str
    part: int
    label: str
    norm_layer: NormFactory | None
    colour: str | None = None
    linestyle: str | None = None
    linear_layer: LinearFactory = nn.Linear
    drop_in: bool = True
    conv: ConvPair | None = None
    freeze_rule: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        one_of("part", self.part, PARTS)
        one_of("colour", self.colour, (*PALETTE, None))
        one_of("linestyle", self.linestyle, (*LINESTYLES, None))
        one_of("freeze_rule", self.freeze_rule, (*FREEZE_RULES, None))

    @property
    def pair(self) -> tuple[LinearFactory, NormFactory | None]:
        """Part I's ``(linear_layer, norm_layer)`` pair."""
        return self.linear_layer, self.norm_layer

    @property
    def gated(self) -> bool:
        """Whether the normaliser's layers carry an AutoNorm gate."""
        return (
            self.norm_layer is AutoNorm
            or getattr(self.norm_layer, "func", None) is AutoNorm
        )


def _table(*entries: Normaliser) -> Mapping[str, Normaliser]:
    """The read-only registry of ``entries``, each given the first (colour, line style)
    pair, line styles outermost, that fits what it names and no earlier entry of its part
    has taken."""
    taken: dict[int, set[tuple[str, str]]] = {part: set() for part in PARTS}
    styled = {}
    for entry in entries:
        styles = (entry.linestyle,) if entry.linestyle else LINESTYLES
        colours = (entry.colour,) if entry.colour else PALETTE
        free = [
            (c, s) for s in styles for c in colours if (c, s) not in taken[entry.part]
        ]
        if not free:
            raise ValueError(
                f"normaliser {entry.name!r}: colour={entry.colour!r}, "
                f"linestyle={entry.linestyle!r} leave no (colour, linestyle) pair that "
                f"part {entry.part} has not taken; expected a free pair"
            )
        taken[entry.part].add(free[0])
        colour_, style = free[0]
        styled[entry.name] = dataclasses.replace(entry, colour=colour_, linestyle=style)
    return MappingProxyType(styled)


def _patchnorm(mode: str) -> ConvFactory:
    """A 3x3 :class:`~normlab.layers.PatchNormConv2d` in ``mode``, in place of :data:`CONV3X3`."""
    return functools.partial(PatchNormConv2d, kernel_size=3, padding=1, mode=mode)


NORMALISERS: Mapping[str, Normaliser] = _table(
    # Part I: (linear layer, norm layer) pairs in an MLP.
    Normaliser(
        name="none",
        part=1,
        label="plain",
        colour=_BLACK,
        norm_layer=None,
        drop_in=False,
        conv=(CONV3X3, None),
        description="plain affine layers, no normaliser",
    ),
    Normaliser(
        name="batchnorm",
        part=1,
        label="BatchNorm",
        colour=_BLUE,
        norm_layer=nn.BatchNorm1d,
        drop_in=False,
        conv=(CONV3X3, nn.BatchNorm2d),
        description="batch statistics per feature",
    ),
    Normaliser(
        name="layernorm",
        part=1,
        label="LayerNorm",
        colour=_GREEN,
        norm_layer=nn.LayerNorm,
        # LayerNorm over a whole feature map: one group of every channel
        conv=(CONV3X3, functools.partial(nn.GroupNorm, 1)),
        description="mean and variance over the features",
    ),
    Normaliser(
        name="rmsnorm",
        part=1,
        label="RMSNorm",
        colour=_SKY,
        norm_layer=nn.RMSNorm,
        conv=(CONV3X3, RMSNorm2d),
        description="root mean square over the features",
    ),
    Normaliser(
        name="l2",
        part=1,
        label="L2",
        colour=_PURPLE,
        norm_layer=l2_norm,
        description="parameter-free x / |x| over the features",
    ),
    Normaliser(
        name="norm_like",
        part=1,
        label="norm-like",
        colour=_ORANGE,
        norm_layer=None,
        linear_layer=NormLikeLinear,
        drop_in=False,
        # PatchNorm: the correction of chapter 3 applied to every receptive field
        conv=(_patchnorm("norm_like"), None),
        description="z = W x / |x| + b",
    ),
    Normaliser(
        name="affine_like",
        part=1,
        label="affine-like",
        colour=_VERMILLION,
        norm_layer=None,
        linear_layer=AffineLikeLinear,
        drop_in=False,
        conv=(_patchnorm("affine_like"), None),
        description="z = (W x + b) / sqrt(|x|^2 + 1)",
    ),
    # Part II: one normaliser in every normalisation slot of a Transformer.
    Normaliser(
        name="frozen_ln",
        part=2,
        label="FrozenLN",
        colour=_GREEN,
        norm_layer=nn.LayerNorm,
        description="plain LayerNorm",
    ),
    Normaliser(
        name="dyt",
        part=2,
        label="DyT",
        colour=_BLUE,
        norm_layer=DyT,
        description="Dynamic Tanh",
    ),
    Normaliser(
        name="adanorm",
        part=2,
        label="AdaNorm",
        colour=_SKY,
        norm_layer=AdaNorm,
        description="LayerNorm with an adaptive scale",
    ),
    Normaliser(
        name="film",
        part=2,
        label="FiLM",
        colour=_PURPLE,
        norm_layer=FiLMNorm,
        description="LayerNorm, scale and shift from the pooled input",
    ),
    Normaliser(
        name="autonorm",
        part=2,
        label="AutoNorm",
        colour=_ORANGE,
        norm_layer=AutoNorm,
        description="learned Gumbel-Softmax gate, never frozen",
    ),
    Normaliser(
        name="autonorm_random",
        part=2,
        label="Random Selector",
        colour=_BLACK,
        norm_layer=functools.partial(AutoNorm, selector="random"),
        description="AutoNorm with uniform random weights",
    ),
    Normaliser(
        name="autonorm_s",
        part=2,
        label="AutoNorm-S",
        colour=_VERMILLION,
        norm_layer=AutoNorm,
        freeze_rule="high",
        description="AutoNorm-S, the paper's rule: freeze if H >= eps_H at T_freeze",
    ),
    Normaliser(
        name="autonorm_s_low",
        part=2,
        label="AutoNorm-S (low)",
        colour=_YELLOW,
        norm_layer=AutoNorm,
        freeze_rule="low",
        description="AutoNorm-S, the opposite reading: freeze once H < eps_H at T_freeze",
    ),
)

PART1: tuple[str, ...] = tuple(name for name, n in NORMALISERS.items() if n.part == 1)
PART2: tuple[str, ...] = tuple(name for name, n in NORMALISERS.items() if n.part == 2)


def get(name: str) -> Normaliser:
    """The registered :class:`Normaliser` called ``name``; a ValueError lists the names otherwise."""
    return NORMALISERS[one_of("normaliser", name, NORMALISERS)]


def names(part: int | None = None) -> tuple[str, ...]:
    """Every registered name in book order, or those of one part."""
    if part is None:
        return tuple(NORMALISERS)
    return PART1 if one_of("part", part, PARTS) == 1 else PART2


def conv_names() -> tuple[str, ...]:
    """The names with a ``conv`` pair, in book order: chapter 8's CNN normalisers."""
    return tuple(name for name, entry in NORMALISERS.items() if entry.conv is not None)


def label(name: str) -> str:
    """The label figures and tables show for ``name``."""
    return get(name).label


def colour(name: str) -> str:
    """The colour of ``name`` in every figure."""
    return str(get(name).colour)


def linestyle(name: str) -> str:
    """The matplotlib line style of ``name`` in every figure."""
    return str(get(name).linestyle)


def norm_layer(name: str, **kwargs: Any) -> NormFactory:
    """The factory ``normalized_shape -> nn.Module`` of a drop-in normaliser, by name.

    ``kwargs`` are bound into the factory (``norm_layer("autonorm", tau=0.5)``). Every Part II
    name is accepted (``autonorm_s`` and ``autonorm_s_low`` build the ``autonorm`` layer;
    their freezing comes from :class:`normlab.gates.AutoNormS` with the entry's
    ``freeze_rule``), and so are Part I's ``layernorm``, ``rmsnorm`` and ``l2``.
    """
    drop_ins = [n for n, entry in NORMALISERS.items() if entry.drop_in]
    factory = NORMALISERS[one_of("norm_layer name", name, drop_ins)].norm_layer
    return functools.partial(factory, **kwargs) if kwargs else factory


def resolve_norm_layer(norm_layer_or_name: NormFactory | str) -> NormFactory:
    """Accept a factory or a registered name; return a factory."""
    if isinstance(norm_layer_or_name, str):
        return norm_layer(norm_layer_or_name)
    if not callable(norm_layer_or_name):
        raise TypeError(
            f"norm_layer must be a callable factory or a name, got {norm_layer_or_name!r}"
        )
    return norm_layer_or_name
