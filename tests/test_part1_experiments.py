"""Part I experiments: grid filters, the l2 and CNN normalisers, kernel coupling, slopes and leads."""

from __future__ import annotations

import collections
import math

import numpy as np
import pandas as pd
import pytest
import torch
from normlab import experiments
from normlab.analysis import batch as batch_analysis
from normlab.analysis import part1 as analysis_part1
from normlab.divergence import (
    kernel_coupling,
    layer_inputs,
    offdiagonal_share,
    tangent_kernel,
)
from normlab.experiments import Grid, RunContext, part1, part1_batch, part1_conv
from normlab.experiments.part1_batch import PRIMARY
from normlab.functional import PATCHNORM_FLOOR
from normlab.layers import L2Norm, PatchNormConv2d, RMSNorm2d
from normlab.models import CNN, cnn_for, mlp_for
from normlab.normalisers import conv_names
from torch import nn

F64 = torch.float64


# ------------------------------------------------------------------------ grids


def test_grid_where_keeps_only_matching_points() -> None:
    rates = {"sgd": (0.1, 1.0), "adam": (0.001,)}
    grid = Grid(
        axes={"optimizer": ["sgd", "adam"], "lr": [0.001, 0.1, 1.0]},
        seeds=2,
        where=lambda c: c["lr"] in rates[c["optimizer"]],
    )
    configs = grid.configs()
    assert {(c["optimizer"], c["lr"]) for c in configs} == {
        ("sgd", 0.1),
        ("sgd", 1.0),
        ("adam", 0.001),
    }
    assert grid.size() == len(configs) == 6 and grid.size(seeds=1) == 3


def test_part1_grids_meet_the_design() -> None:
    fc, batch, cnn = (
        experiments.get(n) for n in ("fc_normalisers", "batch_size", "cnn_normalisers")
    )
    for exp in (fc, batch, cnn):
        assert exp.grid("quick").seeds >= 3 and exp.grid("cpu").seeds >= 3
        for profile in exp.profiles:
            configs = exp.grid(profile).configs(seeds=1)
            per_config: dict[tuple, set] = {}
            for c in configs:
                key = tuple(
                    sorted((k, v) for k, v in c.items() if k not in ("lr", "seed"))
                )
                per_config.setdefault(key, set()).add(c["lr"])
            least = 3  # the house rule: a rate chosen on validation from 3+ values
            assert min(len(v) for v in per_config.values()) >= least, (
                f"{exp.name} {profile}: lr chosen from >= {least} rates"
            )
    cpu = fc.grid("cpu").configs(seeds=1)
    assert {c["normaliser"] for c in cpu} == set(part1.BOOK_NORMALISERS)
    # the specification curve: the primary specification and each one-choice change of
    # it at the primary shape, with every normaliser
    primary_shape = [
        c for c in cpu if (c["activation"], c["depth"], c["width"]) == part1.FC_SHAPE
    ]
    for source, init, optimizer in (
        ("mnist_5k", "xavier_normal", "sgd"),
        ("mnist_5k", "default", "sgd"),
        ("mnist_5k", "xavier_normal", "adam"),
        ("digits", "xavier_normal", "sgd"),
    ):
        spec = dict(source=source, init=init, optimizer=optimizer, head="same")
        assert _names_at(primary_shape, **spec) == set(part1.BOOK_NORMALISERS), spec
    assert part1.FC_PRIMARY["source"] == "mnist_5k"
    assert {c["optimizer"] for c in fc.grid("quick").configs()} == {"sgd", "adam"}
    for profile in batch.profiles:  # the large-batch studies' range: a factor of 64
        sizes = sorted({c["batch_size"] for c in batch.grid(profile).configs(seeds=1)})
        assert len(sizes) >= 3 and sizes[-1] / sizes[0] >= 64, profile
    # cpu: every normaliser at seven doublings under the primary specification, and the
    # initialisation and the budget convention as axes beside it
    cpu_batch = batch.grid("cpu").configs(seeds=1)
    primary = [c for c in cpu_batch if all(c[k] == v for k, v in PRIMARY.items())]
    assert {c["batch_size"] for c in primary} == set(part1_batch.CPU_SIZES)
    assert {c["normaliser"] for c in primary} == set(part1.BOOK_NORMALISERS)
    assert {"optimizer", "init", "budget"} <= set(batch.grid("cpu").axes)
    assert {c["init"] for c in cpu_batch} == {"xavier_normal", "default"}
    assert {c["budget"] for c in cpu_batch} == set(part1_batch.BATCH_BUDGETS)
    assert {c["optimizer"] for c in batch.grid("standard").configs(seeds=1)} == {
        "sgd",
        "adam",
    }
    assert cnn.grid("cpu").axes["normaliser"] == list(part1_conv.BOOK_CONV_NAMES)
    assert set(part1_conv.BOOK_CONV_NAMES) <= set(conv_names())


def _names_at(configs: list[dict], **where: object) -> set[str]:
    return {
        c["normaliser"] for c in configs if all(c.get(k) == v for k, v in where.items())
    }


def test_cpu_fc_points_are_matched() -> None:
    """A9-A11 compare one rival set at every shape under the primary specification; the
    primary shape runs every normaliser under every specification."""
    cpu = experiments.get("fc_normalisers").grid("cpu").configs(seeds=1)
    primary = {**part1.FC_PRIMARY, "head": "same"}
    act, depth, width = part1.FC_SHAPE
    assert _names_at(cpu, **primary, activation=act, depth=depth, width=width) == set(
        part1.BOOK_NORMALISERS
    )
    for act, depth, width in part1.FC_OTHER_SHAPES:
        assert _names_at(
            cpu, **primary, activation=act, depth=depth, width=width
        ) == set(part1.FC_CORE)
    assert _names_at(cpu, head="plain") == set(part1.CORRECTIONS)
    toy = {"source": "digits", "init": "xavier_normal", "optimizer": "sgd"}
    assert _names_at(cpu, **toy) == set(part1.BOOK_NORMALISERS)


def test_cpu_fc_confirmation_runs_the_pilots_choice_for_the_planned_seeds() -> None:
    """Seeds beyond the pilot run each primary cell at the rate its pilot chose on
    validation (FC_CONFIRM_RATES, checked against the saved pilot), as many as A8's plan
    asks (A11's a fixed extension, its size left open where its plan asks more); every other point keeps the pilot's seeds, which run every rate."""
    from normlab import claims, results
    from normlab.claims.pairing import at_chosen_lr

    assert part1.FC_PILOT_SEEDS == claims.plans.PILOT_SEEDS
    configs = experiments.get("fc_normalisers").grid("cpu").configs()
    later = [c for c in configs if c["seed"] >= part1.FC_PILOT_SEEDS]
    assert {part1.fc_cell(c): c["lr"] for c in later} == part1.FC_CONFIRM_RATES
    pilot_seeds, primary_seeds = part1.FC_PILOT_SEEDS, part1.FC_PRIMARY_SEEDS
    per_cell = {cell: primary_seeds - pilot_seeds for cell in part1.FC_CONFIRM_RATES}
    for cell in part1.FC_A11_CELLS:  # A11's plan asks for more seeds of its cell
        per_cell[cell] = part1.FC_A11_SEEDS - pilot_seeds
    assert collections.Counter(part1.fc_cell(c) for c in later) == per_cell
    for c in later:
        assert (
            all(c[a] == v for a, v in part1.FC_PRIMARY.items()) and c["head"] == "same"
        )
    pilot = claims.plans.pilot(results.largest("fc_normalisers").results)
    chosen = at_chosen_lr(part1.verdict_rows(pilot))
    assert {part1.fc_cell(r): r["lr"] for _, r in chosen.iterrows()} == (
        part1.FC_CONFIRM_RATES
    )
    planned = claims.judging.evaluate("A8").planned
    assert planned is not None and planned[0] <= primary_seeds
    # A11's margin is half a point; where its pilot's plan asks more seeds than the set
    # holds, its verdict may not claim a size
    a11_out = claims.judging.evaluate("A11")
    assert a11_out.planned is not None and a11_out.planned[0] is not None
    if a11_out.planned[0] > part1.FC_A11_SEEDS:
        assert {j.verdict for j in a11_out.judged} <= {
            claims.INCONCLUSIVE,
            claims.SIGN_SUPPORTED,
            claims.SIGN_CONTRADICTED,
        }
    # the claims that average over cells read the seeds every cell ran; A11 its own
    table = results.largest("fc_normalisers").results
    assert {j.n for j in claims.judge(claims.get("A8"), table).judged} == {
        primary_seeds
    }
    (a11,) = claims.judge(claims.get("A11"), table).judged
    assert a11.n == part1.FC_A11_SEEDS


def test_cpu_budgets_train_for_a_thousand_steps() -> None:
    """Every fixed-budget cpu set's median run takes >= 1,000 SGD steps, from the grid
    and the size of the training split (the batch-size set trains to a target instead)."""
    for name in ("fc_normalisers", "cnn_normalisers"):
        configs = experiments.get(name).grid("cpu").configs(seeds=1)

        def steps_of(c: dict) -> int:
            train = len(part1.config_splits(c)["train"])  # the grid's source, if any
            return c["epochs"] * (train // c["batch_size"])

        steps = sorted(steps_of(c) for c in configs)
        assert steps[len(steps) // 2] >= 1000, name


def test_batch_size_caps_leave_room_to_reach_the_target() -> None:
    """A steps-to-target run may go on for at least its cap of epochs and steps, and is
    measured at least 16 times before the cap, so a run the cap stops is a slow run, not
    one stopped between two measurements."""
    for profile in ("quick", "cpu"):
        for c in experiments.get("batch_size").grid(profile).configs(seeds=1):
            if c["budget"] != "to_target":
                continue
            train = len(part1.config_splits(c)["train"])
            cap = part1_batch.cap_steps(c, train)
            assert cap >= c["cap_epochs"] * (train // c["batch_size"])
            assert cap >= 16 * part1_batch.eval_every(c), (profile, c["batch_size"])


# ----------------------------------------------------------------------- models


def test_l2_normaliser_divides_each_sample_by_its_norm() -> None:
    model = mlp_for("l2", in_features=64, num_classes=10, width=16, depth=2)
    norms = [m for m in model.hidden if isinstance(m, L2Norm)]
    assert len(norms) == 2 and norms[0].dim == (-1,)
    x = torch.randn(5, 64)
    h = layer_inputs(model, [model.hidden[2]], x)[
        0
    ]  # the first tanh's input: the L2Norm output
    assert torch.allclose(h.norm(dim=1), torch.ones(5), atol=1e-6)


def test_rmsnorm2d_maths_and_gradients() -> None:
    layer = RMSNorm2d(3).double()
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([1.0, 2.0, -0.5], dtype=F64))
    x = torch.randn(4, 3, 5, 5, dtype=F64)
    rms = x.square().mean(dim=(1, 2, 3), keepdim=True).add(layer.eps).sqrt()
    assert torch.allclose(
        layer(x), x / rms * layer.weight.view(1, -1, 1, 1), rtol=1e-12, atol=1e-12
    )
    assert torch.autograd.gradcheck(layer, (x.requires_grad_(),))
    with pytest.raises(ValueError, match="num_channels"):
        RMSNorm2d(0)
    with pytest.raises(ValueError, match=r"shape \(N, C=3, H, W\)"):
        layer(torch.randn(2, 4, 5, 5, dtype=F64))


@pytest.mark.parametrize("normaliser", conv_names())
def test_cnn_for_builds_each_normaliser(normaliser: str) -> None:
    model = cnn_for(normaliser, in_channels=1, num_classes=10, channels=4, depth=2)
    assert model(torch.randn(3, 1, 8, 8)).shape == (3, 10)
    convs = model.convolutions()
    assert len(convs) == 2
    patch = [c for c in convs if isinstance(c, PatchNormConv2d)]
    assert (len(patch) == 2) == (normaliser in ("norm_like", "affine_like"))
    if patch:
        assert {c.mode for c in patch} == {normaliser}
    kinds = {
        "batchnorm": nn.BatchNorm2d,
        "layernorm": nn.GroupNorm,
        "rmsnorm": RMSNorm2d,
    }
    if normaliser in kinds:
        assert sum(isinstance(m, kinds[normaliser]) for m in model.features) == 2
    if normaliser == "layernorm":
        assert model.features[1].num_groups == 1


def test_cnn_first_convolution_may_be_strided() -> None:
    for normaliser in ("none", "norm_like"):
        model = cnn_for(
            normaliser, in_channels=1, num_classes=10, channels=4, depth=2, stride=2
        )
        first, second = model.convolutions()
        assert first.stride == (2, 2) and second.stride == (1, 1)
        x = torch.randn(3, 1, 28, 28)
        assert layer_inputs(model, [second], x)[0].shape == (3, 4, 14, 14)
        assert model(x).shape == (3, 10) and "stride=2" in repr(model)
    plain = cnn_for("none", in_channels=1, num_classes=10)
    assert plain.convolutions()[0].stride == (1, 1)
    assert "depth=2, activation" in repr(plain)
    with pytest.raises(ValueError, match="stride must be a positive int"):
        cnn_for("none", in_channels=1, num_classes=10, stride=0)


def test_cpu_cnn_set_is_on_real_mnist_with_every_patchnorm_floor_at_its_default() -> (
    None
):
    grid = experiments.get("cnn_normalisers").grid("cpu")
    assert grid.fixed["source"] == "mnist_5k" and grid.fixed["stride"] == 2
    config = grid.configs(seeds=1)[0]
    splits = part1.config_splits(config)
    assert splits["train"].x.shape[1:] == (1, 28, 28)
    model = cnn_for("norm_like", in_channels=1, num_classes=10)
    assert {c.eps for c in model.convolutions()} == {PATCHNORM_FLOOR}


def test_init_gradients_scale_as_one_over_the_floor_at_blank_patches() -> None:
    """With zero biases a blank margin reaches the second convolution as exact zeros, whose
    patches pass back W^T g / floor: the first bias's gradient scales as 1 / floor when
    the floor is tiny, and stays a plain convolution's size at the default floor."""
    config = {
        **experiments.get("cnn_normalisers").grid("quick").configs(seeds=1)[0],
        "init": "xavier_normal",
    }
    assert part1_conv.blank_patches(config, images=16)[2] > 0
    grads = pd.DataFrame(
        part1_conv.init_gradients(config, (1e-12, 1e-10, 1.0), images=16)
    )
    first_bias = grads[grads["parameter"] == "features.0.bias"].set_index("arm")
    norm = first_bias["grad_norm"]
    assert norm["norm_like, floor 1e-12"] / norm["norm_like, floor 1e-10"] == (
        pytest.approx(100.0, rel=1e-6)
    )
    assert norm["norm_like, floor 1e-12"] > 1e6
    assert norm["norm_like, floor 1"] < 10 * norm["none"]
    assert set(grads["arm"]) == {
        "norm_like, floor 1e-12",
        "norm_like, floor 1e-10",
        "norm_like, floor 1",
        "affine_like",
        "none",
    }


def test_cnn_errors() -> None:
    with pytest.raises(ValueError, match="normaliser='groupnorm' is not known"):
        cnn_for("groupnorm", in_channels=1, num_classes=10)
    with pytest.raises(TypeError, match="unknown CNN settings: width"):
        cnn_for("none", in_channels=1, num_classes=10, width=3)
    with pytest.raises(ValueError, match="depth must be a positive int"):
        CNN(in_channels=1, num_classes=10, depth=0)


# ------------------------------------------------------------------ measurements


def test_offdiagonal_share_exact() -> None:
    assert offdiagonal_share(torch.eye(4)) == 0.0
    K = torch.tensor([[2.0, -1.0], [1.0, 4.0]])
    assert offdiagonal_share(K) == pytest.approx(2.0 / 8.0)
    with pytest.raises(ValueError, match="square"):
        offdiagonal_share(torch.ones(2, 3))
    with pytest.raises(ValueError, match="all zeros"):
        offdiagonal_share(torch.zeros(3, 3))


def test_kernel_coupling_of_affine_like_is_the_cosine_gram_of_augmented_inputs() -> (
    None
):
    torch.manual_seed(0)
    model = mlp_for(
        "affine_like", in_features=6, num_classes=3, width=5, depth=1
    ).double()
    x = torch.randn(7, 6, dtype=F64)
    head_input = layer_inputs(model, [model.head], x)[0]
    augmented = torch.cat([head_input, torch.ones(7, 1, dtype=F64)], dim=1)
    unit = augmented / augmented.norm(dim=1, keepdim=True)
    cosine = unit @ unit.T  # the affine-like kernel (chapter 3): diagonal exactly 1
    assert torch.allclose(tangent_kernel(model.head, head_input), cosine, atol=1e-12)
    off = cosine.abs().sum() - cosine.diagonal().abs().sum()
    measured = kernel_coupling(model, x)
    assert measured["gram_offdiag"] == pytest.approx(
        float(off / cosine.abs().sum()), rel=1e-9
    )
    assert measured["gram_cosine"] == pytest.approx(float(off / (7 * 6)), rel=1e-9)
    with pytest.raises(ValueError, match="batch of >= 2"):
        kernel_coupling(model, x[:1])


def test_position_coupling_matches_the_conv_kernel() -> None:
    torch.manual_seed(0)
    model = cnn_for("none", in_channels=1, num_classes=10, channels=3, depth=1).double()
    x = torch.rand(2, 1, 6, 6, dtype=F64)
    conv = model.convolutions()[0]
    expected = np.mean(
        [offdiagonal_share(tangent_kernel(conv, x[i : i + 1])) for i in range(2)]
    )
    assert part1_conv.position_coupling(model, x) == pytest.approx(expected, rel=1e-12)
    assert 0.5 < expected < 1.0  # 36 positions share one set of weights


def test_layer_inputs_names_layers_that_never_ran() -> None:
    model = mlp_for("none", in_features=4, num_classes=2, width=3, depth=1)
    with pytest.raises(ValueError, match="were not called"):
        layer_inputs(model, [nn.Linear(2, 2)], torch.randn(2, 4))


def test_init_is_a_declared_option() -> None:
    """``init="default"`` is torch's own initialisation, bit for bit; ``"xavier_normal"``
    draws every linear and convolution weight with std sqrt(2 / (fan_in + fan_out)) and
    zeroes the biases (corrected layers and PatchNorm included)."""
    shape = dict(in_features=64, num_classes=10, width=256, depth=2)
    for name in part1.NORMALISERS:
        torch.manual_seed(0)
        plain = mlp_for(name, **shape)
        torch.manual_seed(0)
        declared = mlp_for(name, **shape, init="default")
        for a, b in zip(plain.state_dict().values(), declared.state_dict().values()):
            assert torch.equal(a, b)
        torch.manual_seed(0)
        xavier = mlp_for(name, **shape, init="xavier_normal")
        linears = [m for m in xavier.modules() if isinstance(m, nn.Linear)]
        assert len(linears) == 3
        for layer in linears:
            fan_out, fan_in = layer.weight.shape
            expected = math.sqrt(2.0 / (fan_in + fan_out))
            assert float(layer.weight.detach().std()) == pytest.approx(
                expected, rel=0.05
            )
            assert torch.equal(layer.bias, torch.zeros_like(layer.bias))
    torch.manual_seed(0)
    cnn = cnn_for(
        "affine_like",
        in_channels=1,
        num_classes=10,
        channels=64,
        depth=2,
        init="xavier_normal",
    )
    conv = cnn.convolutions()[1]
    fan = 64 * 9
    assert float(conv.weight.detach().std()) == pytest.approx(
        math.sqrt(2.0 / (2 * fan)), rel=0.05
    )
    assert torch.equal(conv.bias, torch.zeros_like(conv.bias))
    with pytest.raises(ValueError, match="init"):
        mlp_for("none", in_features=4, num_classes=2, init="kaiming")
    with pytest.raises(ValueError, match="init"):
        cnn_for("none", in_channels=1, num_classes=2, init="kaiming")


def test_head_is_corrected_or_plain() -> None:
    from normlab.layers import AffineLikeLinear, NormLikeLinear

    shape = dict(in_features=8, num_classes=3, width=4, depth=1)
    for name, kind in (
        ("affine_like", AffineLikeLinear),
        ("norm_like", NormLikeLinear),
    ):
        assert type(mlp_for(name, **shape).head) is kind
        assert type(mlp_for(name, **shape, head="plain").head) is nn.Linear
        assert type(mlp_for(name, **shape, head="plain").hidden[0]) is kind
    with pytest.raises(ValueError, match="head"):
        mlp_for("none", **shape, head="corrected")


# --------------------------------------------------------------------- analysis


def _batch_table(slopes: dict[str, float]) -> pd.DataFrame:
    """Runs whose test accuracy is 0.5 + slope * log2(B) + a seed offset at the lr that val prefers.

    The other lr has the better *test* accuracy and the worse val accuracy, so a choice made
    on test would change every slope.
    """
    rows = []
    for budget in part1.BUDGETS:
        for name, slope in slopes.items():
            for batch in (8, 32, 128):
                for lr in (0.1, 1.0):
                    good = lr == (1.0 if budget == "scaled_lr" or batch >= 32 else 0.1)
                    for seed in range(4):
                        acc = 0.5 + slope * math.log2(batch) + 0.01 * seed
                        rows.append(
                            {
                                "budget": budget,
                                "normaliser": name,
                                "batch_size": batch,
                                "lr": lr,
                                "base_batch_size": 32,
                                "seed": seed,
                                "higher_is_better": True,
                                "val_metric": acc if good else acc - 0.2,
                                "test_metric": acc if good else acc + 0.3,
                            }
                        )
    return pd.DataFrame(rows)


def test_batch_slopes_choose_on_val_and_apply_the_scaling_rule() -> None:
    slopes, scores = analysis_part1.batch_slopes(
        _batch_table({"none": 0.02, "affine_like": -0.05})
    )
    by = slopes.set_index(["budget", "normaliser"])
    for budget in part1.BUDGETS:
        assert by.loc[(budget, "none"), "mean"] == pytest.approx(0.02)
        assert by.loc[(budget, "affine_like"), "mean"] == pytest.approx(-0.05)
        assert by.loc[(budget, "none"), "n"] == 4 and by.loc[
            (budget, "none"), "ci95"
        ] == pytest.approx(0.0, abs=1e-12)
    scaled = scores[scores["budget"] == "scaled_lr"]
    assert set(scaled["lr"]) == {
        1.0
    }  # chosen once at batch 32, kept (scaled by the runs) at every batch
    assert set(
        scores[(scores["budget"] == "fixed_epochs") & (scores["batch_size"] == 8)]["lr"]
    ) == {0.1}


def test_scaled_lr_flags_the_edge_of_its_one_choice() -> None:
    """Under ``scaled_lr`` the rate is chosen once, at the base batch size: ``at_edge`` is
    that choice's, even where the per-batch choice would sit inside the grid."""
    rows = []
    for batch in (8, 32, 128):
        for lr in (0.1, 0.3, 1.0):
            best = 1.0 if batch == 32 else 0.3  # base batch 32: the largest rate
            for seed in range(3):
                val = 0.9 - abs(math.log10(lr / best)) + 0.01 * seed
                rows.append(
                    {
                        "budget": "scaled_lr",
                        "normaliser": "none",
                        "batch_size": batch,
                        "lr": lr,
                        "base_batch_size": 32,
                        "seed": seed,
                        "higher_is_better": True,
                        "val_metric": val,
                        "test_metric": val,
                    }
                )
    slopes, scores = analysis_part1.batch_slopes(pd.DataFrame(rows))
    assert set(scores["lr"]) == {1.0} and scores["at_edge"].all()
    assert bool(slopes.loc[0, "at_edge"])
    interior = pd.DataFrame(rows).assign(budget="fixed_epochs")
    _, fixed = analysis_part1.batch_slopes(interior)
    assert not fixed[fixed["batch_size"] != 32]["at_edge"].any()


def _steps_rows(curves: dict[str, dict[int, float]], seeds: int = 3) -> pd.DataFrame:
    """to_target runs: ``curves[name][batch]`` epochs to the target at the best of three
    rates (0.3), the other two twice as slow; every seed alike up to a small wobble."""
    rows = []
    for name, curve in curves.items():
        for batch, epochs in curve.items():
            for lr, slower in ((0.1, 2.0), (0.3, 1.0), (1.0, 2.0)):
                for seed in range(seeds):
                    e = epochs * slower * (1 + 0.01 * seed)
                    rows.append(
                        {
                            "optimizer": "sgd",
                            "init": "xavier_normal",
                            "budget": "to_target",
                            "normaliser": name,
                            "batch_size": batch,
                            "lr": lr,
                            "seed": seed,
                            "steps_to_target": e * 1000 / batch,
                            "epochs_to_target": e,
                            "val_metric": 0.85,
                            "test_metric": 0.85,
                        }
                    )
    return pd.DataFrame(rows)


def test_steps_scores_choose_the_fastest_rate_every_seed_reaches() -> None:
    sizes = (4, 16, 64, 256)
    rows = _steps_rows({"none": dict.fromkeys(sizes, 1.0)})
    scores = batch_analysis.steps_scores(rows)
    assert set(scores["lr"]) == {0.3} and not scores["at_edge"].any()
    # one censored seed disqualifies the fastest rate at batch 16 ...
    slow = (rows["batch_size"] == 16) & (rows["lr"] == 0.3) & (rows["seed"] == 1)
    rows.loc[slow, ["steps_to_target", "epochs_to_target"]] = math.nan
    at16 = batch_analysis.steps_scores(rows).query("batch_size == 16")
    assert set(at16["lr"]) == {0.1} and at16["at_edge"].all()  # ties: the smaller rate
    # ... and a batch size where no rate has every seed is censored, its seeds kept
    rows.loc[rows["batch_size"] == 16, ["steps_to_target", "epochs_to_target"]] = (
        math.nan
    )
    at16 = batch_analysis.steps_scores(rows).query("batch_size == 16")
    assert at16["censored"].all() and at16["lr"].isna().all() and len(at16) == 3
    assert (
        batch_analysis.scaling_slopes(batch_analysis.steps_scores(rows))["slope"]
        .isna()
        .all()
    )


def test_scaling_slopes_and_the_critical_batch() -> None:
    """Perfect scaling has slope 0 and no critical batch in range; epochs growing as
    1 + B / 32 (McCandlish et al.'s form) double their value at batch 4 by batch 40."""
    sizes = (4, 8, 16, 32, 64, 128, 256)
    rows = _steps_rows(
        {
            "layernorm": dict.fromkeys(sizes, 0.5),
            "norm_like": {b: 0.5 * (1 + b / 32) for b in sizes},
            "none": {b: 0.5 * (b / 4) ** 0.25 for b in sizes},
        }
    )
    scores = batch_analysis.steps_scores(rows)
    slopes = batch_analysis.scaling_slopes(scores).groupby("normaliser")["slope"].mean()
    assert slopes["layernorm"] == pytest.approx(0.0, abs=0.01)
    assert slopes["none"] == pytest.approx(0.25, abs=0.01)
    assert 0.25 < slopes["norm_like"] < 1.0
    critical = batch_analysis.critical_batch(scores).set_index("normaliser")
    assert bool(critical.loc["layernorm", "beyond"])
    assert math.isnan(critical.loc["layernorm", "critical_batch"])
    # 1 + B/32 = 2 (1 + 4/32) at B = 40, read between 32 and 64 on a log2 scale
    assert 32 < critical.loc["norm_like", "critical_batch"] < 64
    # (B/4)^0.25 = 2 at B = 64 exactly
    assert critical.loc["none", "critical_batch"] == pytest.approx(64, rel=0.02)
    summary = batch_analysis.scaling_summary(scores).set_index("normaliser")
    assert (summary["n"] == 3).all() and (summary["censored"] == 0).all()


def test_each_cell_tries_three_rates_around_its_centre() -> None:
    """Three rates half a decade apart around the centre; a cell that chose an edge tries
    the next rates of the ladder beyond it under the budget that chose it, and only there."""
    for (profile, optimizer), (sizes, table) in part1_batch.CENTRES.items():
        for name, centres in table.items():
            for batch, centre in zip(sizes, centres):
                rates = part1_batch.rates_for(profile, optimizer, name, batch)
                assert len(rates) == 3 and rates[1] == centre
                assert rates[2] / rates[0] == pytest.approx(10, rel=0.12)
                for budget in part1_batch.BATCH_BUDGETS:
                    wider = part1_batch.WIDER.get((profile, optimizer, budget), {})
                    more = part1_batch.rates_for(
                        profile, optimizer, name, batch, budget=budget
                    )
                    side = wider.get((name, batch), 0)
                    assert set(rates) <= set(more) and len(more) == 3 + abs(side)
                    lo, hi = part1_batch.LADDER.index(more[0]), len(more)
                    assert more == part1_batch.LADDER[lo : lo + hi]  # no gap
                    extra = set(more) - set(rates)
                    assert all(
                        (e > rates[-1]) if side > 0 else (e < rates[0]) for e in extra
                    )
    cpu = experiments.get("batch_size").grid("cpu").configs(seeds=1)
    per_cell: dict[tuple, int] = {}
    for c in cpu:
        key = (c["budget"], c["optimizer"], c["init"], c["normaliser"], c["batch_size"])
        per_cell[key] = per_cell.get(key, 0) + 1
    for (budget, optimizer, _, name, batch), n in per_cell.items():
        wider = part1_batch.WIDER.get(("cpu", optimizer, budget), {})
        assert n == 3 + abs(wider.get((name, batch), 0))
    assert any(n > 3 for k, n in per_cell.items() if k[0] == "fixed_epochs")


def test_plateau_gap() -> None:
    rising = [{"val_accuracy": v} for v in (0.1, 0.5, 0.7, 0.8)]
    flat = [{"val_accuracy": v} for v in (0.1, 0.9, 0.95, 0.94, 0.95, 0.96, 0.95, 0.95)]
    assert analysis_part1.plateau_gap(rising) == pytest.approx(0.0)  # ends at its best
    assert analysis_part1.plateau_gap(flat) == pytest.approx(0.01)
    assert analysis_part1.plateau_gap(
        [{"val_accuracy": 0.9}, {"val_accuracy": 0.5}]
    ) == (pytest.approx(0.4))
    with pytest.raises(ValueError, match="epoch"):
        analysis_part1.plateau_gap([])


def test_runs_record_the_measurements(tmp_path) -> None:
    ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path / "a")
    config = {
        **experiments.get("batch_size").grid("quick").configs(seeds=1)[0],
        "normaliser": "affine_like",
        "batch_size": 16,
        "lr": 1.0,
    }
    record = part1_batch.train_batch_run(config, ctx)
    metrics = record["metrics"]
    assert 0.0 < metrics["gram_offdiag"] < 1.0 and 0.0 < metrics["gram_cosine"] <= 1.0
    # stopped at the target: the last step is the one that reached it
    assert metrics["reached"] and metrics["steps_to_target"] == metrics["steps"]
    assert record["history"][-1]["val_accuracy"] >= config["target"]
    assert metrics["epochs_to_target"] == pytest.approx(
        metrics["steps"] * 16 / len(part1.config_splits(config)["train"])
    )
    # a target no run reaches: censored at the cap, its steps unknown
    censored = part1_batch.train_batch_run(
        {**config, "target": 1.5, "cap_epochs": 0, "cap_steps": 20},
        RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path / "d"),
    )["metrics"]
    assert not censored["reached"] and math.isnan(censored["steps_to_target"])
    assert censored["steps"] == 20
    adam = {
        **experiments.get("fc_normalisers").grid("quick").configs(seeds=1)[0],
        "optimizer": "adam",
        "lr": 0.01,
        "epochs": 1,
    }
    assert part1.train_mlp(
        adam, RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path / "b")
    )["metrics"]
    cnn = {
        **experiments.get("cnn_normalisers").grid("quick").configs(seeds=1)[0],
        "epochs": 1,
    }
    outcome = part1_conv.train_cnn(
        cnn, RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path / "c")
    )
    assert 0.0 < outcome["metrics"]["position_coupling"] < 1.0


# ------------------------------------------------------------------------ claims


def _two_optimisers(lead: dict[str, float]) -> pd.DataFrame:
    """affine_like ahead of every other normaliser by ``lead[optimizer]`` (noise-free per seed)."""
    rows = []
    for optimizer, gap in lead.items():
        for name in part1.NORMALISERS:
            for seed in range(5):
                acc = (
                    0.8
                    + 0.002 * seed
                    + (gap if name == "affine_like" else 0.0)
                    - 0.001 * len(name)
                )
                rows.append(
                    {
                        "data": "digits",
                        "budget": "fixed_epochs",
                        "optimizer": optimizer,
                        "activation": "tanh",
                        "width": 64,
                        "depth": 3,
                        "normaliser": name,
                        "lr": 0.1,
                        "seed": seed,
                        "higher_is_better": True,
                        "val_metric": acc,
                        "test_metric": acc,
                    }
                )
    return pd.DataFrame(rows)


def test_part1_verdicts_read_the_primary_optimiser_and_the_curve_shows_the_other() -> (
    None
):
    from normlab import claims

    results = _two_optimisers({"sgd": 0.05, "adam": -0.05})
    outcome = claims.judge(claims.get("A15"), results)
    assert [label for label, _, _ in outcome.effects] == [
        "affine_like - strongest scale-invariant normaliser"
    ]
    assert outcome.verdict == claims.SUPPORTED  # SGD's +0.05, the primary optimiser
    curve = claims.specification_curve(
        results, ["A15"], part1.specifications(results), part1.FC_PRIMARY
    )
    verdicts = dict(zip(curve["optimizer"], curve["verdict"]))
    assert verdicts == {"sgd": claims.SUPPORTED, "adam": claims.CONTRADICTED}
    assert curve.loc[curve["optimizer"] == "sgd", "primary"].all()


@pytest.mark.parametrize("gap, verdict", [(0.0, "supported"), (0.05, "contradicted")])
def test_a14_is_an_equivalence(gap: float, verdict: str) -> None:
    from normlab import claims

    rows = []
    for name in conv_names():
        for seed in range(5):
            acc = (
                0.9
                + 0.001 * seed
                + (gap if name == "affine_like" else 0.0)
                - (0.05 if name == "none" else 0.0)
            )
            rows.append(
                {
                    "data": "digits",
                    "depth": 2,
                    "channels": 8,
                    "normaliser": name,
                    "lr": 0.3,
                    "seed": seed,
                    "higher_is_better": True,
                    "val_metric": acc,
                    "test_metric": acc,
                }
            )
    assert claims.judge(claims.get("A14"), pd.DataFrame(rows)).verdict == verdict


def test_verdict_table_lists_every_effect(tmp_path) -> None:
    from normlab import claims

    live = _two_optimisers({"sgd": 0.05, "adam": 0.05})
    empty = claims.verdict_table(
        ["A8", "A15"], live=live, root=tmp_path
    )  # no saved set under tmp_path
    assert (
        list(empty["id"]) == ["A8", "A15"]
        and empty["claim verdict"].str.startswith("needs").all()
    )
    assert empty["live run"].tolist() == ["not measurable"] * 2
    assert set(claims.verdict_table(["A12"], root=tmp_path).columns) >= {
        "effect",
        "ours",
        "n",
        "verdict",
    }


def test_verdict_rows_keep_the_primary_specification_on_swept_axes() -> None:
    rows = pd.DataFrame(
        [
            {"source": s, "init": i, "optimizer": o, "head": h}
            for s in ("mnist_5k", "digits")
            for i in ("xavier_normal", "default")
            for o in ("sgd", "adam")
            for h in ("same", "plain")
        ]
    )
    kept = part1.verdict_rows(rows)
    assert kept.to_dict("records") == [{**part1.FC_PRIMARY, "head": "same"}]
    # a table already cut to another specification comes back whole (but the head)
    other = rows[(rows["init"] == "default") & (rows["optimizer"] == "adam")]
    other = other[other["source"] == "digits"]
    assert len(part1.verdict_rows(other)) == 1
    specs = part1.specifications(rows)
    assert len(specs) == 8 and specs[0] == part1.FC_PRIMARY


def _primary_choices() -> dict[str, tuple[pd.DataFrame, pd.DataFrame, list[str]]]:
    """Per shipped set and budget, the primary specification's runs, the rate each of its
    cells chose (as the verdicts choose it) and the cell's columns."""
    from normlab import results
    from normlab.analysis import select_best

    fc = part1.verdict_rows(results.largest("fc_normalisers").results)
    fc_by = ["activation", "depth", "width", "normaliser"]
    runs = results.largest("batch_size").results
    runs = runs[
        (runs["optimizer"] == PRIMARY["optimizer"]) & (runs["init"] == PRIMARY["init"])
    ]
    steps = runs[runs["budget"] == "to_target"]
    epochs = runs[runs["budget"] == "fixed_epochs"]
    batch_by = ["normaliser", "batch_size"]
    cnn = results.largest("cnn_normalisers").results
    return {
        "fc_normalisers": (fc, select_best(fc, fc_by), fc_by),
        "batch_size to_target": (steps, batch_analysis.steps_scores(steps), batch_by),
        "batch_size fixed_epochs": (epochs, select_best(epochs, batch_by), batch_by),
        "cnn_normalisers": (cnn, select_best(cnn, ["normaliser"]), ["normaliser"]),
    }


def test_shipped_sets_choose_every_primary_rate_inside_its_grid() -> None:
    """Issue 48: no primary-specification cell of the fc, batch-size (both budgets) and CNN
    sets has its rate chosen at the edge of the rates it tried, so the grid brackets each
    optimum the verdicts compare."""
    from normlab.analysis import choice_edges

    for name, (runs, chosen, by) in _primary_choices().items():
        assert len(chosen) and not chosen["lr"].isna().any(), name
        edges = choice_edges(runs, chosen, by)
        assert (edges["tried"] >= 3).all(), name
        at_edge = edges[edges["edge"] != ""]
        assert at_edge.empty, f"{name}: {at_edge.to_dict('records')}"


def test_shipped_sensitivities_choose_inside_their_grids_too() -> None:
    """Every specification of the fc and batch-size sets, not only the primary one, has its
    rates bracket each cell's choice: a verdict read under a sensitivity compares optima."""
    from normlab import results
    from normlab.analysis import choice_edges, select_best

    fc = results.largest("fc_normalisers").results
    fc_by = [*part1.SPEC_AXES, "activation", "depth", "width", "head", "normaliser"]
    runs = results.largest("batch_size").results
    batch_by = ["optimizer", "init", "normaliser", "batch_size"]
    steps = runs[runs["budget"] == "to_target"]
    epochs = runs[runs["budget"] == "fixed_epochs"]
    for name, table, chosen, by in (
        ("fc_normalisers", fc, select_best(fc, fc_by), fc_by),
        ("batch_size to_target", steps, batch_analysis.steps_scores(steps), batch_by),
        ("batch_size fixed_epochs", epochs, select_best(epochs, batch_by), batch_by),
    ):
        edges = choice_edges(table, chosen, by)
        assert edges["edge"].eq("").all(), f"{name}: {edges[edges['edge'] != '']}"
