"""Part II backbones: ViTLite, SequenceTransformer, TabularTransformer and their blocks."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from normlab.data import IGNORE_INDEX, PAD_ID
from normlab.gates import autonorm_layers
from normlab.layers import AutoNorm, FiLMNorm
from normlab.models import (
    DropPath,
    LayerScale,
    SequenceConfig,
    SequenceTransformer,
    TabularConfig,
    TabularTransformer,
    ViTConfig,
    ViTLite,
    sequence_config,
    tabular_config,
    vit_config,
)
from normlab.normalisers import norm_layer
from torch import nn

NORMS = ["layernorm", "dyt", "adanorm", "film", "autonorm", "autonorm_random"]
TINY = {
    "dim": 32,
    "depth": 2,
    "heads": 2,
    "dropout": 0.0,
    "attn_dropout": 0.0,
    "drop_path": 0.1,
}


def _one_step(model: nn.Module, loss: torch.Tensor) -> None:
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    changed = [not torch.equal(a, p) for a, p in zip(before, model.parameters())]
    assert (
        sum(changed) >= len(changed) // 2
    )  # most tensors moved (some get no gradient, e.g. PAD row)


@pytest.mark.parametrize("norm", NORMS)
def test_vit_trains_one_step(norm: str) -> None:
    torch.manual_seed(0)
    model = ViTLite(
        ViTConfig(img_size=8, in_chans=1, patch_size=2, num_classes=10, **TINY),
        norm_layer(norm),
    )
    logits = model(torch.rand(4, 1, 8, 8))
    assert logits.shape == (4, 10)
    _one_step(model, F.cross_entropy(logits, torch.randint(0, 10, (4,))))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("task", ["tagging", "classification"])
def test_sequence_model_trains_one_step(norm: str, task: str) -> None:
    torch.manual_seed(0)
    config = SequenceConfig(vocab_size=40, max_len=12, num_outputs=5, task=task, **TINY)
    model = SequenceTransformer(config, norm_layer(norm))
    tokens = torch.randint(1, 40, (3, 9))
    tokens[0, 6:] = PAD_ID
    out = model(tokens)
    if task == "tagging":
        assert out.shape == (3, 9, 5)
        tags = torch.randint(0, 5, (3, 9)).masked_fill(tokens == PAD_ID, IGNORE_INDEX)
        loss = F.cross_entropy(
            out.reshape(-1, 5), tags.reshape(-1), ignore_index=IGNORE_INDEX
        )
    else:
        assert out.shape == (3, 5)
        loss = F.cross_entropy(out, torch.randint(0, 5, (3,)))
    _one_step(model, loss)


@pytest.mark.parametrize("norm", NORMS)
def test_tabular_model_trains_one_step(norm: str) -> None:
    torch.manual_seed(0)
    model = TabularTransformer(TabularConfig(num_features=7, **TINY), norm_layer(norm))
    pred = model(torch.randn(5, 7))
    assert pred.shape == (5,)
    _one_step(model, F.mse_loss(pred, torch.randn(5)))
    two = TabularTransformer(TabularConfig(num_features=7, num_outputs=2, **TINY), norm)
    assert two(torch.randn(5, 7)).shape == (5, 2)


@pytest.mark.parametrize(
    ("size", "chans", "patch"),
    [(28, 1, 4), (32, 3, 4), (8, 1, 2), (8, 1, 4), (16, 3, 4)],
)
def test_vit_input_sizes(size: int, chans: int, patch: int) -> None:
    model = ViTLite(ViTConfig(img_size=size, in_chans=chans, patch_size=patch, **TINY))
    assert model(torch.rand(2, chans, size, size)).shape == (2, 10)
    assert model.pos_embed.shape == (1, (size // patch) ** 2 + 1, 32)


def test_named_configs() -> None:
    paper = vit_config("paper_vision")
    assert (paper.depth, paper.heads, paper.dim, paper.patch_size, paper.mlp_ratio) == (
        8,
        4,
        128,
        4,
        2.0,
    )
    assert (paper.drop_path, paper.layer_scale_init) == (0.1, 1e-4)
    lite = vit_config("vit_lite_7_4", num_classes=100)
    assert (
        lite.depth,
        lite.heads,
        lite.dim,
        lite.patch_size,
        lite.mlp_ratio,
        lite.num_classes,
    ) == (7, 4, 256, 4, 2.0, 100)
    nlp, tab = sequence_config("paper_nlp"), tabular_config("paper_tabular")
    assert (
        (nlp.depth, nlp.dim, nlp.heads)
        == (tab.depth, tab.dim, tab.heads)
        == (12, 128, 8)
    )
    model = ViTLite(paper, "autonorm")
    assert len(autonorm_layers(model)) == 2 * 8 + 1
    rates = [block.drop_path.p for block in model.encoder.blocks]
    assert rates == pytest.approx([0.1 * i / 7 for i in range(8)])
    assert all(block.ls1.gamma.eq(1e-4).all() for block in model.encoder.blocks)
    with pytest.raises(ValueError, match="'vit_huge' is not known"):
        vit_config("vit_huge")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(
    ("task", "pool"),
    [("tagging", "mean"), ("classification", "mean"), ("classification", "cls")],
)
def test_padding_does_not_change_the_other_outputs(
    norm: str, task: str, pool: str
) -> None:
    """Eval mode: a sentence alone, and the same sentence padded inside a longer batch."""
    torch.manual_seed(0)
    config = SequenceConfig(
        vocab_size=30, max_len=16, num_outputs=4, task=task, readout=pool, **TINY
    )
    model = SequenceTransformer(config, norm_layer(norm)).eval()
    for (
        layer
    ) in model.modules():  # make FiLM's conditioning non-trivial, so pooling matters
        if isinstance(layer, FiLMNorm):
            nn.init.normal_(layer.condition[2].weight, std=0.5)
    sentence = torch.randint(1, 30, (1, 6))
    other = torch.randint(1, 30, (1, 11))
    batch = torch.cat([F.pad(sentence, (0, 5), value=PAD_ID), other])
    alone, padded = model(sentence), model(batch)
    if task == "tagging":
        torch.testing.assert_close(padded[0, :6], alone[0], rtol=1e-5, atol=1e-5)
    else:
        torch.testing.assert_close(padded[0], alone[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(padded[1:], model(other), rtol=1e-5, atol=1e-5)


def test_padding_check_detects_leaks() -> None:
    """The invariance above is not automatic: without the mask the padded output differs."""
    torch.manual_seed(0)
    config = SequenceConfig(
        vocab_size=30, max_len=16, num_outputs=4, task="classification", **TINY
    )
    model = SequenceTransformer(config).eval()
    sentence = torch.randint(1, 30, (1, 6))
    padded = F.pad(sentence, (0, 5), value=PAD_ID)
    x = model.embed(padded) + model.pos_embed[:, :11]
    unmasked = model.head(model.encoder(x).mean(dim=1))
    assert (unmasked - model(sentence)).abs().max() > 1e-4


def test_autonorm_drops_into_timm_vision_transformer() -> None:
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    model = VisionTransformer(
        img_size=32,
        patch_size=4,
        embed_dim=64,
        depth=2,
        num_heads=2,
        num_classes=10,
        norm_layer=functools.partial(AutoNorm, tau=0.5),
    )
    assert len(autonorm_layers(model)) == 2 * 2 + 1
    logits = model(torch.rand(2, 3, 32, 32))
    assert logits.shape == (2, 10)
    logits.sum().backward()
    assert all(
        layer.selector.mlp[0].weight.grad is not None
        for _, layer in autonorm_layers(model)
    )
    assert all(layer.last_probs.shape == (2, 2) for _, layer in autonorm_layers(model))


def test_drop_path_and_layer_scale() -> None:
    x = torch.randn(2000, 3, 4)
    layer = DropPath(0.25)
    assert torch.equal(layer.eval()(x), x)
    out = layer.train()(x)
    kept = (out != 0).flatten(1).all(dim=1)
    dropped = (out == 0).flatten(1).all(dim=1)
    assert torch.equal(
        kept | dropped, torch.ones(2000, dtype=torch.bool)
    )  # whole samples
    torch.testing.assert_close(out[kept], x[kept] / 0.75)
    # Binomial(2000, 0.25) dropped samples: mean 500, sd 19.4; 5 sd either side.
    assert 403 < dropped.sum().item() < 597
    assert torch.equal(LayerScale(4, 1e-4)(torch.ones(2, 4)), torch.full((2, 4), 1e-4))


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="divisible"):
        ViTConfig(img_size=30, patch_size=4)
    with pytest.raises(ValueError, match="heads"):
        ViTConfig(dim=30, heads=4)
    model = ViTLite(ViTConfig(img_size=8, in_chans=1, patch_size=2, **TINY))
    with pytest.raises(ValueError, match="images"):
        model(torch.rand(2, 3, 8, 8))
    seq = SequenceTransformer(SequenceConfig(vocab_size=10, max_len=5, **TINY))
    with pytest.raises(ValueError, match="max_len"):
        seq(torch.ones(2, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="long"):
        seq(torch.ones(2, 4))
    with pytest.raises(ValueError, match="task"):
        SequenceConfig(task="translation")
    with pytest.raises(ValueError, match="features"):
        TabularTransformer(TabularConfig(num_features=3, **TINY))(torch.randn(2, 4))
    with pytest.raises(ValueError, match="drop_path"):
        ViTConfig(drop_path=1.0)
    with pytest.raises(ValueError, match="'groupnorm' is not known"):
        ViTLite(norm_layer="groupnorm")
    with pytest.raises(TypeError, match="norm_layer"):
        ViTLite(norm_layer=3)


@pytest.mark.parametrize("init", ["trunc_normal_0.02", "torch_default"])
def test_init_schemes_set_every_linear_as_declared(init: str) -> None:
    """std 0.02 (truncated at +-2) and zero biases, or torch's fan-in uniform in
    +-1/sqrt(fan_in), whose std is 1/sqrt(3 fan_in); for every linear map and the head."""
    torch.manual_seed(0)
    config = ViTConfig(
        img_size=8, in_chans=1, patch_size=2, init=init, **{**TINY, "dim": 64}
    )
    model = ViTLite(config)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert len(linears) == 4 * config.depth + 1  # qkv, proj, fc1, fc2 per block; head
    for layer in linears:
        w, fan_in = layer.weight.detach(), layer.weight.shape[1]
        if init == "torch_default":
            bound = 1 / fan_in**0.5
            assert w.abs().max() <= bound and layer.bias.abs().max() <= bound
            assert w.std().item() == pytest.approx(bound / 3**0.5, rel=0.15)
        else:
            assert w.std().item() == pytest.approx(0.02, rel=0.15)
            assert torch.equal(layer.bias, torch.zeros_like(layer.bias))


def test_mean_readout_pools_the_patch_tokens_without_a_class_token() -> None:
    torch.manual_seed(0)
    config = ViTConfig(img_size=8, in_chans=1, patch_size=2, readout="mean", **TINY)
    model = ViTLite(config).eval()
    images = torch.rand(3, 1, 8, 8)
    tokens = model.tokens(images)
    assert model.cls_token is None and tokens.shape == (3, config.num_patches, 32)
    expected = model.head(model.encoder(tokens).mean(dim=1))
    torch.testing.assert_close(model(images), expected)
    table = TabularTransformer(
        TabularConfig(num_features=5, readout="mean", **TINY)
    ).eval()
    features = torch.randn(4, 5)
    pooled = table.encoder(table.tokenizer(features)).mean(dim=1)
    torch.testing.assert_close(table(features), table.head(pooled).squeeze(-1))


@pytest.mark.parametrize("field", ["init", "readout"])
def test_unknown_init_or_readout_is_named(field: str) -> None:
    with pytest.raises(ValueError, match=f"{field}='nope' is not known"):
        ViTConfig(**{field: "nope"})
