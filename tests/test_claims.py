"""The claims registry: every claim registered, each rule gives each verdict, exact claims
measured, statuses before a chapter or a saved set exists, and the scorecard lists them all."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from normlab import claims, stats
from normlab.__main__ import main
from normlab.claims import CONTRADICTED, INCONCLUSIVE, NOT_YET_TESTED, SUPPORTED
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[1]


def _number(claim_id: str) -> int:
    """The number of a claim id: 14 for ``A14``."""
    return int(claim_id[1:])


def _ci(mean: float, half: float, n: int = 5) -> stats.Interval:
    return stats.Interval(mean, half, n)


# ----------------------------------------------------------------------- registry


def test_kinds_parts_and_tests_agree() -> None:
    kinds = {c.id: c.kind for c in claims.CLAIMS.values()}
    # The affine-divergence algebra (A1-A7) is exact or conceptual; every later claim,
    # however many are registered, is empirical.
    assert {i: k for i, k in kinds.items() if _number(i) <= 7 and i[0] == "A"} == {
        **{f"A{i}": "exact" for i in range(1, 7)},
        "A7": "conceptual",
    }
    assert {k for i, k in kinds.items() if i[0] == "N" or _number(i) > 7} == {
        "empirical"
    }
    for c in claims.CLAIMS.values():
        assert c.part == {"A": "I", "N": "II"}[c.id[0]], c.id
        expected = claims.Test if c.kind == "empirical" else claims.Measurement
        assert isinstance(c.test, expected), c.id
    bad = claims.Claim("Z1", "I", "theorem", "x", 2)
    with pytest.raises(ValueError, match="kind='theorem'.*expected a kind of exact"):
        claims.declare(**vars(bad))
    assert "Z1" not in claims.CLAIMS


def test_ids_and_chapters() -> None:
    ids = claims.ids()
    # Part I's claims, then Part II's, each numbered 1, 2, ... without a gap.
    assert ids == sorted(ids, key=lambda i: ("AN".index(i[0]), _number(i)))
    for prefix in "AN":
        mine = [i for i in ids if i[0] == prefix]
        assert mine == [f"{prefix}{n}" for n in range(1, len(mine) + 1)]
    chapters = {c.id: c.chapter for c in claims.CLAIMS.values()}
    assert (
        chapters["A1"] == 2
        and chapters["A14"] == 8
        and chapters["N12"] == 14
        and chapters["N7"] == 15
    )
    assert all(
        isinstance(c.test, claims.Measurement)
        for i, c in claims.CLAIMS.items()
        if i in ("A1", "A2", "A3", "A4", "A5", "A6", "A7")
    )
    with pytest.raises(ValueError, match="Z9"):
        claims.get("Z9")


def test_a_test_must_name_a_registered_experiment() -> None:
    bad = claims.Claim(
        "Z1",
        "I",
        "empirical",
        "x",
        6,
        test=claims.Test("no_such_experiment", lambda r: [], claims.Directional(), "x"),
    )
    with pytest.raises(ValueError, match="fc_normalisers"):
        claims.declare(**vars(bad))
    assert "Z1" not in claims.CLAIMS
    with pytest.raises(ValueError, match="declared twice"):
        claims.declare(**vars(claims.get("A1")))


def test_paper_numbers_are_the_papers() -> None:
    assert claims.get("N3").paper["AutoNorm-S"] == 86.35
    assert claims.get("N1").paper == {"AutoNorm (CIFAR-10)": 84.35, "Random": 85.48}


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    "rule, cases",
    [
        (
            claims.Directional(+1),
            {
                SUPPORTED: (0.5, 0.2),
                CONTRADICTED: (-0.5, 0.2),
                INCONCLUSIVE: (0.1, 0.2),
            },
        ),
        (
            claims.Directional(-1),
            {
                SUPPORTED: (-0.5, 0.2),
                CONTRADICTED: (0.5, 0.2),
                INCONCLUSIVE: (-0.1, 0.2),
            },
        ),
        (
            claims.Equivalent(0.01),
            {
                SUPPORTED: (0.002, 0.005),
                CONTRADICTED: (0.05, 0.01),
                INCONCLUSIVE: (0.008, 0.01),
            },
        ),
        (
            claims.AtLeast(0.01),
            {
                SUPPORTED: (-0.005, 0.004),
                CONTRADICTED: (-0.05, 0.01),
                INCONCLUSIVE: (-0.01, 0.01),
            },
        ),
        (
            claims.AtLeast(0.01, direction=-1),
            {
                SUPPORTED: (0.005, 0.004),
                CONTRADICTED: (0.05, 0.01),
                INCONCLUSIVE: (0.01, 0.01),
            },
        ),
        (
            claims.ConsistentWith(+1),
            {
                claims.CONSISTENT: (0.5, 0.2),
                CONTRADICTED: (-0.5, 0.2),
                INCONCLUSIVE: (0.1, 0.2),
            },
        ),
    ],
)
def test_each_rule_gives_each_verdict(rule, cases) -> None:
    assert rule.words
    for verdict, (mean, half) in cases.items():
        assert rule.verdict(_ci(mean, half)) == verdict, (rule, mean, half)
    assert (
        rule.verdict(stats.Interval(1.0, math.nan, 1)) == INCONCLUSIVE
    )  # one seed decides nothing


def test_rules_reject_bad_settings() -> None:
    with pytest.raises(ValueError, match="direction"):
        claims.Directional(0)
    with pytest.raises(ValueError, match="margin"):
        claims.Equivalent(0)
    with pytest.raises(ValueError, match="margin"):
        claims.AtLeast(-1)
    with pytest.raises(ValueError, match="direction"):
        claims.ConsistentWith(2)


def test_combine() -> None:
    """Effects that agree give their verdict; effects that differ give MIXED, and the
    words name each verdict with its effects (no effect's verdict hidden by another's)."""
    assert claims.combine([SUPPORTED, SUPPORTED]) == SUPPORTED
    for mixed in (
        [SUPPORTED, claims.NEGLIGIBLE],
        [SUPPORTED, INCONCLUSIVE],
        [SUPPORTED, CONTRADICTED],
        [SUPPORTED, claims.CONSISTENT],
        [claims.CONSISTENT, CONTRADICTED],
    ):
        assert claims.combine(mixed) == claims.MIXED, mixed
    assert claims.combine([]) == INCONCLUSIVE
    words = claims.verdict_words(
        [
            ("norm-like", SUPPORTED),
            ("affine-like", claims.NEGLIGIBLE),
            ("l2", SUPPORTED),
        ]
    )
    assert (
        words == "supported for norm-like, l2; smaller than the margin for affine-like"
    )
    assert (
        claims.verdict_words([("a", CONTRADICTED), ("b", CONTRADICTED)]) == CONTRADICTED
    )


def test_an_interval_across_the_margin_decides_the_sign_only() -> None:
    """An interval that excludes zero but straddles the margin gets a verdict of sign,
    never a decided size; one beyond the margin decides both."""
    rule = claims.Directional(+1)
    assert rule.verdict(_ci(0.05, 0.02), 0.01) == SUPPORTED  # [0.03, 0.07]
    assert (
        rule.verdict(_ci(0.01, 0.008), 0.01) == claims.SIGN_SUPPORTED
    )  # [0.002, 0.018]
    assert rule.verdict(_ci(-0.01, 0.008), 0.01) == claims.SIGN_CONTRADICTED
    assert rule.verdict(_ci(-0.05, 0.02), 0.01) == CONTRADICTED
    assert rule.verdict(_ci(0.004, 0.005), 0.01) == claims.NEGLIGIBLE
    assert claims.ConsistentWith(+1).verdict(_ci(0.01, 0.008), 0.01) == (
        "consistent in sign, size unresolved"
    )


RULES_WITH_MARGINS = [
    (claims.Directional(+1), 0.01),
    (claims.Directional(-1), 0.01),
    (claims.ConsistentWith(+1), 0.01),
    (claims.Equivalent(0.01), None),
    (claims.AtLeast(0.01), None),
    (claims.AtLeast(0.01, direction=-1), None),
]


@pytest.mark.parametrize("rule, margin", RULES_WITH_MARGINS)
def test_a_wider_interval_never_decides_a_size_a_narrower_one_left_open(
    rule, margin
) -> None:
    """Less data widens an interval around the same mean: for every mean and pair of
    widths on a grid that crosses zero and the margin, a size the wider interval decides
    is decided (the same way) by the narrower one."""
    means = np.linspace(-0.04, 0.04, 81)
    halves = np.linspace(0.0005, 0.04, 80)
    for mean in means:
        verdicts = [rule.verdict(_ci(float(mean), float(h)), margin) for h in halves]
        for narrow, wide in zip(verdicts, verdicts[1:]):
            if claims.size_decided(wide):
                assert narrow == wide, (rule, mean, narrow, wide)


def test_removing_a_seed_never_decides_an_unresolved_size() -> None:
    """Constructed seeds whose interval straddles the margin: dropping any one seed
    (which widens the interval more than it moves it) never gives a decided size; and
    seeds whose interval lies just inside the margin ("smaller than the margin", as A12's
    affine-like once did) give, without a seed, that verdict or one of sign alone, never
    the opposite decided size ("supported")."""
    rule = claims.Directional(+1)
    straddle = 0.1 + 0.01 * np.arange(-4, 5)  # mean 0.1: on the margin
    assert rule.verdict(stats.interval(straddle), 0.1) == claims.SIGN_SUPPORTED
    inside = np.array([0.05, 0.06, 0.07, 0.08, 0.09, 0.065, 0.075, 0.085, 0.055, 0.095])
    full = rule.verdict(stats.interval(inside), 0.1)
    assert full == claims.NEGLIGIBLE
    for drop in range(len(straddle)):
        verdict = rule.verdict(stats.interval(np.delete(straddle, drop)), 0.1)
        assert not claims.size_decided(verdict), (drop, verdict)
    for drop in range(len(inside)):
        verdict = rule.verdict(stats.interval(np.delete(inside, drop)), 0.1)
        assert verdict == full or not claims.size_decided(verdict), (drop, verdict)


def test_the_ceiling_rule_refuses_arms_at_the_ceiling() -> None:
    """Arms within CEILING_MARGIN of the task's ceiling (a stand-in's own, else 0.97)
    cannot show a difference: the effect says so instead of a verdict."""
    from normlab.claims import rules

    assert rules.at_ceiling([0.909, 0.908], 0.9125)
    assert not rules.at_ceiling([0.909, 0.85], 0.9125)
    assert rules.at_ceiling([0.965, 0.97], None) and not rules.at_ceiling([0.95], None)
    assert not rules.at_ceiling([], 0.9)
    claim = claims.get("A8")
    samples = np.array([0.03, 0.032, 0.031, 0.029, 0.033])
    top = (claims.Arm("a", 0.909, 0.1, 0.9125), claims.Arm("b", 0.905, 0.1, 0.9125))
    effect = claims.Effect("a - b", samples, arms=top)
    test = dataclasses.replace(claim.test, quantity=lambda _: [effect])
    out = claims.judge(dataclasses.replace(claim, test=test), pd.DataFrame())
    assert out.verdict == claims.AT_CEILING and "0.9125" in out.judged[0].note
    low = (claims.Arm("a", 0.88, 0.1, 0.9125), claims.Arm("b", 0.86, 0.1, 0.9125))
    effect = claims.Effect("a - b", samples, arms=low)
    test = dataclasses.replace(claim.test, quantity=lambda _: [effect])
    out = claims.judge(dataclasses.replace(claim, test=test), pd.DataFrame())
    assert out.verdict == SUPPORTED


# --------------------------------------------------------------------------- stats


def test_mean_ci_is_the_t_interval() -> None:
    x = np.array([0.8, 0.82, 0.79, 0.85, 0.81])
    mean, half, n = stats.mean_ci(x)
    low, high = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert (
        n == 5
        and mean == pytest.approx(x.mean())
        and half == pytest.approx((high - low) / 2, rel=1e-12)
    )
    assert math.isnan(stats.mean_ci([1.0])[1]) and stats.mean_ci([])[2] == 0


def test_paired_slope_tost() -> None:
    assert list(
        stats.paired_differences({0: 1.0, 1: 2.0, 2: 5.0}, {1: 1.5, 2: 4.0, 3: 9.0})
    ) == [0.5, 1.0]
    assert stats.slope_log2([8, 16, 32, 64], [0.9, 0.88, 0.86, 0.84]) == pytest.approx(
        -0.02
    )
    with pytest.raises(ValueError, match="distinct"):
        stats.slope_log2([8, 8], [1, 2])
    table = pd.DataFrame(
        {"seed": [0, 0, 1, 1], "b": [8, 16, 8, 16], "y": [1.0, 0.9, 1.0, 0.8]}
    )
    assert list(stats.slopes_log2(table, "b", "y")) == pytest.approx([-0.1, -0.2])
    rng = np.random.default_rng(0)
    assert stats.tost(rng.normal(0, 0.001, 10), 0.01)[1]
    assert not stats.tost(rng.normal(0.02, 0.001, 10), 0.01)[1]
    with pytest.raises(ValueError, match="margin"):
        stats.tost([1, 2], 0)


# ----------------------------------------------------------------- exact claims


@pytest.mark.parametrize("claim_id", ["A1", "A2", "A3", "A4", "A5", "A6", "A7"])
def test_exact_claims_are_measured(claim_id: str) -> None:
    out = claims.evaluate(claim_id)
    # a conceptual claim's measurement shows its view consistent, never "supported"
    expected = claims.CONCEPTUAL if claim_id == "A7" else SUPPORTED
    assert out.verdict == expected, out.checks
    assert out.checks and all(math.isfinite(c.value) for c in out.checks)


def test_a_failed_measurement_is_contradicted(tmp_path: Path) -> None:
    (tmp_path / "02_x.ipynb").write_text("{}")
    broken = claims.Claim(
        "A1",
        "I",
        "exact",
        "x",
        2,
        test=claims.Measurement(
            lambda: [
                claims.Check("should be zero", 1e-3),
                claims.Check("should not", 0.0, zero=False),
            ],
            "x",
        ),
    )
    assert claims.evaluate(broken, book=tmp_path).verdict == CONTRADICTED


# -------------------------------------------------------------- empirical claims


def _fc_table(lead: float, seeds: int = 5) -> pd.DataFrame:
    """A constructed fc_normalisers table: affine_like ahead of norm_like by ``lead``, norm_like ahead of
    the rest by ``lead``, plus per-seed noise; the best lr of every normaliser is 0.1."""
    rng = np.random.default_rng(1)
    rows = []
    base = {
        "none": 0.5,
        "batchnorm": 0.55,
        "layernorm": 0.56,
        "rmsnorm": 0.54,
        "l2": 0.5,
    }
    base.update(norm_like=0.56 + lead, affine_like=0.56 + 2 * lead)
    for act in ("tanh", "leaky_relu"):
        for name, acc in base.items():
            for lr in (0.01, 0.1):
                for seed in range(seeds):
                    noise = rng.normal(0, 0.003)
                    value = acc + noise - (0.2 if lr == 0.01 else 0.0)
                    rows.append(
                        {
                            "experiment": "fc_normalisers",
                            "profile": "cpu",
                            "data": "digits",
                            "budget": "fixed_epochs",
                            "activation": act,
                            "width": 64,
                            "depth": 3,
                            "batch_size": 32,
                            "normaliser": name,
                            "lr": lr,
                            "seed": seed,
                            "higher_is_better": True,
                            "val_metric": value,
                            "test_metric": value,
                        }
                    )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "lead, verdict",
    [(0.05, SUPPORTED), (-0.05, CONTRADICTED), (0.0, claims.NEGLIGIBLE)],
)
def test_a8_on_constructed_results(lead: float, verdict: str) -> None:
    out = claims.judge(claims.get("A8"), _fc_table(lead))
    assert out.verdict == verdict
    assert all(ci.n == 5 for _, ci, _ in out.effects)
    if not lead:  # no lead: every paired CI covers 0, and lies inside the margin
        assert all(-0.01 < ci.low < 0 < ci.high < 0.01 for _, ci, _ in out.effects)


def test_a8_with_no_lead_and_a_wide_spread_is_inconclusive() -> None:
    table = _fc_table(0.0)
    rng = np.random.default_rng(4)
    table["test_metric"] += rng.normal(0, 0.03, len(table))
    out = claims.judge(claims.get("A8"), table)
    assert out.verdict == INCONCLUSIVE and out.n_needed is not None


def test_chosen_lr_is_chosen_on_val() -> None:
    table = _fc_table(0.05)
    table.loc[table["lr"] == 0.01, "test_metric"] += (
        1.0  # a test-set winner at lr 0.01 must not be chosen
    )
    best = claims.at_chosen_lr(table)
    assert set(best["lr"]) == {0.1} and len(best) == 7 * 2 * 5


def test_unmeasurable_is_said_not_guessed() -> None:
    out = claims.judge(claims.get("A11"), _fc_table(0.05))  # no depth-3 width-16 runs
    assert out.verdict == INCONCLUSIVE and "width=16" in out.note and not out.effects


def steps_table(
    slopes: dict[str, float | list[float]], *, noise: float = 0.02, seeds: int = 5
) -> pd.DataFrame:
    """A batch-size set under the primary specification: each normaliser's epochs to the
    target grow by ``slopes[name]`` doublings per doubling of the batch (one value, or one
    per seed; steps = epochs x 3000 / B), with a seed-dependent wobble of ``noise``
    doublings; three rates, the middle one the fastest, the others 1.5 times slower."""
    rows = []
    for name, slope in slopes.items():
        for b in (4, 16, 64, 256):
            for seed in range(seeds):
                tilt = slope[seed] if isinstance(slope, list) else slope
                wobble = noise * (((seed * 7 + b) % 5) - 2) / 2
                epochs = 0.5 * 2 ** ((tilt + wobble) * math.log2(b / 4))
                for lr, slower in ((0.1, 1.5), (0.3, 1.0), (1.0, 1.5)):
                    steps = round(epochs * slower * 3000 / b, 3)
                    rows.append(
                        {
                            "normaliser": name,
                            "batch_size": b,
                            "seed": seed,
                            "lr": lr,
                            "data": "mnist",
                            "data_profile": "cpu",
                            "source": "mnist_5k",
                            "optimizer": "sgd",
                            "init": "xavier_normal",
                            "budget": "to_target",
                            "metric": "accuracy",
                            "higher_is_better": True,
                            "steps_to_target": steps,
                            "epochs_to_target": steps * b / 3000,
                            "val_metric": 0.85,
                            "test_metric": 0.85,
                        }
                    )
    return pd.DataFrame(rows)


RIVALS_FLAT = {
    "layernorm": 0.0,
    "batchnorm": 0.02,
    "rmsnorm": 0.0,
    "none": -0.02,
    "l2": 0.0,
}


def test_batch_size_scaling_slopes() -> None:
    """A12 reads each correction's scaling slope (log2 epochs to the target per doubling)
    minus the rivals' mean; A13 each rival's own slope against 0, perfect scaling."""
    table = steps_table({"affine_like": 0.4, "norm_like": 0.3, **RIVALS_FLAT})
    a12 = claims.judge(claims.get("A12"), table)
    assert a12.verdict == SUPPORTED
    # the contrast: affine-like's 0.4 against the rivals' mean of 0.0
    assert a12.effects[0][1].mean == pytest.approx(0.4, abs=0.02)
    assert claims.judge(claims.get("A13"), table).verdict == SUPPORTED
    # every method leaving perfect scaling alike is no evidence for A12, and A13's "flat"
    # is then contradicted for every rival
    alike = steps_table(dict.fromkeys(["affine_like", "norm_like", *RIVALS_FLAT], 0.5))
    assert claims.judge(claims.get("A12"), alike).verdict != SUPPORTED
    assert claims.judge(claims.get("A13"), alike).verdict == CONTRADICTED
    # the corrections keeping perfect scaling longer than the rivals contradict A12
    early = steps_table(
        {"affine_like": 0.0, "norm_like": 0.0, **{n: 0.5 for n in RIVALS_FLAT}}
    )
    assert claims.judge(claims.get("A12"), early).verdict == CONTRADICTED


def epochs_table(
    slopes: dict[str, float], *, seeds: int = 6, noise: float = 0.004
) -> pd.DataFrame:
    """A batch-size set under the paper's convention (fixed epochs): each normaliser's
    test accuracy changes by ``slopes[name]`` per doubling of the batch from 0.9 at batch
    4, with a seed wobble of ``noise``; three rates, the middle one the best on val."""
    rows = []
    for name, slope in slopes.items():
        for b in (4, 16, 64, 256):
            for seed in range(seeds):
                wobble = noise * (((seed * 7 + b) % 5) - 2) / 2
                accuracy = 0.9 + slope * math.log2(b / 4) + wobble
                for lr, loss in ((0.1, 0.02), (0.3, 0.0), (1.0, 0.02)):
                    rows.append(
                        {
                            "normaliser": name,
                            "batch_size": b,
                            "seed": seed,
                            "lr": lr,
                            "data": "mnist",
                            "data_profile": "cpu",
                            "source": "mnist_5k",
                            "optimizer": "sgd",
                            "init": "xavier_normal",
                            "budget": "fixed_epochs",
                            "metric": "accuracy",
                            "higher_is_better": True,
                            "val_metric": accuracy - loss,
                            "test_metric": accuracy - loss,
                        }
                    )
    return pd.DataFrame(rows)


def test_batch_size_claims_read_the_papers_quantity_first() -> None:
    """A12's and A13's first effects are the paper's: each correction's own accuracy
    slope per doubling at fixed epochs (A12: falling), the rivals' (A13: flat, or not
    falling); the steps-to-target reading follows where the set has it."""
    falling = {"affine_like": -0.03, "norm_like": -0.04, **RIVALS_FLAT}
    flat = {**falling, **{k: 0.0 for k in RIVALS_FLAT}}
    table = epochs_table(flat)
    a12 = claims.judge(claims.get("A12"), table)
    assert [j.label for j in a12.judged] == [
        f"affine_like: {claims.part1_batch.ACCURACY_READING}",
        f"norm_like: {claims.part1_batch.ACCURACY_READING}",
    ]
    assert a12.verdict == SUPPORTED
    assert a12.judged[0].interval.mean == pytest.approx(-0.03, abs=0.002)
    # flat rivals: every interval holds 0 (the bound on the test set's noise, with no
    # per-item hits here, keeps the half-point margin from deciding equivalence)
    flat13 = claims.judge(claims.get("A13"), table)
    assert all(j.interval.low < 0 < j.interval.high for j in flat13.judged)
    assert CONTRADICTED not in {j.verdict for j in flat13.judged}
    # the rivals falling as fast contradict A13's "flat" for each of them
    steep = epochs_table({**falling, **{k: -0.03 for k in RIVALS_FLAT}})
    a13 = claims.judge(claims.get("A13"), steep)
    assert {j.verdict for j in a13.judged} == {CONTRADICTED}
    # both readings together: the paper's first, then the steps to the target
    both = pd.concat(
        [table, steps_table({"affine_like": 0.4, "norm_like": 0.3, **RIVALS_FLAT})]
    )
    labels = [j.label for j in claims.judge(claims.get("A12"), both).judged]
    assert len(labels) == 4
    assert all(claims.part1_batch.ACCURACY_READING in x for x in labels[:2])
    assert all(claims.part1_batch.STEPS_READING in x for x in labels[2:])


def test_cross_fitting_never_reads_a_seed_at_a_choice_it_made() -> None:
    """Seeds 0, 2, 4 find rate 0.1 best on val, seeds 1, 3, 5 rate 1.0: cross-fitted,
    each half is read at the other half's rate, and no change to a half's own val
    metric moves the rate it is read at."""
    from normlab import run_tables as runs
    from normlab.analysis import batch

    table = epochs_table(dict.fromkeys(["layernorm"], 0.0))
    even = table["seed"] % 2 == 0
    table.loc[even & (table["lr"] == 0.1), "val_metric"] += 0.05
    table.loc[~even & (table["lr"] == 1.0), "val_metric"] += 0.05
    assert runs.seed_halves([5, 0, 3, 1, 2, 4]) == ([0, 2, 4], [1, 3, 5])
    scores = batch.accuracy_scores(table)
    read = scores.groupby("seed")["lr"].unique()
    assert all(list(read[s]) == [1.0 if s % 2 == 0 else 0.1] for s in read.index)
    # in-sample, every seed would be read at one rate chosen on all of them
    assert batch.accuracy_scores(table, cross_fitted=False)["lr"].nunique() == 1
    # a half's own val metric cannot move its rate
    moved = table.copy()
    moved.loc[even & (moved["lr"] == 0.3), "val_metric"] += 1.0
    again = batch.accuracy_scores(moved)
    assert (again.loc[again["seed"] % 2 == 0, "lr"] == 1.0).all()
    # steps to the target: the same for the fewest steps
    steps = steps_table({"layernorm": 0.0}, seeds=4)
    odd = steps["seed"] % 2 == 1
    steps.loc[odd & (steps["lr"] == 1.0), "steps_to_target"] /= 3
    fitted = batch.steps_scores(steps, cross_fitted=True)
    assert set(fitted.loc[fitted["seed"] % 2 == 0, "lr"]) == {1.0}
    assert set(fitted.loc[fitted["seed"] % 2 == 1, "lr"]) == {0.3}
    with pytest.raises(ValueError, match="two seeds"):
        runs.seed_halves([3])


def test_batch_size_claims_refuse_censored_and_other_conventions() -> None:
    """A cell where no rate reached the target with every seed leaves no slope to judge,
    and the fixed-epochs convention alone is not the primary specification."""
    table = steps_table({"affine_like": 0.4, "norm_like": 0.3, **RIVALS_FLAT})
    cell = (table["normaliser"] == "norm_like") & (table["batch_size"] == 256)
    censored = table.copy()
    censored.loc[
        cell & (table["seed"] == 0) & (table["lr"] == 0.3),
        ["steps_to_target", "epochs_to_target"],
    ] = math.nan
    # a rate with one censored seed is never chosen; the cell keeps its other rates
    assert claims.judge(claims.get("A12"), censored).verdict == SUPPORTED
    censored.loc[cell, ["steps_to_target", "epochs_to_target"]] = math.nan
    out = claims.judge(claims.get("A12"), censored)
    assert out.verdict == INCONCLUSIVE and "norm_like at batch 256" in out.note
    # A13 read without either budget's runs says which specification it lacks
    adam = claims.judge(claims.get("A13"), table.assign(optimizer="adam"))
    assert "no runs under the specification" in adam.note


# ---------------------------------------------------------------------- statuses


def test_statuses_before_chapters_and_sets(tmp_path: Path) -> None:
    book = tmp_path / "book"
    book.mkdir()
    assert claims.evaluate("A8", book=book, root=tmp_path).verdict == NOT_YET_TESTED
    untested = claims.Claim("Z1", "II", "empirical", "x", 13)
    out = claims.evaluate(untested, book=book, root=tmp_path)
    assert (out.verdict, out.note) == (
        NOT_YET_TESTED,
        "no test is attached yet (chapter 13)",
    )
    out = claims.evaluate("N10", book=book, root=tmp_path)
    assert (out.verdict, out.note) == (NOT_YET_TESTED, "chapter 13 is not written yet")
    (book / "06_fc.ipynb").write_text("{}")
    (book / "11_x.ipynb").write_text("{}")
    (book / "13_x.ipynb").write_text("{}")
    (book / "15_x.ipynb").write_text("{}")
    out = claims.evaluate("N10", book=book, root=tmp_path)
    assert (out.verdict, out.note) == (
        "needs the cpu profile",
        "python -m normlab save autonorm_gates --profile cpu",
    )
    out = claims.evaluate("A8", book=book, root=tmp_path)
    assert (
        out.verdict == "needs the cpu profile"
        and out.note == "python -m normlab save fc_normalisers --profile cpu"
    )
    assert (
        claims.evaluate("N1", book=book, root=tmp_path).verdict
        == "needs the cpu profile"
    )
    assert (
        claims.evaluate("N4", book=book, root=tmp_path).verdict
        == "needs the standard profile"
    )


def test_scorecard_lists_every_claim(tmp_path: Path) -> None:
    card = claims.scorecard(root=tmp_path)
    assert list(card["id"]) == claims.ids() and len(card) == len(claims.CLAIMS)
    assert set(card.loc[card["kind"] != "empirical", "verdict"]) <= {
        SUPPORTED,
        CONTRADICTED,
        claims.CONCEPTUAL,
    }
    assert set(card["verdict"]) <= {
        SUPPORTED,
        claims.CONCEPTUAL,
        CONTRADICTED,
        INCONCLUSIVE,
        NOT_YET_TESTED,
        "needs the cpu profile",
        "needs the standard profile",
    }
    md = claims.markdown(card[["id", "claim", "verdict"]])
    # header, rule, one row per claim; a | in a claim is escaped
    assert md.count("\n") == len(claims.CLAIMS) + 2 and "\\|" in md


def test_forest_is_empty_safe() -> None:
    from normlab.figures import forest

    fig = forest([])
    assert "No empirical claim" in fig.axes[0].texts[0].get_text()
    out = claims.judge(claims.get("A8"), _fc_table(0.05))
    fig = forest([out])
    assert len(fig.axes[0].get_yticklabels()) == 2


def test_the_forest_colours_every_verdict_an_effect_can_have() -> None:
    from normlab.figures.effects import VERDICT_COLOURS

    assert set(VERDICT_COLOURS) == {
        *claims.VERDICTS,
        claims.NOT_TRAINED,
        claims.AT_CEILING,
    }


def test_a_claim_declared_anywhere_reaches_the_scorecard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, unclaimed_root: Path
) -> None:
    """Adding a claim is one :func:`claims.declare` call: ids, the scorecard, its markdown
    and the command line all read the registry, so nothing else needs editing."""
    from normlab.claims import registry

    table = dict(registry.CLAIMS)  # a scratch copy: the real table is left as it was
    monkeypatch.setattr(registry, "CLAIMS", table)
    monkeypatch.setattr(claims, "CLAIMS", table)
    number = max(_number(i) for i in claims.ids() if i[0] == "A") + 1
    exact = claims.declare(
        id=f"A{number}",
        part="I",
        kind="exact",
        sentence="one plus one is two",
        chapter=2,
        test=claims.Measurement(
            lambda: [claims.Check("1 + 1 - 2", abs(1.0 + 1.0 - 2.0))], "sums"
        ),
    )
    empirical = claims.declare(
        id=f"A{number + 1}",
        part="I",
        kind="empirical",
        sentence="the scratch effect is positive",
        chapter=6,
        test=claims.Test("fc_normalisers", lambda r: [], claims.Directional(), "x"),
    )
    ids = claims.ids()  # in the papers' order: the new ones after Part I's, before N1
    assert ids.index(empirical.id) == ids.index(exact.id) + 1 == ids.index("N1") - 1
    card = claims.scorecard(root=tmp_path).set_index("id")
    assert list(card.index) == claims.ids() and len(card) == len(table)
    assert card.loc[exact.id, "verdict"] == SUPPORTED
    assert card.loc[empirical.id, "verdict"] == "needs the cpu profile"
    assert exact.sentence in claims.markdown(card.reset_index()[["id", "claim"]])
    assert main(["scorecard", "--json", "--root", str(unclaimed_root)]) == 0
    printed = [record["id"] for record in json.loads(capsys.readouterr().out)]
    assert printed == claims.ids()


def test_cli_scorecard(tmp_path: Path, capsys, unclaimed_root: Path) -> None:
    out = tmp_path / "card.csv"
    root = str(unclaimed_root)
    assert (
        main(["scorecard", "--format", "csv", "--out", str(out), "--root", root]) == 0
    )
    count = len(claims.CLAIMS)
    assert len(pd.read_csv(out)) == count
    assert f"{count} claims" in capsys.readouterr().out
    assert main(["scorecard", "--format", "markdown", "--root", root]) == 0
    assert capsys.readouterr().out.startswith("| id |")


# ----------------------------------------------------- chapters cite their claims


def uncited(book: Path) -> list[str]:
    """Claims with an experiment test whose chapter exists but never mentions the claim's id."""
    missing = []
    for claim in claims.CLAIMS.values():
        if not isinstance(claim.test, claims.Test):
            continue
        path = claims.chapter_notebook(claim.chapter, book)
        if path is not None and not re.search(rf"\b{claim.id}\b", path.read_text()):
            missing.append(f"{path.name} does not cite {claim.id}")
    return missing


def test_experiment_chapters_cite_their_claims() -> None:
    assert uncited(ROOT / "book") == []


def test_citation_checker_flags_a_silent_chapter(tmp_path: Path) -> None:
    (tmp_path / "06_fc.ipynb").write_text(
        json.dumps({"cells": [{"source": ["Tests A8, A9 and A10."]}]})
    )
    assert sorted(uncited(tmp_path)) == [
        "06_fc.ipynb does not cite A11",
        "06_fc.ipynb does not cite A15",
    ]
