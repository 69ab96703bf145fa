"""benchmarks/gpu.py's CPU dry run: every measured case runs (a failure raises)."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch


@pytest.fixture
def gpu_benchmark(root, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "gpu_bench", root / "benchmarks/gpu.py"
    )
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_bench", module)  # for its dataclass
    spec.loader.exec_module(module)
    return module


def test_dry_run_exercises_every_case(gpu_benchmark, capsys) -> None:
    assert gpu_benchmark.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "on the CPU (dry run), batch 8, 3 AdamW steps" in out
    for label in (
        "DataLoader, fp32 (baseline)",
        "fit, on-device data, fp32",
        "fit, on-device data, bf16",
        "fit, bf16 + crop/flip on device",
    ):
        assert re.search(rf"{re.escape(label)}\s+\d+\s+\d+\.\d\dx", out), label
    assert re.search(r"torch\.compile\s+skipped \(dry run\)", out)


def test_without_cuda_it_measures_nothing(gpu_benchmark, monkeypatch, capsys) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_benchmark.main([]) == 0
    assert "nothing measured" in capsys.readouterr().out
