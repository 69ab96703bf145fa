"""Pre-norm Transformer building blocks shared by the Part II backbones.

Every block takes a ``norm_layer`` factory (``normalized_shape -> nn.Module``), so any
normaliser of :mod:`normlab.layers` drops in. A boolean ``token_mask`` ``(N, L)`` (True =
real token) flows through the blocks: attention ignores masked keys, and normalisers that
pool over tokens (``pools_tokens = True``) pool over real tokens only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import fraction, one_of, positive_ints, positive_number
from ..normalisers import NormFactory

__all__ = [
    "DEFAULT_INIT",
    "DEFAULT_READOUT",
    "Attention",
    "Block",
    "DropPath",
    "Encoder",
    "EncoderConfig",
    "FeedForward",
    "INITS",
    "LayerScale",
    "READOUTS",
    "apply_norm",
    "init_linear",
    "named_config",
]

Config = TypeVar("Config")


def named_config(
    table: Mapping[str, Config], kind: str, name: str, **overrides: object
) -> Config:
    """``table[name]`` with fields replaced; a ValueError lists the known names otherwise."""
    return dataclasses.replace(
        table[one_of(f"{kind} config", name, table)], **overrides
    )


def apply_norm(
    norm: nn.Module, x: torch.Tensor, token_mask: torch.Tensor | None
) -> torch.Tensor:
    """Call ``norm`` on ``x``, passing ``token_mask`` to normalisers that pool over tokens."""
    if token_mask is not None and getattr(norm, "pools_tokens", False):
        return norm(x, token_mask=token_mask)
    return norm(x)


class DropPath(nn.Module):
    r"""Stochastic depth: drop a whole residual branch per sample.

    In training, each sample's branch is multiplied by :math:`b / (1 - p)` with
    :math:`b \sim \mathrm{Bernoulli}(1 - p)`, so its expectation is unchanged; identity in
    eval mode or when ``p = 0``.
    """

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.p = fraction("drop path rate p", p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty(x.shape[0], *([1] * (x.dim() - 1))).bernoulli_(keep)
        return x * mask / keep

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LayerScale(nn.Module):
    r"""Per-channel gain on a residual branch (CaiT): :math:`\gamma \odot x`, :math:`\gamma`
    initialised to ``init`` (small, so each block starts close to the identity)."""

    def __init__(self, dim: int, init: float = 1e-4) -> None:
        super().__init__()
        self.init = float(init)
        self.gamma = nn.Parameter(torch.empty(dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.gamma, self.init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma

    def extra_repr(self) -> str:
        return f"{self.gamma.numel()}, init={self.init}"


# How a backbone's linear maps start: "trunc_normal_0.02" (weights truncated normal with std
# 0.02, biases zero: ViT's scheme, a scale chosen for width 768) or "torch_default" (torch's
# own fan-in default, uniform within 1/sqrt(fan_in)). Chapter 11 compares the two.
INITS: tuple[str, ...] = ("trunc_normal_0.02", "torch_default")
READOUTS: tuple[str, ...] = ("cls", "mean")
#: The book's initialisation for small models, in every chapter and profile (chapter 11):
#: PyTorch's fan-in default; ViT's truncated normal with std 0.02 was chosen for width 768.
DEFAULT_INIT = "torch_default"
DEFAULT_READOUT = "cls"  # the paper's ViT reads the class token


def init_linear(layer: nn.Linear | nn.Conv2d, init: str) -> None:
    """Initialise ``layer`` in place by the scheme ``init`` (one of :data:`INITS`)."""
    if init == "torch_default":
        layer.reset_parameters()
        return
    one_of("init", init, INITS)
    nn.init.trunc_normal_(layer.weight, std=0.02)
    nn.init.zeros_(layer.bias)


class Attention(nn.Module):
    """Multi-head self-attention with ``F.scaled_dot_product_attention``.

    ``token_mask`` ``(N, L)`` (True = real token) hides padded keys from every query.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        attn_dropout: float = 0.0,
        dropout: float = 0.0,
        init: str = "trunc_normal_0.02",
    ) -> None:
        super().__init__()
        self.init = one_of("init", init, INITS)
        if dim % heads:
            raise ValueError(f"dim={dim} must be divisible by heads={heads}")
        self.heads = heads
        self.attn_dropout = float(attn_dropout)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init_linear(self.qkv, self.init)
        init_linear(self.proj, self.init)

    def forward(
        self, x: torch.Tensor, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        n, length, dim = x.shape
        q, k, v = (
            self.qkv(x)
            .reshape(n, length, 3, self.heads, dim // self.heads)
            .permute(2, 0, 3, 1, 4)
        )
        attn_mask = None if token_mask is None else token_mask[:, None, None, :]
        dropout_p = self.attn_dropout if self.training else 0.0
        if torch._C._are_functorch_transforms_active() and not dropout_p:
            # under vmap (a population, normlab.population) the CPU kernel has no batching
            # rule and would run member by member: the same attention, written out
            out = _attention(q, k, v, attn_mask)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=dropout_p
            )
        return self.drop(self.proj(out.transpose(1, 2).reshape(n, length, dim)))


def _attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """Scaled dot-product attention as ``F.scaled_dot_product_attention`` defines it (a
    boolean ``mask``, True = attend), in plain operations that ``vmap`` batches."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class FeedForward(nn.Module):
    """The Transformer MLP: ``Linear(dim, hidden) -> GELU -> Linear(hidden, dim)``, with dropout."""

    def __init__(
        self,
        dim: int,
        hidden: int,
        dropout: float = 0.0,
        init: str = "trunc_normal_0.02",
    ) -> None:
        super().__init__()
        self.init = one_of("init", init, INITS)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init_linear(self.fc1, self.init)
        init_linear(self.fc2, self.init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


@dataclass
class EncoderConfig:
    """The encoder part of every Part II backbone's config.

    Defaults are the paper's vision setting (8 layers, 4 heads, dim 128; GELU, stochastic
    depth 0.1, LayerScale 1e-4, dropout 0.1). The paper gives no MLP ratio: 2 is our choice,
    after ViT-Lite; attention dropout 0.1 follows ViT-Lite too. ``drop_path`` is the rate of
    the last block; :class:`Encoder` raises it linearly from 0 over the blocks. ``init``
    names how every linear map starts (:data:`INITS`); ``readout`` how a backbone reads its
    output from the final tokens: ``"cls"`` (the class token) or ``"mean"`` (the mean over
    the real tokens, no class token).
    """

    dim: int = 128
    depth: int = 8
    heads: int = 4
    mlp_ratio: float = 2.0
    drop_path: float = 0.1
    layer_scale_init: float | None = 1e-4
    dropout: float = 0.1
    attn_dropout: float = 0.1
    init: str = "trunc_normal_0.02"
    readout: str = "cls"

    def __post_init__(self) -> None:
        positive_ints(dim=self.dim, depth=self.depth, heads=self.heads)
        if self.dim % self.heads:
            raise ValueError(f"dim={self.dim} must be divisible by heads={self.heads}")
        positive_number("mlp_ratio", self.mlp_ratio)
        for name in ("drop_path", "dropout", "attn_dropout"):
            fraction(name, getattr(self, name))
        one_of("init", self.init, INITS)
        one_of("readout", self.readout, READOUTS)

    def encoder(self, norm_layer: NormFactory) -> Encoder:
        """Build the :class:`Encoder` this config describes."""
        return Encoder(self, norm_layer)


class Block(nn.Module):
    r"""Pre-norm Transformer block with LayerScale and stochastic depth.

    .. math::
        x \leftarrow x + \mathrm{DropPath}(\gamma_1 \odot \mathrm{Attn}(\mathrm{norm}_1(x))), \qquad
        x \leftarrow x + \mathrm{DropPath}(\gamma_2 \odot \mathrm{MLP}(\mathrm{norm}_2(x)))

    Sizes, dropout and LayerScale come from ``config``; ``drop_path`` is this block's own
    stochastic depth rate (the encoder spreads ``config.drop_path`` over its blocks).
    """

    def __init__(
        self,
        config: EncoderConfig,
        norm_layer: NormFactory = nn.LayerNorm,
        drop_path: float = 0.0,
    ) -> None:
        super().__init__()
        dim, scale = config.dim, config.layer_scale_init
        self.norm1 = norm_layer(dim)
        self.attn = Attention(
            dim,
            config.heads,
            attn_dropout=config.attn_dropout,
            dropout=config.dropout,
            init=config.init,
        )
        self.ls1 = LayerScale(dim, scale) if scale else nn.Identity()
        self.norm2 = norm_layer(dim)
        self.mlp = FeedForward(
            dim, int(dim * config.mlp_ratio), dropout=config.dropout, init=config.init
        )
        self.ls2 = LayerScale(dim, scale) if scale else nn.Identity()
        self.drop_path = DropPath(drop_path)

    def forward(
        self, x: torch.Tensor, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = x + self.drop_path(
            self.ls1(self.attn(apply_norm(self.norm1, x, token_mask), token_mask))
        )
        x = x + self.drop_path(
            self.ls2(self.mlp(apply_norm(self.norm2, x, token_mask)))
        )
        return x


class Encoder(nn.Module):
    """``config.depth`` pre-norm blocks, stochastic depth rising linearly from 0 to
    ``config.drop_path``, then a final norm."""

    def __init__(
        self, config: EncoderConfig, norm_layer: NormFactory = nn.LayerNorm
    ) -> None:
        super().__init__()
        depth, drop_path = config.depth, config.drop_path
        rates = (
            torch.linspace(0.0, drop_path, depth).tolist()
            if depth > 1
            else [drop_path] * depth
        )
        self.blocks = nn.ModuleList(Block(config, norm_layer, rate) for rate in rates)
        self.norm = norm_layer(config.dim)

    def forward(
        self, x: torch.Tensor, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, token_mask)
        return apply_norm(self.norm, x, token_mask)
