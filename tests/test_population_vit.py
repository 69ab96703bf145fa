"""A population of ViT-Lites over the member dimension (normlab._population_vit).

For every normaliser the gate studies put in a ViT (LayerNorm, DyT, AutoNorm with a learned
gate, soft or hard, the Random Selector, the fixed mix), K stacked ViTs run without vmap
must compute what vmap computes member by member: the same outputs, gate probabilities and
gradients, in training (each member's own gate noise, one member's gate frozen by
AutoNorm-S) and in eval, in float64 to 1e-12 (the same arithmetic, summed in another
order); in eval, what each module computes on its own too. A ViT with a part the stacked
form lacks (dropout, LayerScale, AdaNorm) is left to vmap.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from normlab._population_ensemble import ensemble_forward
from normlab.gates import autonorm_layers
from normlab.layers.gate import NormSelector
from normlab.models.vit import ViTConfig, ViTLite
from normlab.normalisers import norm_layer
from normlab.population import stack_models
from normlab.population_noise import GateNoise
from torch import nn

K, BATCH, CLASSES = 3, 6, 4
EXACT = dict(rtol=1e-12, atol=1e-12)
CONFIG = ViTConfig(
    img_size=8,
    in_chans=1,
    patch_size=4,
    num_classes=CLASSES,
    dim=16,
    depth=2,
    heads=2,
    dropout=0.0,
    attn_dropout=0.0,
    drop_path=0.0,
    layer_scale_init=None,
    init="torch_default",
)
NORMS = {
    "frozen_ln": ("frozen_ln", {}),
    "dyt": ("dyt", {}),
    "autonorm": ("autonorm", {}),
    "autonorm_hard": ("autonorm", {"hard": True}),
    "autonorm_random": ("autonorm_random", {}),
    "autonorm_fixed": ("autonorm", {"selector": "fixed"}),
}


def _vits(arm: str, config: ViTConfig = CONFIG) -> list[nn.Module]:
    name, kwargs = NORMS[arm]
    models = []
    for seed in range(K):
        torch.manual_seed(seed)
        models.append(ViTLite(config, norm_layer(name, **kwargs)).double())
    return models


def _with_vmap(pop):  # the same population, run under vmap
    return dataclasses.replace(pop, ensemble=None)


def _gradients(pop, out: torch.Tensor, weights: torch.Tensor) -> list[torch.Tensor]:
    names = [n for n, p in pop.params.items() if p.requires_grad]
    return torch.autograd.grad((out * weights).sum(), [pop.params[n] for n in names])


@pytest.mark.parametrize("arm", list(NORMS))
def test_a_stacked_vit_population_computes_what_vmap_computes_in_training(
    arm: str,
) -> None:
    pop = stack_models(_vits(arm), torch.device("cpu"))
    assert pop.ensemble is not None
    pop.template.train()
    gates = [n for n, m in pop.template.named_modules() if isinstance(m, NormSelector)]
    if gates:  # AutoNorm-S froze member 1's first gate: it draws nothing, as alone
        pop.frozen[gates[0]][1] = True
    noise = GateNoise(pop.template, range(K))(pop, BATCH)
    probes = [n for n, _ in autonorm_layers(pop.template)]
    x = torch.randn(K, BATCH, 1, 8, 8, dtype=torch.float64)
    weights = torch.randn(K, BATCH, CLASSES, dtype=torch.float64)
    stacked = pop.forward(x, noise=noise, probes=probes)
    probed = pop.probed
    vmapped = _with_vmap(pop)
    reference = vmapped.forward(x, noise=noise, probes=probes)
    torch.testing.assert_close(stacked, reference, **EXACT)
    assert probed.keys() == vmapped.probed.keys() == set(probes)
    for name in probes:
        torch.testing.assert_close(probed[name], vmapped.probed[name], **EXACT)
    for mine, theirs in zip(
        _gradients(pop, stacked, weights), _gradients(vmapped, reference, weights)
    ):
        torch.testing.assert_close(mine, theirs, **EXACT)


@pytest.mark.parametrize("arm", list(NORMS))
def test_a_stacked_vit_population_in_eval_is_each_member_on_its_own(arm: str) -> None:
    models = _vits(arm)
    pop = stack_models(_vits(arm), torch.device("cpu"))
    pop.template.eval()
    x = torch.randn(BATCH, 1, 8, 8, dtype=torch.float64)
    with torch.no_grad():
        out = pop.forward(x, shared_input=True)
        for k, model in enumerate(models):
            torch.testing.assert_close(out[k], model.eval()(x), **EXACT)


def test_a_pinned_autonorm_runs_its_candidate() -> None:
    models = _vits("autonorm")
    pop = stack_models(_vits("autonorm"), torch.device("cpu"))
    pop.template.eval()
    x = torch.randn(K, BATCH, 1, 8, 8, dtype=torch.float64)
    for pin in ("dyt", "ln"):
        for _, layer in autonorm_layers(pop.template):
            layer.pin = pin
        for model in models:
            for _, layer in autonorm_layers(model):
                layer.pin = pin
        with torch.no_grad():
            out = pop.forward(x)
            for k, model in enumerate(models):
                torch.testing.assert_close(out[k], model.eval()(x[k]), **EXACT)


def test_the_random_selector_needs_each_members_draw_in_training() -> None:
    pop = stack_models(_vits("autonorm_random"), torch.device("cpu"))
    pop.template.train()
    with pytest.raises(ValueError, match="random selector"):
        pop.forward(torch.randn(K, BATCH, 1, 8, 8, dtype=torch.float64))


@pytest.mark.parametrize(
    "change",
    [
        {"dropout": 0.1},
        {"attn_dropout": 0.1},
        {"drop_path": 0.1},
        {"layer_scale_init": 1e-4},
    ],
    ids=lambda c: next(iter(c)),
)
def test_a_vit_with_parts_the_stacked_form_lacks_is_left_to_vmap(change) -> None:
    assert ensemble_forward(ViTLite(dataclasses.replace(CONFIG, **change))) is None


def test_a_vit_with_a_normaliser_the_stacked_form_lacks_is_left_to_vmap() -> None:
    assert ensemble_forward(ViTLite(CONFIG, norm_layer("adanorm"))) is None
    no_affine = functools.partial(nn.LayerNorm, elementwise_affine=False)
    assert ensemble_forward(ViTLite(CONFIG, no_affine)) is None
    assert ensemble_forward(ViTLite(CONFIG, norm_layer("frozen_ln"))) is not None
