"""ViT-Lite: a small Vision Transformer for 8x8 to 32x32 images (Hassani et al., 2021).

::

    image -> conv patch embedding -> [CLS] + patches + position embedding
          -> pre-norm blocks -> final norm -> CLS token -> linear -> logits
    (readout "mean": no class token; the mean over patch tokens goes to the linear head)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .._checks import positive_ints
from ..normalisers import NormFactory, resolve_norm_layer
from .blocks import EncoderConfig, init_linear, named_config

__all__ = [
    "VIT_CONFIGS",
    "ViTConfig",
    "ViTLite",
    "vit_config",
]


@dataclass
class ViTConfig(EncoderConfig):
    """Shape of a :class:`ViTLite`; the encoder fields come from :class:`EncoderConfig`."""

    img_size: int = 32
    in_chans: int = 3
    patch_size: int = 4
    num_classes: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        positive_ints(
            img_size=self.img_size,
            in_chans=self.in_chans,
            patch_size=self.patch_size,
            num_classes=self.num_classes,
        )
        if self.img_size % self.patch_size:
            raise ValueError(
                f"img_size={self.img_size} must be divisible by patch_size={self.patch_size}"
            )

    @property
    def num_patches(self) -> int:
        return (self.img_size // self.patch_size) ** 2


VIT_CONFIGS: dict[str, ViTConfig] = {
    # The AutoNorm paper's vision backbone: 8 layers, 4 heads, dim 128, patch 4 (MLP ratio 2: ours).
    "paper_vision": ViTConfig(dim=128, depth=8, heads=4, mlp_ratio=2.0, patch_size=4),
    # CCT's ViT-Lite-7/4: 7 layers, 4 heads, dim 256, MLP ratio 2, patch 4.
    "vit_lite_7_4": ViTConfig(dim=256, depth=7, heads=4, mlp_ratio=2.0, patch_size=4),
}


def vit_config(name: str, **overrides: object) -> ViTConfig:
    """A named config with fields replaced, e.g. ``vit_config("paper_vision", img_size=28, in_chans=1)``."""
    return named_config(VIT_CONFIGS, "ViT", name, **overrides)


class ViTLite(nn.Module):
    """Vision Transformer with a class token, learned position embedding and pre-norm blocks.

    Shape:
        - Input: :math:`(N, C, H, W)` with ``C = in_chans`` and ``H = W = img_size``
        - Output: :math:`(N, \\text{num\\_classes})` logits
    """

    def __init__(
        self,
        config: ViTConfig | None = None,
        norm_layer: NormFactory | str = nn.LayerNorm,
    ) -> None:
        super().__init__()
        self.config = config = config or ViTConfig()
        self.patch_embed = nn.Conv2d(
            config.in_chans,
            config.dim,
            kernel_size=config.patch_size,
            stride=config.patch_size,
        )
        cls = config.readout == "cls"
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim)) if cls else None
        self.pos_embed = nn.Parameter(
            torch.zeros(1, config.num_patches + int(cls), config.dim)
        )
        self.pos_drop = nn.Dropout(config.dropout)
        self.encoder = config.encoder(resolve_norm_layer(norm_layer))
        self.head = nn.Linear(config.dim, config.num_classes)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.cls_token is not None:
            nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        init_linear(self.head, self.config.init)

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        """Embed images as ``(N, 1 + num_patches, dim)`` tokens, class token first
        (``(N, num_patches, dim)`` for the mean readout)."""
        c = self.config
        if images.dim() != 4 or tuple(images.shape[1:]) != (
            c.in_chans,
            c.img_size,
            c.img_size,
        ):
            raise ValueError(
                f"images of shape {tuple(images.shape)} do not match the config; "
                f"expected (N, {c.in_chans}, {c.img_size}, {c.img_size})"
            )
        patches = self.patch_embed(images).flatten(2).transpose(1, 2)
        if self.cls_token is not None:
            cls = self.cls_token.expand(patches.shape[0], -1, -1)
            patches = torch.cat([cls, patches], dim=1)
        return self.pos_drop(patches + self.pos_embed)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.encoder(self.tokens(images))
        return self.head(x[:, 0] if self.cls_token is not None else x.mean(dim=1))
