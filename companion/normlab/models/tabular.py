"""A Transformer for tabular regression: FT-Transformer-style feature tokens plus an encoder.

::

    features (N, F) -> one token per feature: x_j * W_j + b_j -> [CLS] + tokens
                    -> pre-norm blocks -> final norm -> CLS token (or the mean over
                    feature tokens) -> linear -> prediction
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .._checks import positive_ints
from ..normalisers import NormFactory, resolve_norm_layer
from .blocks import EncoderConfig, init_linear, named_config

__all__ = [
    "FeatureTokenizer",
    "TABULAR_CONFIGS",
    "TabularConfig",
    "TabularTransformer",
    "tabular_config",
]


@dataclass
class TabularConfig(EncoderConfig):
    """Shape of a :class:`TabularTransformer`. Encoder defaults are the paper's tabular
    setting (12 layers, dim 128, 8 heads)."""

    depth: int = 12
    heads: int = 8
    num_features: int = 8
    num_outputs: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        positive_ints(num_features=self.num_features, num_outputs=self.num_outputs)


TABULAR_CONFIGS: dict[str, TabularConfig] = {
    # The AutoNorm paper's tabular backbone: 12 layers, dim 128, 8 heads (MLP ratio 2: ours).
    "paper_tabular": TabularConfig(dim=128, depth=12, heads=8),
}


def tabular_config(name: str, **overrides: object) -> TabularConfig:
    """A named config with fields replaced, e.g. ``tabular_config("paper_tabular", num_features=10)``."""
    return named_config(TABULAR_CONFIGS, "tabular", name, **overrides)


class FeatureTokenizer(nn.Module):
    r"""One token per numerical feature (Gorishniy et al., 2021): :math:`t_j = x_j W_j + b_j`.

    ``weight`` and ``bias`` are ``(num_features, dim)``, initialised
    :math:`U(-1/\sqrt{d}, 1/\sqrt{d})` as in FT-Transformer.

    Shape:
        - Input: :math:`(N, F)`
        - Output: :math:`(N, F, \text{dim})`
    """

    def __init__(self, num_features: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_features, dim))
        self.bias = nn.Parameter(torch.empty(num_features, dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.weight.shape[1])
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias, x.unsqueeze(-1), self.weight)

    def extra_repr(self) -> str:
        return f"num_features={self.weight.shape[0]}, dim={self.weight.shape[1]}"


class TabularTransformer(nn.Module):
    """Feature tokenizer, class token, pre-norm encoder and a linear regression head.

    Shape:
        - Input: :math:`(N, F)` float features
        - Output: :math:`(N,)` when ``num_outputs == 1`` (to match a ``(N,)`` target),
          else :math:`(N, \\text{num\\_outputs})`
    """

    def __init__(
        self,
        config: TabularConfig | None = None,
        norm_layer: NormFactory | str = nn.LayerNorm,
    ) -> None:
        super().__init__()
        self.config = config = config or TabularConfig()
        self.tokenizer = FeatureTokenizer(config.num_features, config.dim)
        self.cls_token = (
            nn.Parameter(torch.zeros(1, 1, config.dim))
            if config.readout == "cls"
            else None
        )
        self.encoder = config.encoder(resolve_norm_layer(norm_layer))
        self.head = nn.Linear(config.dim, config.num_outputs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.cls_token is not None:
            nn.init.trunc_normal_(self.cls_token, std=0.02)
        init_linear(self.head, self.config.init)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.dim() != 2 or features.shape[1] != self.config.num_features:
            raise ValueError(
                f"features of shape {tuple(features.shape)} do not match the config; "
                f"expected (N, {self.config.num_features})"
            )
        x = self.tokenizer(features)
        if self.cls_token is None:
            out = self.head(self.encoder(x).mean(dim=1))
        else:
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            out = self.head(self.encoder(torch.cat([cls, x], dim=1))[:, 0])
        return out.squeeze(-1) if self.config.num_outputs == 1 else out
