"""The population optimiser (normlab._population_opt): each member steps as torch's own
single-tensor AdamW and SGD step its parameters, with its own rate; a member a frozen gate
leaves without a gradient gets no update, no moment and no step count for that parameter,
as in its single run; and the weight-decay groups, stepped as flat tensors, keep each
parameter's own decay (matrices only)."""

from __future__ import annotations

import pytest
import torch
from normlab._population_opt import StackedOptimizer

K = 3
EXACT = dict(rtol=1e-12, atol=1e-15)
SHAPES = {"weight": (4, 5), "bias": (5,), "gain": ()}


def _params() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {n: torch.randn(K, *s, dtype=torch.float64) for n, s in SHAPES.items()}


def _grads(step: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(100 + step)
    return {n: torch.randn(K, *s, dtype=torch.float64) for n, s in SHAPES.items()}


def _torch_optimizer(name: str, p: torch.Tensor, lr: float):
    if name == "adamw":
        # decay on matrices only, as fit's groups and the population's rule
        decay = 0.1 if p.dim() >= 2 else 0.0
        return torch.optim.AdamW([p], lr=lr, weight_decay=decay, foreach=False)
    return torch.optim.SGD([p], lr=lr, momentum=0.9, foreach=False)


@pytest.mark.parametrize("name", ["adamw", "sgd"])
def test_each_member_steps_as_torch_steps_its_own_parameters(name: str) -> None:
    kwargs = {"momentum": 0.9} if name == "sgd" else {}
    decay = 0.1 if name == "adamw" else 0.0
    stacked = StackedOptimizer(name, weight_decay=decay, kwargs=kwargs)
    params, lrs = _params(), torch.tensor([1e-3, 3e-3, 1e-2], dtype=torch.float64)
    singles = {
        (n, k): params[n][k].clone().requires_grad_() for n in SHAPES for k in range(K)
    }
    optims = {
        key: _torch_optimizer(name, p, float(lrs[key[1]])) for key, p in singles.items()
    }
    # member 0's gain is a frozen gate's on the first step: no gradient in its single run
    skips = [{"gain": torch.tensor([True, False, False])}, {}, {}]
    for step, skip in enumerate(skips):
        grads = _grads(step)
        stacked.step(params, grads, lrs, torch.ones(K, dtype=torch.bool), skip)
        for (n, k), p in singles.items():
            if n in skip and bool(skip[n][k]):
                continue  # as alone: no gradient, so torch skips the parameter
            p.grad = grads[n][k].clone()
            optims[(n, k)].step()
    for (n, k), p in singles.items():
        torch.testing.assert_close(params[n][k], p.detach(), **EXACT, msg=f"{n}[{k}]")


def test_a_stopped_member_keeps_its_parameters_and_state() -> None:
    stacked = StackedOptimizer("adamw", weight_decay=0.1)
    params, lrs = _params(), torch.full((K,), 1e-2, dtype=torch.float64)
    stacked.step(params, _grads(0), lrs, torch.ones(K, dtype=torch.bool))
    before = {n: p.clone() for n, p in params.items()}
    stacked.step(params, _grads(1), lrs, torch.tensor([True, False, True]))
    for n, p in params.items():
        assert torch.equal(p[1], before[n][1])
        assert not torch.equal(p[0], before[n][0])
    for state in stacked.state.values():  # its step count stood still
        assert state["step"][1].tolist() == [1.0] * state["step"].shape[1]
        assert state["step"][0].tolist() == [2.0] * state["step"].shape[1]
