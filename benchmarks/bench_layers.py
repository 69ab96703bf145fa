"""Forward + backward time of the Part I layers against their torch baselines, on the CPU.

Each pair runs interleaved (baseline, candidate, baseline, ...) in one process, and the
printed figure is the ratio of the medians, so machine noise mostly cancels. On a machine
that other jobs share, ``--threads 1 --clock cpu`` (process CPU time, one torch thread) is
stretched least by their load; the header prints the load average to read the figures by.

    .venv/bin/python benchmarks/bench_layers.py [--repeats 15] [--threads 0] [--clock wall]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch
from normlab.layers import AffineLikeLinear, NormLikeLinear, PatchNormConv2d
from torch import nn

CLOCKS: dict[str, Callable[[], float]] = {
    "wall": time.perf_counter,
    "cpu": time.process_time,
}
clock = CLOCKS["wall"]


def step_time(layer: nn.Module, x: torch.Tensor) -> float:
    """Seconds for one forward and backward pass (input and parameter gradients)."""
    start = clock()
    layer(x).sum().backward()
    return clock() - start


def compare(
    make_base: Callable[[], nn.Module],
    make_ours: Callable[[], nn.Module],
    x: torch.Tensor,
    repeats: int,
) -> tuple[float, float]:
    torch.manual_seed(0)
    base, ours = make_base(), make_ours()
    x = x.requires_grad_()
    for _ in range(2):  # warm-up
        step_time(base, x), step_time(ours, x)
    base_t, ours_t = [], []
    for _ in range(repeats):
        base_t.append(step_time(base, x))
        ours_t.append(step_time(ours, x))
    return statistics.median(base_t), statistics.median(ours_t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default)"
    )
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cases = [
        (
            "AffineLikeLinear vs nn.Linear, batch 256, 1024 -> 1024",
            1.05,
            lambda: nn.Linear(1024, 1024),
            lambda: AffineLikeLinear(1024, 1024),
            torch.randn(256, 1024),
        ),
        (
            "NormLikeLinear vs nn.Linear, batch 256, 1024 -> 1024",
            1.05,
            lambda: nn.Linear(1024, 1024),
            lambda: NormLikeLinear(1024, 1024),
            torch.randn(256, 1024),
        ),
        (
            "PatchNormConv2d vs nn.Conv2d, 64 -> 64, 3x3, 32x32, batch 64, padding 1",
            1.25,
            lambda: nn.Conv2d(64, 64, 3, padding=1),
            lambda: PatchNormConv2d(64, 64, 3, padding=1),
            torch.randn(64, 64, 32, 32),
        ),
    ]
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} "
        f"interleaved repeats, {args.clock} clock, load average {load}"
    )
    print("| comparison | baseline ms | ours ms | ratio | goal | met |")
    print("|---|---|---|---|---|---|")
    for name, goal, make_base, make_ours, x in cases:
        base, ours = compare(make_base, make_ours, x, args.repeats)
        print(
            f"| {name} | {base * 1e3:.1f} | {ours * 1e3:.1f} | {ours / base:.3f}x | <= {goal}x "
            f"| {'yes' if ours / base <= goal else 'NO'} |"
        )


if __name__ == "__main__":
    main()
