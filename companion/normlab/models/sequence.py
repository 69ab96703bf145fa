"""A Transformer encoder for token sequences, with a tagging or a classification head.

::

    token ids -> embedding (+ [CLS]) + position embedding -> pre-norm blocks -> final norm
              -> tagging: linear on every token        -> (N, L, num_outputs)
              -> classification: masked mean or CLS -> linear -> (N, num_outputs)

Token id ``PAD_ID`` (0) is padding: padded keys are hidden from attention, normalisers that
pool over tokens skip them, and the mean pool skips them, so appending padding leaves every
real token's output unchanged (up to floating-point rounding).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .._checks import positive_ints
from ..data.types import PAD_ID
from ..normalisers import NormFactory, resolve_norm_layer
from .blocks import EncoderConfig, init_linear, named_config

__all__ = [
    "SEQUENCE_CONFIGS",
    "SEQUENCE_TASKS",
    "SequenceConfig",
    "SequenceTransformer",
    "sequence_config",
]

SEQUENCE_TASKS: tuple[str, ...] = ("tagging", "classification")


@dataclass
class SequenceConfig(EncoderConfig):
    """Shape of a :class:`SequenceTransformer`. Encoder defaults are the paper's NLP setting
    (12 layers, dim 128, 8 heads); ``readout`` (default the masked mean) applies to
    classification only."""

    depth: int = 12
    heads: int = 8
    vocab_size: int = 1000
    max_len: int = 128
    num_outputs: int = 2
    task: str = "classification"
    readout: str = "mean"

    def __post_init__(self) -> None:
        super().__post_init__()
        positive_ints(
            vocab_size=self.vocab_size,
            max_len=self.max_len,
            num_outputs=self.num_outputs,
        )
        if self.task not in SEQUENCE_TASKS:
            raise ValueError(
                f"task={self.task!r} is not a sequence task; expected one of {', '.join(SEQUENCE_TASKS)}"
            )

    @property
    def uses_cls(self) -> bool:
        return self.task == "classification" and self.readout == "cls"


SEQUENCE_CONFIGS: dict[str, SequenceConfig] = {
    # The AutoNorm paper's NLP backbone: 12 layers, dim 128, 8 heads (MLP ratio 2: ours).
    "paper_nlp": SequenceConfig(dim=128, depth=12, heads=8),
}


def sequence_config(name: str, **overrides: object) -> SequenceConfig:
    """A named config with fields replaced, e.g. ``sequence_config("paper_nlp", vocab_size=5000)``."""
    return named_config(SEQUENCE_CONFIGS, "sequence", name, **overrides)


class SequenceTransformer(nn.Module):
    """Encoder over token ids with learned position embeddings and a padding mask.

    Shape:
        - Input: :math:`(N, L)` long token ids, ``L <= max_len``, padded with ``PAD_ID``;
          every sequence needs at least one real token
        - Output: :math:`(N, L, \\text{num\\_outputs})` for tagging,
          :math:`(N, \\text{num\\_outputs})` for classification
    """

    def __init__(
        self,
        config: SequenceConfig | None = None,
        norm_layer: NormFactory | str = nn.LayerNorm,
    ) -> None:
        super().__init__()
        self.config = config = config or SequenceConfig()
        self.embed = nn.Embedding(config.vocab_size, config.dim, padding_idx=PAD_ID)
        self.cls_token = (
            nn.Parameter(torch.zeros(1, 1, config.dim)) if config.uses_cls else None
        )
        self.pos_embed = nn.Parameter(
            torch.zeros(1, config.max_len + int(config.uses_cls), config.dim)
        )
        self.embed_drop = nn.Dropout(config.dropout)
        self.encoder = config.encoder(resolve_norm_layer(norm_layer))
        self.head = nn.Linear(config.dim, config.num_outputs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.trunc_normal_(self.embed.weight, std=0.02)
        with torch.no_grad():
            self.embed.weight[PAD_ID].zero_()
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            nn.init.trunc_normal_(self.cls_token, std=0.02)
        init_linear(self.head, self.config.init)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        c = self.config
        if (
            tokens.dim() != 2
            or tokens.dtype != torch.long
            or tokens.shape[1] > c.max_len
        ):
            raise ValueError(
                f"tokens must be a long tensor (N, L) with L <= max_len={c.max_len}, "
                f"got {tokens.dtype} of shape {tuple(tokens.shape)}"
            )
        mask = tokens != PAD_ID
        x = self.embed(tokens)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
            mask = torch.cat([mask.new_ones(x.shape[0], 1), mask], dim=1)
        x = self.embed_drop(x + self.pos_embed[:, : x.shape[1]])
        x = self.encoder(x, mask)
        if c.task == "tagging":
            return self.head(x)
        if self.cls_token is not None:
            return self.head(x[:, 0])
        weight = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * weight).sum(dim=1) / weight.sum(dim=1).clamp_min(1.0)
        return self.head(pooled)
