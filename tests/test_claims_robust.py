"""Robust choices: a verdict at a close runner-up rate, and one under each declared
specification, on constructed tables; and removing a seed from the shipped sets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from normlab import claims, stats
from normlab.claims import robust
from normlab.experiments.part1 import verdict_rows


def _rows(
    arms: dict[tuple[str, float], tuple[float, float]],
    *,
    seeds: int = 6,
    optimizer: str = "sgd",
) -> list[dict]:
    """One row per (arm, rate, seed): ``arms[(arm, lr)] = (val, test)`` mean accuracies,
    with a seed wobble of +-0.01 shared by the val and test metrics."""
    rows = []
    for (arm, lr), (val, test) in arms.items():
        for seed in range(seeds):
            wobble = 0.01 * (((seed * 7 + int(lr * 10)) % 5) - 2) / 2
            rows.append(
                {
                    "data": "mnist",
                    "data_profile": "cpu",
                    "source": "mnist_5k",
                    "init": "xavier_normal",
                    "optimizer": optimizer,
                    "normaliser": arm,
                    "lr": lr,
                    "seed": seed,
                    "metric": "accuracy",
                    "higher_is_better": True,
                    "val_metric": val + wobble,
                    "test_metric": test + wobble,
                }
            )
    return rows


def _claim() -> claims.Claim:
    """A8 with a quantity of two arms: ``a - b`` at the rates chosen on val."""

    def quantity(results: pd.DataFrame) -> list[claims.Effect]:
        best = claims.at_chosen_lr(verdict_rows(results))
        return [claims.paired(best, "a", "b", label="a - b")]

    base = claims.get("A8")
    return dataclasses.replace(
        base, test=dataclasses.replace(base.test, quantity=quantity)
    )


# a's two rates are alike on val (0.801 against 0.800) but not on test
CLOSE = {
    ("a", 0.1): (0.800, 0.75),
    ("a", 0.3): (0.801, 0.90),
    ("b", 0.1): (0.850, 0.85),
    ("b", 0.3): (0.700, 0.70),
}


def test_a_runner_up_within_validation_noise_is_found() -> None:
    table = pd.DataFrame(_rows(CLOSE))
    found = robust.close_runner_ups(table, ("a", "b"), "normaliser")
    assert [(c.arm, c.chosen, c.runner_up) for c in found] == [("a", 0.3, 0.1)]
    assert abs(found[0].gap) < found[0].half  # b's 0.15 gap is decided on val


def test_the_verdict_is_shown_at_the_runner_up_rate() -> None:
    """At a's chosen rate a leads b; at its runner-up, as good on val, it trails: the
    outcome says the verdict is rate-dependent and gives both."""
    claim, table = _claim(), pd.DataFrame(_rows(CLOSE))
    outcome = claims.judge(claim, table)
    assert outcome.verdict == claims.SUPPORTED
    choices = robust.rate_choices(claim, table, outcome.arms, claims.judge)
    assert [c.arm for c in choices] == ["a"] and choices[0].says == claims.CONTRADICTED
    outcome.rates = choices
    assert outcome.says.startswith("supported; rate-dependent: a at its runner-up")
    # a decided choice on val is not judged again
    apart = {**CLOSE, ("a", 0.1): (0.70, 0.75)}
    assert (
        robust.rate_choices(claim, pd.DataFrame(_rows(apart)), ("a", "b"), claims.judge)
        == []
    )


def test_a_flip_under_a_declared_specification_is_named() -> None:
    """a leads b under SGD (the primary specification) and trails under Adam: the outcome
    is specification-dependent, naming Adam; with Adam agreeing, nothing is named."""
    claim = _claim()
    sgd = _rows({("a", 0.1): (0.9, 0.9), ("b", 0.1): (0.8, 0.8)})
    adam = _rows({("a", 0.1): (0.8, 0.8), ("b", 0.1): (0.9, 0.9)}, optimizer="adam")
    table = pd.DataFrame(sgd + adam)
    outcome = claims.judge(claim, table)
    assert outcome.verdict == claims.SUPPORTED  # the primary specification's
    flips = robust.specification_flips(claim, table, outcome, claims.judge)
    assert flips == [
        {
            "specification": {"optimizer": "adam"},
            "says": claims.CONTRADICTED,
            "effects": {"a - b": claims.CONTRADICTED},
        }
    ]
    outcome.flips = flips
    assert "specification-dependent: under optimizer adam: contradicted for a - b" in (
        outcome.says
    )
    agree = _rows({("a", 0.1): (0.9, 0.9), ("b", 0.1): (0.8, 0.8)}, optimizer="adam")
    same = pd.DataFrame(sgd + agree)
    assert (
        robust.specification_flips(claim, same, claims.judge(claim, same), claims.judge)
        == []
    )


def _regime_claim() -> claims.Claim:
    """A8 with ``a - b`` measured in a regime named by the table's ``regime`` column."""

    def quantity(results: pd.DataFrame) -> list[claims.Effect]:
        best = claims.at_chosen_lr(verdict_rows(results))
        regime = f"{results['regime'].iloc[0]} epochs"
        effect = claims.paired(best, "a", "b", label="a - b")
        return [dataclasses.replace(effect, label=f"a - b ({regime})", regime=regime)]

    base = claims.get("A8")
    return dataclasses.replace(
        base, test=dataclasses.replace(base.test, quantity=quantity)
    )


def test_a_flip_in_another_declared_regime_is_named() -> None:
    """a leads b when trained long (the primary regime) and trails in a short one: the
    flip names the short regime and its effect by the label it has there; a regime that
    agrees names nothing."""
    claim = _regime_claim()
    long = pd.DataFrame(_rows({("a", 0.1): (0.9, 0.9), ("b", 0.1): (0.8, 0.8)}))
    short = pd.DataFrame(_rows({("a", 0.1): (0.8, 0.8), ("b", 0.1): (0.9, 0.9)}))
    long["regime"], short["regime"] = 24, 8
    outcome = claims.judge(claim, long)
    assert outcome.verdict == claims.SUPPORTED
    assert [e.key for e in claim.test.quantity(long)] == ["a - b"]
    flips = robust.regime_flips(claim, long, outcome, claims.judge, {"short": short})
    assert flips == [
        {
            "specification": {"regime": "short"},
            "says": claims.CONTRADICTED,
            "effects": {"a - b (8 epochs)": claims.CONTRADICTED},
        }
    ]
    outcome.flips = flips
    assert "under regime short: contradicted for a - b (8 epochs)" in outcome.says
    agree = long.assign(regime=8)
    assert robust.regime_flips(claim, long, outcome, claims.judge, {"s": agree}) == []


# ------------------------------------------------- removing a seed from the shipped sets

#: Claims whose shipped sets are cheap to judge again, one seed left out at a time.
DROP_CLAIMS = ("A12", "A13", "N7", "N8", "N9", "N12")


@pytest.mark.parametrize("claim_id", DROP_CLAIMS)
def test_removing_a_seed_from_a_shipped_set_never_decides_an_unresolved_size(
    claim_id: str,
) -> None:
    """Each of the pilot's seeds (the first five, which every cell ran) left out of the
    shipped set in turn: an effect whose size the whole set leaves unresolved
    (inconclusive, or decided in sign only) is never given a decided size by less data."""
    from normlab import results

    claim = claims.get(claim_id)
    saved = results.largest(claim.test.experiment)
    if saved is None:
        pytest.skip(f"no saved set of {claim.test.experiment}")
    table = saved.results
    whole = {j.label: j.verdict for j in claims.judge(claim, table).judged}
    open_ = {k for k, v in whole.items() if not claims.size_decided(v)}
    for seed in sorted(table["seed"].unique())[:5]:
        less = claims.judge(claim, table[table["seed"] != seed])
        for j in less.judged:
            if j.label in open_:
                assert not claims.size_decided(j.verdict), (claim_id, seed, j.label)


def test_report_attaches_robustness_on_evaluate() -> None:
    """evaluate() fills an outcome's rate choices and flips from its saved set; the JSON
    record carries them where there are any."""
    outcome = claims.evaluate("A15")
    record = claims.scorecard_records(outcomes=[outcome])[0]
    assert ("specification_dependent" in record) == bool(outcome.flips)
    assert record["verdict_words"] == outcome.says
    assert np.isfinite(record["effects"][0]["seeds_only"]["confidence"])


# ---------------------------------------------------------------- chapter 16's tables


def _record(claim_id: str, kind: str, verdict: str, effects: list[dict] = ()) -> dict:
    return {"id": claim_id, "kind": kind, "verdict": verdict, "effects": list(effects)}


def test_the_kinds_are_counted_apart() -> None:
    """Exact, conceptual and empirical claims are counted in rows of their own: seven
    identities never add to one empirical finding as "8 supported"."""
    records = [
        *[_record(f"A{i}", "exact", claims.SUPPORTED) for i in range(1, 7)],
        _record("A7", "conceptual", claims.CONCEPTUAL),
        _record("A8", "empirical", claims.SUPPORTED),
        _record("A9", "empirical", claims.MIXED),
    ]
    table = claims.kind_counts(records).set_index("verdict")
    assert list(table.columns) == ["exact", "conceptual", "empirical"]
    assert list(table.loc["claims"]) == [6, 1, 2]
    assert list(table.loc[claims.SUPPORTED]) == [6, 0, 1]
    assert list(table.loc[claims.CONCEPTUAL]) == [0, 1, 0]
    assert list(table.loc[claims.MIXED]) == [0, 0, 1]
    assert len(table) == 4  # three verdicts that occur, and the totals


def test_the_reading_table_shows_every_effect_of_both_readings() -> None:
    effect = {
        "estimate": -0.03,
        "low": -0.04,
        "high": -0.02,
        "confidence": 0.975,
        "margin": 0.005,
        "units": "accuracy per doubling",
    }
    records = [
        _record(
            "A12",
            "empirical",
            claims.MIXED,
            [
                {**effect, "label": "x: accuracy", "verdict": claims.SUPPORTED},
                {**effect, "label": "x: steps", "verdict": claims.SIGN_SUPPORTED},
            ],
        ),
        _record(
            "A8",
            "empirical",
            claims.SUPPORTED,
            [{**effect, "label": "other", "verdict": "x"}],
        ),
    ]
    table = claims.reading_table(records)
    assert list(table["effect"]) == ["x: accuracy", "x: steps"]
    assert list(table["verdict"]) == [claims.SUPPORTED, claims.SIGN_SUPPORTED]
    assert table.loc[0, "interval"] == "-0.0300 [-0.0400, -0.0200] (97.5 %)"


def _judge_samples(samples: np.ndarray, rule: claims.Directional | None = None):
    """A8 (margin 0.01) judged on one effect of ``samples`` (seeds' spread only)."""
    base = claims.get("A8")
    effect = claims.Effect("x", samples, rule)
    test = dataclasses.replace(base.test, quantity=lambda _: [effect])
    return claims.judge(dataclasses.replace(base, test=test), pd.DataFrame())


def test_no_seeds_are_asked_for_that_are_in_hand() -> None:
    """30 seeds with 80 % power against the margin whose interval still straddles zero
    (its estimate between zero and the margin): the effect says the seeds are in hand
    instead of asking for about 30 of them."""
    from scipy import stats as sps

    z = sps.norm.ppf((np.arange(30) + 0.5) / 30)
    samples = 0.005 + 0.018 * z / z.std(ddof=1)
    judged = _judge_samples(samples).judged[0]
    assert judged.verdict == claims.INCONCLUSIVE
    assert stats.n_needed(judged.interval.seed_sd, 0.01) <= 30
    assert judged.n_needed is None and "seeds in hand" in judged.note
    assert judged.needs == ""


def test_a_contradicted_effect_reports_the_p_of_its_contradiction() -> None:
    """A non-inferiority effect well below its margin: its p is that of the test that it
    lies beyond the margin (small), named, not the support test's 1.0."""
    samples = np.array([-0.05, -0.045, -0.04, -0.048, -0.052])
    judged = _judge_samples(samples, claims.AtLeast(0.01)).judged[0]
    assert judged.verdict == claims.CONTRADICTED
    assert judged.p < 0.01 and judged.p_test == "beyond the margin (the contradiction)"
    assert claims.AtLeast(0.01).p_value(judged.interval) == 1.0  # the support test's
    record = claims.scorecard_records(
        outcomes=[_judge_samples(samples, claims.AtLeast(0.01))]
    )
    assert record[0]["effects"][0]["p_test"] == judged.p_test
    assert record[0]["effects"][0]["seeds_only"]["confidence"] == 0.95
