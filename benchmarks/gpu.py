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
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

BATCH, STEPS, WARMUP_STEPS = 128, 300, 30
BUDGET_S = 6 * 60  # stop starting new measurements after this
SCRIPT_START = time.perf_counter()


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
    val = DataSplit(
        x[:256].clone(), y[:256].clone(), "classification", "generated", "val", meta
    )
    return train, val


def dataloader_fp32(train) -> float:
    """The baseline: DataLoader over CPU tensors, fp32 forward/backward on the GPU."""
    from torch.utils.data import DataLoader, TensorDataset

    model = make_model().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(
        TensorDataset(train.x, train.y),
        batch_size=BATCH,
        shuffle=True,
        drop_last=True,
        num_workers=4,
        pin_memory=True,
        persistent_workers=True,
    )

    def steps(n: int) -> None:
        done = 0
        while done < n:
            for x, y in loader:
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                done += 1
                if done == n:
                    break

    steps(WARMUP_STEPS)
    torch.cuda.synchronize()
    started = time.perf_counter()
    steps(STEPS)
    torch.cuda.synchronize()
    return STEPS * BATCH / (time.perf_counter() - started)


def with_fit(train, val, **kwargs) -> float:
    """``fit`` with the data on the GPU; warm-up call first, then ``STEPS`` timed steps."""
    from normlab.training import fit

    model = make_model()
    common = dict(
        epochs=1,
        batch_size=BATCH,
        lr=1e-3,
        optimizer="adamw",
        device="cuda",
        progress=False,
    )
    fit(model, train, val, max_steps=WARMUP_STEPS, **common, **kwargs)
    torch.cuda.synchronize()
    started = time.perf_counter()
    fit(model, train, val, max_steps=STEPS, **common, **kwargs)
    torch.cuda.synchronize()
    return STEPS * BATCH / (time.perf_counter() - started)


def main() -> int:
    if not torch.cuda.is_available():
        print(
            "benchmarks/gpu.py: CUDA is not available on this machine; nothing measured."
        )
        return 0
    from normlab.augment import Augment

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    train_cpu, val_cpu = make_data(STEPS * BATCH)
    train_gpu, val_gpu = train_cpu.to("cuda"), val_cpu.to("cuda")
    name = torch.cuda.get_device_name()
    cases: list[tuple[str, Callable[[], float]]] = [
        ("DataLoader, fp32 (baseline)", lambda: dataloader_fp32(train_cpu)),
        ("fit, on-device data, fp32", lambda: with_fit(train_gpu, val_gpu, amp=False)),
        ("fit, on-device data, bf16", lambda: with_fit(train_gpu, val_gpu, amp=True)),
        (
            "fit, bf16 + crop/flip on device",
            lambda: with_fit(
                train_gpu,
                val_gpu,
                amp=True,
                augment=Augment(crop_padding=4, hflip=True),
            ),
        ),
        (
            "fit, bf16 + torch.compile",
            lambda: with_fit(train_gpu, val_gpu, amp=True, compile=True),
        ),
    ]
    print(
        f"ViT-Lite paper_vision on {name}, batch {BATCH}, {STEPS} AdamW steps per measurement, "
        f"torch {torch.__version__}"
    )
    print(f"{'setting':<36} {'images/s':>10} {'vs baseline':>12}")
    baseline = None
    for label, measure in cases:
        if time.perf_counter() - SCRIPT_START > BUDGET_S:
            print(f"{label:<36} {'skipped (time budget spent)':>23}")
            continue
        try:
            rate = measure()
        except (
            Exception
        ) as err:  # one failing case (e.g. compile) must not lose the others
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
