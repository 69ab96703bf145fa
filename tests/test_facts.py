"""normlab.facts: the numbers Part II's chapters glue, gathered from the saved sets."""

from __future__ import annotations

import pandas as pd
import pytest
from normlab import claims, facts, results
from normlab.analysis import gates as ag
from normlab.experiments import gate_study as gs


@pytest.fixture(scope="module")
def bottleneck():
    saved = results.largest("gate_bottleneck")
    assert saved is not None
    return saved


def test_power_table_holds_what_the_scorecard_says() -> None:
    from normlab.claims.judging import evaluate

    table = facts.power_table(["N1", "N5"])
    outcome = evaluate("N1")
    assert list(table["id"].unique()) == ["N1", "N5"]
    first = table[table["id"] == "N1"].iloc[0]
    label, ci, verdict = outcome.effects[0]
    assert first["effect"] == label and first["verdict"] == verdict
    assert first["estimate"] == pytest.approx(ci.mean)
    assert (table["mde"] > 0).all() and (table["seeds"] >= 2).all()
    resolved = table["verdict"] != "inconclusive"
    assert table.loc[resolved, "to resolve"].isna().all()


def test_verdict_of_a_claim_on_one_effect() -> None:
    found = facts.verdict("N12", no_note="no note")
    assert found["verdict"].data.startswith("*") and found["half"] >= 0
    assert set(found) == {"verdict", "seeds", "diff", "half", "note"}


def test_plan_cost_prices_the_seeds_a_plan_asks_beyond_the_set() -> None:
    from normlab.claims.judging import evaluate
    from normlab.experiments import get as experiment
    from normlab.experiments.costs import CPU_BUDGET_MIN

    ids = ["A8", "A11", "A15", "N13"]
    cost = facts.plan_cost(ids).set_index("id")
    for claim_id in ids:
        outcome = evaluate(claim_id)
        seeds, items = outcome.planned
        held = max(j.n for j in outcome.judged)  # the seeds its verdict read
        assert (claim_id in cost.index) == (seeds > held or bool(items)), claim_id
        if claim_id in cost.index:
            assert cost.loc[claim_id, "seeds"] == held
    # the fc set holds A8's and A15's planned seeds; A11's plan, its test set's noise
    # measured item by item and the runs' disagreement left to the seeds' spread, asks
    # for more seeds than the set holds, each a run of A11's cell per correction
    assert "A8" not in cost.index and "A15" not in cost.index
    a11 = cost.loc["A11"]
    assert a11["planned seeds"] == evaluate("A11").planned[0] > a11["seeds"]
    assert a11["runs to plan"] > 0
    met = facts.plan_cost(["A8"])  # nothing to add: no rows, the same columns
    assert met.empty and list(met.columns) == list(cost.reset_index().columns)
    # N13's plan asks for more seeds than its set holds: a missing pilot seed would run
    # every rate of every arm it compares, the rest each of them at the rate the pilot chose
    row = cost.loc["N13"]
    assert row["planned seeds"] == evaluate("N13").planned[0] > row["seeds"]
    saved = results.largest(claims.get("N13").test.experiment)
    read = facts._claim_runs("N13", evaluate("N13"), saved.results)
    grid = experiment(claims.get("N13").test.experiment).grid("cpu")
    per_pilot = (read["seed"] == read["seed"].min()).sum()
    per_cell = len(read[[a for a in grid.axes if a != "lr"]].drop_duplicates())
    pilot = max(claims.plans.PILOT_SEEDS - row["seeds"], 0)
    more = row["planned seeds"] - row["seeds"] - pilot
    assert row["runs to plan"] == pilot * per_pilot + more * per_cell
    per_run = read["seconds"].mean()  # what the runs it reads took
    assert row["CPU-hours"] == pytest.approx(row["runs to plan"] * per_run / 3600)
    assert row["budgets"] == pytest.approx(row["CPU-hours"] * 60 / CPU_BUDGET_MIN)
    text = facts.plan_plainly(cost.reset_index(), 5000).data
    assert f"**N13**'s plan asks for {int(row['planned seeds'])} seeds" in text
    assert f"{int(row['runs to plan']):,} runs" in text
    assert f"**A11**'s plan asks for {int(a11['planned seeds']):,} seeds" in text
    empty = facts.plan_plainly(facts.plan_cost([])).data
    assert empty.startswith("Every plan of this chapter")


def test_resolve_cost_prices_what_the_scorecard_says_is_needed() -> None:
    from normlab.claims.judging import evaluate
    from normlab.claims.rules import INCONCLUSIVE
    from normlab.experiments.costs import CPU_BUDGET_MIN

    ids = ["N8", "N9", "N12"]
    cost = facts.resolve_cost(ids).set_index("id")
    inconclusive = [i for i in ids if evaluate(i).verdict == INCONCLUSIVE]
    assert list(cost.index) == inconclusive  # resolved claims have no row
    for claim_id, row in cost.iterrows():
        outcome = evaluate(claim_id)
        assert row["seeds needed"] == outcome.n_needed
        saved = results.largest(claims.get(claim_id).test.experiment)
        read = facts._claim_runs(claim_id, outcome, saved.results)  # what it compares
        # a set afresh: the pilot's seeds at every rate, the rest at the chosen rate
        pilot = min(row["seeds needed"], claims.plans.PILOT_SEEDS)
        per_pilot = (read["seed"] == read["seed"].min()).sum()
        from normlab.experiments import get as experiment

        grid = experiment(claims.get(claim_id).test.experiment).grid("cpu")
        per_cell = len(read[[a for a in grid.axes if a != "lr"]].drop_duplicates())
        assert row["runs needed"] == (
            pilot * per_pilot + (row["seeds needed"] - pilot) * per_cell
        )
        per_run = read["seconds"].mean()  # what the runs it reads took
        assert row["CPU-hours"] == pytest.approx(row["runs needed"] * per_run / 3600)
        assert row["budgets"] == pytest.approx(row["CPU-hours"] * 60 / CPU_BUDGET_MIN)


def test_gate_seeds_held_names_the_cells_run_further() -> None:
    base = [
        {"data": d, "arm": a, "lr": lr, "seed": s}
        for d in ("mnist", "mnist_restyled")
        for a in ("frozen_ln", "autonorm", "freeze_at_3")
        for lr in (1e-3, 3e-3)
        for s in range(3)
    ]
    further = [
        {"data": "mnist_restyled", "arm": a, "lr": lr, "seed": s}
        for a in ("freeze_at_3", "frozen_ln")
        for lr in (1e-3, 3e-3)
        for s in (3, 4)
    ] + [
        {"data": "mnist_restyled", "arm": a, "lr": 3e-3, "seed": s}
        for a in ("freeze_at_3", "frozen_ln")
        for s in range(5, 9)
    ]
    words = facts.gate_seeds_held(pd.DataFrame(base + further)).data
    assert words == (
        "3 seeds of every arm at every rate; on the restyled 8×8 digits, FrozenLN and "
        "the gate frozen at epoch 3 have 9 (5 at every rate, the other 4 at the rate "
        "those 5 chose)"
    )
    assert facts.gate_seeds_held(pd.DataFrame(base)).data == (
        "3 seeds of every arm at every rate"
    )


def test_verdict_gives_the_seeds_its_effects_read() -> None:
    from normlab.claims.judging import evaluate

    found = facts.verdict("N5")
    assert found["seeds"] == max(j.n for j in evaluate("N5").judged)
    assert facts.verdict("A1")["seeds"] == 0  # exact: no seeds


def test_a_plans_runs_are_the_arms_its_effects_compare(bottleneck) -> None:
    """A further seed of N13 adds the soft and the hard gate on each task; of N5 in the
    short budget FrozenLN and AutoNorm-S's two runs on real MNIST, in the regime past the
    plateau FrozenLN and AutoNorm-S's one; N14 names no arms, so every arm counts."""
    from normlab.claims.judging import evaluate

    table = bottleneck.results
    regime = results.largest("gate_regime").results
    freeze = f"{gs.FREEZE_PREFIX}{gs.T_FREEZE['cpu']}"
    cases = {
        "N13": (table, {"autonorm", "autonorm_hard"}),
        "N5": (table, {"frozen_ln", "autonorm", freeze}),
        "N14": (table, set(table["arm"])),
    }
    cases["N5 past the plateau"] = (regime, {"frozen_ln", "autonorm_s_ready"})
    cases["N13 past the plateau"] = (regime, {"autonorm", "autonorm_hard"})
    for case, (read_from, arms) in cases.items():
        claim_id = case.split()[0]
        read = facts._claim_runs(claim_id, evaluate(claim_id), read_from)
        assert set(read["arm"]) == arms, case


def test_runs_behind_expands_autonorm_s_into_its_runs() -> None:
    present = ["frozen_ln", "autonorm", "freeze_at_3", "sample_at_3"]
    assert ag.runs_behind(["autonorm_s", "frozen_ln"], present) == [
        "autonorm",
        "freeze_at_3",
        "frozen_ln",
    ]
    assert ag.runs_behind(["autonorm_s_sample"], present) == [
        "autonorm",
        "freeze_at_3",
        "sample_at_3",
    ]
    assert ag.runs_behind(["autonorm_s"], ["autonorm_s", "frozen_ln"]) == ["autonorm_s"]
    assert ag.runs_behind(["strongest of a/b"], present) == []
    assert ag.runs_behind(["autonorm_s"], ["autonorm"]) == []  # no freeze to compose


def test_a_brief_power_table_names_each_effect_without_its_regime() -> None:
    full = facts.power_table(["N3"])
    brief = facts.power_table(["N3"], brief=True)
    assert "low" not in brief and "high" not in brief
    assert len(brief) == len(full)
    for whole, short in zip(full["effect"], brief["effect"], strict=True):
        assert whole.startswith(short + " (") and "(" not in short
    assert brief.drop(columns="effect").equals(
        full.drop(columns=["effect", "low", "high"])
    )
