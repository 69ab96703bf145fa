"""Per-step overhead of ``normlab.training.fit`` over a bare hand-written loop (CPU).

Both train the same MLP on the same generated data with the same batch size, optimiser and
per-epoch validation; repetitions alternate between the two, and the ratio of the medians
is printed. Goal: ratio <= 1.05.

It also times the data checks ``fit`` runs once before training (the label-range check, the
finite-input check of both splits and the one-batch dry run) against one epoch of the bare
loop, both in CPU time (``time.process_time``), so that other jobs on the machine do not
stretch the short check more than the long epoch. Goal: well under 1 %.

    .venv/bin/python benchmarks/bench_training.py
"""

from __future__ import annotations

import statistics
import time

import normlab
import torch
import torch.nn.functional as F
from normlab import training
from normlab.data import DataSplit
from normlab.models import MLP
from normlab.training import fit

N_TRAIN, N_VAL, BATCH, EPOCHS, REPEATS = 4096, 512, 128, 3, 7
WIDTH, DEPTH, LR = 256, 3, 0.05


def data() -> tuple[DataSplit, DataSplit]:
    g = torch.Generator().manual_seed(0)
    meta = {"classes": [str(c) for c in range(10)]}
    train = DataSplit(
        torch.rand(N_TRAIN, 1, 28, 28, generator=g),
        torch.randint(0, 10, (N_TRAIN,), generator=g),
        "classification",
        "noise",
        "train",
        meta,
    )
    val = DataSplit(
        torch.rand(N_VAL, 1, 28, 28, generator=g),
        torch.randint(0, 10, (N_VAL,), generator=g),
        "classification",
        "noise",
        "val",
        meta,
    )
    return train, val


def model() -> MLP:
    normlab.seed_everything(0)
    return MLP(in_features=784, num_classes=10, width=WIDTH, depth=DEPTH)


def bare_loop(train: DataSplit, val: DataSplit) -> tuple[float, float]:
    """Wall-clock and CPU seconds of the whole loop."""
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    generator = torch.Generator().manual_seed(0)
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(EPOCHS):
        net.train()
        order = torch.randperm(N_TRAIN, generator=generator)
        for b in range(N_TRAIN // BATCH):
            index = order[b * BATCH : (b + 1) * BATCH]
            loss = F.cross_entropy(net(train.x[index]), train.y[index])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            out = net(val.x)
            (
                F.cross_entropy(out, val.y).item(),
                (out.argmax(-1) == val.y).float().mean().item(),
            )
    return time.perf_counter() - started, time.process_time() - cpu_started


def with_fit(train: DataSplit, val: DataSplit) -> float:
    net = model()
    started = time.perf_counter()
    fit(
        net,
        train,
        val,
        epochs=EPOCHS,
        batch_size=BATCH,
        lr=LR,
        optimizer="sgd",
        device="cpu",
        progress=False,
    )
    return time.perf_counter() - started


def data_checks(net: torch.nn.Module, train: DataSplit, val: DataSplit) -> float:
    """CPU seconds of the checks ``fit`` runs before its first step (``to`` re-checks the labels)."""
    started = time.process_time()
    training._check_data(
        net,
        train.to("cpu"),
        val.to("cpu"),
        training._autocast(torch.device("cpu"), None),
    )
    return time.process_time() - started


def main() -> None:
    torch.set_num_threads(1)
    train, val = data()
    bare_loop(train, val), with_fit(train, val)  # warm-up
    bare, bare_cpu, ours, checks = [], [], [], []
    for _ in range(REPEATS):  # interleaved, so drifts in machine load hit both
        wall, cpu = bare_loop(train, val)
        bare.append(wall)
        bare_cpu.append(cpu)
        ours.append(with_fit(train, val))
        checks.append(data_checks(model(), train, val))
    steps = EPOCHS * (N_TRAIN // BATCH)
    b, o = statistics.median(bare), statistics.median(ours)
    print(
        f"MLP {DEPTH}x{WIDTH}, batch {BATCH}, {steps} SGD steps + {EPOCHS} validations, 1 thread, "
        f"median of {REPEATS}"
    )
    print(f"bare loop: {1e3 * b / steps:.3f} ms/step")
    print(f"fit:       {1e3 * o / steps:.3f} ms/step")
    print(f"overhead ratio fit/bare: {o / b:.3f}  (goal <= 1.05)")
    c, epoch = statistics.median(checks), statistics.median(bare_cpu) / EPOCHS
    print(
        f"data checks once per fit: {1e3 * c:.3f} ms CPU = {100 * c / epoch:.3f} % of a bare epoch "
        f"({1e3 * epoch:.1f} ms CPU)  (goal well under 1 %)"
    )


if __name__ == "__main__":
    main()
