"""Where a run was made: the commit of the code and the numerics fingerprint of the machine.

Every run record the runner writes carries ``made_by`` (:func:`made_by`): the commit of the
checkout that made it and the :func:`fingerprint` of its numerics. A saved set
(:mod:`normlab.results`) gathers them into its manifest, so that what made each run
survives an interrupted and resumed ``save``, and a re-run is compared exactly only on the
numerics that made that run.

Equal fingerprints promise equal results on the CPU (the engine is deterministic there), so
the fingerprint names everything that picks the kernels, not only torch's own dispatch:
torch's ATen capability (``ATEN_CPU_CAPABILITY`` can lower it), and the CPU's vendor and
widest vector instruction set, which MKL and oneDNN dispatch on by themselves (an AVX-512
machine with ``ATEN_CPU_CAPABILITY=avx2`` still runs its matrix products in AVX-512), plus
the environment variables that cap those libraries.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ._runtime import VERSION

__all__ = ["KERNEL_ENV", "cpu_model", "fingerprint", "git_commit", "kernels", "made_by"]

# The checkout's top (companion/normlab/_provenance.py is two folders below it).
ROOT = Path(__file__).resolve().parents[2]
#: Environment variables that cap the instruction set MKL and oneDNN dispatch on.
KERNEL_ENV = (
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
)
# Widest first: the first of these flags the CPU reports names its instruction set.
_ISA_FLAGS = ("avx512_fp16", "avx512f", "avx2", "avx", "sse4_2", "asimd", "neon")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (empty off Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    """The CPU's model name, or the processor/machine name where it cannot be read."""
    return (
        _cpuinfo().get("model name")
        or platform.processor()
        or platform.machine()
        or "unknown CPU"
    )


def kernels() -> str:
    """What MKL and oneDNN dispatch on: the CPU's vendor, its widest vector instruction set,
    and any environment variable that caps them, e.g. ``GenuineIntel avx512f`` or
    ``AuthenticAMD avx2 MKL_ENABLE_INSTRUCTIONS=AVX2``."""
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    isa = next((f for f in _ISA_FLAGS if f in flags), "unknown-isa")
    vendor = info.get("vendor_id") or info.get("CPU implementer") or platform.machine()
    caps = [f"{k}={os.environ[k]}" for k in KERNEL_ENV if os.environ.get(k)]
    return " ".join([vendor or "unknown-vendor", isa, *caps])


def fingerprint(device: str = "cpu", threads: int | None = None) -> dict[str, Any]:
    """What decides the numerics of a CPU run, so that equal fingerprints promise equal
    results: the device, torch's CPU kernel capability (``AVX2``, ``AVX512``, ...), the
    kernels' instruction set (:func:`kernels`), the versions of torch, numpy and Python,
    and the torch thread count."""
    return {
        "device": device.split(":")[0],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "kernels": kernels(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "threads": int(threads if threads is not None else torch.get_num_threads()),
    }


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout.strip()


def git_commit() -> str:
    """The commit of this checkout, with ``+dirty`` when the package's code differs from it
    (the saved sets themselves do not count: a set being extended is not code); outside a
    git checkout (an installed wheel, Colab), the installed version, ``normlab 0.1.0``."""
    try:
        head = _git("rev-parse", "HEAD")
        dirty = _git(
            "status", "--porcelain", "--", "companion", ":!companion/normlab/saved"
        )
    except (OSError, subprocess.SubprocessError):
        return f"normlab {VERSION}"
    if not head:
        return f"normlab {VERSION}"
    return f"{head}{'+dirty' if dirty else ''}"


def made_by(device: str | torch.device) -> dict[str, Any]:
    """A run's provenance, read when the run is recorded: ``commit`` (:func:`git_commit`;
    code edited while a long ``save`` runs shows as ``+dirty`` from then on) and
    ``fingerprint`` (None off the CPU, where no re-run is promised to be exact)."""
    kind = str(device).split(":")[0]
    return {
        "commit": git_commit(),
        "fingerprint": fingerprint(kind) if kind == "cpu" else None,
    }
