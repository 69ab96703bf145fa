"""Issue 51's gate code: the fixed mix, the mix-or-gate grid, the regime checks and
AutoNorm-S deciding once the features have formed."""

from __future__ import annotations

import collections
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from normlab import experiments
from normlab.analysis import gates as ag
from normlab.experiments import RunContext, gate_mix, gate_regime
from normlab.experiments import gate_study as gs
from normlab.gates import READY_LEAD, ReadyAutoNormS
from normlab.layers import AutoNorm

TINY = {
    **gs.SETUP["quick"],
    "data": "mnist",
    "lr": 3e-3,
    "seed": 0,
    "epochs": 2,
    "depth": 1,
    "dim": 16,
    "tau": 0.5,
    "selector_lr": 1.0,
}


def _history(curve: list[float], losses: list[float] | None = None) -> list[dict]:
    losses = losses or [1.0] * len(curve)
    return [
        {"epoch": e + 1, "val_accuracy": a, "train_loss": loss}
        for e, (a, loss) in enumerate(zip(curve, losses, strict=True))
    ]


def test_the_fixed_mix_is_half_of_each_candidate_in_training_and_eval() -> None:
    layer = AutoNorm(8, selector="fixed")
    x = torch.randn(4, 3, 8)
    for train in (True, False):
        layer.train(train)
        half = 0.5 * layer.dyt(x) + 0.5 * layer.ln(x)
        assert torch.allclose(layer(x), half, atol=1e-6)
    assert layer.selector is None


def test_the_random_selector_in_eval_is_the_fixed_mix() -> None:
    torch.manual_seed(0)
    fixed, random = AutoNorm(8, selector="fixed"), AutoNorm(8, selector="random")
    random.load_state_dict(fixed.state_dict())
    x = torch.randn(5, 2, 8)
    assert torch.equal(fixed.eval()(x), random.eval()(x))
    assert not torch.allclose(fixed.train()(x), random.train()(x))


def test_late_gain_reads_the_last_quarter_of_the_epochs() -> None:
    history = _history([0.1, 0.3, 0.5, 0.6, 0.7, 0.72, 0.73, 0.74])
    assert ag.late_gain(history) == pytest.approx(0.74 - 0.72)  # epochs 6 -> 8
    assert ag.late_gain(history, share=0.5) == pytest.approx(0.74 - 0.6)
    with pytest.raises(ValueError):
        ag.late_gain(history, share=1.0)


def test_ready_epoch_is_the_first_after_warm_up_clear_of_chance() -> None:
    history = _history([0.45, 0.2, 0.35, 0.5, 0.6])
    assert ag.ready_epoch(history, chance=0.1, lead=0.3) == 1
    assert ag.ready_epoch(history, chance=0.1, lead=0.3, after=2) == 4
    assert ag.ready_epoch(history, chance=0.1, lead=0.6) is None


def test_regime_marks_an_arm_past_its_plateau_by_either_test() -> None:
    def record(arm: str, curve: list[float], loss: float) -> dict:
        history = _history(curve, [2.0] * (len(curve) - 1) + [loss])
        return {"config": {"data": "t", "arm": arm}, "history": history}

    records = [
        record("frozen_ln", [0.5, 0.7, 0.8, 0.8], 0.4),
        record("still_learning", [0.2, 0.4, 0.5, 0.6], 1.0),
        record("close_loss", [0.2, 0.4, 0.5, 0.6], 0.5),
        record("flat", [0.2, 0.4, 0.5, 0.502], 1.0),
    ]
    table = ag.regime(records, decision=2).set_index("arm")
    assert table.loc["frozen_ln", "loss_ratio"] == 1.0
    assert table["plateau"].to_dict() == {
        "frozen_ln": True,
        "still_learning": False,
        "close_loss": True,
        "flat": True,
    }
    assert table.loc["flat", "val_at_decision"] == pytest.approx(0.4)
    assert math.isnan(ag.regime(records)["val_at_decision"].iloc[0])


def test_ready_autonorm_s_decides_once_validation_accuracy_has_left_chance(
    tmp_path: Path,
) -> None:
    """A real run: the decision falls at the first epoch clear of chance + lead (or at the
    last one), and the record says when and at what accuracy."""
    config = {**TINY, "arm": "autonorm_s_ready", "epochs": 3}
    record = gs.train_gate(config, RunContext(torch.device("cpu"), tmp_path))
    curve = [h["val_accuracy"] for h in record["history"]]
    ready = ag.ready_epoch(record["history"], chance=0.1, lead=READY_LEAD)
    decided = record["metrics"]["decided_at"]
    assert decided == (ready if ready is not None else len(curve))
    assert record["metrics"]["accuracy_at"] == curve[decided - 1]
    assert [r["epoch"] for r in record["entropy_records"]] == list(
        range(1, decided + 1)
    )
    with pytest.raises(ValueError):
        ReadyAutoNormS(chance=0.1, lead=0.95)


def test_the_mix_grid_runs_a_pilot_and_leaves_the_gates_to_gate_bottleneck() -> None:
    configs = experiments.get("gate_mix").grid("cpu").configs()
    cells = collections.Counter(
        (c["data"], c["arm"], c["alpha_init"], c["lr"]) for c in configs
    )
    assert {arm for _, arm, _, _ in cells} == set(gate_mix.MIX_ARMS)
    assert {data for data, *_ in cells} == set(gate_mix.MIX_DATA)
    for (data, arm, alpha, lr), n in cells.items():
        if alpha != gate_mix.MIX_ALPHAS[0]:
            assert arm == "dyt" and data == gate_mix.MIX_TASK
        confirmed = lr in gate_mix.MIX_CONFIRM_RATES.get(arm, ())
        if data == gate_mix.MIX_TASK and alpha == gate_mix.MIX_ALPHAS[0] and confirmed:
            assert n == gate_mix.MIX_SEEDS
        elif data == gate_mix.MIX_TASK:
            assert n == gate_mix.MIX_PILOT_SEEDS
    # the pilot runs every rate of the gate sets
    assert {lr for *_, lr in cells} == set(gs.LRS["cpu"])


def test_the_regime_grid_trains_longer_and_decides_on_formed_features() -> None:
    configs = experiments.get("gate_regime").grid("cpu").configs()
    frame = pd.DataFrame(configs)
    for data, epochs in frame.groupby("data")["epochs"].unique().items():
        assert list(epochs) == [gate_regime.REGIME_EPOCHS[data]]
        assert epochs[0] > gs.SETUP["cpu"]["epochs"]
    assert set(frame["arm"]) == set(gate_regime.REGIME_ARMS)
    assert "autonorm_s_ready" in set(frame["arm"])
    # every arm tries the grid's three rates; an arm whose pilot chose an edge, the
    # rates beyond it too, and no other arm does
    for (data, arm), part in frame.groupby(["data", "arm"]):
        wider = set(gate_regime.REGIME_WIDER.get((data, arm), ()))
        assert set(part["lr"]) == set(gs.LRS["cpu"]) | wider
        assert not wider & set(gs.LRS["cpu"])


def test_n1_and_the_mix_confirm_at_the_rates_their_pilots_chose() -> None:
    """The Random Selector (N1) and the fixed mix run their further seeds at the rate the
    five-seed pilot chose on validation accuracy, inside the grid."""
    from normlab import claims, results
    from normlab.chapters import ch11
    from normlab.experiments import gate_grids

    bottleneck = results.largest("gate_bottleneck").results
    pilot = ag.chosen(claims.plans.pilot(ag.at_defaults(bottleneck)))
    on_task = pilot[pilot["data"] == gate_grids.N3_TASK].groupby("arm")
    for arm, rates in gate_grids.N1_CONFIRM_RATES.items():
        assert {on_task["lr"].first()[arm]} == set(rates)
        assert not on_task["at_edge"].first()[arm]
    mix = results.largest("gate_mix").results
    study = claims.plans.pilot(ch11.mix_runs(bottleneck, mix))
    chosen = ag.chosen(study[study["data"] == gate_mix.MIX_TASK]).groupby("arm")
    for arm, rates in gate_mix.MIX_CONFIRM_RATES.items():
        assert {chosen["lr"].first()[arm]} == set(rates)


def test_the_regime_confirms_at_the_rates_its_pilot_chose() -> None:
    """Each arm runs its further seeds at the rate its pilot chose on validation accuracy,
    inside its widened grid, on each task; and only there."""
    from normlab import results

    regime = ag.at_defaults(results.largest("gate_regime").results)
    pilot = regime[regime["seed"] < regime["data"].map(gate_regime.REGIME_PILOT_SEEDS)]
    chosen = ag.chosen(pilot)
    assert not chosen["at_edge"].any()
    picked = chosen.groupby(["data", "arm"])["lr"].first()
    assert set(gate_regime.REGIME_CONFIRM_RATES) == set(picked.index)
    for key, rates in gate_regime.REGIME_CONFIRM_RATES.items():
        assert {picked[key]} == set(rates)
    seeds = regime.groupby(["data", "arm", "lr"])["seed"].nunique()
    for (data, arm, lr), n in seeds.items():
        if lr in gate_regime.REGIME_CONFIRM_RATES[data, arm]:
            assert n == gate_regime.REGIME_SEEDS
        else:
            assert n == gate_regime.REGIME_PILOT_SEEDS[data]


def test_every_gate_claim_reads_the_regime_past_the_plateau() -> None:
    """N1, N2, N3, N5, N13 and N14 read ``gate_regime`` with the short budget as their
    declared sensitivity, on 30 seeds an arm, and each effect's label states its regime:
    its epochs and the compared arms' final training losses."""
    from normlab import claims

    epochs = f"{max(gate_regime.REGIME_EPOCHS.values())} epochs"
    for claim_id in ("N1", "N2", "N3", "N5", "N13", "N14"):
        test = claims.get(claim_id).test
        assert test.experiment == "gate_regime", claim_id
        assert test.regimes == ("gate_bottleneck",), claim_id
        outcome = claims.evaluate(claim_id)
        assert outcome.judged, claim_id
        for judged in outcome.judged:
            assert epochs in judged.label and "final training loss" in judged.label
            assert judged.interval.n == gate_regime.REGIME_SEEDS, judged.label


def test_a_controls_words_give_each_tasks_verdict() -> None:
    """N2's and N13's sentences read the verdicts past the plateau, task by task, with at
    most three numbers a sentence; an effect on a task not named is refused."""
    import re

    from normlab import claims
    from normlab.chapters import ch11

    names = {"mnist_restyled": "the restyled digits", "mnist": "real MNIST"}
    for claim_id in ("N2", "N13"):
        outcome = claims.evaluate(claim_id)
        words = ch11.control_words(outcome, names)
        sentences = words.split(". ")
        assert len(sentences) == len(outcome.judged) == 2
        assert sentences[0].startswith("On the restyled digits, ")
        for judged in outcome.judged:
            line = f"{judged.interval.mean:+.3f} ± {judged.interval.half:.3f}"
            assert f"{line} over {judged.interval.n} seeds: {judged.verdict}" in words
        for sentence in sentences:
            assert len(re.findall(r"\d+\.\d+|\b\d+\b", sentence)) <= 3
        with pytest.raises(ValueError, match="names none of the tasks"):
            ch11.control_words(outcome, {"mnist": "real MNIST"})
