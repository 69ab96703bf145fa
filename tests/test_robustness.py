"""Chapter 15's tables: runs at the lr chosen on clean validation, their means and paired tests."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from normlab.robustness import (
    corruption_ranking,
    matched_rates,
    paired_rows,
    robustness_run_table,
    robustness_summary,
)
from normlab.run_tables import at_chosen_lr
from scipy import stats

SEEDS = range(5)
RATES = (1e-3, 3e-3, 1e-2)
# Each method's best rate on clean validation; the other rates get worse val and wild test
# numbers, so a table that read them would show it.
BEST = {"frozen_ln": 3e-3, "dyt": 1e-3, "autonorm": 1e-2, "autonorm_s": 3e-3}


def accuracies(name: str, seed: int) -> tuple[float, float]:
    """Known (clean, mCA) of the run of ``name`` and ``seed`` at its chosen rate."""
    rng = np.random.default_rng([sorted(BEST).index(name), seed])
    clean = 0.8 + 0.02 * rng.standard_normal()
    return clean, clean - 0.2 - 0.03 * rng.standard_normal()


def records() -> list[dict]:
    out = []
    for name in BEST:
        for lr in RATES:
            for seed in SEEDS:
                clean, mca = accuracies(name, seed) if lr == BEST[name] else (0.0, 1.0)
                out.append(
                    {
                        "run_id": f"{name}-{lr}-{seed}",
                        "config": {
                            "data": "fashion_mnist",
                            "normaliser": name,
                            "lr": lr,
                            "seed": seed,
                        },
                        "metrics": {"val_metric": 0.9 if lr == BEST[name] else 0.5},
                        "clean_accuracy": clean,
                        "mean_corruption_accuracy": mca,
                        "corruption": [],
                    }
                )
    return out


def chosen() -> pd.DataFrame:
    return at_chosen_lr(robustness_run_table(records()))


def test_robustness_run_table_has_one_row_per_record() -> None:
    table = robustness_run_table(records())
    assert len(table) == len(BEST) * len(RATES) * len(SEEDS)
    assert {"run_id", "normaliser", "lr", "seed", "clean", "mCA", "val_metric"} <= set(
        table.columns
    )
    assert table["higher_is_better"].all()
    row = table[table["run_id"] == "dyt-0.001-2"].iloc[0]
    assert (row["clean"], row["mCA"]) == accuracies("dyt", 2)


def test_summary_reads_each_method_at_its_chosen_rate() -> None:
    summary = robustness_summary(chosen())
    # every method present (none hard-coded), in the registry's order
    assert list(summary.index) == ["frozen_ln", "dyt", "autonorm", "autonorm_s"]
    for name, lr in BEST.items():
        clean, mca = zip(*(accuracies(name, s) for s in SEEDS))
        row = summary.loc[name]
        assert row["lr"] == lr and row["n"] == len(SEEDS)
        assert row["at_edge"] == (lr != 3e-3)
        assert row["clean"] == pytest.approx(np.mean(clean), abs=1e-12)
        assert row["mCA"] == pytest.approx(np.mean(mca), abs=1e-12)
        assert row["mCA_sd"] == pytest.approx(np.std(mca, ddof=1), abs=1e-12)
        assert row["mCA / clean"] == pytest.approx(
            np.mean(mca) / np.mean(clean), abs=1e-12
        )


def test_paired_rows_are_paired_t_tests_against_every_other_method() -> None:
    table = paired_rows(chosen())
    # registry order, the reference left out, two values each
    assert list(table["minus"]) == [
        m for m in ("frozen_ln", "dyt", "autonorm") for _ in "ab"
    ]
    assert set(table["normaliser"]) == {"autonorm_s"} and list(table["on"][:2]) == [
        "mCA",
        "clean",
    ]
    for row in table.itertuples(index=False):
        column = {"mCA": 1, "clean": 0}[row.on]
        a = [accuracies("autonorm_s", s)[column] for s in SEEDS]
        b = [accuracies(row.minus, s)[column] for s in SEEDS]
        d = np.subtract(a, b)
        reference = stats.ttest_rel(a, b)
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
        assert row.n == len(SEEDS) and row.difference == pytest.approx(
            d.mean(), abs=1e-12
        )
        assert row.p == pytest.approx(reference.pvalue, rel=1e-9)
        assert row.d_z == pytest.approx(
            reference.statistic / math.sqrt(len(d)), rel=1e-9
        )
        assert (row.low, row.high) == pytest.approx(
            (d.mean() - half, d.mean() + half), abs=1e-12
        )


def test_paired_rows_take_a_reference_a_subset_and_a_confidence() -> None:
    runs = chosen()
    wide = paired_rows(runs, ["autonorm_s"], reference="dyt", values=["mCA"])
    narrow = paired_rows(
        runs, ["autonorm_s"], reference="dyt", values=["mCA"], confidence=0.5
    )
    flipped = paired_rows(runs, ["dyt"], values=["mCA"])
    assert len(wide) == 1 and wide["difference"][0] == pytest.approx(
        -flipped["difference"][0]
    )
    assert narrow["low"][0] > wide["low"][0] and narrow["high"][0] < wide["high"][0]


def test_bad_inputs_name_the_argument() -> None:
    runs = chosen()
    with pytest.raises(ValueError, match="records is empty"):
        robustness_run_table([])
    with pytest.raises(ValueError, match="lacks"):
        robustness_run_table([{"run_id": "r", "config": {}}])
    with pytest.raises(ValueError, match="chosen must be a non-empty table"):
        robustness_summary(pd.DataFrame())
    with pytest.raises(ValueError, match=r"chosen lacks the columns \['mCA'\]"):
        robustness_summary(runs.drop(columns="mCA"))
    with pytest.raises(ValueError, match=r"chosen lacks the columns \['at_edge'\]"):
        robustness_summary(
            robustness_run_table(records())
        )  # every rate: the choice is not made
    every_rate = robustness_run_table(records()).assign(at_edge=False)
    with pytest.raises(ValueError, match="one learning rate per normaliser"):
        paired_rows(every_rate)
    with pytest.raises(ValueError, match="one run per seed"):
        robustness_summary(pd.concat([runs, runs]))
    two_sets = pd.concat([runs, runs.assign(data="cifar10")])
    with pytest.raises(ValueError, match="one data set"):
        paired_rows(two_sets)
    with pytest.raises(ValueError, match="reference='adanorm'"):
        paired_rows(runs, reference="adanorm")
    for against in ("dyt", ["adanorm"], ["autonorm_s"], []):
        with pytest.raises(ValueError, match="against must name"):
            paired_rows(runs, against)
    with pytest.raises(ValueError, match="confidence"):
        paired_rows(runs, confidence=1.5)


def test_matched_rates_pairs_the_drops_at_each_shared_rate() -> None:
    table = robustness_run_table(records())
    matched = matched_rates(table)
    assert list(matched["lr"]) == sorted(RATES)
    at = matched.set_index("lr").loc[3e-3]  # both arms' chosen rate: the known numbers
    drops = {
        name: np.array([np.subtract(*accuracies(name, s)) for s in SEEDS])
        for name in ("frozen_ln", "autonorm_s")
    }
    difference = drops["frozen_ln"] - drops["autonorm_s"]
    assert at["drop, FrozenLN - AutoNorm-S"] == pytest.approx(difference.mean())
    half = stats.t.ppf(0.975, len(SEEDS) - 1) * difference.std(ddof=1) / math.sqrt(5)
    assert at["high"] - at["low"] == pytest.approx(2 * half)
    kept = np.mean(
        [accuracies("frozen_ln", s)[1] / accuracies("frozen_ln", s)[0] for s in SEEDS]
    )
    assert at["retention, FrozenLN"] == pytest.approx(kept)
    assert at["drop, AutoNorm-S"] == pytest.approx(drops["autonorm_s"].mean())
    apart = table[
        ((table["normaliser"] == "frozen_ln") & (table["lr"] == 1e-3))
        | ((table["normaliser"] == "autonorm_s") & (table["lr"] == 1e-2))
    ]
    with pytest.raises(ValueError, match="share no learning rate"):
        matched_rates(apart)


def test_corruption_ranking_orders_by_the_accuracy_left() -> None:
    rows = [
        {"run_id": r, "corruption": c, "severity": s, "accuracy": a - 0.1 * s}
        for r in ("a", "b")
        for c, a in (("blur", 0.9), ("noise", 0.7), ("contrast", 0.8))
        for s in range(1, 6)
    ] + [
        {"run_id": r, "corruption": "clean", "severity": 0, "accuracy": 0.95}
        for r in "ab"
    ]
    ranking = corruption_ranking(pd.DataFrame(rows))
    assert list(ranking.index) == ["noise", "contrast", "blur"]
    assert ranking.loc["noise", "accuracy"] == pytest.approx(0.7 - 0.3)
    assert ranking.loc["blur", "worst"] == pytest.approx(0.9 - 0.5)
    with pytest.raises(ValueError, match="no corrupted rows"):
        corruption_ranking(pd.DataFrame(rows[-2:]))
