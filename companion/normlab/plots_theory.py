"""Figures for the Part I theory chapters (the affine divergence).

Each function measures with :mod:`normlab.divergence` and draws with matplotlib; it returns
the figure so a chapter can display it, and the interactive widget of chapter 3 wires its
sliders straight to :func:`plot_update_sizes`. Like :mod:`normlab.plots` (imported here for the
inline display it sets up), nothing registers a figure with pyplot, so a figure returned as a
cell's last expression is shown exactly once.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from . import plots  # noqa: F401  (loads the backend, so IPython displays the figures returned here)
from .divergence import measure_update
from .layers import AffineLikeLinear, NormLikeLinear

__all__ = ["LAYER_KINDS", "make_layer", "update_sizes", "plot_update_sizes", "plot_update_size_curves",
           "plot_ratio_scatter", "plot_kernels", "plot_ratio_bars"]

LAYER_KINDS: dict[str, type[nn.Linear]] = {
    "plain": nn.Linear, "norm-like": NormLikeLinear, "affine-like": AffineLikeLinear,
}


def make_layer(kind: str, in_features: int, out_features: int, *, seed: int = 0,
               dtype: torch.dtype = torch.float64) -> nn.Linear:
    """A seeded ``plain``, ``norm-like`` or ``affine-like`` linear layer."""
    if kind not in LAYER_KINDS:
        raise ValueError(f"kind must be one of {tuple(LAYER_KINDS)}, got {kind!r}")
    torch.manual_seed(seed)
    return LAYER_KINDS[kind](in_features, out_features, dtype=dtype)


def _inputs(x_norm: float, batch_size: int, dim: int, out: int, seed: int) -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, dim, generator=gen, dtype=torch.float64)
    x = x_norm * x / x.norm(dim=1, keepdim=True)
    g = torch.randn(batch_size, out, generator=gen, dtype=torch.float64)
    return x, g / g.norm(dim=1, keepdim=True)


def update_sizes(x_norm: float, lr: float, batch_size: int, *, dim: int = 16, out: int = 8,
                 seed: int = 0) -> dict[str, dict[str, float]]:
    """Mean per-sample ``|ideal|``, ``|effective|`` and cosine for each layer kind.

    Inputs: ``batch_size`` random directions of norm ``x_norm`` in ``dim`` dimensions;
    upstream gradients: random unit vectors. One SGD step of rate ``lr`` on the mean loss.
    "ideal" is the step of each sample's share of the mean loss, ``eta |g_i| / B``, so that a
    batch changes the ratio only through cross-talk, not through the ``1/B`` of the mean.
    """
    x, g = _inputs(x_norm, batch_size, dim, out, seed)
    sizes = {}
    for kind in LAYER_KINDS:
        m = measure_update(make_layer(kind, dim, out, seed=seed), x, g, lr=lr, kernel=False)
        sizes[kind] = {
            "ideal": float(m.ideal.norm(dim=1).mean()) / batch_size,
            "effective": float(m.effective.norm(dim=1).mean()),
            "cosine": float(m.cosine.mean()),
        }
    return sizes


def plot_update_sizes(x_norm: float = 3.0, lr: float = 0.05, batch_size: int = 1, *,
                      dim: int = 16, seed: int = 0) -> Figure:
    """Bars of ideal versus effective update size for plain, norm-like and affine-like layers."""
    sizes = update_sizes(x_norm, lr, batch_size, dim=dim, seed=seed)
    fig = Figure(figsize=(9, 3.4))
    ax_size, ax_cos = fig.subplots(1, 2)
    kinds = list(sizes)
    pos = torch.arange(len(kinds)).tolist()
    ax_size.bar([p - 0.2 for p in pos], [sizes[k]["ideal"] for k in kinds], width=0.4, label="ideal eta |g| / B")
    ax_size.bar([p + 0.2 for p in pos], [sizes[k]["effective"] for k in kinds], width=0.4, label="effective |dz|")
    ax_size.set_xticks(pos, kinds)
    ax_size.set_yscale("log")
    ax_size.set_ylabel("mean update size per sample")
    ax_size.legend(fontsize=8)
    ax_cos.bar(pos, [sizes[k]["cosine"] for k in kinds], color="tab:green")
    ax_cos.set_xticks(pos, kinds)
    ax_cos.set_ylim(-1, 1.05)
    ax_cos.set_ylabel("cosine(effective, ideal)")
    fig.suptitle(f"|x| = {x_norm:.3g}, lr = {lr:.3g}, batch = {batch_size}")
    fig.tight_layout()
    return fig


def plot_update_size_curves(x_norms: Sequence[float], lr: float, batch_sizes: Sequence[int], *,
                            dim: int = 16, seed: int = 0) -> Figure:
    """Static companion of the widget: ``|effective| / |ideal|`` against ``|x|``, per batch size."""
    fig = Figure(figsize=(4.2 * len(batch_sizes), 3.4))
    axes = fig.subplots(1, len(batch_sizes), sharey=True, squeeze=False)
    for ax, batch in zip(axes[0], batch_sizes):
        curves: dict[str, list[float]] = {kind: [] for kind in LAYER_KINDS}
        for x_norm in x_norms:
            for kind, s in update_sizes(x_norm, lr, batch, dim=dim, seed=seed).items():
                curves[kind].append(s["effective"] / s["ideal"])
        for kind, ratios in curves.items():
            ax.plot(x_norms, ratios, marker="o", ms=3, label=kind)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("|x|")
        ax.set_title(f"batch {batch}")
    axes[0][0].set_ylabel("|effective| / |ideal|")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_ratio_scatter(sq_norms: Tensor, ratios: Mapping[str, Tensor], *, title: str = "") -> Figure:
    """Per-sample update ratio against ``|x|^2``, one series per label, with the line ``|x|^2 + 1``."""
    fig = Figure(figsize=(6, 3.8))
    ax = fig.subplots()
    for label, r in ratios.items():
        ax.scatter(sq_norms.cpu(), r.cpu(), s=8, alpha=0.6, label=label)
    grid = torch.linspace(float(sq_norms.min()), float(sq_norms.max()), 50)
    ax.plot(grid, grid + 1, "k--", lw=1, label="|x|² + 1")
    ax.set_xlabel("|x|²")
    ax.set_ylabel("|effective| / |ideal|")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_kernels(kernels: Mapping[str, Tensor], *, title: str = "") -> Figure:
    """Heat maps of induced kernels (sites x sites), one panel each, on a shared colour scale."""
    fig = Figure(figsize=(3.6 * len(kernels), 3.4))
    axes = fig.subplots(1, len(kernels), squeeze=False)
    vmax = max(float(k.abs().max()) for k in kernels.values())
    for ax, (label, K) in zip(axes[0], kernels.items()):
        image = ax.imshow(K.cpu(), cmap="RdBu_r", vmin=-vmax, vmax=vmax)
        ax.set_title(label)
        ax.set_xlabel("site j")
        ax.set_ylabel("site i")
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
    fig.suptitle(title)
    return fig


def plot_ratio_bars(values: Mapping[str, Mapping[str, float]], *, ylabel: str, log: bool = False,
                    reference: float | None = None) -> Figure:
    """Grouped bars: ``values[group][series]``, e.g. optimiser -> layer kind -> ratio."""
    groups = list(values)
    series = list(next(iter(values.values())))
    width = 0.8 / len(series)
    fig = Figure(figsize=(1.8 + 1.6 * len(groups), 3.4))
    ax = fig.subplots()
    for s_idx, name in enumerate(series):
        xs = [g_idx + (s_idx - (len(series) - 1) / 2) * width for g_idx in range(len(groups))]
        ax.bar(xs, [values[g][name] for g in groups], width=width, label=name)
    if reference is not None:
        ax.axhline(reference, color="k", lw=1, ls="--")
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
