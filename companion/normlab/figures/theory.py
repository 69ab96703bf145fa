"""Figures for the Part I theory chapters (the affine divergence).

Each function measures with :mod:`normlab.divergence` and draws in the book's one style
(:func:`normlab.figures.style`, pyplot-free figures, registered colours and labels); it returns
the figure so a chapter can display it, and the interactive widget of chapter 3 wires its
sliders straight to :func:`plot_update_sizes`. The layer kinds are the Part I normalisers
``none`` (a plain affine layer), ``norm_like`` and ``affine_like`` of
:mod:`normlab.normalisers`. Importing :mod:`normlab.figures.column` here loads the inline display, and
nothing registers a figure with pyplot, so a figure returned as a cell's last expression is
shown exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from .. import normalisers
from .._checks import one_of
from ..divergence import LeastSquaresStudy, measure_update
from .column import colours, label, new_figure, style

__all__ = [
    "LAYER_KINDS",
    "make_layer",
    "update_sizes",
    "plot_update_sizes",
    "plot_update_size_curves",
    "plot_ratio_scatter",
    "plot_kernels",
    "plot_ratio_bars",
    "plot_least_squares",
]

LAYER_KINDS: dict[str, type[nn.Linear]] = {
    name: normalisers.get(name).linear_layer
    for name in ("none", "norm_like", "affine_like")
}


def make_layer(
    kind: str,
    in_features: int,
    out_features: int,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> nn.Linear:
    """A seeded linear layer of one of :data:`LAYER_KINDS`: ``none``, ``norm_like`` or ``affine_like``."""
    one_of("kind", kind, LAYER_KINDS)
    torch.manual_seed(seed)
    return LAYER_KINDS[kind](in_features, out_features, dtype=dtype)


def _inputs(
    x_norm: float, batch_size: int, dim: int, out: int, seed: int
) -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, dim, generator=gen, dtype=torch.float64)
    x = x_norm * x / x.norm(dim=1, keepdim=True)
    g = torch.randn(batch_size, out, generator=gen, dtype=torch.float64)
    return x, g / g.norm(dim=1, keepdim=True)


def update_sizes(
    x_norm: float,
    lr: float,
    batch_size: int,
    *,
    dim: int = 16,
    out: int = 8,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Mean per-sample ``|ideal|``, ``|effective|`` and cosine for each layer kind.

    Inputs: ``batch_size`` random directions of norm ``x_norm`` in ``dim`` dimensions;
    upstream gradients: random unit vectors. One SGD step of rate ``lr`` on the mean loss.
    "ideal" is the step of each sample's share of the mean loss, ``eta |g_i| / B``, so that a
    batch changes the ratio only through cross-talk, not through the ``1/B`` of the mean.
    """
    x, g = _inputs(x_norm, batch_size, dim, out, seed)
    sizes = {}
    for kind in LAYER_KINDS:
        m = measure_update(
            make_layer(kind, dim, out, seed=seed), x, g, lr=lr, kernel=False
        )
        sizes[kind] = {
            "ideal": float(m.ideal.norm(dim=1).mean()) / batch_size,
            "effective": float(m.effective.norm(dim=1).mean()),
            "cosine": float(m.cosine.mean()),
        }
    return sizes


def plot_update_sizes(
    x_norm: float = 3.0,
    lr: float = 0.05,
    batch_size: int = 1,
    *,
    dim: int = 16,
    seed: int = 0,
) -> Figure:
    """Bars of ideal versus effective update size, and their cosine, for each layer kind."""
    sizes = update_sizes(x_norm, lr, batch_size, dim=dim, seed=seed)
    kinds = list(sizes)
    pos = list(range(len(kinds)))
    series = colours(["ideal", "effective"])
    with style():
        figure, axes = new_figure(ncols=2, size=(4.5, 3.4))
        ax_size, ax_cos = axes[0]
        ax_size.bar(
            [p - 0.2 for p in pos],
            [sizes[k]["ideal"] for k in kinds],
            width=0.4,
            color=series["ideal"],
            label="ideal eta |g| / B",
        )
        ax_size.bar(
            [p + 0.2 for p in pos],
            [sizes[k]["effective"] for k in kinds],
            width=0.4,
            color=series["effective"],
            label="effective |dz|",
        )
        ax_size.set_xticks(pos, [label(k) for k in kinds])
        ax_size.set_yscale("log")
        ax_size.set_ylabel("mean update size per sample")
        ax_size.legend()
        ax_cos.bar(
            pos,
            [sizes[k]["cosine"] for k in kinds],
            color=list(colours(kinds).values()),
        )
        ax_cos.set_xticks(pos, [label(k) for k in kinds])
        ax_cos.set_ylim(-1, 1.05)
        ax_cos.set_ylabel("cosine(effective, ideal)")
        figure.suptitle(f"|x| = {x_norm:.3g}, lr = {lr:.3g}, batch = {batch_size}")
    return figure


def plot_update_size_curves(
    x_norms: Sequence[float],
    lr: float,
    batch_sizes: Sequence[int],
    *,
    dim: int = 16,
    seed: int = 0,
) -> Figure:
    """Static companion of the widget: ``|effective| / |ideal|`` against ``|x|``, per batch size."""
    palette = colours(LAYER_KINDS)
    with style():
        figure, axes = new_figure(ncols=len(batch_sizes), size=(4.2, 3.4), sharey=True)
        for ax, batch in zip(axes[0], batch_sizes):
            curves: dict[str, list[float]] = {kind: [] for kind in LAYER_KINDS}
            for x_norm in x_norms:
                for kind, s in update_sizes(
                    x_norm, lr, batch, dim=dim, seed=seed
                ).items():
                    curves[kind].append(s["effective"] / s["ideal"])
            for kind, ratios in curves.items():
                ax.plot(
                    x_norms,
                    ratios,
                    marker="o",
                    ms=3,
                    color=palette[kind],
                    label=label(kind),
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("|x|")
            ax.set_title(f"batch {batch}")
        axes[0][0].set_ylabel("|effective| / |ideal|")
        axes[0][0].legend()
    return figure


def plot_ratio_scatter(
    sq_norms: Tensor, ratios: Mapping[str, Tensor], *, title: str = ""
) -> Figure:
    """Per-sample update ratio against ``|x|^2``, one series per name, with the line ``|x|^2 + 1``."""
    palette = colours(ratios)
    with style():
        figure, axes = new_figure(size=(6, 3.8))
        ax = axes[0, 0]
        for name, r in ratios.items():
            ax.scatter(
                sq_norms.detach().cpu().numpy(),
                r.detach().cpu().numpy(),
                s=8,
                alpha=0.6,
                color=palette[name],
                label=label(name),
            )
        grid = torch.linspace(float(sq_norms.min()), float(sq_norms.max()), 50)
        ax.plot(grid, grid + 1, "k--", lw=1, label="|x|² + 1")
        ax.set_xlabel("|x|²")
        ax.set_ylabel("|effective| / |ideal|")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend()
    return figure


def plot_kernels(kernels: Mapping[str, Tensor], *, title: str = "") -> Figure:
    """Heat maps of induced kernels (sites x sites), one panel each, on a shared colour scale."""
    vmax = max(float(k.abs().max()) for k in kernels.values())
    with style():
        figure, axes = new_figure(ncols=len(kernels), size=(3.6, 3.4))
        for ax, (name, kernel) in zip(axes[0], kernels.items()):
            ax.grid(False)
            image = ax.imshow(
                kernel.detach().cpu().numpy(), cmap="RdBu_r", vmin=-vmax, vmax=vmax
            )
            ax.set_title(label(name))
            ax.set_xlabel("site j")
            ax.set_ylabel("site i")
        figure.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
        figure.suptitle(title)
    return figure


def plot_ratio_bars(
    values: Mapping[str, Mapping[str, float]],
    *,
    ylabel: str,
    log: bool = False,
    reference: float | None = None,
) -> Figure:
    """Grouped bars: ``values[group][series]``, e.g. optimiser -> layer kind -> ratio."""
    groups = list(values)
    series = list(next(iter(values.values())))
    palette = colours(series)
    width = 0.8 / len(series)
    with style():
        figure, axes = new_figure(size=(1.8 + 1.6 * len(groups), 3.4))
        ax = axes[0, 0]
        for s_idx, name in enumerate(series):
            xs = [
                g_idx + (s_idx - (len(series) - 1) / 2) * width
                for g_idx in range(len(groups))
            ]
            ax.bar(
                xs,
                [values[g][name] for g in groups],
                width=width,
                color=palette[name],
                label=label(name),
            )
        if reference is not None:
            ax.axhline(reference, color="k", lw=1, ls="--")
        ax.set_xticks(range(len(groups)), groups)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        ax.legend()
    return figure


def plot_least_squares(study: LeastSquaresStudy) -> Figure:
    """Two panels from :func:`normlab.divergence.least_squares_study`.

    Left: the training loss per epoch of each layer kind at the study's one shared rate
    (a run that blew up stops where it did). Right: the loss after the last epoch against
    the rate, with each kind's one-sample stable-rate cap ``2 / max K_ii`` as a dashed line.
    """
    kinds = list(study.curves)
    palette = colours(kinds)
    finite = torch.cat([c[torch.isfinite(c)] for c in study.curves.values()])
    finite = torch.cat([finite] + [f[torch.isfinite(f)] for f in study.final.values()])
    top = 10 * float(finite[finite < 1e3].max())
    with style():
        figure, axes = new_figure(ncols=2, size=(3.6, 3.2))
        ax_curve, ax_rate = axes[0]
        per_epoch = (len(study.curves[kinds[0]]) - 1) / study.epochs
        for kind in kinds:
            curve = study.curves[kind]
            shown = torch.isfinite(curve)
            epochs = torch.arange(len(curve))[shown] / per_epoch
            ax_curve.plot(epochs, curve[shown], color=palette[kind], label=label(kind))
            if not bool(shown.all()):
                ax_curve.annotate(
                    "  blows up",
                    (float(epochs[-1]), min(float(curve[shown][-1]), top) / 2),
                    color=palette[kind],
                    va="top",
                )
            final = study.final[kind].clamp(max=top)
            ax_rate.plot(
                study.lrs,
                final,
                color=palette[kind],
                marker="o",
                ms=3,
                label=label(kind),
            )
            ax_rate.axvline(study.caps[kind], color=palette[kind], ls="--", lw=1)
        ax_curve.set_yscale("log")
        ax_curve.set_ylim(top=top)
        ax_curve.set_xlabel("epoch")
        ax_curve.set_ylabel("training loss")
        ax_curve.set_title(f"one rate, lr = {study.shared_lr:g}")
        ax_curve.legend()
        ax_rate.set_xscale("log")
        ax_rate.set_yscale("log")
        ax_rate.set_ylim(top=top * 1.5)
        ax_rate.set_xlabel("learning rate")
        ax_rate.set_ylabel(f"loss after {study.epochs} epochs")
        ax_rate.set_title("dashed: 2 / max(K_ii); top: blew up")
    return figure
