"""GPU throughput of the training engine (one shot, about 2-5 minutes, at most ~8).

Trains ViT-Lite in the AutoNorm paper's vision size (``paper_vision``: 8 layers, 4 heads,
dim 128, patch 4) on generated CIFAR-sized tensors (3x32x32, 10 classes; no download) and
prints images/s for:

- a plain ``DataLoader`` (CPU tensors, 4 workers, pinned memory) feeding an fp32 loop: the
  baseline;
- ``normlab.training.fit`` with the data resident on the GPU, fp32 and bf16, with the
  on-device crop/flip augmentation, and with ``torch.compile``.

Each measurement is a fixed number of AdamW steps after a warm-up, and is skipped once the
script's time budget is spent. Exits cleanly when CUDA is absent.

    .venv/bin/python benchmarks/gpu.py
    .venv/bin/python benchmarks/gpu.py --dry-run   # on the CPU, in seconds

``--dry-run`` runs every case on the CPU with a batch of 8 and a few steps, so that the
script's code paths are checked without a GPU (tests/test_benchmarks_gpu.py); its numbers
mean nothing. It runs the bf16 cases in fp32 (bf16 on a CPU is slow) and skips
``torch.compile``, whose CPU compilation alone takes minutes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

BUDGET_S = 6 * 60  # stop starting new measurements after this
SCRIPT_START = time.perf_counter()


@dataclass(frozen=True)
class Setup:
    """Where and how much each measurement runs."""

    device: str = "cuda"
    batch: int = 128
    steps: int = 300
    warmup_steps: int = 30
    workers: int = 4
    bf16: bool = True  # the "bf16" cases' autocast (CPU bf16 is too slow for a dry run)


DRY_RUN = Setup(device="cpu", batch=8, steps=3, warmup_steps=1, workers=2, bf16=False)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def make_model() -> torch.nn.Module:
    from normlab.models import ViTLite, vit_config

    torch.manual_seed(0)
    return ViTLite(vit_config("paper_vision", num_classes=10, in_chans=3, img_size=32))


def make_data(n: int):
    from normlab.data import DataSplit

    g = torch.Generator().manual_seed(0)
    meta = {"classes": [str(c) for c in range(10)]}
    x, y = (
        torch.rand(n, 3, 32, 32, generator=g),
        torch.randint(0, 10, (n,), generator=g),
    )
    train = DataSplit(x, y, "classification", "generated", "train", meta)
    m = min(n, 256)
    val = DataSplit(
        x[:m].clone(), y[:m].clone(), "classification", "generated", "val", meta
    )
    return train, val


def dataloader_fp32(train, setup: Setup) -> float:
    """The baseline: DataLoader over CPU tensors, fp32 forward/backward on the GPU."""
    from torch.utils.data import DataLoader, TensorDataset

    device = setup.device
    model = make_model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(
        TensorDataset(train.x, train.y),
        batch_size=setup.batch,
        shuffle=True,
        drop_last=True,
        num_workers=setup.workers,
        pin_memory=device == "cuda",
        persistent_workers=True,
    )

    def steps(n: int) -> None:
        done = 0
        while done < n:
            for x, y in loader:
                x = x.to(device, non_blocking=True)
                y = y.to(device, non_blocking=True)
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                done += 1
                if done == n:
                    break

    steps(setup.warmup_steps)
    sync(device)
    started = time.perf_counter()
    steps(setup.steps)
    sync(device)
    return setup.steps * setup.batch / (time.perf_counter() - started)


def with_fit(train, val, setup: Setup, **kwargs) -> float:
    """``fit`` with the data on the GPU; warm-up call first, then ``STEPS`` timed steps."""
    from normlab.training import fit

    model = make_model()
    common = dict(
        epochs=1,
        batch_size=setup.batch,
        lr=1e-3,
        optimizer="adamw",
        device=setup.device,
        progress=False,
    )
    fit(model, train, val, max_steps=setup.warmup_steps, **common, **kwargs)
    sync(setup.device)
    started = time.perf_counter()
    fit(model, train, val, max_steps=setup.steps, **common, **kwargs)
    sync(setup.device)
    return setup.steps * setup.batch / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="every case on the CPU, batch 8, a few steps: checks the code, measures nothing",
    )
    dry = parser.parse_args(argv).dry_run
    if not dry and not torch.cuda.is_available():
        print(
            "benchmarks/gpu.py: CUDA is not available on this machine; nothing measured "
            "(--dry-run checks the code paths on the CPU)."
        )
        return 0
    from normlab.augment import Augment

    setup = DRY_RUN if dry else Setup()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    train_cpu, val_cpu = make_data(setup.steps * setup.batch)
    train_dev, val_dev = train_cpu.to(setup.device), val_cpu.to(setup.device)
    name = "the CPU (dry run)" if dry else torch.cuda.get_device_name()
    cases: list[tuple[str, Callable[[], float]]] = [
        ("DataLoader, fp32 (baseline)", lambda: dataloader_fp32(train_cpu, setup)),
        (
            "fit, on-device data, fp32",
            lambda: with_fit(train_dev, val_dev, setup, amp=False),
        ),
        (
            "fit, on-device data, bf16",
            lambda: with_fit(train_dev, val_dev, setup, amp=setup.bf16),
        ),
        (
            "fit, bf16 + crop/flip on device",
            lambda: with_fit(
                train_dev,
                val_dev,
                setup,
                amp=setup.bf16,
                augment=Augment(crop_padding=4, hflip=True),
            ),
        ),
        (
            "fit, bf16 + torch.compile",
            lambda: with_fit(train_dev, val_dev, setup, amp=True, compile=True),
        ),
    ]
    print(
        f"ViT-Lite paper_vision on {name}, batch {setup.batch}, {setup.steps} AdamW steps "
        f"per measurement, torch {torch.__version__}"
    )
    print(f"{'setting':<36} {'images/s':>10} {'vs baseline':>12}")
    baseline = None
    for label, measure in cases:
        if dry and "compile" in label:
            print(f"{label:<36} {'skipped (dry run)':>23}")
            continue
        if time.perf_counter() - SCRIPT_START > BUDGET_S:
            print(f"{label:<36} {'skipped (time budget spent)':>23}")
            continue
        try:
            rate = measure()
        except (
            Exception
        ) as err:  # one failing case (e.g. compile) must not lose the others
            if dry:
                raise  # the dry run exists to find such failures
            print(
                f"{label:<36} failed: {type(err).__name__}: {str(err).splitlines()[0][:80] if str(err) else ''}"
            )
            continue
        if label.startswith("DataLoader"):
            baseline = rate
        ratio = f"{rate / baseline:>11.2f}x" if baseline else f"{'n/a':>12}"
        print(f"{label:<36} {rate:>10.0f} {ratio}", flush=True)
    print(f"total {time.perf_counter() - SCRIPT_START:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
