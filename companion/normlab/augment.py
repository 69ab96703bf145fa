"""Light image augmentations made on whole batches, on the batch's own device.

Every random number comes from the ``generator`` argument (a CPU ``torch.Generator``),
never from the global RNG, so a training run is reproducible and resumable. The few random
numbers a batch needs are drawn on the CPU and moved to the batch's device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ._checks import fraction, non_negative_int

__all__ = [
    "Augment",
    "cutmix",
    "mixup",
    "random_crop",
    "random_hflip",
]


def random_crop(
    x: torch.Tensor, padding: int, generator: torch.Generator
) -> torch.Tensor:
    """Zero-pad each image by ``padding`` pixels and crop it back at a random offset.

    Shape: ``(N, C, H, W)`` in and out; each image gets its own offset.
    """
    if padding <= 0:
        return x
    n, _, h, w = x.shape
    padded = F.pad(x, (padding, padding, padding, padding))
    offsets = torch.randint(0, 2 * padding + 1, (n, 2), generator=generator).to(
        x.device
    )
    rows = offsets[:, :1] + torch.arange(h, device=x.device)  # (N, H)
    cols = offsets[:, 1:] + torch.arange(w, device=x.device)  # (N, W)
    batch = torch.arange(n, device=x.device)[:, None, None]
    # Advanced indices around a slice put their dimensions first: (N, H, W, C).
    return padded[batch, :, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


def random_hflip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror each image left-right with probability 1/2."""
    flip = (torch.rand(len(x), generator=generator) < 0.5).to(x.device)
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


def _beta(alpha: float, generator: torch.Generator) -> float:
    """One Beta(alpha, alpha) draw, seeded from ``generator``."""
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return float(np.random.default_rng(seed).beta(alpha, alpha))


def mixup(
    x: torch.Tensor, y: torch.Tensor, alpha: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, float]:
    r"""MixUp (Zhang et al., 2018): :math:`\tilde x = \lambda x + (1-\lambda) x_{\pi}`.

    Returns the mixed batch, the partner labels :math:`y_{\pi}` and :math:`\lambda`; the loss
    is then :math:`\lambda\,\ell(f(\tilde x), y) + (1-\lambda)\,\ell(f(\tilde x), y_{\pi})`.
    """
    lam = _beta(alpha, generator)
    perm = torch.randperm(len(x), generator=generator).to(x.device)
    return lam * x + (1.0 - lam) * x[perm], y[perm], lam


def cutmix(
    x: torch.Tensor, y: torch.Tensor, alpha: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """CutMix (Yun et al., 2019): paste a random box from a partner image.

    Returns the mixed batch, the partner labels and :math:`\\lambda` = the kept area fraction.
    """
    lam = _beta(alpha, generator)
    n, _, h, w = x.shape
    perm = torch.randperm(n, generator=generator).to(x.device)
    cut_h, cut_w = int(h * (1.0 - lam) ** 0.5), int(w * (1.0 - lam) ** 0.5)
    cy, cx = (int(v) for v in torch.randint(0, 1 << 30, (2,), generator=generator))
    cy, cx = cy % h, cx % w
    top, bottom = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, h)
    left, right = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, w)
    mixed = x.clone()
    mixed[:, :, top:bottom, left:right] = x[perm, :, top:bottom, left:right]
    kept = 1.0 - (bottom - top) * (right - left) / (h * w)
    return mixed, y[perm], kept


@dataclass(frozen=True)
class Augment:
    """The training-time augmentation of image batches, applied by :func:`normlab.training.fit`.

    ``crop_padding`` > 0 enables random crops, ``hflip`` random mirroring. MixUp and
    CutMix are enabled by a positive ``alpha``; with both, each batch uses one of them with
    probability 1/2 (as in timm). ``mix_prob`` is the chance that a batch is mixed at all.
    """

    crop_padding: int = 0
    hflip: bool = False
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    mix_prob: float = 1.0

    def __post_init__(self) -> None:
        non_negative_int("crop_padding", self.crop_padding)
        if self.mixup_alpha < 0 or self.cutmix_alpha < 0:
            raise ValueError("mixup_alpha and cutmix_alpha must be >= 0")
        fraction("mix_prob", self.mix_prob, closed_right=True)

    @property
    def mixes(self) -> bool:
        """True when batches may be mixed (the loss then needs partner labels)."""
        return self.mix_prob > 0 and (self.mixup_alpha > 0 or self.cutmix_alpha > 0)

    def __call__(
        self, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Augment one ``(N, C, H, W)`` batch; return ``(x, partner_labels, lam)``.

        Without mixing, the partner labels are ``y`` itself and ``lam`` is 1.
        """
        if x.ndim != 4:
            raise ValueError(
                f"augmentations need image batches (N, C, H, W), got shape {tuple(x.shape)}"
            )
        x = random_crop(x, self.crop_padding, generator)
        if self.hflip:
            x = random_hflip(x, generator)
        if (
            not self.mixes
            or float(torch.rand((), generator=generator)) >= self.mix_prob
        ):
            return x, y, 1.0
        use_cutmix = self.mixup_alpha <= 0 or (
            self.cutmix_alpha > 0 and float(torch.rand((), generator=generator)) < 0.5
        )
        if use_cutmix:
            return cutmix(x, y, self.cutmix_alpha, generator)
        return mixup(x, y, self.mixup_alpha, generator)
