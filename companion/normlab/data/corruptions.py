r"""Common image corruptions after CIFAR-10-C (Hendrycks & Dietterich, ICLR 2019).

:func:`corrupt` applies one corruption at one severity (1..5) to any batch of images
``(N, C, H, W)`` in [0, 1] (C = 1 or 3). The parameter tables are the CIFAR ones of the
authors' ``make_cifar_c.py``, as recalled from memory and checked against a public
re-implementation of that script; they were not checked against the original file.
Differences from the original: operations run on floats (the original rounds to uint8
between steps, except here for JPEG), random numbers come from a ``torch.Generator``,
and blurs use reflect/replicate padding as documented per function.

=================  ==========================================  ==========================
corruption         operation                                   severities 1..5
=================  ==========================================  ==========================
gaussian_noise     :math:`x + \mathcal N(0, c^2)`              c = .04 .06 .08 .09 .10
shot_noise         :math:`\mathrm{Poisson}(c x) / c`           c = 500 250 100 75 50
impulse_noise      a fraction c of values set to 0 or 1        c = .01 .02 .03 .05 .07
speckle_noise      :math:`x + x\,\mathcal N(0, c^2)`           c = .06 .10 .12 .16 .20
gaussian_blur      Gaussian filter, std c pixels               c = .4 .6 .7 .8 1
defocus_blur       disk of radius r, then Gaussian of std a    (r, a) = (.3,.4) (.4,.5)
                                                               (.5,.6) (1,.2) (1.5,.1)
contrast           :math:`(x - \bar x) c + \bar x`             c = .75 .5 .4 .3 .15
brightness         HSV value :math:`V + c` (hue, sat. kept)    c = .05 .1 .15 .2 .3
pixelate           box-downsample to c x size, box-upsample    c = .95 .9 .85 .75 .65
jpeg_compression   JPEG encode/decode (PIL), quality c         c = 80 65 58 50 40
=================  ==========================================  ==========================

Every result is clipped to [0, 1]. (:math:`\bar x` is the per-image, per-channel mean.)
The distance to the clean image grows with severity for every corruption on typical
images; pixelate is the exception on images that are smooth at the 2-pixel scale, where
box resampling to 28 and 27 px (severities 2 and 3 at 32 px) gives about the same error.
On images under 16 px the integer pixelate sizes can coincide.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from .._checks import one_of

__all__ = ["SEVERITY_TABLE", "CORRUPTIONS", "corrupt"]

SEVERITY_TABLE: dict[str, tuple] = {
    "gaussian_noise": (0.04, 0.06, 0.08, 0.09, 0.10),
    "shot_noise": (500, 250, 100, 75, 50),
    "impulse_noise": (0.01, 0.02, 0.03, 0.05, 0.07),
    "speckle_noise": (0.06, 0.10, 0.12, 0.16, 0.20),
    "gaussian_blur": (0.4, 0.6, 0.7, 0.8, 1.0),
    "defocus_blur": ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1.0, 0.2), (1.5, 0.1)),
    "contrast": (0.75, 0.5, 0.4, 0.3, 0.15),
    "brightness": (0.05, 0.1, 0.15, 0.2, 0.3),
    "pixelate": (0.95, 0.9, 0.85, 0.75, 0.65),
    "jpeg_compression": (80, 65, 58, 50, 40),
}
CORRUPTIONS: tuple[str, ...] = tuple(SEVERITY_TABLE)


def _gaussian_noise(x: torch.Tensor, c: float, g: torch.Generator) -> torch.Tensor:
    return x + c * torch.randn(x.shape, generator=g, dtype=x.dtype)


def _shot_noise(x: torch.Tensor, c: float, g: torch.Generator) -> torch.Tensor:
    return torch.poisson(x * c, generator=g) / c


def _impulse_noise(x: torch.Tensor, c: float, g: torch.Generator) -> torch.Tensor:
    u = torch.rand(x.shape, generator=g, dtype=x.dtype)
    salt, pepper = u < c / 2, (u >= c / 2) & (u < c)
    return x.masked_fill(salt, 1.0).masked_fill(pepper, 0.0)


def _speckle_noise(x: torch.Tensor, c: float, g: torch.Generator) -> torch.Tensor:
    return x + x * c * torch.randn(x.shape, generator=g, dtype=x.dtype)


def _filter(x: torch.Tensor, kernel: torch.Tensor, mode: str) -> torch.Tensor:
    """Convolve every channel of ``x`` with one square odd-sized ``kernel`` (same size out)."""
    n, c, h, w = x.shape
    r = kernel.shape[-1] // 2
    flat = F.pad(x.reshape(n * c, 1, h, w), (r, r, r, r), mode=mode)
    return F.conv2d(flat, kernel[None, None].to(x.dtype)).reshape(n, c, h, w)


def _gaussian_kernel(sigma: float, radius: int) -> torch.Tensor:
    t = torch.arange(-radius, radius + 1, dtype=torch.float64)
    k = torch.exp(-(t**2) / (2 * sigma**2))
    return torch.outer(k, k) / k.sum() ** 2


def _gaussian_blur(x: torch.Tensor, c: float, g: torch.Generator) -> torch.Tensor:
    """skimage.filters.gaussian semantics: truncated at 4 std, edge pixels replicated."""
    return _filter(x, _gaussian_kernel(c, int(4 * c + 0.5)), "replicate")


def _defocus_blur(
    x: torch.Tensor, c: tuple[float, float], g: torch.Generator
) -> torch.Tensor:
    """Aliased disk of radius r (17 x 17 grid), smoothed by a 3 x 3 Gaussian of std a, then
    cropped to its non-zero support; reflect padding (as cv2.filter2D's default)."""
    radius, alias = c
    t = torch.arange(-8, 9, dtype=torch.float64)
    disk = ((t[:, None] ** 2 + t[None, :] ** 2) <= radius**2).double()
    disk = disk / disk.sum()
    smooth = F.conv2d(
        disk[None, None], _gaussian_kernel(alias, 1)[None, None], padding=1
    )[0, 0]
    support = max(int(torch.nonzero(smooth > 1e-12).sub(8).abs().max()), 1)
    kernel = smooth[8 - support : 9 + support, 8 - support : 9 + support]
    return _filter(x, kernel / kernel.sum(), "reflect")


def _contrast(x: torch.Tensor, c: float, g: torch.Generator) -> torch.Tensor:
    mean = x.mean(dim=(2, 3), keepdim=True)
    return (x - mean) * c + mean


def _brightness(x: torch.Tensor, c: float, g: torch.Generator) -> torch.Tensor:
    """Add c to the HSV value V = max over channels with hue and saturation unchanged: an
    RGB pixel is V times a function of (H, S), so every channel scales by (V + c) / V
    (a black pixel, whose saturation is 0, becomes grey V + c)."""
    v = x.amax(dim=1, keepdim=True)
    new_v = (v + c).clamp(0, 1)
    return torch.where(v > 0, x * new_v / v.clamp_min(1e-12), new_v.expand_as(x))


def _pil_map(x: torch.Tensor, fn: Callable) -> torch.Tensor:
    """Apply ``fn(PIL image) -> PIL image`` to every image, through 8-bit L or RGB images."""
    from PIL import Image

    array = (x.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    out = []
    for image in array:
        pil = Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image)
        result = np.asarray(fn(pil), dtype=np.float32).reshape(image.shape)
        out.append(result)
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).to(x.dtype) / 255.0


def _pixelate(x: torch.Tensor, c: float, g: torch.Generator) -> torch.Tensor:
    from PIL import Image

    h, w = x.shape[-2:]
    small = (max(1, int(w * c)), max(1, int(h * c)))
    return _pil_map(
        x,
        lambda im: im.resize(small, Image.Resampling.BOX).resize(
            (w, h), Image.Resampling.BOX
        ),
    )


def _jpeg_compression(x: torch.Tensor, c: int, g: torch.Generator) -> torch.Tensor:
    from PIL import Image

    def roundtrip(image):
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=c)
        buffer.seek(0)
        return Image.open(buffer).convert(image.mode)

    return _pil_map(x, roundtrip)


_FUNCTIONS: dict[str, Callable] = {
    "gaussian_noise": _gaussian_noise,
    "shot_noise": _shot_noise,
    "impulse_noise": _impulse_noise,
    "speckle_noise": _speckle_noise,
    "gaussian_blur": _gaussian_blur,
    "defocus_blur": _defocus_blur,
    "contrast": _contrast,
    "brightness": _brightness,
    "pixelate": _pixelate,
    "jpeg_compression": _jpeg_compression,
}


def corrupt(
    images: torch.Tensor,
    name: str,
    severity: int,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Return ``images`` under corruption ``name`` at ``severity`` (1 = mild .. 5 = strong).

    Args:
        images: float tensor ``(N, C, H, W)`` with values in [0, 1], C = 1 or 3.
        name: one of :data:`CORRUPTIONS` (see the module table for each operation).
        severity: int in 1..5, indexing the CIFAR-10-C parameter table.
        generator: random source for the noise corruptions; None uses a fresh
            ``torch.Generator`` seeded with 0, so the default is deterministic.

    Shape:
        Output has the shape and dtype of ``images``, values in [0, 1]. The input is not modified.
    """
    if (
        not isinstance(images, torch.Tensor)
        or images.dim() != 4
        or not images.is_floating_point()
    ):
        raise TypeError(
            f"images must be a float tensor (N, C, H, W), got {type(images).__name__} "
            f"{getattr(images, 'shape', '')}"
        )
    if images.shape[1] not in (1, 3):
        raise ValueError(f"images must have 1 or 3 channels, got C={images.shape[1]}")
    if images.numel() and (images.min() < 0 or images.max() > 1):
        raise ValueError("images must lie in [0, 1]")
    one_of("name", name, CORRUPTIONS)
    if (
        isinstance(severity, bool)
        or not isinstance(severity, int)
        or not 1 <= severity <= 5
    ):
        raise ValueError(f"severity={severity!r} must be an int in 1..5")
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    device = images.device
    out = _FUNCTIONS[name](
        images.detach().cpu(), SEVERITY_TABLE[name][severity - 1], generator
    )
    return out.clamp_(0, 1).to(device=device, dtype=images.dtype)
