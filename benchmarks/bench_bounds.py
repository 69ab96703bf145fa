"""How close can eager PyTorch come to issue 39's cost goals? The fewest-pass forms, timed.

Each goal compares a layer with torch's own (``bench_layers.py``, ``bench_autonorm.py``).
This script times, against the same baselines and in the same way (interleaved repetitions,
ratio of medians, one process), the cheapest eager form of each computation that we could
write: one autograd node, every pass that the maths needs and no other, no overflow-safe
scaling and no care for the summation order (so these forms would change the saved sets'
bits and would overflow where the layers do not; they are bounds, not layers). A goal below
its bound cannot be met by eager PyTorch on this machine: it needs a fused, compiled kernel.

Before timing, each form's gradients are checked against autograd's for the plain
expression in float64, so that the bound measures the right computation.

    .venv/bin/python benchmarks/bench_bounds.py [--repeats 25] [--threads 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from normlab.functional import autonorm_mix
from normlab.layers import AffineLikeLinear, NormLikeLinear, PatchNormConv2d
from torch import Tensor, nn
from torch.autograd.function import once_differentiable


class _LinearBound(torch.autograd.Function):
    """AffineLikeLinear's ``(W x + b) / sqrt(|x|^2 + 1)`` or, ``affine`` False,
    NormLikeLinear's ``W x / |x| + b``: one norm, the product and one scaling forward; one
    scaling, one row dot and one fused multiply-add backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, affine):  # type: ignore[override]
        sq = x.square().sum(-1, keepdim=True)
        if affine:
            factor = sq.add_(1.0).rsqrt_()
            y = torch.addmm(bias, x, weight.t())
            out = y * factor
        else:
            factor = sq.clamp_min_(1e-24).rsqrt_()
            y = x.mm(weight.t())
            out = torch.addcmul(bias, y, factor)
        ctx.save_for_backward(x, weight, y, factor)
        ctx.affine = affine
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        x, weight, y, factor = ctx.saved_tensors
        gy = g * factor
        coef = (g * y).sum(-1, keepdim=True).mul_(factor.pow(3)).neg_()
        gb = gy.sum(0) if ctx.affine else g.sum(0)
        return gy.mm(weight).addcmul_(x, coef), gy.t().mm(x), gb, None


class _PatchNormBound(torch.autograd.Function):
    """Affine-mode PatchNorm, 3x3, stride 1, padding 1: the channel sum of squares, its
    patch sums (a one-channel convolution) and one scaling forward; one scaling, one
    channel dot, the patch sums' transpose and one fused multiply-add backward."""

    @staticmethod
    def forward(ctx, x, weight, bias):  # type: ignore[override]
        ones = x.new_ones(1, 1, 3, 3)
        sumsq = x.square().sum(1, keepdim=True)
        factor = F.conv2d(sumsq, ones, padding=1).add_(1.0).rsqrt_()
        z = F.conv2d(x, weight, bias, padding=1)
        ctx.save_for_backward(x, weight, sumsq, ones, z, factor)
        return z * factor

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        x, weight, sumsq, ones, z, factor = ctx.saved_tensors
        conv_backward = torch.ops.aten.convolution_backward
        geometry = ([1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        gz = g * factor
        gx, gw, gb = conv_backward(
            gz, x, weight, [weight.shape[0]], *geometry, [True, True, True]
        )
        coef = (g * z).sum(1, keepdim=True).mul_(factor.pow(3)).mul_(-0.5)
        g_sumsq = conv_backward(
            coef, sumsq, ones, None, *geometry, [True, False, False]
        )
        return gx.addcmul_(x, g_sumsq[0], value=2.0), gw, gb


def bound(kind: str, x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """The fewest-pass form of ``kind``: ``"affine_like"`` or ``"norm_like"`` (a linear
    layer) or ``"patch_norm"`` (affine-mode PatchNorm, 3x3, padding 1)."""
    if kind == "patch_norm":
        return _PatchNormBound.apply(x, weight, bias)
    return _LinearBound.apply(x, weight, bias, kind == "affine_like")


def plain(kind: str, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """The expression :func:`bound` computes, for autograd to differentiate."""
    if kind == "affine_like":
        return F.linear(x, w, b) / (x.square().sum(-1, keepdim=True) + 1).sqrt()
    if kind == "norm_like":
        return F.linear(x, w) / x.square().sum(-1, keepdim=True).sqrt() + b
    sq = F.conv2d(x.square().sum(1, keepdim=True), x.new_ones(1, 1, 3, 3), padding=1)
    return F.conv2d(x, w, b, padding=1) / (sq + 1).sqrt()


class _Bound(nn.Module):
    """:func:`bound` of ``kind`` with a torch layer's parameters (its initialisation)."""

    def __init__(self, kind: str, like: nn.Module) -> None:
        super().__init__()
        self.kind, self.weight, self.bias = kind, like.weight, like.bias

    def forward(self, x: Tensor) -> Tensor:
        return bound(self.kind, x, self.weight, self.bias)


SHAPES = {  # small operands for the float64 check: x, weight, bias
    "affine_like": ((8, 5), (3, 5), (3,)),
    "norm_like": ((8, 5), (3, 5), (3,)),
    "patch_norm": ((2, 3, 6, 6), (4, 3, 3, 3), (4,)),
}


def check(kind: str) -> None:
    """:func:`bound`'s output and gradients equal autograd's for :func:`plain` (float64)."""
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(s, dtype=torch.float64, generator=gen) for s in SHAPES[kind]]
    upstream = None
    results = []
    for fn in (bound, plain):
        leaves = [a.clone().requires_grad_() for a in args]
        out = fn(kind, *leaves)
        if upstream is None:
            upstream = torch.randn(out.shape, dtype=torch.float64, generator=gen)
        results.append([out, *torch.autograd.grad(out, leaves, upstream)])
    for ours, theirs in zip(*results):
        torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-10)


def interleaved(fns: list[Callable[[], object]], repeats: int) -> list[float]:
    """Median wall seconds of each function, timed in turn ``repeats`` times."""
    for _ in range(3):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def step(layer: nn.Module, x: Tensor) -> Callable[[], None]:
    """One forward and backward pass (input and parameter gradients), as bench_layers."""
    return lambda: layer(x).sum().backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for kind in SHAPES:
        check(kind)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} "
        f"interleaved repeats, wall clock, load average {load}"
    )
    print(
        "| computation | baseline | layer | fewest-pass bound | goal | bound within goal |"
    )
    print("|---|---|---|---|---|---|")
    torch.manual_seed(0)
    linear, conv = nn.Linear(1024, 1024), nn.Conv2d(64, 64, 3, padding=1)
    cases = [
        ("AffineLikeLinear, batch 256, 1024 -> 1024", 1.05, linear,
         AffineLikeLinear(1024, 1024), _Bound("affine_like", linear),
         torch.randn(256, 1024)),
        ("NormLikeLinear, batch 256, 1024 -> 1024", 1.05, linear,
         NormLikeLinear(1024, 1024), _Bound("norm_like", linear),
         torch.randn(256, 1024)),
        ("PatchNormConv2d, 64 -> 64, 3x3, 32x32, batch 64", 1.25, conv,
         PatchNormConv2d(64, 64, 3, padding=1), _Bound("patch_norm", conv),
         torch.randn(64, 64, 32, 32)),
    ]  # fmt: skip
    for name, goal, base, layer, bound, x in cases:
        x.requires_grad_()
        t = interleaved([step(base, x), step(layer, x), step(bound, x)], args.repeats)
        print(
            f"| {name} | {t[0] * 1e3:.1f} ms | {t[1] / t[0]:.3f}x | {t[2] / t[0]:.3f}x "
            f"| <= {goal}x | {'yes' if t[2] / t[0] <= goal else 'no'} |"
        )
    autonorm_bounds(args.repeats)


def autonorm_bounds(repeats: int, batch: int = 64, calls: int = 10) -> None:
    """AutoNorm's mix alone (its one node, no gate) and DyT's branch alone (the tanh of a
    product and its backward) against nn.LayerNorm on the ViT's token tensor: any AutoNorm
    computes both, so the goal (3x) cannot be met where the mix alone exceeds it."""
    torch.manual_seed(0)
    x = torch.randn(batch, 65, 128, requires_grad=True)
    upstream = torch.randn(batch, 65, 128)
    coefs = [torch.randn(batch, 1, 128, requires_grad=True) for _ in range(3)]
    alpha = torch.tensor(0.5, requires_grad=True)
    norm = nn.LayerNorm(128)

    def repeat(fn: Callable[[], Tensor]) -> Callable[[], None]:
        return lambda: [fn().backward(upstream) for _ in range(calls)]

    t = interleaved(
        [
            repeat(lambda: norm(x)),
            repeat(lambda: autonorm_mix(x, alpha, *coefs, (128,))),
            repeat(lambda: torch.tanh(alpha * x)),
        ],
        repeats,
    )
    print(
        f"| AutoNorm's mix alone, ({batch}, 65, 128) | {t[0] / calls * 1e3:.2f} ms "
        f"| (see bench_autonorm.py) | {t[1] / t[0]:.3f}x | <= 3.0x "
        f"| {'yes' if t[1] / t[0] <= 3.0 else 'no'} |"
    )
    print(
        f"| DyT's branch alone, tanh(alpha x) | {t[0] / calls * 1e3:.2f} ms | | "
        f"{t[2] / t[0]:.3f}x | | |"
    )


if __name__ == "__main__":
    main()
