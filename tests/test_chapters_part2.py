"""normlab.chapters' modules for chapters 9, 10 and 13-15: each returns every value its
chapter glues, and each value keeps the property the chapter's prose states."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import torch
from normlab import claims, data, results
from normlab.chapters import ch09, ch10, ch13, ch14, ch15, part2
from normlab.layers import DyT
from normlab.perplexity import perplexity_bounds
from normlab.robustness import robustness_run_table

BOOK = Path(__file__).resolve().parents[1] / "book"
#: A glue role in a Markdown cell, and the name it cites.
ROLE = re.compile(r"\{glue(?::\w+)?\}`(ch\d\d_[A-Za-z0-9_]+)")
#: The widest table a chapter shows from these modules (the text column at 1280 px).
MOST_COLUMNS = 8


def glued_in(chapter: str) -> set[str]:
    """The names a chapter's prose cites (``ch13_`` dropped)."""
    path = next(BOOK.glob(f"{chapter}_*.ipynb"))
    cells = json.loads(path.read_text())["cells"]
    prose = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return {name.split("_", 1)[1] for name in ROLE.findall(prose)}


def saved(name: str):
    found = results.largest(name)
    assert found is not None, f"the saved set of {name} ships with normlab"
    return found


# ----------------------------------------------------------------------- chapter 9


def test_ch09_numbers_keep_the_bound_and_the_spread() -> None:
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randn(50, 12, generator=gen) * torch.linspace(0.5, 3, 50)[:, None]
    found = ch09.numbers(tokens)
    assert found["largest"] <= found["bound"] == pytest.approx(math.sqrt(11))
    assert found["sigma_min"] <= found["sigma_median"] <= found["sigma_max"]
    assert found["alpha_typical"] == pytest.approx(1 / found["sigma_median"])
    assert found["jac_ln"] > 0  # LayerNorm couples the channels of a token
    one_hot = torch.zeros(1, 12)
    one_hot[0, 3] = 100.0
    assert ch09.numbers(one_hot, eps=0.0)["largest"] == pytest.approx(math.sqrt(11))
    with pytest.raises(ValueError):
        ch09.numbers(torch.zeros(5))


def test_ch09_saturated_share_agrees_with_dyts_slope_and_grows_with_alpha() -> None:
    x = torch.randn(400, 8, generator=torch.Generator().manual_seed(1)) * 2
    shares = [ch09.saturated_share(x, a) for a in (0.01, 0.5, 1.0, 4.0)]
    assert shares[0] == 0 and shares == sorted(shares) and shares[-1] < 1
    layer = DyT(8).double()
    with torch.no_grad():
        layer.alpha.fill_(0.5)
    inputs = x.double().requires_grad_(True)
    (slope,) = torch.autograd.grad(layer(inputs).sum(), inputs)
    assert shares[1] == pytest.approx(float((slope < 0.25).double().mean()))
    assert glued_in("09") <= set(ch09.numbers(x))


# ---------------------------------------------------------------------- chapter 10


def _moments() -> tuple[pd.DataFrame, pd.DataFrame, float]:
    moments = pd.DataFrame(
        {"tau": [0.1, 0.5], "mean grad": [0.2, 0.19], "variance (trace)": [5.0, 0.5]}
    )
    soft = pd.DataFrame({"tau": [0.5], "relative bias vs p1": [-0.03]})
    return moments, soft, 0.2


def test_ch10_temperature_reads_the_bias_and_the_variance_ratio() -> None:
    moments, soft, exact = _moments()
    found = ch10.temperature(moments, soft, exact)
    assert found["grad_bias"] == pytest.approx(0.19 / 0.2 - 1)
    assert found["var_ratio"] == pytest.approx(5.0 / 0.5)
    assert found["soft_bias"] == -0.03


@pytest.fixture(scope="module")
def widget():
    return ch10.widget_runs()


def test_ch10_walks_the_saved_widget_runs(widget) -> None:
    runs, grid, source = widget
    assert source.startswith("the saved") and len(grid) >= len(runs.records)
    found = ch10.gate_collapse(runs)
    for key in ("h_slow", "h_fast", "h_slowest", "h_first", "h_last"):
        assert 0 <= found[key] <= math.log(2) + 1e-6, key
    assert found["slowest_rate"] <= 1.0 <= found["fast_rate"]
    assert found["t_first"] < found["t_last"]


def test_ch10_grid_table_averages_every_unfrozen_run_once_per_setting(widget) -> None:
    _, grid, _ = widget
    summary = ch10.widget_grid(grid)
    table = ch10.grid_table(grid)
    assert len(table.columns) <= MOST_COLUMNS
    unfrozen = int((grid["freeze_at"] == 0).sum())
    assert summary["unfrozen"] == unfrozen
    rates = table[table["setting"].str.startswith("selector rate")]
    assert rates["runs"].sum() == unfrozen
    assert rates["final entropy"].max() == pytest.approx(summary["h_undecided"])
    assert rates["final entropy"].min() == pytest.approx(summary["h_collapsed"])
    for row in table.itertuples():
        expected = (
            "undecided"
            if row[2] > ch10.UNDECIDED
            else "collapsed"
            if row[2] < ch10.COLLAPSED
            else "between"
        )
        assert row[4] == expected


def test_ch10_decision_table_applies_the_papers_rule(widget) -> None:
    runs, _, _ = widget
    table = ch10.decision_table(runs)
    assert list(table["T_freeze"]) == sorted(t for t in runs.values("freeze_at") if t)
    assert table["mean entropy then"].between(0, math.log(2) + 1e-6).all()
    assert (table["rule fires"] == (table["mean entropy then"] >= 0.1)).all()
    strict = ch10.decision_table(runs, eps_h=float(table["mean entropy then"].max()))
    assert strict["rule fires"].sum() >= 1  # the most undecided epoch still fires


def test_ch10_numbers_hold_every_name_the_chapter_glues(widget) -> None:
    runs, grid, _ = widget
    found = ch10.numbers(*_moments(), runs, grid)
    assert glued_in("10") <= set(found)
    summary = ch10.widget_grid(grid)
    text = str(getattr(found["finding"], "data", found["finding"]))
    if (
        summary["h_collapsed"]
        < ch10.COLLAPSED
        < ch10.UNDECIDED
        < summary["h_undecided"]
    ):
        assert f"×{summary['rate_collapsed']:g}" in text


# ---------------------------------------------------------------------- chapter 13


def test_ch13_paper_perplexity_orders_its_bounds() -> None:
    table = ch13.paper_perplexity()
    assert (table["floor 2^e"] <= table["Fano best ≤"]).all()
    assert (table["Fano best ≤"] < table["uniform"]).all()
    assert len(table.columns) <= MOST_COLUMNS
    found = ch13.perplexity_facts()
    assert found["fano"] == table["Fano best ≤"].max()
    (_, accuracy, low), (_, _, high) = ch13.PAPER_TAGGERS
    assert found["gap_nats"] == pytest.approx(math.log(high) - math.log(low))
    assert found["smoothed_floor"] > perplexity_bounds(accuracy, ch13.PTB_TAGS).lower
    assert found["smoothed_raise"] > 0
    for _, _, reported in ch13.PAPER_TAGGERS:
        error = ch13.fano_error(reported)
        bounds = perplexity_bounds(1 - error, ch13.PTB_TAGS)
        assert bounds.fano_best == pytest.approx(reported)


@pytest.fixture(scope="module")
def language():
    splits = {
        "ptb_pos": data.for_profile("ptb_pos", "quick"),
        "sst2": data.for_profile("sst2", "quick"),
    }
    return splits, saved("autonorm_language"), saved("autonorm_gates")


def test_ch13_tables_are_consistent_with_the_sets(language) -> None:
    splits, lang, gates = language
    stand_ins = ch13.stand_ins(splits)
    k = stand_ins["classes"]
    ceiling = 1 - stand_ins["labels redrawn"] * (k - 1) / k
    assert ceiling.to_numpy() == pytest.approx(stand_ins["ceiling"].to_numpy())
    freezing = ch13.freezing_on_off(lang, gates)
    assert freezing["froze"].between(0, 1).all()
    assert (freezing["low"] <= freezing["on − off"]).all()
    assert (freezing["on − off"] <= freezing["high"]).all()
    accuracy = ch13.accuracy_table(lang.results)
    for row in accuracy.itertuples():
        assert row.verdict == claims.evaluate(row.id).verdict
    for table in (freezing, accuracy, ch13.progress(gates.results)):
        assert len(table.columns) <= MOST_COLUMNS


def test_ch13_numbers_hold_every_name_the_chapter_glues(language) -> None:
    found = ch13.numbers(*language)
    assert glued_in("13") <= set(found)
    text = str(getattr(found["finding"], "data", found["finding"]))
    for claim_id in ("N8", "N9", "N10"):
        assert claims.evaluate(claim_id).verdict in text


# ---------------------------------------------------------------------- chapter 14


def test_ch14_constant_bound_is_attained_and_widened_by_the_training_mean() -> None:
    assert ch14.constant_bound(6.0, 48.0) == 21.0
    ends = torch.tensor([6.0, 48.0] * 50)
    rmse = float(((ends - 27.0) ** 2).mean().sqrt())
    assert rmse == pytest.approx(ch14.constant_bound(6.0, 48.0))
    assert ch14.constant_bound(6.0, 48.0, n=100) > ch14.constant_bound(6.0, 48.0)
    with pytest.raises(ValueError):
        ch14.constant_bound(2.0, 1.0)
    bounds = ch14.energy_bounds()
    ratio = ch14.PAPER_ENERGY_RMSE / bounds["constant's RMSE ≤"]
    assert bounds["paper / bound"].to_numpy() == pytest.approx(ratio.to_numpy())


def test_ch14_numbers_read_n12_and_fit_the_column() -> None:
    tabular = saved("autonorm_tabular")
    found = ch14.numbers(tabular, reference_mean=5.0, test_rows=100)
    assert glued_in("14") <= set(found)
    ((_, effect, _),) = claims.evaluate("N12").effects
    assert (found["rel"], found["rel_half"]) == (effect.mean, effect.half)
    assert found["direction"] == ("larger" if effect.mean > 0 else "smaller")
    table = ch14.equivalence(tabular.results)
    assert len(table.columns) <= MOST_COLUMNS
    assert (table["95% low"] <= table["difference"]).all()
    assert (table["equivalent"] == (table["smallest"] < table["margin"])).all()


# ---------------------------------------------------------------------- chapter 15


def test_ch15_matched_tables_pair_the_arms_drops() -> None:
    robust = saved("autonorm_robustness")
    per_arm, paired = ch15.matched(robustness_run_table(robust.records()))
    assert len(per_arm) == 2 * len(paired)
    assert max(len(per_arm.columns), len(paired.columns)) <= MOST_COLUMNS
    for row in paired.itertuples():
        at = per_arm[per_arm["lr"] == row.lr].set_index("arm")["drop"]
        assert row[2] == pytest.approx(at["FrozenLN"] - at["AutoNorm-S"], abs=1e-9)
        assert row.low <= row[2] <= row.high


def test_ch15_numbers_read_n7_and_the_plateau() -> None:
    robust = saved("autonorm_robustness")
    found = ch15.numbers(robust, test_images=1500)
    assert glued_in("15") <= set(found)
    ((_, effect, _),) = claims.evaluate("N7").effects
    assert found["drop"] == effect.mean and found["drop_half"] == effect.half
    assert 0 <= found["matched_less"] <= found["matched_rates"]
    assert found["chance"] < found["needs"]
    plateau = ch15.plateau_table(robust.records())
    levelled = plateau["levelled off"].all()
    assert found["plateau"] == ("long enough" if levelled else "not long enough")
    raw = ch15.plateau(robust.records())
    for row in plateau.itertuples():
        assert row[2] == raw[f"early_{row.normaliser}"]


# ---------------------------------------------------------- shared by chapters 13-15


def test_schedule_table_and_resolve_read_the_sets() -> None:
    runs = saved("autonorm_tabular").results
    table = part2.schedule_table(runs)
    assert set(table["schedule"]) <= set(part2.SCHEDULE_WORDS.values())
    assert len(table) == len(part2.schedule(runs))
    cost, words = part2.resolve(["N12"])
    text = str(getattr(words, "data", words))
    inconclusive = claims.evaluate("N12").verdict == "inconclusive"
    assert (not cost.empty) == inconclusive
    assert ("N12" in text) == inconclusive
    assert not cost.isna().all().any()  # no empty column
    verdicts = part2.verdicts(["N12", "N7"])
    assert list(verdicts["id"]) == ["N12", "N7"]
    assert len(verdicts.columns) <= MOST_COLUMNS


def test_ch10_gate_collapse_walks_fabricated_runs() -> None:
    from normlab.widgets import GateRuns

    def record(selector_lr: float, freeze_at: int, entropy: float) -> dict:
        gates = [
            {"epoch": e, "layer": layer, "entropy": entropy / e}
            for e in (1, 2)
            for layer in ("a", "b")
        ]
        return {
            "config": {
                "data": "mnist",
                "tau": 0.5,
                "selector_lr": selector_lr,
                "hard": False,
                "freeze_at": freeze_at,
                "seed": 0,
            },
            "gates": gates,
            "metrics": {"val_metric": 0.5 + selector_lr / 100},
            "entropy_records": [{"epoch": freeze_at, "mean": entropy / 4}],
        }

    runs = GateRuns(
        record(lr, t, 0.6 if lr == 1.0 else 0.1)
        for lr in (1.0, 10.0)
        for t in (0, 1, 2)
    )
    found = ch10.gate_collapse(runs)
    assert found["h_slow"] == pytest.approx(0.3) and found["h_fast"] == pytest.approx(
        0.05
    )
    assert (found["fast_rate"], found["t_first"], found["t_last"]) == (10.0, 1, 2)
    assert found["h_first"] == pytest.approx(0.15)
    assert found["acc_fast"] == pytest.approx(0.6)


def test_ch15_plateau_reads_the_chosen_runs_validation_curves() -> None:
    """Two arms, two rates, two seeds: the rate with the better final validation accuracy
    is each arm's choice, and only its curves enter the early rise and the late change."""

    def record(name: str, lr: float, seed: int, curve: list[float]) -> dict:
        return {
            "run_id": f"{name}-{lr}-{seed}",
            "config": {"data": "mnist", "normaliser": name, "lr": lr, "seed": seed},
            "metric": "accuracy",
            "higher_is_better": True,
            "metrics": {"val_metric": curve[-1]},
            "history": [{"val_accuracy": v} for v in curve],
        }

    records = [
        record("frozen_ln", 0.1, 0, [0.1, 0.5, 0.7, 0.8, 0.8, 0.81]),
        record("frozen_ln", 0.1, 1, [0.2, 0.5, 0.7, 0.8, 0.8, 0.79]),
        record("frozen_ln", 0.01, 0, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
        record("frozen_ln", 0.01, 1, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
        record("autonorm_s", 0.1, 0, [0.1, 0.2, 0.3, 0.4, 0.5, 0.7]),
        record("autonorm_s", 0.1, 1, [0.1, 0.2, 0.3, 0.4, 0.5, 0.7]),
    ]
    found = ch15.plateau(records)
    assert found["late_epochs"] == 2  # a third of six epochs
    assert found["early_frozen_ln"] == pytest.approx((0.7 + 0.6) / 2)  # to epoch 4
    assert found["late_frozen_ln"] == pytest.approx((0.01 - 0.01) / 2)
    assert found["late_autonorm_s"] == pytest.approx(0.3)  # still rising


def test_part2_means_are_keyed_by_their_columns() -> None:
    table = pd.DataFrame({"data": ["a", "b"], "normaliser": ["x", "y"], "mean": [1, 2]})
    assert part2.means(table, ["data", "normaliser"]) == {"a_x": 1.0, "b_y": 2.0}
