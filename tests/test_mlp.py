"""normlab.models.MLP: structure, factories and Part I's normalisers by name."""

from __future__ import annotations

import normlab
import pytest
import torch
from normlab.layers import AffineLikeLinear, L2Norm, NormLikeLinear
from normlab.models import MLP, MLPConfig, mlp_for
from torch import nn


def test_structure_and_order() -> None:
    model = MLP(
        MLPConfig(
            in_features=12,
            num_classes=5,
            width=7,
            depth=3,
            activation="leaky_relu",
            norm_layer=nn.LayerNorm,
        )
    )
    kinds = [type(m) for m in model.hidden]
    assert (
        kinds == [nn.Linear, nn.LayerNorm, nn.LeakyReLU] * 3
    )  # norm after linear, before activation
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [
        (12, 7),
        (7, 7),
        (7, 7),
        (7, 5),
    ]


def test_flattens_images_and_matches_a_hand_built_net() -> None:
    normlab.seed_everything(0)
    model = MLP(in_features=48, num_classes=3, width=8, depth=1, activation="tanh")
    x = torch.randn(4, 3, 4, 4)
    h = torch.tanh(model.hidden[0](x.reshape(4, 48)))
    assert torch.equal(model(x), model.head(h))


def test_linear_layer_factory_builds_every_linear_layer() -> None:
    built = []

    def linear(i: int, o: int) -> nn.Module:
        built.append((i, o))
        return nn.Linear(i, o, bias=False)

    model = MLP(in_features=4, num_classes=2, width=3, depth=2, linear_layer=linear)
    assert built == [(4, 3), (3, 3), (3, 2)]
    assert all(m.bias is None for m in model.modules() if isinstance(m, nn.Linear))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"activation": "swish"}, "activation"),
        ({"width": 0}, "width"),
        ({"depth": -1}, "depth"),
        ({"in_features": 2.5}, "in_features"),
    ],
)
def test_bad_config(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MLPConfig(**{"in_features": 4, "num_classes": 2, **kwargs})


@pytest.mark.parametrize(
    "normaliser, norm_type",
    [
        ("none", None),
        ("batchnorm", nn.BatchNorm1d),
        ("layernorm", nn.LayerNorm),
        ("rmsnorm", nn.RMSNorm),
    ],
)
def test_torch_normalisers(normaliser: str, norm_type: type | None) -> None:
    model = mlp_for(normaliser, in_features=64, num_classes=10, width=16, depth=2)
    norms = [m for m in model.hidden if not isinstance(m, (nn.Linear, nn.Tanh))]
    assert [type(m) for m in norms] == ([norm_type] * 2 if norm_type else [])
    assert model(torch.randn(5, 1, 8, 8)).shape == (5, 10)


@pytest.mark.parametrize(
    "normaliser, layer_type",
    [("norm_like", NormLikeLinear), ("affine_like", AffineLikeLinear)],
)
def test_corrected_layers(normaliser: str, layer_type: type) -> None:
    model = mlp_for(normaliser, in_features=64, num_classes=10, width=16, depth=2)
    corrected = [m for m in model.modules() if isinstance(m, layer_type)]
    assert len(corrected) == 3  # two hidden layers and the head
    assert not any(
        isinstance(m, (nn.LayerNorm, nn.BatchNorm1d, L2Norm)) for m in model.modules()
    )
    assert model(torch.randn(5, 64)).shape == (5, 10)


def test_l2_divides_each_sample_by_its_norm() -> None:
    model = mlp_for("l2", in_features=12, num_classes=3, width=6, depth=1).double()
    assert [type(m) for m in model.hidden] == [nn.Linear, L2Norm, nn.Tanh]
    x = torch.randn(5, 12, dtype=torch.float64)
    z = model.hidden[0](x)
    torch.testing.assert_close(
        model.hidden[1](z), z / z.norm(dim=1, keepdim=True), rtol=1e-12, atol=0
    )
    assert not list(model.hidden[1].parameters())


def test_unknown_normaliser_and_setting() -> None:
    with pytest.raises(ValueError, match="normaliser='groupnorm'.*affine_like"):
        mlp_for("groupnorm", in_features=4, num_classes=2)
    with pytest.raises(TypeError, match="dropout"):
        mlp_for("none", in_features=4, num_classes=2, dropout=0.1)
    with pytest.raises(
        ValueError, match="normaliser='dyt'"
    ):  # a Part II name: not an MLP normaliser
        mlp_for("dyt", in_features=4, num_classes=2)
