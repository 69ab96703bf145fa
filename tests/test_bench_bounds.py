"""benchmarks/bench_bounds.py measures the right computations: each fewest-pass form's
output and gradients are autograd's for its plain expression, and the check catches a
wrong one."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch


@pytest.fixture
def bounds(root, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "bench_bounds", root / "benchmarks/bench_bounds.py"
    )
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_bounds", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["affine_like", "norm_like", "patch_norm"])
def test_each_bound_computes_its_expression(bounds, kind) -> None:
    bounds.check(kind)


@pytest.mark.parametrize("kind", ["affine_like", "patch_norm"])
def test_the_check_catches_a_wrong_gradient(bounds, monkeypatch, kind) -> None:
    right = bounds.bound

    def wrong(kind, x, weight, bias):  # the weight's gradient halved
        return right(kind, x, weight / 2 + weight.detach() / 2, bias)

    monkeypatch.setattr(bounds, "bound", wrong)
    with pytest.raises(AssertionError):
        bounds.check(kind)


def test_a_bound_shares_its_baselines_parameters(bounds) -> None:
    linear = torch.nn.Linear(5, 3)
    layer = bounds._Bound("affine_like", linear)
    assert layer.weight is linear.weight and layer.bias is linear.bias
    assert layer(torch.randn(4, 5)).shape == (4, 3)
