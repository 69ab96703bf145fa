"""normlab.chapters.ch06-ch08: each chapter's numbers agree with what the analysis functions
compute from the saved sets, lie within their bounds and have the types the prose glues."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from normlab import claims
from normlab.analysis import part1 as analysis_part1
from normlab.chapters import ch06, ch07, ch08
from normlab.claims.pairing import at_chosen_lr
from normlab.experiments import part1
from normlab.stats import interval, slopes_log2

GLUED = (int, float, str, bool)


@pytest.fixture(scope="module")
def fc() -> pd.DataFrame:
    return ch06.load()[0]


@pytest.fixture(scope="module")
def bs() -> pd.DataFrame:
    return ch07.load()[0]


@pytest.fixture(scope="module")
def cnn() -> pd.DataFrame:
    return ch08.load()[0]


def _glued(values: dict, prefix: str) -> None:
    assert values and all(k.startswith(prefix) for k in values)
    assert all(isinstance(v, GLUED) for v in values.values())
    for value in values.values():
        if isinstance(value, float):
            assert np.isfinite(value)


# chapter 6 ---------------------------------------------------------------------------


def test_ch06_ranking_is_the_chosen_rate_mean_of_every_normaliser(fc) -> None:
    ranks = ch06.ranking(fc)
    assert set(ranks["normaliser"]) == set(part1.BOOK_NORMALISERS)
    assert ranks["mean"].is_monotonic_decreasing
    assert ranks["rank"].tolist() == list(range(1, len(ranks) + 1))
    cell = fc[(fc["source"] == "mnist_5k") & (fc["init"] == "xavier_normal")]
    cell = cell[(cell["optimizer"] == "sgd") & (cell["head"] == "same")]
    cell = cell[(cell["depth"] == 3) & (cell["width"] == 128)]
    cell = at_chosen_lr(cell[cell["activation"] == "tanh"])
    expected = cell.groupby("normaliser")["test_metric"].mean()
    got = ranks.set_index("normaliser")["mean"]
    assert np.allclose(got.loc[expected.index], expected)
    assert ((ranks["mean"] > 0.1) & (ranks["mean"] < 1)).all()


def test_ch06_seed_differences_pair_by_seed(fc) -> None:
    rows = ch06.cell_runs(fc)
    diff = ch06.seed_differences(rows, "affine_like", "none")
    a = rows[rows["normaliser"] == "affine_like"].set_index("seed")["test_metric"]
    b = rows[rows["normaliser"] == "none"].set_index("seed")["test_metric"]
    assert np.allclose(diff, (a - b).dropna().loc[diff.index])
    assert (diff.index.isin(a.index) & diff.index.isin(b.index)).all()


def test_ch06_finding_agrees_with_the_ranking(fc) -> None:
    found = ch06.finding(fc)
    ranks = ch06.ranking(fc).set_index("normaliser")["rank"]
    worst = set(ranks.sort_values().index[-3:])
    assert found["worst_are_factor"] == (worst == set(ch06.FACTOR_LAYERS))
    assert found["factor_ranks"] == [int(ranks[n]) for n in ch06.FACTOR_LAYERS]
    widths = found["deficit_by_width"]
    assert found["deficit_grows"] == (widths[max(widths)] > widths[min(widths)])
    assert len(found["sentences"]) == 3
    for sentence in found["sentences"]:
        numbers = [t for t in sentence.split() if any(c.isdigit() for c in t)]
        assert len(numbers) <= 5  # at most three quoted, plus "1 or 2" and a width


def test_ch06_deficit_is_the_paired_interval(fc) -> None:
    table = ch06.deficit_by_width(fc)
    row = table[(table["width"] == 128) & (table["normaliser"] == "affine_like")].iloc[
        0
    ]
    rows = ch06.cell_runs(fc, width=128)
    ci = interval(ch06.seed_differences(rows, "affine_like", "none"))
    assert row["mean"] == pytest.approx(ci.mean) and row["n"] == ci.n


def test_ch06_tables_fit_and_numbers_glue(fc) -> None:
    assert len(ch06.edges(fc).columns) <= 6
    curve = ch06.curve(fc)
    assert curve["primary"].iloc[0] and set(curve["claim"]) == {"A8", "A15"}
    assert curve["verdict"].astype(bool).all()
    heads = ch06.heads(fc)
    assert set(heads["normaliser"]) == set(part1.CORRECTIONS)
    values = ch06.numbers(fc)
    _glued(values, "ch6_")
    assert values["ch6_lr_ratio"] == pytest.approx(
        values["ch6_lr_affine"] / values["ch6_lr_none"]
    )
    assert 0 <= values["ch6_curve_agree"] <= values["ch6_curve_other"]
    assert values["ch6_sq_mnist"] > values["ch6_sq_digits"] > 0
    for claim_id in ch06.CLAIMS:
        assert claims.evaluate(claim_id).verdict in values[f"ch6_{claim_id}"]


def test_ch06_figure_has_two_panels(fc) -> None:
    figure = ch06.finding_figure(fc)
    assert len(figure.axes) == 2


# chapter 7 ---------------------------------------------------------------------------


def test_ch07_fixed_slopes_are_batch_slopes(bs) -> None:
    slopes = ch07.fixed_slopes(bs)
    expected, scores = analysis_part1.batch_slopes(bs[bs["budget"] == "fixed_epochs"])
    got = slopes.set_index("normaliser")["mean"]
    want = expected.set_index("normaliser")["mean"]
    assert np.allclose(got.loc[want.index], want)
    assert slopes["mean"].is_monotonic_increasing
    one = scores[scores["normaliser"] == "none"]
    seeds = ch07.seed_slopes(bs)["none"].dropna()
    assert np.allclose(seeds, slopes_log2(one, "batch_size", "test_metric"))


def test_ch07_contrast_is_each_correction_minus_the_others_mean(bs) -> None:
    per = ch07.seed_slopes(bs)
    contrast = ch07.fixed_contrast(bs).set_index("normaliser")
    for name in part1.CORRECTIONS:
        want = (per[name] - per[list(part1.PART1_RIVALS)].mean(axis=1)).mean()
        assert contrast.loc[name, "mean"] == pytest.approx(want)


def test_ch07_effects_list_every_effect_of_each_claim(bs) -> None:
    table = ch07.effects()
    for claim_id in ch07.CLAIMS:
        outcome = claims.evaluate(claim_id)
        mine = table[table["claim"] == claim_id]
        assert len(mine) == len(outcome.judged)
        assert mine["verdict"].tolist() == [j.verdict for j in outcome.judged]
        assert mine["margin"].tolist() == [j.margin for j in outcome.judged]
        assert mine["n"].tolist() == [j.n for j in outcome.judged]


def test_ch07_steps_and_scaling_agree_with_the_batch_analysis(bs) -> None:
    steps = ch07.steps_table(bs)
    assert (steps.columns == sorted(steps.columns)).all()
    assert (steps.to_numpy() > 0).all()
    scaling = ch07.scaling(bs)
    assert scaling["mean"].is_monotonic_increasing
    assert (
        (scaling["low"] <= scaling["mean"]) & (scaling["mean"] <= scaling["high"])
    ).all()
    share = ch07.coupling(bs)
    assert ((share.to_numpy() > 0) & (share.to_numpy() < 1)).all()
    sizes = np.array(share.columns, dtype=float)
    assert (share.to_numpy() <= (sizes - 1) / sizes + 1e-9).all(), "at most (B-1)/B"


def test_ch07_finding_and_numbers(bs) -> None:
    found = ch07.finding(bs)
    slopes = found["fixed"]
    steepest = set(slopes.index[:2])
    assert found["corrections_steepest"] == (steepest == set(part1.CORRECTIONS))
    assert 0 <= found["rivals_falling"] <= len(part1.PART1_RIVALS)
    values = ch07.numbers(bs)
    _glued(values, "ch7_")
    assert values["ch7_factor"] >= 64
    assert values["ch7_share_grows"].startswith("for ")
    assert 0 < values["ch7_share_small"] <= values["ch7_share_large"] < 1


# chapter 8 ---------------------------------------------------------------------------


def test_ch08_finding_is_the_claims_effect(cnn) -> None:
    found = ch08.finding(cnn)
    (want,) = claims.judge(claims.get("A14"), cnn).judged
    assert found["effect"].interval.mean == pytest.approx(want.interval.mean)
    assert found["effect"].verdict == want.verdict
    ranks = found["ranking"]
    assert ranks["mean"].is_monotonic_decreasing and len(ranks) == 6
    values = ch08.numbers(cnn)
    _glued(values, "ch8_")
    assert values["ch8_margin_images"] == round(0.01 * values["ch8_test_images"])
    assert 0 < values["ch8_share_affine"] < 1 and 0 < values["ch8_share_norm"] < 1
    assert 0 < values["ch8_reach_high"] < 1


def test_ch08_margins_and_position_share(cnn) -> None:
    margins = ch08.margins(cnn)
    assert margins["nets"].iloc[0] == "convolutional"
    (want,) = claims.get("A14").test.quantity(cnn)
    assert margins["mean"].iloc[0] == pytest.approx(np.mean(want.samples))
    share = ch08.position_share(cnn)
    assert share["mean"].is_monotonic_increasing
    assert ((share["mean"] > 0) & (share["mean"] < 1)).all()


def test_ch08_the_floor_is_what_explodes() -> None:
    grads, values = ch08.floor_gradients()
    assert values["ch8_bias_ratio"] > 1e6
    assert 0 < values["ch8_blank_2"] <= 1 and 0 < values["ch8_blank_1"] <= 1
    assert "parameter" in grads.columns and len(grads.columns) <= 6
    by = grads.set_index("parameter")
    others = by.drop(index="features.0.bias")
    old, new = by.columns[0], by.columns[1]  # norm-like under the old floor, then 1
    assert (others[old] < 10 * others[new]).all(), "only the first bias explodes"


def test_band_words_name_the_arms_outside_the_band() -> None:
    from normlab.chapters._common import CEILING, band_words

    inside = pd.Series({"none": 0.8, "layernorm": 0.9})
    assert "0.800 to 0.900" in band_words(inside, 0.1)
    outside = pd.Series({"none": 0.8, "l2": 0.15, "layernorm": CEILING + 0.01})
    words = band_words(outside, 0.1)
    assert "L2" in words and "LayerNorm" in words and "0.800" not in words
    assert "0.150" in band_words(pd.Series({"l2": 0.15, "none": 0.5}), None)


def test_the_appendix_worked_example_is_what_normlab_stats_computes() -> None:
    from pathlib import Path

    from normlab import stats

    text = (
        Path(__file__).resolve().parents[1] / "book/appendix_decides.md"
    ).read_text()
    d = [0.012, 0.008, 0.015, 0.010, 0.005]
    seeds = stats.interval(d)
    both = stats.interval(d, item_var=1e-6)
    assert f"0.010 \\pm {seeds.half:.4f} = [{seeds.low:.4f}, {seeds.high:.4f}]" in text
    assert f"$s = {seeds.sd:.4f}$" in text
    assert f"0.010 \\pm {both.half:.4f}" in text
    assert f"the MDE is {stats.mde(both.sd, 5, item_var=1e-6):.4f}" in text
    levels = 1 - stats.holm_levels([0.001, 0.03])
    assert f"on its {levels[0]:.1%} interval".replace("%", " %") in text


PART1_EXPERIMENTS = ("06_fc_normalisers", "07_batch_size", "08_patchnorm_cnns")


@pytest.mark.parametrize("name", PART1_EXPERIMENTS)
def test_chapter_opens_with_its_finding_from_one_hidden_cell(name: str) -> None:
    """Its prose's words and glued values: tests/test_book_prose.py, for every page."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "book" / f"{name}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert "\n## The finding\n" in markdown[0]
    hidden = [
        c
        for c in cells[1:]  # the first is the Colab install cell
        if c["cell_type"] == "code"
        and {"remove-cell", "hide-input", "remove-input"}
        & set(c["metadata"].get("tags", []))
    ]
    assert len(hidden) == 1 and "numbers(" in "".join(hidden[0]["source"])


def _cited(name: str) -> set[str]:
    import json
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "book" / f"{name}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return set(re.findall(r"\{glue(?::\w+)?\}`(ch\d_[A-Za-z0-9_]+)", text))


def test_each_module_returns_every_name_its_chapter_glues(fc, bs, cnn) -> None:
    coupling = pd.DataFrame(
        {
            "init": ["xavier_normal"],
            "normaliser": ["affine_like"],
            "pair coupling": [0.5],
            "hidden |x|": [1.0],
        }
    )
    assert _cited("06_fc_normalisers") <= set(ch06.numbers(fc, coupling))
    assert _cited("07_batch_size") <= set(ch07.numbers(bs))
    floor = {"ch8_blank_1", "ch8_blank_2", "ch8_bias_ratio", "ch8_step_old"}
    assert _cited("08_patchnorm_cnns") - floor <= set(ch08.numbers(cnn))
