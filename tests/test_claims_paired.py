"""The one paired comparison, the learnability rule and the power of an equivalence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from normlab import claims
from normlab.claims.pairing import difference
from normlab.claims.rules import Equivalent, trained, trained_margin


def table(metric: str = "accuracy", higher: bool = True) -> pd.DataFrame:
    """Two configurations (width 16, 64), arms a, b, c, two rates, three seeds."""
    rows = []
    for width in (16, 64):
        for arm, base in (("a", 0.80), ("b", 0.70), ("c", 0.60)):
            for lr, shift in ((0.1, 0.0), (1.0, -0.2)):
                for seed in range(3):
                    test = base + shift + 0.01 * seed + (0.05 if width == 64 else 0)
                    rows.append(
                        {
                            "data": "mnist",
                            "data_profile": "cpu",
                            "width": width,
                            "normaliser": arm,
                            "lr": lr,
                            "seed": seed,
                            "metric": metric,
                            "higher_is_better": higher,
                            "val_metric": test,
                            "test_metric": test,
                        }
                    )
    return pd.DataFrame(rows)


def test_paired_is_a_minus_b_per_seed_at_each_arms_chosen_rate() -> None:
    best = claims.at_chosen_lr(table())
    assert set(best["lr"]) == {0.1}  # the better rate on val
    effect = claims.paired(best, "a", "b")
    np.testing.assert_allclose(effect.samples, [0.1, 0.1, 0.1], atol=1e-12)
    assert effect.label == "a - b"
    assert [arm.name for arm in effect.arms] == ["a", "b"]
    assert effect.arms[0].score == pytest.approx(0.80 + 0.01 + 0.025)


def test_paired_orients_a_lower_is_better_metric_so_positive_means_a_is_better() -> (
    None
):
    frame = table(metric="rmse", higher=False)
    frame[["val_metric", "test_metric"]] = 1 - frame[["val_metric", "test_metric"]]
    best = claims.at_chosen_lr(frame)
    assert set(best["lr"]) == {0.1}  # the lower val RMSE
    effect = claims.paired(best, "a", "b")
    np.testing.assert_allclose(effect.samples, [0.1, 0.1, 0.1], atol=1e-12)
    assert all(arm.chance is None for arm in effect.arms)  # no chance level for an RMSE


def test_a_side_of_several_arms_is_the_strongest_on_validation_per_configuration() -> (
    None
):
    frame = table()
    # On width 64, c beats b on val, but b is better on test: val decides.
    wide = frame["width"] == 64
    frame.loc[wide & (frame["normaliser"] == "c"), "val_metric"] = 0.99
    best = claims.at_chosen_lr(frame)
    diff, arms = difference(best, "a", ["b", "c"])
    at = diff.xs(64, level="width").to_numpy()
    np.testing.assert_allclose(at, [0.20, 0.20, 0.20], atol=1e-12)  # a - c on test
    at = diff.xs(16, level="width").to_numpy()
    np.testing.assert_allclose(at, [0.10, 0.10, 0.10], atol=1e-12)  # a - b
    assert arms[1].name == "strongest of b/c"


def test_within_restricts_and_a_missing_arm_is_unmeasurable() -> None:
    best = claims.at_chosen_lr(table())
    effect = claims.paired(best, "a", "c", within={"width": 16})
    np.testing.assert_allclose(effect.samples, [0.2, 0.2, 0.2], atol=1e-12)
    assert "width 16" in effect.label
    with pytest.raises(claims.Unmeasurable, match="no runs of z"):
        claims.paired(best, "a", "z")
    with pytest.raises(claims.Unmeasurable, match="width=32"):
        claims.paired(best, "a", "b", within={"width": 32})


def test_learnability_needs_the_margin_over_chance() -> None:
    assert trained_margin(0.1) == 0.1 and trained_margin(0.5) == 0.05
    assert trained(0.21, 0.1) and not trained(0.19, 0.1)
    assert trained(0.56, 0.5) and not trained(0.54, 0.5)
    assert not trained(float("nan"), 0.1)
    assert trained(123.0, None)  # a metric without a chance level


def test_judge_gives_no_verdict_when_an_arm_did_not_train() -> None:
    claim = claims.Claim(
        id="Z1",
        part="I",
        kind="empirical",
        sentence="x",
        chapter=6,
        test=claims.Test(
            experiment="fc_normalisers",
            quantity=lambda r: [
                claims.Effect(
                    "a - b",
                    np.array([0.3, 0.31, 0.29]),
                    arms=(claims.Arm("a", 0.5, 0.1), claims.Arm("b", 0.15, 0.1)),
                )
            ],
            rule=claims.Directional(+1),
            says="x",
        ),
    )
    outcome = claims.judge(claim, pd.DataFrame())
    assert outcome.verdict == claims.NOT_TRAINED
    assert "b at 0.150 (chance 0.100" in outcome.note
    assert outcome.effects[0][2] == claims.NOT_TRAINED


def test_seeds_needed_follows_the_margin_and_the_spread() -> None:
    rule = Equivalent(0.01)
    n = rule.seeds_needed(0.01)
    # (t_0.975 + z_0.9) ~ 2.1 + 1.28 at n ~ 12: about (3.4)^2 ~ 12 seeds.
    assert 10 <= n <= 14
    assert rule.seeds_needed(0.02) > n > Equivalent(0.02).seeds_needed(0.01)
    assert rule.seeds_needed(0.0) == 2
    with pytest.raises(ValueError, match="sd must be >= 0"):
        rule.seeds_needed(-1.0)


def test_chance_is_the_majority_share_of_the_stand_ins_test_split() -> None:
    best = claims.at_chosen_lr(table())
    chance = claims.chance_level(best)
    assert 0.1 <= chance < 0.2  # ten digit classes, close to balanced


def test_a_verdict_names_its_stand_in() -> None:
    label = claims.tested_on(claims.get("A8"), table(), "cpu")
    assert label == "mechanism, on 8×8 digits (a stand-in for CIFAR-10)"
    restyled = table().assign(data="mnist_restyled")
    assert "restyled 8×8 digits" in claims.tested_on(claims.get("N3"), restyled, "cpu")
    assert claims.tested_on(claims.get("A8"), table(), "standard") == "on MNIST"


def test_a_verdict_names_only_the_data_its_effects_read() -> None:
    both = pd.concat([table(), table().assign(data="mnist_restyled")])
    effect = claims.paired(
        claims.at_chosen_lr(both), "a", "b", within={"data": "mnist"}
    )
    assert effect.data == ("mnist",)
    assert claims.paired(claims.at_chosen_lr(both), "a", "b").data == (
        "mnist",
        "mnist_restyled",
    )
    label = claims.tested_on(claims.get("N3"), both, "cpu", effect.data)
    assert label == "mechanism, on 8×8 digits (a stand-in for CIFAR-10)"
    assert "restyled" in claims.tested_on(claims.get("N3"), both, "cpu")


def test_n1_and_n3_read_the_same_cifar10_stand_in() -> None:
    n1, n3 = claims.evaluate("N1"), claims.evaluate("N3")  # the packaged saved set
    assert n1.data[0] == n3.data[0] == "mnist_restyled"  # the primary: the stand-in
    assert n3.data == ("mnist_restyled",)
    assert set(n1.data) == {"mnist_restyled", "mnist"}  # N1 also on a stationary task
    assert (
        n3.source["data"]
        == "mechanism, on restyled 8×8 digits (a stand-in for CIFAR-10)"
    )
    assert n1.source["data"].startswith("mechanism, on real MNIST")  # names both tasks
    assert n1.source["data"].endswith(n3.source["data"].removeprefix("mechanism, on "))


def test_a_brief_verdict_table_keeps_the_columns_that_fit_a_chapter() -> None:
    from normlab.claims.rendering import BRIEF_COLUMNS

    full = claims.verdict_table(["N12"])
    brief = claims.verdict_table(["N12"], brief=True)
    assert tuple(brief.columns) == BRIEF_COLUMNS
    assert brief.equals(full[list(BRIEF_COLUMNS)])
    assert "stand-in" in brief["data"].iloc[0]  # it still names what was tested
