"""Chapter 11's mechanism analysis (normlab.analysis.mechanism) on small constructed tables:
the pairing by seed, the time to specialise and what each gate commits to."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from normlab.analysis import mechanism as mech

LAYERS = ["encoder.blocks.0.norm1", "encoder.blocks.0.norm2", "encoder.norm"]


def _entropy(p: float) -> float:
    return -sum(q * math.log(q) for q in (p, 1 - p) if q > 0)


def _runs(rng: np.random.Generator) -> pd.DataFrame:
    """Two budgets x two rates; the learned gate at two selector rates, the random one at
    one; seeds 0-3 for the learned gate, 0-2 for the random one (seed 3 unpaired)."""
    rows = []
    for epochs in (3, 8):
        for lr in (1e-3, 1e-2):
            for seed in range(4):
                arms = [("autonorm", 1.0), ("autonorm", 0.1)]
                arms += [("autonorm_random", 1.0)] if seed < 3 else []
                for arm, sel in arms:
                    rows.append(
                        dict(
                            data="mnist",
                            epochs=epochs,
                            init="x",
                            lr=lr,
                            selector_lr=sel,
                            arm=arm,
                            seed=seed,
                            test_metric=float(rng.uniform(0.3, 0.9)),
                        )
                    )
    return pd.DataFrame(rows)


def test_gap_pairs_by_seed_and_one_random_run_partners_every_selector_rate() -> None:
    runs = _runs(np.random.default_rng(0))
    gap = mech.gap_table(runs)
    assert len(gap) == 2 * 2 * 2  # one row per learned cell, selector rates included
    assert (gap["n"] == 3).all()  # seed 3 has no random partner and is dropped
    for row in gap.itertuples():
        mine = runs[
            (runs["arm"] == "autonorm")
            & (runs["epochs"] == row.epochs)
            & (runs["lr"] == row.lr)
            & (runs["selector_lr"] == row.selector_lr)
        ]
        other = runs[
            (runs["arm"] == "autonorm_random")
            & (runs["epochs"] == row.epochs)
            & (runs["lr"] == row.lr)
        ]
        diff = (
            mine.set_index("seed")["test_metric"]
            - other.set_index("seed")["test_metric"]
        ).dropna()
        assert row.mean == pytest.approx(diff.mean())
        assert row.a_mean - row.b_mean == pytest.approx(row.mean)
        assert row.low < row.mean < row.high
        assert row.high - row.mean == pytest.approx(row.ci95)
    # swapping the arms turns the sign and mirrors the interval
    back = mech.gap_table(
        runs[runs["selector_lr"] == 1.0], "autonorm_random", "autonorm"
    )
    same = gap[gap["selector_lr"] == 1.0].reset_index(drop=True)
    assert np.allclose(back["mean"], -same["mean"])
    assert np.allclose(back["low"], -same["high"])


def test_a_cell_without_a_partner_has_no_interval_and_the_band_flags() -> None:
    runs = _runs(np.random.default_rng(1))
    lone = runs[~((runs["arm"] == "autonorm_random") & (runs["epochs"] == 3))]
    gap = mech.gap_table(lone)
    short = gap[gap["epochs"] == 3]
    assert (short["n"] == 0).all() and short["mean"].isna().all()
    runs.loc[runs["arm"] == "autonorm_random", "test_metric"] = 0.15  # at chance + 0.05
    flagged = mech.gap_table(runs, chance=0.1)
    assert not flagged["trained"].any()
    runs.loc[runs["arm"] == "autonorm_random", "test_metric"] = 0.5
    runs.loc[runs["arm"] == "autonorm", "test_metric"] = 0.6
    assert mech.gap_table(runs, chance=0.1)["trained"].all()


def _gates(p_dyt: dict[tuple[int, str], list[float]]) -> pd.DataFrame:
    """A gate table: per (seed, layer) the DyT weight at epochs 1, 2, ..."""
    rows = []
    for (seed, layer), weights in p_dyt.items():
        for epoch, p in enumerate(weights, start=1):
            rows.append(
                dict(
                    run_id=f"r{seed}",
                    data="mnist",
                    epochs=len(weights),
                    init="x",
                    lr=1e-2,
                    selector_lr=1.0,
                    arm="autonorm",
                    seed=seed,
                    layer=layer,
                    position=LAYERS.index(layer),
                    epoch=epoch,
                    p_dyt=p,
                    p_ln=1 - p,
                    entropy=_entropy(p),
                )
            )
    return pd.DataFrame(rows)


def _random_gates(
    rng: np.random.Generator, seeds: int = 4, epochs: int = 6
) -> pd.DataFrame:
    return _gates(
        {
            (s, layer): list(rng.uniform(0.005, 0.995, epochs))
            for s in range(seeds)
            for layer in LAYERS
        }
    )


def test_a_commitment_is_the_first_epoch_below_the_threshold() -> None:
    gates = _random_gates(np.random.default_rng(2))
    held = mech.commitments(gates)
    assert len(held) == 4 * len(LAYERS)
    for row in held.itertuples():
        layer = gates[(gates["run_id"] == row.run_id) & (gates["layer"] == row.layer)]
        layer = layer.sort_values("epoch")
        if math.isnan(row.epoch_committed):
            assert pd.isna(row.to)
            assert (layer["entropy"] >= mech.SPECIALISED_AT).all()
            continue
        before = layer[layer["epoch"] < row.epoch_committed]
        at = layer[layer["epoch"] == row.epoch_committed].iloc[0]
        assert (before["entropy"] >= mech.SPECIALISED_AT).all()
        assert at["entropy"] < mech.SPECIALISED_AT
        assert row.to == ("dyt" if at["p_dyt"] > 0.5 else "ln")
    assert set(held["slot"]) == {"pre-attention", "pre-MLP", "final"}


def test_a_lower_threshold_never_commits_earlier() -> None:
    gates = _random_gates(np.random.default_rng(3))
    loose = mech.commitments(gates, 0.5)["epoch_committed"].fillna(np.inf)
    strict = mech.commitments(gates, 0.1)["epoch_committed"].fillna(np.inf)
    assert (strict >= loose).all() and (strict > loose).any()
    loose = mech.specialisation_table(gates, 0.5)["epoch_specialised"].fillna(np.inf)
    strict = mech.specialisation_table(gates, 0.1)["epoch_specialised"].fillna(np.inf)
    assert (strict >= loose).all()
    with pytest.raises(ValueError, match="threshold"):
        mech.commitments(gates, 0.0)
    with pytest.raises(ValueError, match="threshold"):
        mech.specialisation_table(gates, 0.8)


def test_a_run_specialises_on_its_mean_over_layers_not_on_one_layer() -> None:
    # seed 0: one gate decided at once, two undecided throughout; seed 1: all decide in
    # epoch 2, the pre-MLP one towards DyT, the others towards LayerNorm
    gates = _gates(
        {
            (0, LAYERS[0]): [0.999, 0.999, 0.999],
            (0, LAYERS[1]): [0.5, 0.5, 0.5],
            (0, LAYERS[2]): [0.5, 0.5, 0.5],
            (1, LAYERS[0]): [0.5, 0.02, 0.01],
            (1, LAYERS[1]): [0.5, 0.98, 0.99],
            (1, LAYERS[2]): [0.5, 0.02, 0.01],
        }
    )
    spec = mech.specialisation_table(gates).set_index("seed")
    assert math.isnan(spec.loc[0, "epoch_specialised"])
    assert spec.loc[1, "epoch_specialised"] == 2.0
    assert spec.loc[1, "entropy_final"] < spec.loc[1, "entropy_first"]
    held = mech.commitments(gates).set_index(["seed", "slot"])
    assert held.loc[(0, "pre-attention"), "epoch_committed"] == 1.0
    assert held.loc[(1, "pre-MLP"), "to"] == "dyt"
    assert held.loc[(1, "final"), "to"] == "ln"


def test_the_mechanism_table_joins_shares_to_the_gap() -> None:
    rng = np.random.default_rng(4)
    gates = _random_gates(rng, seeds=3, epochs=8)
    runs = pd.DataFrame(
        [
            dict(
                data="mnist",
                epochs=8,
                init="x",
                lr=1e-2,
                selector_lr=1.0,
                arm=arm,
                seed=s,
                test_metric=float(rng.uniform(0.3, 0.9)),
            )
            for arm in ("autonorm", "autonorm_random")
            for s in range(3)
        ]
    )
    table = mech.mechanism_table(runs, gates, early=2)
    assert len(table) == 1
    row = table.iloc[0]
    for column in ("specialised", "early", "to_dyt pre-MLP", "committed pre-MLP"):
        assert 0.0 <= row[column] <= 1.0
    assert row["early"] <= row["specialised"]
    assert row["to_dyt pre-MLP"] <= row["committed pre-MLP"]
    spec = mech.specialisation_table(gates)
    assert row["specialised"] == pytest.approx(spec["epoch_specialised"].notna().mean())


def test_at_chosen_rates_each_arm_takes_its_best_rate_on_validation() -> None:
    runs = _runs(np.random.default_rng(5))
    runs = runs[runs["selector_lr"] == 1.0].copy()
    # validation favours the learned gate at 1e-2 and the random one at 1e-3
    runs["val_metric"] = np.where(
        (runs["arm"] == "autonorm") == (runs["lr"] == 1e-2), 0.8, 0.4
    )
    runs["higher_is_better"] = True
    runs["diverged"] = False
    table = mech.chosen_gap_table(runs)
    assert len(table) == 2  # one row per budget
    assert (table["lr_a"] == 1e-2).all() and (table["lr_b"] == 1e-3).all()
    for row in table.itertuples():
        mine = runs[
            (runs["epochs"] == row.epochs)
            & (
                ((runs["arm"] == "autonorm") & (runs["lr"] == 1e-2))
                | ((runs["arm"] == "autonorm_random") & (runs["lr"] == 1e-3))
            )
        ]
        per_seed = mine.pivot(
            index="seed", columns="arm", values="test_metric"
        ).dropna()
        diff = per_seed["autonorm"] - per_seed["autonorm_random"]
        assert row.mean == pytest.approx(diff.mean()) and row.n == len(diff)


def _gap_row(
    cell: tuple[int, str, float, float], gap: float, half: float, base: float = 0.8
) -> dict:
    """One mechanism-table row's cell (epochs, init, lr, selector_lr) and its gap: the
    learned gate at ``base + gap``, the random one at ``base``, over three seeds."""
    e, init, lr, selector_lr = cell
    return dict(
        data="mnist",
        epochs=e,
        init=init,
        lr=lr,
        selector_lr=selector_lr,
        a_mean=base + gap,
        b_mean=base,
        mean=gap,
        ci95=half,
        low=gap - half,
        high=gap + half,
        n=3,
    )


def _selector_cells(slow: dict[str, float], default: dict[str, float]) -> pd.DataFrame:
    """A mechanism table at two budgets: three backbone rates at the default selector
    rate, the slow selector at the highest rate only; ``slow`` and ``default`` give the
    highest rate's ``specialised``, ``epoch_specialised``, ``entropy_final`` and ``mean``."""
    rows = []
    for e in (3, 8):
        for lr in (1e-3, 3e-3, 1e-2):
            for sel in (1.0, 0.1) if lr == 1e-2 else (1.0,):
                values = (slow if sel == 0.1 else default) if lr == 1e-2 else {}
                mean = values.get("mean", 0.0)
                rows.append(
                    dict(
                        **_gap_row((e, "trunc_normal_0.02", lr, sel), mean, 0.01),
                        specialised=values.get("specialised", 1.0),
                        epoch_specialised=values.get("epoch_specialised", 2.0),
                        early=0.5,
                        entropy_final=values.get("entropy_final", 0.1),
                    )
                )
    return pd.DataFrame(rows)


def test_the_selector_table_keeps_the_rate_with_both_selectors_default_first() -> None:
    cells = _selector_cells(
        {"entropy_final": 0.5, "specialised": 0.0, "epoch_specialised": np.nan},
        {"entropy_final": 0.05},
    )
    table = mech.selector_table(cells)
    assert len(table) == 2 * 2  # two budgets x two selector rates, at 1e-2 only
    assert set(table["lr"]) == {1e-2}
    assert list(table["selector_lr"]) == [1.0, 0.1, 1.0, 0.1]
    assert np.allclose(table["vs_default"], [0.0, 0.45, 0.0, 0.45])
    one_rate = cells[cells["selector_lr"] == 1.0]
    assert mech.selector_table(one_rate).empty
