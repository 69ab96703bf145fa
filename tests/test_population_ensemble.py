"""The population's forward pass without vmap (normlab._population_ensemble).

For every Part I normaliser, K stacked MLPs run over the member dimension must compute what
the K modules compute one by one: the same outputs, the same gradients for every parameter
and the same BatchNorm running buffers, in float64 to 1e-12 (the arithmetic is the same,
summed in another order). A model with any layer lacking a stacked form (the CNN, a ViT
with dropout, an L2Norm over a whole image) has none, so vmap runs it; the gate studies'
ViT-Lite has its own (tests/test_population_vit.py).
"""

from __future__ import annotations

import pytest
import torch
from normlab._population_ensemble import ensemble_forward
from normlab.layers import L2Norm
from normlab.models import mlp_for
from normlab.population import stack_models
from torch import nn

PART1 = ("none", "batchnorm", "layernorm", "rmsnorm", "l2", "norm_like", "affine_like")
K, BATCH, FEATURES, CLASSES = 3, 12, 20, 5
EXACT = dict(rtol=1e-12, atol=1e-12)


def _models(normaliser: str, **config: object) -> list[nn.Module]:
    models = []
    for seed in range(K):
        torch.manual_seed(seed)
        model = mlp_for(
            normaliser,
            in_features=FEATURES,
            num_classes=CLASSES,
            width=16,
            depth=2,
            **config,
        )
        models.append(model.double())
    return models


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("normaliser", PART1)
def test_stacked_mlps_compute_what_each_module_computes(
    normaliser: str, train: bool
) -> None:
    models = _models(normaliser)
    pop = stack_models(_models(normaliser), torch.device("cpu"))
    assert pop.ensemble is not None
    pop.template.train(train)
    x = torch.randn(K, BATCH, 4, 5, dtype=torch.float64)  # flattened to FEATURES
    weights = torch.randn(K, BATCH, CLASSES, dtype=torch.float64)
    out = pop.forward(x)
    names = list(pop.params)
    grads = torch.autograd.grad((out * weights).sum(), [pop.params[n] for n in names])
    for k, model in enumerate(models):
        model.train(train)
        mine = model(x[k])
        torch.testing.assert_close(out[k], mine, **EXACT)
        (mine * weights[k]).sum().backward()
        for name, grad in zip(names, grads):
            torch.testing.assert_close(
                grad[k], model.get_parameter(name).grad, **EXACT, msg=name
            )
        for name, buffer in model.named_buffers():  # BatchNorm's running statistics
            torch.testing.assert_close(pop.buffers[name][k], buffer, **EXACT)


def test_a_shared_input_reaches_every_member() -> None:
    models = _models("batchnorm")
    pop = stack_models(_models("batchnorm"), torch.device("cpu"))
    pop.template.eval()
    x = torch.randn(BATCH, FEATURES, dtype=torch.float64)
    with torch.no_grad():
        out = pop.forward(x, shared_input=True)
        for k, model in enumerate(models):
            torch.testing.assert_close(out[k], model.eval()(x), **EXACT)


def test_models_without_a_stacked_form_are_left_to_vmap() -> None:
    from normlab.models import cnn_for
    from normlab.models.vit import ViTConfig, ViTLite

    vit = ViTLite(ViTConfig(dim=16, depth=1, heads=2, img_size=8, in_chans=1))
    assert vit.pos_drop.p > 0  # the default config's dropout: no stacked form
    assert ensemble_forward(vit) is None
    assert ensemble_forward(cnn_for("batchnorm", in_channels=1, num_classes=3)) is None
    image_norm = mlp_for("none", in_features=FEATURES, num_classes=CLASSES)
    image_norm.hidden.insert(1, L2Norm(dim=(0, 1)))  # over the batch: no stacked form
    assert ensemble_forward(image_norm) is None
    assert ensemble_forward(_models("layernorm")[0]) is not None
