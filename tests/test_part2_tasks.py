"""Chapters 13-15's experiments: declarations, corrupted test suites, and the statistics of the tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from normlab import data, experiments, gate_tables, run_tables
from normlab.analysis import tasks as task_analysis
from normlab.claims.tables import equivalence_table
from normlab.corruption_suite import (
    accuracy_under_corruption,
    corruption_suite,
    mean_corruption_accuracy,
)
from normlab.data.corruptions import CORRUPTIONS
from normlab.data.types import IGNORE_INDEX, DataSplit
from normlab.experiments import RunContext
from normlab.experiments import part2_tasks as tasks
from scipy import stats
from torch import nn

COMPARISONS = ("autonorm_language", "autonorm_tabular", "autonorm_robustness")


@pytest.mark.parametrize("name", [*COMPARISONS, "autonorm_gates"])
def test_every_profile_is_declared_with_enough_seeds(name: str) -> None:
    experiment = experiments.get(name)
    assert set(experiment.profiles) == {"quick", "cpu", "standard", "paper"}
    # cpu: at least 5 seeds; how many a claim needs is its plan's business (claims.plans),
    # and a chapter shows the seeds that would resolve an inconclusive verdict
    assert experiment.grid("quick").seeds >= 3 and experiment.grid("cpu").seeds >= 5
    for profile in ("standard", "paper"):
        assert experiment.grid(profile).fixed["data_profile"] == profile
    for profile in ("quick", "cpu"):
        assert (
            experiment.grid(profile).fixed["data_profile"] == "quick"
        )  # offline stand-ins


@pytest.mark.parametrize("name", COMPARISONS)
def test_comparisons_choose_the_lr_and_keep_the_baseline(name: str) -> None:
    experiment = experiments.get(name)
    for profile in ("cpu", "standard", "paper"):
        grid = experiment.grid(profile)
        assert len(grid.axes["lr"]) >= 2
        assert {"frozen_ln", "autonorm_s"} <= set(grid.axes["normaliser"])
    assert experiment.select == "lr"


# ------------------------------------------------------------------ statistics


def test_paired_test_matches_scipy() -> None:
    rng = np.random.default_rng(0)
    a = {s: float(v) for s, v in enumerate(rng.normal(1.0, 1.0, 7))}
    b = {s: float(v) for s, v in enumerate(rng.normal(0.0, 1.0, 7))}
    b[99] = 5.0  # an unpaired seed is ignored
    test = tasks.paired_test(a, b)
    d = np.array([a[s] - b[s] for s in range(7)])
    reference = stats.ttest_rel([a[s] for s in range(7)], [b[s] for s in range(7)])
    assert test.n == 7 and test.mean == pytest.approx(d.mean())
    assert test.p == pytest.approx(reference.pvalue) and test.t == pytest.approx(
        reference.statistic
    )
    assert test.d_z == pytest.approx(d.mean() / d.std(ddof=1))
    half = stats.t.ppf(0.975, 6) * d.std(ddof=1) / math.sqrt(7)
    assert (test.low, test.high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert tasks.paired_test(a, b, confidence=0.9).high < test.high


def test_paired_test_needs_two_pairs() -> None:
    with pytest.raises(ValueError, match="2 common seeds"):
        tasks.paired_test({0: 1.0}, {0: 0.5, 1: 0.2})


def test_at_chosen_lr_keeps_the_validation_best() -> None:
    rows = [
        {
            "data": "d",
            "normaliser": n,
            "lr": lr,
            "seed": s,
            "val_metric": v + 0.01 * s,
            "test_metric": 0.0,
            "higher_is_better": True,
        }
        for n, best in (("a", 0.1), ("b", 0.01))
        for lr in (0.01, 0.1)
        for s in range(3)
        for v in [1.0 if lr == best else 0.0]
    ]
    chosen = run_tables.at_chosen_lr(pd.DataFrame(rows))
    assert chosen.groupby("normaliser")["lr"].unique().map(list).to_dict() == {
        "a": [0.1],
        "b": [0.01],
    }
    assert len(chosen) == 6 and chosen["at_edge"].all()


def test_gate_summary_measures_depth_slope_and_entropy() -> None:
    layers = ["block0.norm1", "block0.norm2", "norm"]
    gates = [
        {
            "epoch": e,
            "layer": name,
            "p_dyt": p,
            "p_ln": 1 - p,
            "entropy": -(p * math.log(p) + (1 - p) * math.log(1 - p)),
        }
        for e in (1, 2)
        for i, name in enumerate(layers)
        for p in [0.2 + 0.3 * i if e == 2 else 0.5]
    ]
    record = {
        "run_id": "r",
        "config": {"data": "d", "normaliser": "autonorm", "lr": 1e-3, "seed": 0},
        "gates": gates,
        "history": [{"epoch": 1, "step": 10}, {"epoch": 2, "step": 20}],
    }
    table = gate_tables.gate_table([record])
    assert list(table["position"][:3]) == [0, 1, 2] and set(table["step"]) == {10, 20}
    summary = gate_tables.gate_summary(table).iloc[0]
    assert summary["depth_slope"] == pytest.approx(
        0.6
    )  # p_dyt 0.2 -> 0.8 over relative depth 0 -> 1
    assert summary["p_ln_final"] == pytest.approx(0.5)
    assert summary["entropy_mean"] == pytest.approx(
        (math.log(2) + table[table["epoch"] == 2]["entropy"].mean()) / 2
    )


def test_tagging_baselines_count_words() -> None:
    # word 2 is tagged 0 twice and 1 once; word 3 always 1; tag 1 is the majority overall.
    x = torch.tensor([[2, 2, 3, 0], [2, 3, 3, 3]])
    y = torch.tensor([[0, 0, 1, IGNORE_INDEX], [1, 1, 1, 1]])
    meta = {"tags": ["A", "B"]}
    train = DataSplit(x=x, y=y, task="tagging", name="t", split="train", meta=meta)
    test = DataSplit(
        x=torch.tensor([[2, 3, 4]]),
        y=torch.tensor([[0, 1, 1]]),
        task="tagging",
        name="t",
        split="test",
        meta=meta,
    )
    assert task_analysis.tagging_baselines(train, test) == {
        "majority_tag": pytest.approx(2 / 3),
        "word_majority": 1.0,
    }


# ------------------------------------------------------------------ corruption


def test_stand_in_suite_covers_every_condition_deterministically() -> None:
    first = list(corruption_suite("fashion_mnist", "quick", images=8))
    second = list(corruption_suite("fashion_mnist", "cpu", images=8))
    assert [(c, s) for c, s, _ in first] == [
        (c, s) for c in CORRUPTIONS for s in range(1, 6)
    ]
    clean = data.for_profile("fashion_mnist", "quick")["test"]
    for (_, _, a), (_, _, b) in zip(first, second):
        assert len(a) == 8 and torch.equal(a.x, b.x) and torch.equal(a.y, clean.y[:8])
        assert a.x.min() >= 0 and a.x.max() <= 1
    assert any(not torch.equal(split.x, clean.x[:8]) for _, _, split in first)


def test_suite_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="images"):
        list(corruption_suite("fashion_mnist", "quick", images=0))
    with pytest.raises(ValueError, match="CIFAR-10-C"):
        list(corruption_suite("mnist", "standard"))


class Constant(nn.Module):
    """Predicts class ``k`` for every image."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (
            nn.functional.one_hot(torch.full((x.shape[0],), self.k), 10).float()
            + 0 * self.dummy
        )


def test_accuracy_under_corruption_of_a_constant_model() -> None:
    suite = list(corruption_suite("fashion_mnist", "quick", images=50))
    rows = accuracy_under_corruption(Constant(3), iter(suite), device="cpu")
    expected = float((suite[0][2].y == 3).float().mean())
    assert len(rows) == 5 * len(CORRUPTIONS) and all(
        r["accuracy"] == pytest.approx(expected) for r in rows
    )
    assert mean_corruption_accuracy(rows) == pytest.approx(expected)
    with pytest.raises(ValueError, match="empty"):
        mean_corruption_accuracy([])


def test_robust_run_records_every_condition(tmp_path: Path) -> None:
    config = {
        **experiments.get("autonorm_robustness").grid("quick").fixed,
        "data": "mnist",
        "normaliser": "frozen_ln",
        "lr": 3e-3,
        "seed": 0,
        "epochs": 1,
        "eval_images": 10,
    }
    assert config["source"] == "mnist_5k"  # the real digits, corrupted at their size
    record = tasks.train_robust(
        config, RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path)
    )
    assert len(record["corruption"]) == 5 * len(CORRUPTIONS)
    assert record["clean_accuracy"] == record["metrics"]["test_metric"]
    assert record["mean_corruption_accuracy"] == pytest.approx(
        np.mean([r["accuracy"] for r in record["corruption"]])
    )
    table = task_analysis.corruption_table(
        [{"run_id": "r", "config": config, **record}]
    )
    assert set(table["severity"]) == {0, 1, 2, 3, 4, 5} and len(table) == 1 + 5 * len(
        CORRUPTIONS
    )


def test_regression_references_report_original_units() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter(
            "error"
        )  # the iteration cap is recorded, not warned about
        table = task_analysis.regression_references(
            "energy_efficiency", "quick", seeds=1
        )
    assert set(table["model"]) == {"mean", "linear", "mlp"} and table["stand_in"].all()
    assert table.loc[table["model"] == "mlp", "capped"].isin([True, False]).all()
    splits = data.for_profile("energy_efficiency", "quick")
    scale = splits["train"].meta["target_scale"]
    y_train, y_test = splits["train"].y.double(), splits["test"].y.double()
    expected = float(((y_test - y_train.mean()) ** 2).mean().sqrt()) * scale
    assert table.set_index("model").loc["mean", "rmse"] == pytest.approx(
        expected, rel=1e-6
    )


# ------------------------------------------------------------------ claims on constructed tables


def gate_results(
    language_entropy: float,
    vision_entropy: float,
    slope: float,
    depth: int = 4,
    sentence_accuracy: float = 0.9,
) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for task in ("ptb_pos", "sst2", "fashion_mnist"):
        vision = task == "fashion_mnist"
        for seed in range(5):
            rows.append(
                {
                    "profile": "cpu",
                    "data": task,
                    "normaliser": "autonorm",
                    "lr": 3e-3,
                    "seed": seed,
                    "val_metric": 0.9,
                    "test_metric": sentence_accuracy if task == "sst2" else 0.9,
                    "metric": "accuracy",
                    "data_profile": "quick",
                    "higher_is_better": True,
                    "entropy_mean": (vision_entropy if vision else language_entropy)
                    + 0.01 * rng.normal(),
                    "depth": depth,
                    "entropy_final": 0.05 if vision else 0.5,
                    "p_ln_final": 0.9 if vision else 0.5,
                    "depth_slope": slope + 0.01 * rng.normal(),
                }
            )
    return pd.DataFrame(rows)


def test_gate_claims_follow_their_rules_and_name_the_stand_ins() -> None:
    from normlab import claims

    n10, n11 = claims.get("N10"), claims.get("N11")
    assert claims.judge(n10, gate_results(0.6, 0.2, 0.3)).verdict == claims.SUPPORTED
    assert claims.judge(n10, gate_results(0.2, 0.6, 0.3)).verdict == claims.CONTRADICTED
    supported = claims.judge(n11, gate_results(0.6, 0.2, 0.3))
    assert supported.verdict == claims.SUPPORTED and len(supported.effects) == 5
    # the DyT slopes' sign reversed: those effects contradicted, the others still
    # supported, and the claim's words name both (no effect hides another)
    reversed_ = claims.judge(n11, gate_results(0.6, 0.2, -0.3))
    assert reversed_.verdict == claims.MIXED
    assert "contradicted for DyT's depth slope on ptb_pos" in reversed_.says
    labels = " ".join(label for label, _, _ in supported.effects)
    assert "synthetic tagging grammar (standing in for PTB POS tagging)" in labels
    assert "synthetic shapes in one style" in labels
    missing = gate_results(0.6, 0.2, 0.3)
    assert (
        claims.judge(n10, missing[missing["data"] != "sst2"]).verdict
        == claims.INCONCLUSIVE
    )
    shallow = claims.judge(n11, gate_results(0.6, 0.2, 0.3, depth=1))
    assert shallow.verdict == claims.INCONCLUSIVE
    assert "not testable on this stand-in" in shallow.note


def test_gates_of_a_network_at_chance_give_no_verdict() -> None:
    """The sentence stand-in is two balanced classes: 0.53 is within 0.05 of chance."""
    from normlab import claims

    for claim in ("N10", "N11"):
        outcome = claims.judge(claims.get(claim), gate_results(0.6, 0.2, 0.3, 4, 0.53))
        assert outcome.verdict == claims.NOT_TRAINED, claim
        assert "autonorm on sst2 at 0.530" in outcome.note
        assert claims.judge(
            claims.get(claim), gate_results(0.6, 0.2, 0.3, 4, 0.6)
        ).verdict != (claims.NOT_TRAINED)


def test_robustness_claim_reads_the_drop_under_corruption() -> None:
    from normlab import claims

    rows = [
        {
            "profile": "cpu",
            "data": "fashion_mnist",
            "normaliser": n,
            "lr": 3e-3,
            "seed": s,
            "val_metric": 0.8,
            "test_metric": 0.8,
            "higher_is_better": True,
            "mean_corruption_accuracy": m + 0.001 * s * (n == "frozen_ln"),
        }
        for n, m in (("autonorm_s", 0.7), ("frozen_ln", 0.6))
        for s in range(5)
    ]
    outcome = claims.judge(claims.get("N7"), pd.DataFrame(rows))
    assert outcome.verdict == claims.SUPPORTED
    ((label, ci, _),) = outcome.effects
    # frozen_ln drops 0.2 + 0.001 s from clean to corrupted, autonorm_s 0.1.
    assert (
        "drop under corruption" in label
        and "synthetic shapes in one style" in label
        and ci.mean == pytest.approx(0.098)
    )


def test_quick_gate_runs_are_the_language_runs_without_freezing() -> None:
    # Chapter 13 takes its quick "freezing off" runs from autonorm_gates: same settings, same lr.
    gates, language = (
        experiments.get("autonorm_gates").grid("quick"),
        experiments.get("autonorm_language").grid("quick"),
    )
    assert gates.fixed == language.fixed and list(gates.axes["lr"]) == list(
        language.axes["lr"]
    )
    assert (
        set(language.axes["data"]) <= set(gates.axes["data"])
        and gates.seeds == language.seeds
    )


def test_equivalence_table_applies_the_margin_to_the_paired_interval() -> None:
    # RMSE (lower is better); "near" differs from autonorm_s by 0.1 +- 0.01 per seed, "far" by 5
    rows = []
    for seed in range(5):
        for name, rmse in (
            ("frozen_ln", 50.0 + 0.01 * seed),
            ("autonorm_s", 50.0),
            ("near", 50.1 + 0.01 * (-1) ** seed),
            ("far", 55.0),
        ):
            for lr, penalty in (
                (1e-3, 0.0),
                (3e-3, 9.0),
            ):  # the worse lr must be ignored
                rows.append(
                    {
                        "data": "energy_efficiency",
                        "normaliser": name,
                        "lr": lr,
                        "seed": seed,
                        "higher_is_better": False,
                        "val_metric": rmse + penalty,
                        "test_metric": rmse + penalty,
                    }
                )
    table = equivalence_table(pd.DataFrame(rows), 0.02).set_index("minus")
    assert table.loc["near", "equivalent"] and not table.loc["far", "equivalent"]
    assert table.loc["far", "difference"] == pytest.approx(-5.0)
    assert table["margin"].iloc[0] == pytest.approx(0.02 * 50.02)
    assert table.loc["near", "smallest margin"] < table.loc["near", "margin"]
    with pytest.raises(ValueError, match="reference='dyt'"):
        equivalence_table(pd.DataFrame(rows), reference="dyt")
    with pytest.raises(ValueError, match="margin_fraction"):
        equivalence_table(pd.DataFrame(rows), 1.5)


def test_progress_epoch_is_the_first_epoch_at_the_stated_share_of_the_gain() -> None:
    # chance 0.5, best 0.9: 80 % of the way is 0.82, first reached at epoch 4
    assert gate_tables.progress_epoch([0.5, 0.6, 0.8, 0.85, 0.9, 0.88], 0.5) == 4
    assert (
        gate_tables.progress_epoch([0.5, 0.6, 0.8, 0.85, 0.9], 0.5, fraction=1.0) == 5
    )
    assert gate_tables.progress_epoch([0.9, 0.2], 0.1) == 1
    assert (
        gate_tables.progress_epoch([0.48, 0.49, 0.47], 0.5) == 2
    )  # never above chance
    with pytest.raises(ValueError, match="fraction"):
        gate_tables.progress_epoch([0.5], 0.5, fraction=0.0)


def test_gate_progress_reads_the_gates_at_that_epoch() -> None:
    gates = [
        {"epoch": e, "layer": layer, "p_dyt": p, "p_ln": 1 - p, "entropy": h}
        for e, ps in ((1, (0.5, 0.5)), (2, (0.3, 0.1)), (3, (0.1, 0.0)))
        for layer, p, h in zip(("a", "b"), ps, (0.69 - 0.2 * e, 0.6 - 0.2 * e))
    ]
    record = {
        "config": {"data": "sst2"},
        "metric": "accuracy",
        "history": [
            {"epoch": e, "step": 10 * e, "val_accuracy": v}
            for e, v in ((1, 0.5), (2, 0.85), (3, 0.9))
        ],
        "gates": gates,
    }
    found = gate_tables.gate_progress(record, chance=0.5)
    assert found["progress_epoch"] == 2
    assert found["entropy_at_progress"] == pytest.approx((0.29 + 0.2) / 2)
    assert found["p_ln_at_progress"] == pytest.approx(1 - (0.3 + 0.1) / 2)


def test_with_sources_names_the_dataset_that_served_each_row() -> None:
    frame = pd.DataFrame(
        {"data": ["mnist", "sst2"], "source": ["mnist_5k", None], "x": [1, 2]}
    )
    named = task_analysis.with_sources(frame)
    assert list(named["data"]) == ["mnist_5k", "sst2"] and "source" not in named
    assert task_analysis.with_sources(frame.drop(columns="source")).equals(
        frame.drop(columns="source")
    )
