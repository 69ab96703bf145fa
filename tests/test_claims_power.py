"""What a verdict can resolve: power and the minimum detectable effect, the test set's own
noise in every interval, Holm's correction across a claim's effects, the margin's verdict,
the claims' plans and the scorecard as JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from normlab import claims, stats
from normlab.__main__ import main
from normlab.claims import (
    CONTRADICTED,
    INCONCLUSIVE,
    NEGLIGIBLE,
    SUPPORTED,
    AtLeast,
    ConsistentWith,
    Directional,
    Equivalent,
)
from scipy import stats as sps

REPLICATES = 4000


def _t_half(sd: np.ndarray, n: int, item_var: float, alpha: float = 0.05) -> np.ndarray:
    """The half-width of :func:`normlab.stats.interval`, vectorised over replicates."""
    a = sd**2 / n
    df = np.where(a > 0, (n - 1) * (1 + item_var / np.where(a > 0, a, 1)) ** 2, np.inf)
    return sps.t.ppf(1 - alpha / 2, df) * np.sqrt(a + item_var)


# ---------------------------------------------------------------------------- power


@pytest.mark.parametrize("n, item_var", [(3, 0.0), (5, 0.0), (10, 0.0), (5, 0.04)])
def test_an_experiment_at_the_mde_finds_it_80_percent_of_the_time(n, item_var) -> None:
    rng = np.random.default_rng(7)
    sd = 1.0
    delta = stats.mde(sd, n, item_var=item_var)
    shared = rng.normal(0, math.sqrt(item_var), (REPLICATES, 1))  # one test set each
    x = delta + shared + rng.normal(0, sd, (REPLICATES, n))
    low = x.mean(axis=1) - _t_half(x.std(axis=1, ddof=1), n, item_var)
    found = float(np.mean(low > 0))
    assert abs(found - stats.POWER) < 0.05, (n, item_var, delta, found)


def test_the_mde_shrinks_with_seeds_but_not_below_the_test_sets_noise() -> None:
    assert stats.mde(1.0, 20) < stats.mde(1.0, 5) < stats.mde(1.0, 3)
    v = 0.01**2
    floor = (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * 0.01
    assert stats.mde(1e-6, 50, item_var=v) == pytest.approx(floor, rel=0.02)
    assert stats.n_needed(0.005, floor * 0.9, item_var=v) is None  # no seeds will do
    assert stats.n_needed(0.005, floor * 1.5, item_var=v) is not None


def test_n_needed_is_the_first_n_whose_mde_is_within_the_margin() -> None:
    n = stats.n_needed(1.0, 1.0)
    assert stats.mde(1.0, n) <= 1.0 < stats.mde(1.0, n - 1)
    assert stats.n_needed(0.0, 0.01) == 2
    with pytest.raises(ValueError, match="margin"):
        stats.n_needed(1.0, 0.0)


def test_equivalence_power_is_for_the_true_difference_not_only_zero() -> None:
    sd, margin = 0.5, 1.0
    at_zero = stats.n_needed_equivalence(sd, margin)
    near = stats.n_needed_equivalence(sd, margin, 0.6)
    assert near > 2 * at_zero
    assert stats.n_needed_equivalence(sd, margin, 1.0) is None  # at the margin: never
    # simulate at `near` seeds and the true difference 0.6
    rng = np.random.default_rng(3)
    x = rng.normal(0.6, sd, (REPLICATES, near))
    m, half = x.mean(axis=1), _t_half(x.std(axis=1, ddof=1), near, 0.0)
    inside = float(np.mean((m - half > -margin) & (m + half < margin)))
    expected = stats.power_equivalence(0.6, sd, near, margin)
    assert expected >= stats.POWER and abs(inside - expected) < 0.03


def test_seeds_needed_no_longer_assumes_a_zero_difference() -> None:
    # A14's shape: an equivalence margin of 0.01, an observed difference of -0.0083
    rule = Equivalent(0.01)
    assert rule.seeds_needed(0.0019, delta=-0.0083) >= 3 * rule.seeds_needed(0.0019)
    assert rule.seeds_needed(0.0019, delta=-0.012) == 1000  # beyond the margin: the cap


# ----------------------------------------------------------------- the test set's noise


def test_the_item_variance_of_a_difference_is_the_sum_of_both_arms() -> None:
    v = stats.accuracy_item_variance([(1, 0.9, 361), (-1, 0.8, 361)])
    assert v == pytest.approx(0.9 * 0.1 / 361 + 0.8 * 0.2 / 361)
    # same-sign terms add their standard deviations (correlation 1 at worst)
    both = stats.accuracy_item_variance([(0.5, 0.9, 100), (0.5, 0.9, 100)])
    assert both == pytest.approx(0.9 * 0.1 / 100)
    assert math.isnan(stats.accuracy_item_variance([(1, float("nan"), 100)]))
    assert stats.items_needed(v, 361, 0.01) > 361


@pytest.mark.parametrize("seed_sd", [0.01, 0.03])
def test_the_combined_interval_covers_95_percent_over_seeds_and_test_items(
    seed_sd: float,
) -> None:
    """Two arms scored on one test set of 361 items, each item right or wrong for every seed
    of an arm (the bound is then exact), plus seed-to-seed noise; the truth is the
    population's difference. The seeds' spread alone misses the test set's draw."""
    rng = np.random.default_rng(11)
    n_test, seeds, pa, pb = 361, 5, 0.9, 0.85
    covered = covered_by_seeds = 0
    for _ in range(REPLICATES):
        acc_a = rng.binomial(n_test, pa) / n_test + rng.normal(0, seed_sd, seeds)
        acc_b = rng.binomial(n_test, pb) / n_test + rng.normal(0, seed_sd, seeds)
        v = stats.accuracy_item_variance(
            [(1, acc_a.mean(), n_test), (-1, acc_b.mean(), n_test)]
        )
        ci = stats.interval(acc_a - acc_b, item_var=v)
        covered += ci.low < pa - pb < ci.high
        seeds_only = stats.interval(acc_a - acc_b)
        covered_by_seeds += seeds_only.low < pa - pb < seeds_only.high
    assert abs(covered / REPLICATES - 0.95) < 0.02
    assert covered_by_seeds / REPLICATES < 0.85


def test_an_interval_without_item_noise_is_the_t_interval() -> None:
    x = [0.8, 0.82, 0.79, 0.85, 0.81]
    plain, withv = stats.interval(x), stats.interval(x, item_var=1e-4)
    assert plain.half == pytest.approx(stats.mean_ci(x)[1]) and plain.df == 4
    assert withv.half > plain.half and withv.df > 4
    assert plain.at(0.99).half > plain.half
    assert plain.at(0.95).half == pytest.approx(plain.half)
    assert stats.Interval(0.5, 0.1, 5).seed_sd == pytest.approx(
        0.1 * math.sqrt(5) / sps.t.ppf(0.975, 4)
    )


def test_a_paired_accuracy_carries_its_test_items() -> None:
    from test_claims_paired import table

    effect = claims.paired(claims.at_chosen_lr(table()), "a", "b")
    a, b = effect.arms
    assert [n for _, _, n in effect.items] == [361, 361]  # the digits' test split
    assert stats.accuracy_item_variance(effect.items) == pytest.approx(
        (a.score * (1 - a.score) + b.score * (1 - b.score)) / 361
    )
    rmse = table(metric="rmse", higher=False)
    assert claims.paired(claims.at_chosen_lr(rmse), "a", "b").items == ()


def test_a_table_on_a_chosen_source_counts_that_sources_test_items() -> None:
    """A grid's ``source`` setting (real MNIST's 5,000 digits, not the 8x8 toy) decides the
    test items, the chance level and the words of the data a verdict read."""
    from normlab import data
    from test_claims_paired import table

    frame = table().assign(source="mnist_5k")
    test = data.for_profile("mnist", "cpu", chosen="mnist_5k")["test"]
    assert claims.source_of(frame) == "mnist_5k" and claims.source_of(table()) is None
    assert claims.test_items(frame) == len(test.y) != claims.test_items(table())
    majority = float(test.y.bincount().max() / len(test.y))
    assert claims.chance_level(frame) == pytest.approx(majority)
    effect = claims.paired(claims.at_chosen_lr(frame), "a", "b")
    assert [n for _, _, n in effect.items] == [len(test.y)] * 2
    words = claims.tested_on(claims.get("A14"), frame, "cpu")
    assert "real MNIST, 5,000 digits" in words and "CIFAR-10" in words


# ----------------------------------------------------------------------------- Holm


def test_holm_against_a_hand_worked_case() -> None:
    # sorted 0.01, 0.03, 0.04 against 0.05/3, 0.05/2, 0.05/1: the first is rejected; the
    # second is not (0.03 > 0.025), so the procedure stops and the third is not either.
    adjusted, rejected = stats.holm([0.01, 0.04, 0.03])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06])
    assert list(rejected) == [True, False, False]
    np.testing.assert_allclose(
        stats.holm_levels([0.01, 0.04, 0.03]), [0.05 / 3, 0.025, 0.025]
    )
    adjusted, rejected = stats.holm([0.01, 0.02, 0.03])
    np.testing.assert_allclose(adjusted, [0.03, 0.04, 0.04])
    assert rejected.all()
    assert list(stats.holm([float("nan"), 0.001])[1]) == [False, True]


def _two_sided(mean: float, p: float, n: int = 5) -> stats.Interval:
    """An interval whose two-sided p-value of zero is ``p`` (sd chosen to fit)."""
    se = mean / sps.t.isf(p / 2, n - 1)
    return stats.Interval(
        mean, sps.t.ppf(0.975, n - 1) * se, n, 0.95, se * math.sqrt(n)
    )


def test_holm_intervals_widen_with_the_number_of_effects() -> None:
    rule = Directional(+1)
    alone = _two_sided(1.0, 0.04)
    assert rule.verdict(alone) == SUPPORTED and rule.p_value(alone) == pytest.approx(
        0.04
    )
    first, second = claims.holm_intervals([rule, rule], [alone, _two_sided(1.0, 0.3)])
    assert first.confidence == pytest.approx(0.975)  # ranked first of two: 0.05/2
    assert rule.verdict(first) == INCONCLUSIVE
    assert second.confidence == pytest.approx(
        0.975
    )  # the procedure stopped at the first
    (one,) = claims.holm_intervals([rule], [alone])
    assert one.confidence == pytest.approx(0.95)


def test_a_claim_with_two_effects_is_judged_with_holm() -> None:
    rng = np.random.default_rng(0)
    samples = rng.normal(0, 1, 6)
    strong = samples - samples.mean() + 3.0  # p far below 0.025
    weak_sd = 1.0
    weak = samples / samples.std(ddof=1) * weak_sd
    weak = (
        weak - weak.mean() + sps.t.isf(0.04 / 2, 5) * weak_sd / math.sqrt(6)
    )  # p 0.04
    claim = claims.Claim(
        "Z1",
        "I",
        "empirical",
        "x",
        6,
        test=claims.Test(
            "fc_normalisers",
            lambda r: [claims.Effect("strong", strong), claims.Effect("weak", weak)],
            Directional(+1),
            "x",
        ),
    )
    out = claims.judge(claim, pd.DataFrame())
    # Holm: the strong effect at 0.025, then the weak one at 0.05: both supported
    assert [v for _, _, v in out.effects] == [SUPPORTED, SUPPORTED]
    assert [j.confidence for j in out.judged] == pytest.approx([0.975, 0.95])


# ---------------------------------------------------------------------- the margin


@pytest.mark.parametrize(
    "rule, mean, half, verdict",
    [
        (Directional(+1), 0.002, 0.005, NEGLIGIBLE),  # inside ±0.01, across zero
        (Directional(+1), 0.005, 0.002, NEGLIGIBLE),  # inside, above zero: still small
        (Directional(+1), 0.03, 0.01, SUPPORTED),
        (Directional(+1), -0.03, 0.01, CONTRADICTED),
        (Directional(+1), 0.0, 0.02, INCONCLUSIVE),  # wider than the margin
        (Directional(-1), -0.003, 0.004, NEGLIGIBLE),
        (ConsistentWith(+1), 0.001, 0.002, NEGLIGIBLE),
        (ConsistentWith(+1), 0.05, 0.01, claims.CONSISTENT),
        (Equivalent(0.01), 0.002, 0.005, SUPPORTED),  # the margin is the claim here
        (AtLeast(0.01), 0.002, 0.005, SUPPORTED),
    ],
)
def test_each_verdict_word_on_a_constructed_interval(rule, mean, half, verdict) -> None:
    assert rule.verdict(stats.Interval(mean, half, 5), 0.01) == verdict


def test_combine_hides_no_margin_behind_another_verdict() -> None:
    """Effects that differ (a margin beside a support or a contradiction) give MIXED, whose
    words name each; a claim whose every effect is inside the margin is NEGLIGIBLE."""
    assert claims.combine([SUPPORTED, NEGLIGIBLE]) == claims.MIXED
    assert claims.combine([NEGLIGIBLE, INCONCLUSIVE]) == claims.MIXED
    assert claims.combine([NEGLIGIBLE, CONTRADICTED]) == claims.MIXED
    assert claims.combine([NEGLIGIBLE, NEGLIGIBLE]) == NEGLIGIBLE
    assert NEGLIGIBLE in claims.VERDICTS and NEGLIGIBLE in claims.DECIDED
    assert "Holm" in claims.rules.COMBINE_WORDS


def test_a_directional_effect_is_powered_against_the_margin() -> None:
    """A11's old advice used the equivalence formula; a directional claim needs the seeds
    for which a true effect of the margin's size would be found."""
    ci = stats.interval([0.01, -0.02, 0.015, -0.01, 0.0])
    n = Directional(+1).seeds_to_resolve(ci, 0.005)
    assert n == stats.n_needed(ci.seed_sd, 0.005)
    assert stats.power_directional(0.005, ci.seed_sd, n) >= 0.8
    assert n != Equivalent(0.005).seeds_needed(ci.seed_sd)


def _slopes(noisy: str) -> pd.DataFrame:
    """A batch-size set: every normaliser keeps perfect scaling (a scaling slope of 0),
    tightly, except ``noisy``, flat on average but spread across seeds."""
    from test_claims import steps_table

    rng = np.random.default_rng(5)
    names = ("none", "batchnorm", "layernorm", "rmsnorm", "l2", "norm_like")
    slopes = {
        name: list(rng.normal(0, 0.2 if name == noisy else 0.005, 5)) for name in names
    }
    return steps_table(slopes, noise=0.0)


def test_the_seeds_needed_are_the_deciding_effects() -> None:
    """A13: when `none`'s slope keeps the claim open, the advice is about `none`."""
    out = claims.judge(claims.get("A13"), _slopes("none"))
    by = {j.label.split(":")[0]: j for j in out.judged}
    assert by["layernorm"].verdict == SUPPORTED and by["layernorm"].n_needed is None
    assert by["none"].verdict == INCONCLUSIVE and by["none"].n_needed is not None
    assert out.verdict == claims.MIXED and out.n_needed == by["none"].n_needed
    assert "inconclusive for none (steps)" in out.says
    needs = [label for label, note in out.notes.items() if "needs" in note]
    assert needs == [by["none"].label]


def test_every_inconclusive_effect_says_what_would_resolve_it() -> None:
    from test_claims import _fc_table

    table = _fc_table(0.004)
    rng = np.random.default_rng(2)
    table["test_metric"] += rng.normal(0, 0.02, len(table))
    out = claims.judge(claims.get("A8"), table)
    for j in out.judged:
        assert j.margin == 0.01 and j.mde > 0 and j.n == 5
        if j.verdict == INCONCLUSIVE:
            assert j.n_needed is not None and j.needs.startswith("needs about")


# -------------------------------------------------------------------------- plans


def test_every_empirical_claim_has_one_plan_whose_margin_its_rules_share() -> None:
    empirical = {c.id for c in claims.CLAIMS.values() if c.kind == "empirical"}
    assert set(claims.PLANS) == empirical
    for claim_id in empirical:
        claim, plan = claims.get(claim_id), claims.plan(claim_id)
        assert plan.estimand and plan.tie and plan.margin > 0
        rule = claim.test.rule
        if hasattr(rule, "margin"):
            assert claims.margin_for(claim_id, "").margin == rule.margin, claim_id
    # A13's two rules, LayerNorm's equivalence and the others' non-inferiority, in each
    # reading: the paper's accuracy at fixed epochs (the default), the steps to the target
    assert claims.plan("A13").margin == claims.part1_batch.ACCURACY_SLOPE_MARGIN
    steps = claims.margin_for("A13", f"none: {claims.part1_batch.STEPS_READING}")
    assert steps.margin == claims.part1_batch.SLOPE_MARGIN


def test_a_margin_is_tied_to_the_papers_gap() -> None:
    assert claims.plan("N1").margin == pytest.approx((85.48 - 84.35) / 200)
    assert "half the paper's 1.13-point gap" in claims.plan("N1").tie
    n3 = claims.margin_for("N3", "autonorm_s - autonorm on mnist_restyled")
    assert n3.margin == pytest.approx((86.35 - 84.35) / 200)
    assert claims.margin_for(
        "N3", "autonorm_s - frozen_ln on x"
    ).margin == pytest.approx((86.35 - 82.97) / 200)
    assert claims.margin_for(
        "N2", "autonorm_exact - autonorm on mnist"
    ).units.startswith("accuracy")
    assert claims.margin_for("N2", "autonorm_exact - autonorm on mnist").margin == 0.01


def test_the_primary_specification_is_read_from_the_grid() -> None:
    spec = claims.specification("A8", "cpu")
    assert set(spec) == {"data", "model", "init", "optimiser", "budget", "rates"}
    assert spec["data"] == "real MNIST, 5,000 digits, a stand-in for CIFAR-10"
    assert spec["init"] == "xavier_normal" and spec["optimiser"].startswith("SGD")
    assert "12 epochs" in spec["budget"] and spec["model"].startswith("MLP")
    # each arm's own rates, from the grid's points (not the union of every arm's)
    from normlab import experiments

    grid = experiments.get("fc_normalisers").grid("cpu")
    ours = {
        c["lr"]
        for c in grid.configs(1)
        if c["normaliser"] == "affine_like"
        and all(c.get(k) == v for k, v in claims.plan("A8").primary.items())
    }
    assert spec["rates"]["affine_like"] == "/".join(map(str, sorted(ours)))
    assert len(set(spec["rates"].values())) > 1
    # A12: the paper's reading (fixed epochs) first, then the steps to the target
    a12 = claims.specification("A12", "cpu")
    assert a12["budget"].startswith("fixed epochs")
    assert "steps to 0.85 val accuracy" in a12["budget"]
    assert a12["data"] == "real MNIST, 5,000 digits, a stand-in for CIFAR-10"
    assert claims.specification("N8", "cpu")["optimiser"].startswith("AdamW")
    assert "stand-in" not in claims.specification("N4", "standard")["data"]
    with pytest.raises(ValueError, match="no 'cpu' grid"):
        claims.specification("N4", "cpu")


def test_planned_seeds_meet_the_margin() -> None:
    seeds, items = claims.plans.planned([(0.01, 0.0, 0.01, None, False)])
    assert items is None and stats.mde(0.01, seeds) <= 0.01
    seeds, items = claims.plans.planned([(0.01, 1e-4, 0.01, 361, False)])
    assert items > 361 and seeds >= 2  # this test set is too noisy for any seeds
    two, _ = claims.plans.planned([(0.01, 0.0, 0.01, None, False)] * 2)
    assert two > claims.plans.planned([(0.01, 0.0, 0.01, None, False)])[0]  # 0.05/2


def test_the_plan_comes_from_the_pilot_and_later_seeds_do_not_move_it() -> None:
    rng = np.random.default_rng(3)
    n = claims.plans.PILOT_SEEDS
    # the pilot's seeds spread narrowly, the seeds run after it widely
    values = np.concatenate([0.01 + rng.normal(0, 0.002, n), rng.normal(0, 0.05, 8)])
    table = pd.DataFrame({"seed": np.arange(values.size), "x": values})
    claim = claims.Claim(
        "Z2",
        "I",
        "empirical",
        "x",
        6,
        test=claims.Test(
            "fc_normalisers",
            lambda r: [claims.Effect("x", r.sort_values("seed")["x"].to_numpy())],
            AtLeast(0.01),
            "x",
        ),
    )
    pilot = claims.plans.pilot(table)
    assert sorted(pilot["seed"]) == list(range(n))
    from_pilot = claims.judging.planned_from(claim, table)
    sd = float(np.std(values[:n], ddof=1))
    assert from_pilot == claims.plans.planned([(sd, 0.0, 0.01, None, False)])
    whole = claims.judge(claim, table)
    assert claims.judging.planned_from(claim, table, whole) == from_pilot
    everything = claims.plans.planned(
        [(float(np.std(values, ddof=1)), 0.0, 0.01, None, False)]
    )
    assert everything[0] > from_pilot[0]  # planning from every seed would have moved it
    with pytest.raises(ValueError, match="'seed' column"):
        claims.plans.pilot(table.drop(columns="seed"))


# --------------------------------------------------------------------- the JSON


def _strict(text: str) -> list:
    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return claims.scorecard_records()  # the saved sets that ship


def test_the_json_scorecard_has_every_claim(records) -> None:
    assert [r["id"] for r in records] == claims.ids()
    assert {r["kind"] for r in records} == {"exact", "conceptual", "empirical"}
    _strict(json.dumps(records, allow_nan=False))
    for r in records:
        assert {"id", "kind", "verdict", "data", "effects"} <= set(r)
        if r["kind"] != "empirical":
            assert r["checks"] and r["effects"] == []
            continue
        assert r["estimand"] and r["specification"] and r["margin_tie"]
        for e in r["effects"]:
            assert e["margin"] > 0 and e["mde"] > 0 and e["n"] >= 2, (r["id"], e)
            assert {"label", "estimate", "low", "high", "n_needed"} <= set(e)
            if e["verdict"] != INCONCLUSIVE:
                assert e["n_needed"] is None
        if r["verdict"] == INCONCLUSIVE and r["effects"]:
            assert isinstance(r["n_needed"], int), r["id"]
        if r["stand_in"]:
            assert "a stand-in" in r["data"], r["id"]


def test_the_json_names_each_stand_in(records) -> None:
    a8 = next(r for r in records if r["id"] == "A8")
    assert a8["data"] == "real MNIST, 5,000 digits, a stand-in for CIFAR-10"
    assert a8["stand_in"]


def test_a_nan_becomes_null(tmp_path: Path) -> None:
    claim = claims.Claim(
        "Z1",
        "I",
        "empirical",
        "x",
        6,
        test=claims.Test(
            "fc_normalisers",
            lambda r: [claims.Effect("one seed", np.array([0.1]))],
            Directional(+1),
            "x",
        ),
    )
    out = claims.judge(claim, pd.DataFrame())
    (record,) = claims.scorecard_records(outcomes=[out])
    text = json.dumps(record, allow_nan=False)
    assert _strict(text)["effects"][0]["high"] is None


def test_cli_scorecard_json(tmp_path: Path, capsys, unclaimed_root: Path) -> None:
    root = str(unclaimed_root)
    assert main(["scorecard", "--json", "--root", root]) == 0
    printed = _strict(capsys.readouterr().out)
    assert len(printed) == len(claims.CLAIMS) and printed[0]["id"] == "A1"
    assert printed[7]["verdict"] == "needs the cpu profile"  # no claim's set in root
    out = tmp_path / "card.json"
    assert main(["scorecard", "--json", "--out", str(out), "--root", root]) == 0
    assert len(_strict(out.read_text())) == len(claims.CLAIMS)


def test_the_forest_has_one_panel_per_unit(records) -> None:
    from normlab.figures import forest_by_unit

    units = {e["units"] for r in records for e in r["effects"]}
    figure = forest_by_unit(records)
    assert len(figure.axes) == len(units) >= 3
    assert {ax.get_title(loc="left") for ax in figure.axes} == units
    assert "No empirical claim" in forest_by_unit([]).axes[0].texts[0].get_text()


def test_the_reproducibility_list_has_one_entry_per_claim_with_every_field(
    records,
) -> None:
    text = claims.reproducibility_markdown(records)
    entries = text.split("\n- ")
    assert len(entries) == len(records) == len(claims.ids())
    for record, entry in zip(records, entries):
        assert entry.lstrip("- ").startswith(f"**{record['id']}**")
        for field in ("paper", "our setting", "effect", "why", "compute"):
            assert f"  - *{field}*: " in entry


def test_the_reproducibility_table_states_the_data_on_its_face(records) -> None:
    repro = claims.reproducibility_table(records)
    assert list(repro["id"]) == claims.ids() and repro.columns[0] == "verdict"
    for record, row in zip(records, repro.itertuples(index=False)):
        if record["stand_in"]:
            assert "stand-in" in row[repro.columns.get_loc("our setting")]
            assert "on a stand-in" in row.reproduced
        if record["verdict"] == INCONCLUSIVE and record["effects"]:
            assert "needs about" in row.why
    plans = claims.plan_table(records)
    assert set(plans["id"]) == set(claims.PLANS)
