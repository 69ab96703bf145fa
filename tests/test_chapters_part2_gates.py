"""Chapters 11 and 12's modules: the mix-or-gate tables and sentence, and the regime."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from normlab import results
from normlab.chapters import ch11, ch12
from normlab.experiments import gate_study as gs
from normlab.experiments.gate_grids import T_FREEZE

SEEDS = range(5)


def _runs(scores: dict[tuple[str, float], list[float]], *, mix: bool) -> pd.DataFrame:
    """A gate table on the stand-in: (arm, alpha) -> test accuracy per seed at one rate."""
    rows = [
        {
            "data": "mnist_restyled",
            "arm": arm,
            "seed": seed,
            "lr": 3e-3,
            "init": "torch_default",
            "readout": "cls",
            "selector_lr": 1.0,
            "metric": "accuracy",
            "higher_is_better": True,
            "val_metric": value,
            "test_metric": value,
            **({"alpha_init": alpha} if mix else {}),
        }
        for (arm, alpha), values in scores.items()
        for seed, value in zip(SEEDS, values)
    ]
    return pd.DataFrame(rows)


def _study(fixed_cost: float, gate_cost: float) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    ln = 0.8 + 0.01 * rng.standard_normal(len(SEEDS))
    fixed = ln - fixed_cost + 0.005 * rng.standard_normal(len(SEEDS))
    gates = _runs(
        {
            ("frozen_ln", 0.5): list(ln),
            ("autonorm", 0.5): list(fixed - gate_cost),
            ("autonorm_random", 0.5): list(fixed - gate_cost / 2),
            ("autonorm_hard", 0.5): [0.1] * 5,  # not the study's: left out
        },
        mix=False,
    )
    mix = _runs(
        {
            ("autonorm_fixed", 0.5): list(fixed),
            ("dyt", 0.5): [0.2] * 5,
            ("dyt", 0.1): [0.1] * 5,
        },
        mix=True,
    )
    return ch11.mix_runs(gates, mix)


def test_mix_runs_name_the_smaller_alpha_and_keep_the_studys_arms() -> None:
    runs = _study(0.0, 0.1)
    assert set(runs["arm"]) == set(ch11.MIX_ORDER)
    assert (runs.loc[runs["arm"] == "dyt_alpha_0.1", "test_metric"] == 0.1).all()


def test_mix_summary_orders_the_arms_on_shared_seeds() -> None:
    study = _study(0.0, 0.1)
    extra = study[study["arm"] == "autonorm"].assign(seed=99)  # one arm's further seed
    # a second task on fewer seeds does not shrink the first one's
    other = study[study["seed"] < 3].assign(data="mnist")
    summary = ch11.mix_summary(pd.concat([study, extra, other], ignore_index=True))
    first = summary[summary["data"] == "mnist_restyled"]
    assert list(first["arm"]) == list(ch11.MIX_ORDER)
    assert first["n"].nunique() == 1 and first["n"].iloc[0] == len(SEEDS)
    assert (summary.loc[summary["data"] == "mnist", "n"] == 3).all()
    summary = first
    assert summary["mean"].between(0, 1).all()


@pytest.mark.parametrize(
    ("fixed_cost", "gate_cost", "who"),
    [
        (0.0, 0.1, "not shown to be the mix's"),
        (0.1, 0.0, "the mix's, not the gate's"),
        (0.03, 0.1, "both, mostly the gate's"),
        (0.1, 0.03, "both, mostly the mix's"),
    ],
)
def test_the_sentence_names_who_pays(
    fixed_cost: float, gate_cost: float, who: str
) -> None:
    contrasts = ch11.mix_contrasts(_study(fixed_cost, gate_cost))
    rows = contrasts.set_index(["a", "b"])
    assert rows.loc[("autonorm_fixed", "frozen_ln"), "mean"] == pytest.approx(
        -fixed_cost, abs=0.02
    )
    assert rows.loc[("autonorm", "autonorm_fixed"), "mean"] == pytest.approx(
        -gate_cost, abs=1e-9
    )
    sentence = ch11.mix_sentence(contrasts)
    assert who in sentence and sentence.endswith(".")


def test_the_regime_of_the_saved_set_is_its_short_budget() -> None:
    saved = results.largest("gate_bottleneck")
    table = ch12.regime_table(saved.results, saved.records())
    assert set(table["data"]) == set(saved.results["data"])
    assert (table["decision"] == T_FREEZE["cpu"]).all()
    assert table["fired"].between(0, 1).all()
    assert table[["val_gated", "val_ln"]].stack().between(0, 1).all()
    ratio = table["loss_gated"] / table["loss_ln"]
    assert np.allclose(ratio, table["loss_ratio"])
    for (_, row), name in zip(table.iterrows(), itertools.repeat("the task")):
        words = ch12.regime_sentence(row, name)
        assert f"epoch {T_FREEZE['cpu']} of {row['epochs']}" in words
        assert ("past their plateau" in words) == row["plateau"]


def test_mix_edges_names_the_arms_whose_rate_sits_at_the_grids_edge() -> None:
    summary = pd.DataFrame(
        {
            "data": ["mnist", "mnist", "mnist_restyled"],
            "arm": ["dyt", "frozen_ln", "autonorm"],
            "at_edge": [True, False, False],
        }
    )
    words = ch11.mix_edges(summary, {"mnist": "real MNIST"})
    assert words == "on real MNIST the rate chosen for DyT sits at the edge of the grid"
    both = ch11.mix_edges(summary.assign(at_edge=True), {})
    assert "for DyT and FrozenLN sits" in both and "on mnist_restyled" in both
    assert ch11.mix_edges(summary.assign(at_edge=False), {}) == ""


def test_freeze_decisions_and_effect_on_the_saved_sets() -> None:
    bottleneck = results.largest("gate_bottleneck")
    assert bottleneck is not None
    runs = gs.at_defaults(bottleneck.results)
    decisions, fires = ch12.freeze_decisions(runs)
    assert decisions[["min", "max"]].stack().between(0, math.log(2)).all()
    assert fires.stack().between(0, 1).all()
    t = gs.freeze_epochs(runs["arm"].unique())[0]
    effect = ch12.freeze_effect(runs, t)
    assert set(effect["rule"]) == {"high", "low"}
    # the two readings fire on complementary seeds, and an unfired rule changes nothing
    shares = effect.pivot(index="data", columns="rule", values="fired")
    assert ((shares["high"] + shares["low"]) == 1).all()
    assert (effect.loc[effect["fired"] == 0, "mean"] == 0).all()
    lead = ch12.lead_over_frozen_ln(runs, t)
    assert set(lead) == {
        f"{k}_{d}" for k in ("lead", "lead_half") for d in runs["data"].unique()
    }
    words = ch12.freeze_plainly(runs, t, bottleneck.profile).data
    assert f"T_freeze = {t}" in words and words.count(" of ") >= runs["data"].nunique()
