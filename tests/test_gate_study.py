"""Gate studies (chapters 10-12): the selector's learning rate, arms, composed AutoNorm-S runs."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from normlab import experiments, figures
from normlab.callbacks import TrainState
from normlab.claims.tables import paired_table
from normlab.data import load
from normlab.experiments import RunContext
from normlab.experiments import gate_study as gs
from normlab.gates import AutoNormS, GateTelemetry, selector_parameters
from normlab.layers import AutoNorm
from normlab.training import fit

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


class Gated(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = AutoNorm(8)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x)).sum()


def test_selector_lr_equals_a_parameter_group_with_a_multiplied_lr() -> None:
    torch.manual_seed(0)
    reference = Gated()
    model = Gated()
    model.load_state_dict(reference.state_dict())
    selector = set(selector_parameters(reference.norm))
    groups = [
        {"params": [p for p in reference.parameters() if p not in selector]},
        {"params": list(selector), "lr": 0.01 * 7.0},
    ]
    opt_ref = torch.optim.AdamW(groups, lr=0.01, weight_decay=0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    callback = gs.SelectorLR(7.0)
    state = TrainState(model=model, optimizer=opt, scheduler=None, epochs=1)
    for step in range(3):
        x = torch.randn(4, 5, 8, generator=torch.Generator().manual_seed(step))
        for net, optimizer in ((reference, opt_ref), (model, opt)):
            torch.manual_seed(100 + step)  # the same Gumbel noise in both
            optimizer.zero_grad()
            net(x).backward()
            if net is model:
                callback.on_after_backward(state)
            optimizer.step()
            if net is model:
                callback.on_step_end(state)
    for p_ref, p in zip(reference.parameters(), model.parameters()):
        torch.testing.assert_close(p, p_ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, True, "2"])
def test_selector_lr_rejects_bad_multipliers(bad: object) -> None:
    with pytest.raises(ValueError, match="multiplier"):
        gs.SelectorLR(bad)  # type: ignore[arg-type]


def test_arms_resolve_to_settings() -> None:
    assert gs.arm_settings({"arm": "freeze_at_4"})["freeze_at"] == 4
    assert gs.arm_settings({"arm": "autonorm_hard"})["hard"] is True
    assert gs.arm_settings({"arm": "frozen_ln"})["normaliser"] == "frozen_ln"
    with pytest.raises(ValueError, match="arm"):
        gs.arm_settings({"arm": "freeze_at_x"})
    with pytest.raises(ValueError, match="freeze_at needs"):
        gs.arm_settings({"normaliser": "frozen_ln", "freeze_at": 2})


def test_every_gate_study_declares_all_profiles() -> None:
    for name in ("gate_bottleneck", "gate_tau", "autonorm_s_sweep", "gate_widget"):
        experiment = experiments.get(name)
        assert {"quick", "cpu", "standard", "paper"} <= set(experiment.profiles)
        assert experiment.grid("cpu").seeds >= (3 if name != "gate_widget" else 1)
        for profile, grid in experiment.profiles.items():
            assert grid.fixed["data_profile"] == (
                "quick" if profile in ("quick", "cpu") else profile
            )
            for config in grid.configs(1):
                if "arm" in config:
                    gs.arm_settings(config)


def test_cpu_budget_trains_and_decides_after_the_gates_can_learn() -> None:
    """1,000+ steps a run on the 1,257 training digits, and the freeze after a quarter of
    them but before half (the gates' entropy has fallen by then: chapter 11)."""
    setup = gs.SETUP["cpu"]
    steps_per_epoch = math.ceil(1257 / setup["batch_size"])
    assert setup["epochs"] * steps_per_epoch >= 1000
    assert 0.25 <= gs.T_FREEZE["cpu"] / setup["epochs"] < 0.5
    for config in experiments.get("gate_bottleneck").grid("cpu").configs(1):
        assert isinstance(config["patch_size"], int)


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"data": "mnist", "lr": 1e-3, "seed": 0, "decision_entropy": math.nan, **r}
            for r in rows
        ]
    )


@pytest.mark.parametrize(
    ("rule", "eps_h", "fired"),
    [
        ("high", 0.1, True),
        ("high", 0.5, False),
        ("low", 0.5, True),
        ("low", 0.1, False),
    ],
)
def test_compose_applies_the_rule_to_the_recorded_entropy(
    rule: str, eps_h: float, fired: bool
) -> None:
    runs = table(
        [
            {"arm": "autonorm", "test_metric": 0.5},
            {"arm": "freeze_at_3", "test_metric": 0.7, "decision_entropy": 0.3},
        ]
    )
    out = gs.compose_schedule(runs, 3, eps_h, rule)
    assert len(out) == 1 and bool(out["fired"].iloc[0]) is fired
    assert out["test_metric"].iloc[0] == (0.7 if fired else 0.5)
    assert out["arm"].iloc[0] == ("autonorm_s" if rule == "high" else "autonorm_s_low")


def test_compose_needs_both_runs() -> None:
    with pytest.raises(ValueError, match="no freeze_at_2"):
        gs.compose_schedule(table([{"arm": "autonorm", "test_metric": 0.5}]), 2, 0.1)
    with pytest.raises(ValueError, match="no autonorm partner"):
        gs.compose_schedule(
            table(
                [{"arm": "freeze_at_2", "test_metric": 0.5, "decision_entropy": 0.2}]
            ),
            2,
            0.1,
        )
    with pytest.raises(ValueError, match="rule"):
        gs.compose_schedule(table([]), 2, 0.1, "middle")


def test_freeze_run_keeps_gates_bit_identical(tmp_path: Path) -> None:
    settings = gs.arm_settings({**TINY, "arm": "freeze_at_1"})
    train, val = load("digits", "train"), load("digits", "val")
    torch.manual_seed(0)
    model = gs.gate_vit(train, settings)
    snapshots = gs.SelectorSnapshots()
    callbacks = [*gs.gate_callbacks(settings), snapshots]
    fit(
        model,
        train,
        val,
        epochs=3,
        batch_size=64,
        lr=3e-3,
        seed=0,
        device="cpu",
        callbacks=callbacks,
    )
    schedule = next(c for c in callbacks if isinstance(c, AutoNormS))
    assert len(schedule.frozen) == 3  # eps_h = 0 under the paper's rule always fires
    assert snapshots.unchanged_since(1)
    learning = gs.SelectorSnapshots()
    torch.manual_seed(0)
    fit(
        gs.gate_vit(train, gs.arm_settings({**TINY, "arm": "autonorm"})),
        train,
        val,
        epochs=2,
        batch_size=64,
        lr=3e-3,
        seed=0,
        device="cpu",
        callbacks=[learning],
    )
    assert not learning.unchanged_since(1)  # a learning gate moves


def test_composed_schedule_equals_a_real_autonorm_s_run(tmp_path: Path) -> None:
    """The identity the chapters rely on: AutoNorm-S = autonorm up to T, then the freeze run or not."""
    records = []
    for arm in ("autonorm", "freeze_at_1"):
        record = gs.train_gate(
            {**TINY, "arm": arm}, RunContext(torch.device("cpu"), tmp_path / arm)
        )
        records.append({**record, "run_id": arm, "config": {**TINY, "arm": arm}})
    runs = gs.run_table(records)
    train, val = load("digits", "train"), load("digits", "val")
    entropy = float(runs["decision_entropy"].dropna().iloc[0])
    above = (entropy + math.log(2)) / 2
    for eps_h, rule in ((0.9 * entropy, "high"), (above, "high"), (above, "low")):
        settings = gs.arm_settings({**TINY, "arm": "autonorm"})
        torch.manual_seed(0)
        model = gs.gate_vit(train, settings)
        history = fit(
            model,
            train,
            val,
            epochs=2,
            batch_size=TINY["batch_size"],
            lr=3e-3,
            weight_decay=0.05,
            schedule="warmup_cosine",
            warmup=TINY["warmup"],
            seed=0,
            device="cpu",
            callbacks=[GateTelemetry(), AutoNormS(1, eps_h, tau=0.5, rule=rule)],
        )
        composed = gs.compose_schedule(runs, 1, eps_h, rule)
        assert history[-1]["val_accuracy"] == composed["val_metric"].iloc[0]
        assert history[-1]["val_loss"] == composed["val_loss"].iloc[0]


def constructed(
    values: dict[tuple[str, str], float], entropy: float = 0.3
) -> pd.DataFrame:
    """A gate-study results table: five seeds per (data, arm), value + a small seed-dependent wiggle."""
    rows = []
    for (data, arm), value in values.items():
        for seed in range(5):
            metric = value + 0.002 * (seed - 2)
            rows.append(
                {
                    "data": data,
                    "arm": arm,
                    "lr": 3e-3,
                    "seed": seed,
                    "val_metric": metric,
                    "test_metric": metric,
                    "val_curve_mean": metric,
                    "higher_is_better": True,
                    "decision_entropy": entropy
                    if arm.startswith("freeze_at_")
                    else math.nan,
                }
            )
    return pd.DataFrame(rows)


def test_gate_claims_on_constructed_data() -> None:
    from normlab import claims

    table = constructed(
        {
            ("mnist", "frozen_ln"): 0.90,
            ("mnist", "autonorm_random"): 0.85,
            ("mnist", "autonorm"): 0.80,
            ("mnist", "autonorm_hard"): 0.70,
            ("mnist", "freeze_at_3"): 0.90,
            ("mnist_restyled", "frozen_ln"): 0.50,
            ("mnist_restyled", "autonorm_random"): 0.50,
            ("mnist_restyled", "autonorm"): 0.45,
            ("mnist_restyled", "autonorm_hard"): 0.30,
            ("mnist_restyled", "freeze_at_3"): 0.60,
        }
    )
    assert (
        claims.judge(claims.get("N1"), table).verdict == claims.SUPPORTED
    )  # learned below random on the CIFAR-10 stand-in (the restyled digits)
    assert (
        claims.judge(claims.get("N13"), table).verdict == claims.SUPPORTED
    )  # soft ahead of hard
    assert (
        claims.judge(claims.get("N3"), table).verdict == claims.SUPPORTED
    )  # the freeze run (H >= 0.1) leads
    assert (
        claims.judge(claims.get("N5"), table).verdict == claims.SUPPORTED
    )  # no gain on mnist
    assert (
        claims.judge(claims.get("N14"), table).verdict == claims.SUPPORTED
    )  # +0.10 on restyled vs 0 on mnist
    # the rule does not fire at H = 0.05 < 0.1: AutoNorm-S is then the plain gate, below FrozenLN
    quiet = constructed(
        {
            k: v
            for k, v in [
                (("mnist_restyled", "frozen_ln"), 0.5),
                (("mnist_restyled", "autonorm"), 0.45),
                (("mnist_restyled", "freeze_at_3"), 0.6),
            ]
        },
        entropy=0.05,
    )
    assert claims.judge(claims.get("N3"), quiet).verdict == claims.CONTRADICTED


def test_n2_compares_the_hottest_and_coldest_temperatures() -> None:
    """At the lr chosen on val per temperature: a second rate, worse on val, whose SNR and
    accuracy would reverse the verdict, must be ignored."""
    from normlab import claims

    rows = [
        {
            "data": "mnist",
            "tau": tau,
            "lr": lr,
            "seed": seed,
            "higher_is_better": True,
            "val_metric": acc - (0.3 if lr == 0.01 else 0.0),
            "gate_snr": (snr if lr == 0.003 else 1 / snr) * (1 + 0.01 * seed),
            "test_metric": (acc if lr == 0.003 else 1 - acc) + 0.001 * seed,
        }
        for tau, snr, acc in ((0.1, 0.2, 0.80), (0.5, 1.0, 0.82), (2.0, 5.0, 0.85))
        for lr in (0.003, 0.01)
        for seed in range(5)
    ]
    outcome = claims.judge(claims.get("N2"), pd.DataFrame(rows))
    # both effects on the predicted side: at most consistent with the claim, not supported
    assert outcome.verdict == claims.CONSISTENT and len(outcome.effects) == 2
    assert outcome.effects[0][1].mean == pytest.approx(math.log(25.0))
    assert all(ci.low > 0 for _, ci, _ in outcome.effects)


def _two_rate_runs() -> pd.DataFrame:
    """Arm a is best on val at lr 0.01, arm b at lr 0.001; test accuracy equals val accuracy
    plus a per-seed offset, so every chosen quantity is known."""
    best = {"a": 0.01, "b": 0.001}
    rows = []
    for arm in ("a", "b"):
        for lr in (0.001, 0.003, 0.01):
            for seed in range(4):
                val = (0.9 if lr == best[arm] else 0.6) + (0.05 if arm == "a" else 0.0)
                rows.append(
                    {
                        "data": "mnist",
                        "arm": arm,
                        "lr": lr,
                        "seed": seed,
                        "higher_is_better": True,
                        "val_metric": val,
                        "test_metric": val + 0.01 * seed,
                    }
                )
    return pd.DataFrame(rows)


def test_arms_are_compared_each_at_its_rate_chosen_on_val() -> None:
    runs = _two_rate_runs()
    summary = gs.arm_summary(runs).set_index("arm")
    assert summary.loc["a", "lr"] == 0.01 and summary.loc["b", "lr"] == 0.001
    assert summary["at_edge"].all()  # both choices are the grid's ends: flagged
    diff = paired_table(gs.chosen(runs), "a", "b", by="arm").iloc[0]
    assert diff["n"] == 4 and diff["mean"] == pytest.approx(0.05)
    assert diff["ci95"] == pytest.approx(0.0, abs=1e-12)


def test_at_lr_of_keeps_every_arm_at_one_arms_rate() -> None:
    runs = _two_rate_runs()
    at = gs.at_lr_of(runs, "b")
    assert set(at["lr"]) == {0.001} and set(at["arm"]) == {"a", "b"} and len(at) == 8
    with pytest.raises(ValueError, match="arm='c'"):
        gs.at_lr_of(runs, "c")


def synthetic_gates() -> pd.DataFrame:
    """A gate table: one task, two temperatures, two seeds, two layers, three epochs; the
    entropy falls faster at the higher temperature and differs between seeds."""
    rows = []
    for tau, seed, position, epoch in itertools.product(
        (0.5, 2.0), (0, 1), (0, 1), (1, 2, 3)
    ):
        entropy = math.log(2) * math.exp(-tau * epoch * (1 + position) / (3 + seed))
        rows.append(
            {
                "data": "mnist",
                "tau": tau,
                "seed": seed,
                "layer": f"encoder.blocks.{position}.norm1",
                "position": position,
                "epoch": epoch,
                "entropy": entropy,
            }
        )
    return pd.DataFrame(rows)


def test_entropy_twin_has_a_control_where_there_is_a_choice() -> None:
    twin = figures.entropy_twin(synthetic_gates(), "tau", "synthetic")
    params = {p["name"]: p for p in twin.spec["params"]}
    assert "bind" not in params["task"] and params["task"]["value"] == "mnist"
    assert params["v"]["bind"]["options"] == [0.5, 2.0]
    assert params["seed"]["bind"]["options"] == ["mean", 0, 1]
    (values,) = [v for v in twin.spec["datasets"].values() if "H" in v[0]]
    assert len(values) == len(synthetic_gates())
    assert all(round(r["H"], 3) == r["H"] for r in values)


@pytest.mark.parametrize("param, other", [("v", 0.5), ("seed", 1)])
def test_entropy_twin_draws_what_its_controls_choose(param: str, other: object) -> None:
    """vl-convert renders the chart at two values of one control: the lines differ."""
    import vl_convert
    from normlab.interactive import vegalite_version

    spec = figures.entropy_twin(synthetic_gates(), "tau", "synthetic").spec
    svgs = []
    for value in (
        next(p["value"] for p in spec["params"] if p["name"] == param),
        other,
    ):
        for p in spec["params"]:
            if p["name"] == param:
                p["value"] = value
        svgs.append(vl_convert.vegalite_to_svg(spec, vl_version=vegalite_version()))
    assert svgs[0] != svgs[1]


def test_entropy_explorer_redraws_the_live_figure() -> None:
    explorer = figures.entropy_explorer(synthetic_gates(), "tau", "synthetic")
    live = explorer.live
    assert "tau 2" in live.result._suptitle.get_text()
    live.kwargs_widgets[1].value = 0.5
    live.kwargs_widgets[2].value = 1
    assert live.result._suptitle.get_text() == "synthetic: tau 0.5, seed 1"
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/html"] == explorer.twin.html()
