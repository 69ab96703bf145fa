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


@pytest.mark.parametrize(
    "node, shapes",
    [
        ("_AffineLikeBound", ((8, 5), (3, 5), (3,))),
        ("_NormLikeBound", ((8, 5), (3, 5), (3,))),
        ("_PatchNormBound", ((2, 3, 6, 6), (4, 3, 3, 3), (4,))),
    ],
)
def test_each_bound_computes_its_expression(bounds, node, shapes) -> None:
    bounds.check(getattr(bounds, node), shapes)


def test_the_check_catches_a_wrong_gradient(bounds, monkeypatch) -> None:
    backward = bounds._AffineLikeBound.backward

    def halved(ctx, g):
        gx, gw, gb = backward(ctx, g)
        return gx, gw / 2, gb

    monkeypatch.setattr(bounds._AffineLikeBound, "backward", staticmethod(halved))
    with pytest.raises(AssertionError):
        bounds.check(bounds._AffineLikeBound, ((8, 5), (3, 5), (3,)))


def test_a_bound_shares_its_baselines_parameters(bounds) -> None:
    linear = torch.nn.Linear(5, 3)
    bound = bounds._Bound(bounds._AffineLikeBound, linear)
    assert bound.weight is linear.weight and bound.bias is linear.bias
    assert bound(torch.randn(4, 5)).shape == (4, 3)
