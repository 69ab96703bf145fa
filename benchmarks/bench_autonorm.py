"""AutoNorm's cost: training-step time of the paper's vision ViT-Lite, AutoNorm against LayerNorm.

Two measurements, each as a ratio of medians over interleaved repetitions (so machine noise
hits both sides alike):

1. Model level: one training step (forward, backward, AdamW step) of ``ViTLite`` with the
   ``paper_vision`` config (8 layers, 4 heads, dim 128, patch 4) on a batch of 32x32x3
   images, with AutoNorm (and DyT) against LayerNorm in all 17 norm positions. Goal: AutoNorm
   at most 1.3x LayerNorm.
2. Layer level: forward + backward of the normaliser alone on the ViT's token tensor
   ``(batch, 65, 128)``: DyT and AutoNorm against ``nn.LayerNorm``. Goal: AutoNorm at most
   3x LayerNorm.

Usage::

    .venv/bin/python benchmarks/bench_autonorm.py [--batch 64] [--reps 9] [--threads 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from normlab.models import ViTLite, vit_config
from normlab.normalisers import norm_layer


def interleaved_medians(
    fns: dict[str, Callable[[], None]], reps: int, warmup: int = 2
) -> dict[str, float]:
    """Median wall time of each function, timing them in turn ``reps`` times."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def training_step(norm: str, batch: int) -> Callable[[], None]:
    torch.manual_seed(0)
    model = ViTLite(vit_config("paper_vision"), norm_layer(norm)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    images, labels = torch.rand(batch, 3, 32, 32), torch.randint(0, 10, (batch,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()

    return step


def layer_pass(norm: str, batch: int, calls: int) -> Callable[[], None]:
    torch.manual_seed(0)
    layer = norm_layer(norm)(128).train()
    x = torch.randn(batch, 65, 128, requires_grad=True)
    upstream = torch.randn(batch, 65, 128)

    def run() -> None:
        for _ in range(calls):
            layer(x).backward(upstream)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (0: leave torch's default)",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, "
        f"{args.reps} interleaved reps, load average {load}"
    )

    steps = interleaved_medians(
        {n: training_step(n, args.batch) for n in ("layernorm", "autonorm", "dyt")},
        args.reps,
    )
    print(
        "\nViTLite paper_vision, 32x32x3, one training step (forward + backward + AdamW):"
    )
    for name, seconds in steps.items():
        print(
            f"  {name:10s} {seconds * 1e3:8.1f} ms   ratio to LayerNorm {seconds / steps['layernorm']:.3f}"
        )

    layers = interleaved_medians(
        {n: layer_pass(n, args.batch, 20) for n in ("layernorm", "dyt", "autonorm")},
        3 * args.reps,
    )
    print(
        f"\nNormaliser alone on ({args.batch}, 65, 128), forward + backward (20 calls per timing):"
    )
    for name, seconds in layers.items():
        print(
            f"  {name:10s} {seconds / 20 * 1e3:8.3f} ms   ratio to LayerNorm {seconds / layers['layernorm']:.3f}"
        )

    for what, ratio, goal in (
        ("training step", steps["autonorm"] / steps["layernorm"], 1.3),
        ("layer alone", layers["autonorm"] / layers["layernorm"], 3.0),
    ):
        verdict = "met" if ratio <= goal else "NOT met"
        print(
            f"AutoNorm / LayerNorm, {what}: {ratio:.3f}x (goal <= {goal}x: {verdict})"
        )


if __name__ == "__main__":
    main()
