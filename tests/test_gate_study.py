"""Gate studies (chapters 10-12): the selector's learning rate, arms, composed AutoNorm-S runs."""

from __future__ import annotations

import collections
import itertools
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from normlab import experiments, figures
from normlab.analysis import gates as ag
from normlab.callbacks import TrainState
from normlab.claims.tables import paired_table
from normlab.data import load
from normlab.experiments import RunContext, gate_grids
from normlab.experiments import gate_study as gs
from normlab.gates import AutoNormS, GateTelemetry, selector_parameters
from normlab.layers import AutoNorm
from normlab.paper import TAU
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


def settings_of(**changes: object) -> gs.ArmSettings:
    """:func:`arm_settings` of TINY with ``changes``."""
    return gs.arm_settings(gs.GateConfig.from_config({**TINY, **changes}))


def test_arms_resolve_to_settings() -> None:
    assert settings_of(arm="freeze_at_4").freeze_at == 4
    assert settings_of(arm="autonorm_hard").hard is True
    assert settings_of(arm="frozen_ln").normaliser == "frozen_ln"
    assert settings_of(arm="autonorm_fixed").selector == "fixed"
    assert settings_of(arm="autonorm_exact").gate_grad == "exact"
    assert settings_of(normaliser="autonorm", hard=True, freeze_at=2).freeze_at == 2
    with pytest.raises(ValueError, match="arm"):
        settings_of(arm="freeze_at_x")
    with pytest.raises(ValueError, match="freeze_at needs"):
        settings_of(normaliser="frozen_ln", freeze_at=2)
    with pytest.raises(ValueError, match="'arm' or a 'normaliser'"):
        settings_of()
    with pytest.raises(ValueError, match=r"sets normaliser; the config also gives"):
        settings_of(arm="autonorm", normaliser="autonorm")
    with pytest.raises(ValueError, match=r"sets hard; .* hard=False"):
        settings_of(arm="autonorm_hard", hard=False)
    with pytest.raises(TypeError, match="takes a GateConfig"):
        gs.arm_settings({**TINY, "arm": "autonorm"})  # type: ignore[arg-type]


def test_every_gate_study_declares_all_profiles() -> None:
    for name in (
        "gate_bottleneck",
        "gate_tau",
        "autonorm_s_sweep",
        "gate_widget",
        "gate_mechanism",
    ):
        experiment = experiments.get(name)
        assert {"quick", "cpu", "standard", "paper"} <= set(experiment.profiles)
        assert experiment.grid("cpu").seeds >= (3 if name != "gate_widget" else 1)
        for profile, grid in experiment.profiles.items():
            assert grid.fixed["data_profile"] == (
                "quick" if profile in ("quick", "cpu") else profile
            )
            for config in grid.configs(1):
                gs.arm_settings(gs.GateConfig.from_config(config))


def test_cpu_budget_trains_and_decides_after_the_gates_can_learn() -> None:
    """600+ steps a run on each task, the freeze after a quarter of them but before half,
    three rates per arm, and each task on its own source, patch and batch."""
    setup = gs.SETUP["cpu"]
    train_sizes = {"mnist_5k": 3000, "digits": 1257}
    grid = experiments.get("gate_bottleneck").grid("cpu")
    configs = list(grid.configs(1))
    assert {c["data"] for c in configs} == set(gs.CPU_TASKS)
    for config in configs:
        task = gs.CPU_TASKS[config["data"]]
        assert {k: config[k] for k in task} == task
        steps = setup["epochs"] * math.ceil(
            train_sizes[config["source"]] / config["batch_size"]
        )
        assert steps >= 600
    assert 0.25 <= gs.T_FREEZE["cpu"] / setup["epochs"] < 0.5
    assert len(grid.axes["lr"]) >= 3
    arms = set(grid.axes["arm"])
    assert {"autonorm_exact", f"{gs.SAMPLE_PREFIX}{gs.T_FREEZE['cpu']}"} <= arms


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
    out = ag.compose_schedule(runs, 3, eps_h, rule)
    assert len(out) == 1 and bool(out["fired"].iloc[0]) is fired
    assert out["test_metric"].iloc[0] == (0.7 if fired else 0.5)
    assert out["arm"].iloc[0] == ("autonorm_s" if rule == "high" else "autonorm_s_low")


def test_compose_needs_both_runs() -> None:
    with pytest.raises(ValueError, match="no freeze_at_2"):
        ag.compose_schedule(table([{"arm": "autonorm", "test_metric": 0.5}]), 2, 0.1)
    with pytest.raises(ValueError, match="no autonorm partner"):
        ag.compose_schedule(
            table(
                [{"arm": "freeze_at_2", "test_metric": 0.5, "decision_entropy": 0.2}]
            ),
            2,
            0.1,
        )
    with pytest.raises(ValueError, match="rule"):
        ag.compose_schedule(table([]), 2, 0.1, "middle")


def test_freeze_run_keeps_gates_bit_identical(tmp_path: Path) -> None:
    settings = settings_of(arm="freeze_at_1")
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
        gs.gate_vit(train, settings_of(arm="autonorm")),
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
    runs = ag.run_table(records)
    train, val = load("digits", "train"), load("digits", "val")
    entropy = float(runs["decision_entropy"].dropna().iloc[0])
    above = (entropy + math.log(2)) / 2
    for eps_h, rule in ((0.9 * entropy, "high"), (above, "high"), (above, "low")):
        settings = settings_of(arm="autonorm")
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
        composed = ag.compose_schedule(runs, 1, eps_h, rule)
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
    quiet_n3 = claims.judge(claims.get("N3"), quiet)
    assert quiet_n3.judged[0].verdict == claims.CONTRADICTED  # below FrozenLN
    assert quiet_n3.says.startswith("contradicted for autonorm_s - frozen_ln")


def test_n2_reads_the_exact_gradient_control() -> None:
    """N2: the exact-gradient arm minus the Gumbel-Softmax one, per task; a gain beyond the
    margin supports it, a loss contradicts it, and without the control it is unmeasurable."""
    from normlab import claims

    def runs(exact: float) -> pd.DataFrame:
        return constructed(
            {
                ("mnist", "autonorm"): 0.80,
                ("mnist", "autonorm_exact"): 0.80 + exact,
                ("mnist_restyled", "autonorm"): 0.60,
                ("mnist_restyled", "autonorm_exact"): 0.60 + exact,
            }
        )

    helped = claims.judge(claims.get("N2"), runs(0.05))
    assert helped.verdict == claims.SUPPORTED and len(helped.effects) == 2
    assert all("autonorm_exact - autonorm" in label for label, _, _ in helped.effects)
    assert claims.judge(claims.get("N2"), runs(-0.05)).verdict == claims.CONTRADICTED
    missing = constructed({("mnist", "autonorm"): 0.8})
    assert "no runs of autonorm_exact" in claims.judge(claims.get("N2"), missing).note


def test_exact_gate_grad_keeps_the_forward_sample_and_gives_the_exact_gradient() -> (
    None
):
    """The hook's forward value is the Gumbel-Softmax sample bit for bit (same noise); the
    gradient reaching the logits is categorical_grad of the loss's per-candidate slope."""
    from normlab.gates import categorical_grad
    from normlab.layers import NormSelector

    torch.manual_seed(0)
    selector = NormSelector(8, tau=0.5).train()
    x = torch.randn(5, 3, 8)
    values = torch.randn(5, 2)
    torch.manual_seed(1)
    plain = selector(x)
    handle = selector.register_forward_hook(gs.ExactGateGrad._hook)
    logits = selector.mlp(x.mean(dim=1)).detach().requires_grad_(True)
    selector.mlp.register_forward_hook(lambda m, a, out: logits)
    torch.manual_seed(1)
    exact = selector(x)
    torch.testing.assert_close(exact, plain, rtol=0, atol=1e-7)
    (exact * values).sum().backward()
    expected = categorical_grad(logits.detach(), values).float()
    torch.testing.assert_close(logits.grad, expected, rtol=1e-5, atol=1e-6)
    handle.remove()
    selector.frozen = True  # a frozen gate is left alone
    assert gs.ExactGateGrad._hook(selector, (x,), plain) is None


def test_stop_selector_stops_learning_but_keeps_sampling() -> None:
    """sample_at_<T>: the gates' parameters stay bit-identical after epoch T, while the gate
    still draws a fresh sample each step (its training output differs between two calls)."""
    from normlab import seed_everything
    from normlab.gates import autonorm_layers

    settings = settings_of(arm="sample_at_1")
    assert settings.stop_at == 1 and settings.freeze_at == 0
    train, val = load("digits", "train"), load("digits", "val")
    seed_everything(0)
    model = gs.gate_vit(train, settings)
    snapshots = gs.SelectorSnapshots()
    fit(
        model,
        train,
        val,
        epochs=3,
        batch_size=256,
        lr=3e-3,
        seed=0,
        callbacks=[*gs.gate_callbacks(settings), snapshots],
        device="cpu",
    )
    assert snapshots.unchanged_since(1)
    # the gates did learn before the stop: a plain run's gates move in epoch 2
    _, layer = autonorm_layers(model)[0]
    layer.train()
    x = torch.randn(4, 5, layer.selector.normalized_shape[0])
    assert not layer.selector.frozen
    assert not torch.equal(layer.selector(x), layer.selector(x))  # still sampling
    with pytest.raises(ValueError, match="stop_at must be"):
        gs.StopSelector(0)


def test_compose_keeps_sampling_where_the_rule_fires() -> None:
    rows = table(
        [
            {"arm": "autonorm", "test_metric": 0.1},
            {"arm": "freeze_at_3", "test_metric": 0.2, "decision_entropy": 0.3},
            {"arm": "sample_at_3", "test_metric": 0.3},
        ]
    )
    fired = ag.compose_schedule(rows, 3, 0.1, keep_sampling=True)
    assert fired["arm"].tolist() == ["autonorm_s_sample"]
    assert fired["test_metric"].tolist() == [0.3] and fired["fired"].all()
    quiet = ag.compose_schedule(rows, 3, 0.5, keep_sampling=True)
    assert quiet["test_metric"].tolist() == [0.1] and not quiet["fired"].any()
    arms = set(ag.with_schedules(rows)["arm"])
    assert arms == {"autonorm", "autonorm_s", "autonorm_s_low", "autonorm_s_sample"}
    with pytest.raises(ValueError, match="no sample_at_3 partner"):
        ag.compose_schedule(
            rows[rows["arm"] != "sample_at_3"], 3, 0.1, keep_sampling=True
        )


def test_with_schedules_composes_the_sampling_ablation_where_it_has_partners() -> None:
    """A freeze run without its sample_at partner (a seed run for N3 alone) still gets
    AutoNorm-S, and no freeze-but-sample row."""
    rows = pd.concat(
        [
            table(
                [
                    {"arm": "autonorm", "test_metric": 0.1},
                    {"arm": "freeze_at_3", "test_metric": 0.2, "decision_entropy": 0.3},
                    {"arm": "sample_at_3", "test_metric": 0.3},
                ]
            ),
            table(
                [
                    {"arm": "autonorm", "test_metric": 0.4},
                    {"arm": "freeze_at_3", "test_metric": 0.5, "decision_entropy": 0.3},
                ]
            ).assign(seed=1),
        ],
        ignore_index=True,
    )
    out = ag.with_schedules(rows)
    assert sorted(out.loc[out["arm"] == "autonorm_s", "seed"]) == [0, 1]
    assert out.loc[out["arm"] == "autonorm_s_sample", "seed"].tolist() == [0]


def test_shared_seeds_keeps_the_seeds_every_cell_ran() -> None:
    rows = table(
        [
            {"arm": "autonorm", "seed": 0},
            {"arm": "autonorm", "seed": 1},
            {"arm": "autonorm", "seed": 2, "lr": 3e-3},
            {"arm": "frozen_ln", "seed": 0},
            {"arm": "frozen_ln", "seed": 2},
        ]
    )
    assert ag.shared_seeds(rows)["seed"].unique().tolist() == []
    kept = ag.shared_seeds(rows[rows["lr"] == 1e-3])
    assert sorted(kept["seed"]) == [0, 0]
    assert ag.shared_seeds(rows.iloc[:0]).empty


def test_n3_cells_run_a_pilot_then_its_planned_seeds_at_the_pilots_rates() -> None:
    """N3's three arms on the CIFAR-10 stand-in run a pilot of PILOT_SEEDS at every rate,
    then, to N3_SEEDS, each at the rates its pilot chose (checked against the saved
    pilot); every other cell keeps the set's seeds at every rate; N3 judged on this set
    (its short-budget regime) reads them."""
    from normlab import claims, results
    from normlab.claims.part2_gates import _gate_best

    assert gate_grids.N3_PILOT_SEEDS == claims.plans.PILOT_SEEDS
    configs = experiments.get("gate_bottleneck").grid("cpu").configs()
    seeds = collections.Counter((c["data"], c["arm"], c["lr"]) for c in configs)
    confirmed = (*gate_grids.N3_ARMS, *gate_grids.N1_ARMS)
    for (data, arm, lr), n in seeds.items():
        if data != gate_grids.N3_TASK or arm not in confirmed:
            assert n == gs.SEEDS["cpu"]
        elif lr in gate_grids.N1_CONFIRM_RATES.get(arm, ()):
            assert n == gate_grids.N1_SEEDS >= 30
        elif lr in gate_grids.N3_CONFIRM_RATES.get(arm, ()):
            assert n == gate_grids.N3_SEEDS
        else:
            assert n == gate_grids.N3_PILOT_SEEDS
    saved = results.largest("gate_bottleneck").results
    best = _gate_best(claims.plans.pilot(saved))
    best = best[best["data"] == gate_grids.N3_TASK].groupby("arm")["lr"].first()
    freeze = f"{gs.FREEZE_PREFIX}{gs.T_FREEZE['cpu']}"
    wanted = {
        "frozen_ln": {best["frozen_ln"]},
        "autonorm": {best["autonorm"], best["autonorm_s"]},
        freeze: {best["autonorm_s"]},
    }
    assert {a: set(r) for a, r in gate_grids.N3_CONFIRM_RATES.items()} == wanted
    # judged on this set (the short budget, a declared regime of N3), it reads them all
    from normlab.claims.judging import judge

    outcome = judge(claims.get("N3"), saved)
    assert {j.n for j in outcome.judged} == {gate_grids.N3_SEEDS}


def test_epochs_to_specialise_is_the_first_epoch_below_eps_h() -> None:
    records = [
        {"epoch": e, "layer": layer, "entropy": h}
        for e, pair in ((1, (0.6, 0.5)), (2, (0.15, 0.08)), (3, (0.05, 0.02)))
        for layer, h in zip("ab", pair)
    ]
    assert gs.epochs_to_specialise(records) == 3.0  # epoch 2's mean is 0.115 >= 0.1
    assert gs.epochs_to_specialise(records, eps_h=0.2) == 2.0
    assert math.isnan(gs.epochs_to_specialise(records, eps_h=0.01))


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
    summary = ag.arm_summary(runs).set_index("arm")
    assert summary.loc["a", "lr"] == 0.01 and summary.loc["b", "lr"] == 0.001
    assert summary["at_edge"].all()  # both choices are the grid's ends: flagged
    diff = paired_table(ag.chosen(runs), "a", "b", by="arm").iloc[0]
    assert diff["n"] == 4 and diff["mean"] == pytest.approx(0.05)
    assert diff["ci95"] == pytest.approx(0.0, abs=1e-12)


def test_at_lr_of_keeps_every_arm_at_one_arms_rate() -> None:
    runs = _two_rate_runs()
    at = ag.at_lr_of(runs, "b")
    assert set(at["lr"]) == {0.001} and set(at["arm"]) == {"a", "b"} and len(at) == 8
    with pytest.raises(ValueError, match="arm='c'"):
        ag.at_lr_of(runs, "c")


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


def test_mechanism_sweep_crosses_budget_init_and_rate_on_real_mnist() -> None:
    """Chapter 11's mechanism sweep: the learned and the random gate at every budget
    (one near 285 steps, one the gate sets' full one), both inits and three backbone
    rates, paired (same cells, same seeds), on real MNIST."""
    grid = experiments.get("gate_mechanism").grid("cpu")
    configs = grid.configs()
    assert grid.seeds >= 3
    assert {c["source"] for c in configs} == {"mnist_5k"}
    steps_per_epoch = 3000 // configs[0]["batch_size"]
    budgets = sorted({c["epochs"] * steps_per_epoch for c in configs})
    assert len(budgets) == 2 and abs(budgets[0] - 285) < 30
    assert budgets[1] == gs.SETUP["cpu"]["epochs"] * steps_per_epoch
    assert {c["init"] for c in configs} == {"trunc_normal_0.02", gs.DEFAULT_INIT}
    assert len({c["lr"] for c in configs}) >= 3
    cells: dict[str, set] = {}
    for c in configs:
        key = (c["epochs"], c["init"], c["lr"], c["selector_lr"], c["seed"])
        cells.setdefault(c["arm"], set()).add(key)
    assert cells["autonorm_random"] <= cells["autonorm"]
    assert {k for k in cells["autonorm"] if k[3] == 1.0} == cells["autonorm_random"]
    # the selector's own rate: the slow one (a tenth) for the learned gate at the
    # highest backbone rate only, at every budget, init and seed
    slow = {k for k in cells["autonorm"] if k[3] != 1.0}
    assert {k[3] for k in slow} == {0.1}
    assert {k[2] for k in slow} == {max(c["lr"] for c in configs)}
    assert len(slow) == 2 * 2 * grid.seeds


def test_the_cpu_widget_grid_serves_every_control_the_chapter_names() -> None:
    """Chapter 10's widget on the saved set: both tasks, two tau, soft and hard gates,
    three selector rates, never-freeze and three T_freeze, three seeds."""
    grid = experiments.get("gate_widget").grid("cpu")
    configs = grid.configs()
    values = {key: {c[key] for c in configs} for key in gate_grids.WIDGET_AXES["cpu"]}
    assert values["data"] == {"mnist", "mnist_restyled"}
    assert len(values["tau"]) == 2 and TAU in values["tau"]
    assert values["hard"] == {False, True}
    assert len(values["selector_lr"]) == 3
    assert 0 in values["freeze_at"] and len(values["freeze_at"] - {0}) >= 3
    assert grid.seeds == 3
    assert len(configs) == 2 * 2 * 2 * 3 * 4 * 3
    assert {c["source"] for c in configs} == {"digits"}
