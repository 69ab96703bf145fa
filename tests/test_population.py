"""The population engine (normlab.population): K seeds as one batched model.

A member must start as its single run starts (same initial weights, same first batch, the
same first loss and gradients, to float rounding: batched matmuls may sum in another order,
so 1e-5 relative, 1e-6 absolute), take the same first optimiser step, and end where single
runs end in distribution (the mean difference of test accuracy over 16 seeds inside its 95 %
interval). A diverged member stops without touching the others; a killed population resumes
to the same numbers; the runner writes one record per member, which verify re-runs exactly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import pytest
import torch
from normlab import population, training
from normlab.callbacks import Callback
from normlab.experiments import RunContext, get
from normlab.experiments.part1 import config_splits, seeded_mlp
from normlab.experiments.populations import groups, rerun_member
from normlab.experiments.runner import run as run_grid
from normlab.population import fit_population, member_model, stack_models

RTOL, ATOL = 1e-5, 1e-6
PART1 = ("none", "batchnorm", "layernorm", "rmsnorm", "l2", "norm_like", "affine_like")


def _config(**changes: object) -> dict:
    base = dict(get("fc_normalisers").runs("quick")[0].config)
    return {**base, "width": 16, "depth": 2, **changes}


class _First(Callback):
    """The single run's first batch loss and gradients."""

    def on_after_backward(self, state) -> None:
        if state.step == 0:
            self.grads = {n: p.grad.clone() for n, p in state.model.named_parameters()}

    def on_step_end(self, state) -> None:
        if state.step == 1:
            self.loss = state.loss
            self.after = {
                n: p.detach().clone() for n, p in state.model.named_parameters()
            }


def _single(config: dict, seed: int, **fit: object) -> tuple[_First, torch.nn.Module]:
    splits = config_splits(config)
    model = seeded_mlp({**config, "seed": seed}, splits["train"])
    first = _First()
    training.fit(
        model,
        splits["train"],
        splits["val"],
        seed=seed,
        callbacks=[first],
        device="cpu",
        progress=False,
        **fit,
    )
    return first, model


@pytest.mark.parametrize("normaliser", PART1)
def test_a_member_starts_as_its_single_run(normaliser: str) -> None:
    config = _config(normaliser=normaliser)
    splits = config_splits(config)
    seeds = [3, 11, 0]
    models = [seeded_mlp({**config, "seed": s}, splits["train"]) for s in seeds]
    initial = [{n: p.detach().clone() for n, p in m.named_parameters()} for m in models]
    seen: dict = {}

    def on_step(step, x, losses, grads) -> None:
        if step == 0:
            seen.update(x=x.clone(), losses=losses.clone(), grads=grads)

    pop, _ = fit_population(
        models,
        splits["train"],
        splits["val"],
        epochs=1,
        batch_size=64,
        lr=0.1,
        optimizer="sgd",
        seeds=seeds,
        max_steps=1,
        device="cpu",
        on_step=on_step,
    )
    for k, seed in enumerate(seeds):
        fresh = seeded_mlp({**config, "seed": seed}, splits["train"])
        for name, p in fresh.named_parameters():  # initial weights: bit for bit
            assert torch.equal(initial[k][name], p.detach())
        order = torch.randperm(
            len(splits["train"]), generator=torch.Generator().manual_seed(seed)
        )
        assert torch.equal(seen["x"][k], splits["train"].x[order[:64]])
        first, single = _single(
            config, seed, epochs=1, batch_size=64, lr=0.1, optimizer="sgd", max_steps=1
        )
        assert math.isclose(float(seen["losses"][k]), first.loss, rel_tol=RTOL)
        for name, grad in first.grads.items():
            torch.testing.assert_close(
                seen["grads"][name][k], grad, rtol=RTOL, atol=ATOL
            )
        after = member_model(pop, k, fresh).state_dict()
        for name, p in single.state_dict().items():
            torch.testing.assert_close(after[name], p, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "fit",
    [
        dict(optimizer="adam", lr=0.01),
        dict(optimizer="adamw", lr=0.01, weight_decay=0.1),
        dict(
            optimizer="sgd",
            lr=0.1,
            weight_decay=0.01,
            optimizer_kwargs={"momentum": 0.9},
        ),
    ],
    ids=["adam", "adamw", "sgd-momentum"],
)
def test_the_optimisers_take_torchs_steps(fit: dict) -> None:
    """Three steps of each optimiser: a member's weights are its single run's, to rounding.

    Without a normaliser: before BatchNorm a bias's gradient is zero up to rounding, which
    Adam scales up to a full step of either sign, so there no two summation orders agree."""
    config = _config(normaliser="none")
    splits = config_splits(config)
    seeds = [1, 2]
    models = [seeded_mlp({**config, "seed": s}, splits["train"]) for s in seeds]
    pop, _ = fit_population(
        models,
        splits["train"],
        splits["val"],
        epochs=1,
        batch_size=64,
        seeds=seeds,
        max_steps=3,
        device="cpu",
        **fit,
    )
    for k, seed in enumerate(seeds):
        _, single = _single(config, seed, epochs=1, batch_size=64, max_steps=3, **fit)
        mine = member_model(pop, k, models[0]).state_dict()
        for name, p in single.state_dict().items():
            torch.testing.assert_close(mine[name], p, rtol=1e-4, atol=1e-6)


def _interval(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """The mean difference of ``a`` and ``b`` and its 95 % (Welch, normal) half-width."""
    diff = statistics.fmean(a) - statistics.fmean(b)
    half = 1.96 * math.sqrt(
        statistics.variance(a) / len(a) + statistics.variance(b) / len(b)
    )
    return diff, half, max(half, 1e-9)


def test_sixteen_members_end_as_sixteen_single_runs_do() -> None:
    config = _config(normaliser="layernorm", optimizer="adam", lr=0.01, epochs=1)
    splits = config_splits(config)
    seeds = list(range(16))
    outcomes = get("fc_normalisers").run_population(
        [{**config, "seed": s} for s in seeds],
        RunContext(device=torch.device("cpu"), checkpoint_dir=None),
    )
    singles = [
        get("fc_normalisers").run_one(
            {**config, "seed": s},
            RunContext(device=torch.device("cpu"), checkpoint_dir=None),
        )
        for s in seeds
    ]
    for key in ("test_metric", "val_loss"):
        a = [o["metrics"][key] for o in outcomes]
        b = [o["metrics"][key] for o in singles]
        diff, half, _ = _interval(a, b)
        assert abs(diff) <= half, (key, diff, half)
    assert len(splits["test"]) > 0
    assert outcomes[0].keys() == singles[0].keys()
    assert outcomes[0]["metrics"].keys() == singles[0]["metrics"].keys()


def test_a_diverged_member_stops_and_the_others_go_on() -> None:
    config = _config(normaliser="none", optimizer="sgd", epochs=3)
    splits = config_splits(config)
    seeds, lrs = [0, 0], [0.1, 1e9]
    models = [seeded_mlp({**config, "seed": s}, splits["train"]) for s in seeds]
    pop, histories = fit_population(
        models,
        splits["train"],
        splits["val"],
        epochs=3,
        batch_size=64,
        seeds=seeds,
        lrs=lrs,
        device="cpu",
    )
    assert len(histories[1]) == 1 and training.is_diverged(
        (histories[1][0]["train_loss"], histories[1][0]["val_loss"]),
        training.divergence_bound(splits["train"]),
    )
    assert len(histories[0]) == 3
    alone_models = [seeded_mlp({**config, "seed": 0}, splits["train"])]
    _, alone = fit_population(
        alone_models,
        splits["train"],
        splits["val"],
        epochs=3,
        batch_size=64,
        seeds=[0],
        lr=0.1,
        device="cpu",
    )
    for mine, theirs in zip(histories[0].without_timing(), alone[0].without_timing()):
        for key, value in theirs.items():
            assert math.isclose(mine[key], value, rel_tol=1e-5), key


def _kill_at_epoch(epoch: int, monkeypatch) -> Callable:
    """Make a population stop (KeyboardInterrupt) as epoch ``epoch`` starts, as a killed
    process does after the previous epoch's checkpoint; return the real epoch to restore."""
    real_epoch = population._epoch

    def killed(run, at):
        if at == epoch:
            raise KeyboardInterrupt
        real_epoch(run, at)

    monkeypatch.setattr(population, "_epoch", killed)
    return real_epoch


def test_a_killed_population_resumes_to_the_same_numbers(tmp_path, monkeypatch) -> None:
    config = _config(normaliser="batchnorm", optimizer="adam")
    splits = config_splits(config)
    seeds = [0, 1, 2]
    settings = dict(
        epochs=3, batch_size=64, lr=0.01, optimizer="adam", seeds=seeds, device="cpu"
    )

    def models():
        return [seeded_mlp({**config, "seed": s}, splits["train"]) for s in seeds]

    whole, want = fit_population(models(), splits["train"], splits["val"], **settings)
    real_epoch = _kill_at_epoch(3, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        fit_population(
            models(),
            splits["train"],
            splits["val"],
            checkpoint_dir=tmp_path,
            **settings,
        )
    monkeypatch.setattr(population, "_epoch", real_epoch)
    resumed, got = fit_population(
        models(), splits["train"], splits["val"], checkpoint_dir=tmp_path, **settings
    )
    assert [h.without_timing() for h in got] == [h.without_timing() for h in want]
    for name, p in whole.params.items():
        assert torch.equal(resumed.params[name], p)
    for name, b in whole.buffers.items():
        assert torch.equal(resumed.buffers[name], b)


def test_stacking_refuses_models_of_two_architectures() -> None:
    config = _config(normaliser="none")
    train = config_splits(config)["train"]
    a = seeded_mlp({**config, "seed": 0}, train)
    b = seeded_mlp({**config, "seed": 0, "width": 8}, train)
    with pytest.raises(ValueError, match="differs in architecture"):
        stack_models([a, b], torch.device("cpu"))


def test_groups_share_all_but_the_seed_and_rate() -> None:
    runs = get("fc_normalisers").runs("quick", seeds=4)
    by_seed = groups(runs, 3)
    assert sum(len(g) for g in by_seed) == len(runs)
    for g in by_seed:
        assert len(g) <= 3
        assert (
            len(
                {
                    tuple(
                        sorted((k, str(v)) for k, v in r.config.items() if k != "seed")
                    )
                    for r in g
                }
            )
            == 1
        )
    with_rates = groups(runs, 100, rates=True)
    cells = {(r.config["optimizer"], r.config["normaliser"]) for r in runs}
    assert len(with_rates) == len(cells)  # each cell's rates and seeds: one population
    for g in with_rates:
        assert len({r.config["lr"] for r in g}) * 4 == len(g)


def test_the_runner_writes_a_record_per_member_that_verify_reruns(
    tmp_path, monkeypatch
) -> None:
    experiment = get("fc_normalisers")
    quick = experiment.grid("quick")
    small = type(quick)(
        axes={"optimizer": ["adam"], "normaliser": ["layernorm"], "lr": [0.01, 0.1]},
        fixed={**quick.fixed, "width": 16, "depth": 1, "epochs": 1},
        seeds=3,
    )
    monkeypatch.setitem(experiment.profiles, "quick", small)
    from normlab.experiments import populations

    readings = []  # the checkout is read once a population: its members share one moment
    made_by = populations.made_by
    monkeypatch.setattr(
        populations,
        "made_by",
        lambda device: readings.append(device) or made_by(device),
    )
    report = run_grid(
        "fc_normalisers",
        profile="quick",
        out=tmp_path,
        population=8,
        rates=True,
        progress=False,
    )
    assert len(report.ran) == 6
    assert len(readings) == 1
    records = sorted((tmp_path / "fc_normalisers" / "quick" / "runs").glob("*.json"))
    from normlab._records import parse

    parsed = [parse(r.read_text(), "record") for r in records]
    assert all(r["made_by"] == parsed[0]["made_by"] for r in parsed)
    record = parsed[4]
    assert record["population"]["size"] == 6
    assert record["run_id"] in {r.run_id for r in experiment.runs("quick")}
    again = rerun_member(
        experiment,
        record,
        RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path / "c"),
    )
    for key in ("train_loss", "val_loss", "test_loss", "test_metric", "test_hits"):
        assert again["metrics"][key] == record["metrics"][key], key
    assert (
        run_grid(
            "fc_normalisers",
            profile="quick",
            out=tmp_path,
            population=4,
            progress=False,
        ).ran
        == []
    )


# ------------------------------------------------------------------- the gate ViT


def _gate_config(**changes: object) -> dict:
    base = dict(get("gate_bottleneck").runs("quick")[0].config)
    base.pop("arm")
    return {**base, "dim": 16, "depth": 1, "heads": 2, "epochs": 1, **changes}


@pytest.mark.parametrize(
    "arm",
    [
        {"arm": "frozen_ln"},
        {"arm": "autonorm_random"},
        {"arm": "autonorm"},
        {"arm": "autonorm_hard"},
        {"normaliser": "dyt"},
        {"normaliser": "adanorm"},
        {"normaliser": "film"},
    ],
    ids=lambda a: next(iter(a.values())),
)
def test_a_gate_vit_member_starts_as_its_single_run(arm: dict) -> None:
    """Initial weights, first batch, first loss and gradients (with each member's own
    Gumbel or uniform gate noise, drawn from its seed's stream), and the first AdamW step."""
    from normlab.experiments.gate_config import GateConfig
    from normlab.experiments.gate_runs import _gate_start
    from normlab.population_noise import GateNoise

    def start(seed: int):
        return _gate_start(GateConfig.from_config(_gate_config(**arm, seed=seed)))

    seeds = [2, 0, 5]
    starts = [start(s) for s in seeds]
    settings, splits = starts[0].settings, starts[0].splits
    recipe = {
        k: v
        for k, v in settings.config.recipe("classification").items()
        if k not in ("seed",)
    }
    models = [s.model for s in starts]
    seen: dict = {}

    def on_step(step, x, losses, grads) -> None:
        if step == 0:
            seen.update(x=x.clone(), losses=losses.clone(), grads=grads)

    pop, _ = fit_population(
        models,
        splits["train"],
        splits["val"],
        seeds=seeds,
        max_steps=1,
        device="cpu",
        noise=GateNoise(models[0], seeds),
        on_step=on_step,
        member_callbacks=[s.callbacks for s in starts],
        **recipe,
    )
    for k, seed in enumerate(seeds):
        settings, splits, model, _, callbacks = start(seed)
        for name, p in model.named_parameters():  # initial weights: bit for bit
            assert torch.equal(models[k].get_parameter(name), p.detach()), name
        first = _First()
        training.fit(
            model,
            splits["train"],
            splits["val"],
            seed=seed,
            max_steps=1,
            callbacks=[*callbacks, first],
            device="cpu",
            progress=False,
            **{k2: v for k2, v in recipe.items()},
        )
        assert math.isclose(float(seen["losses"][k]), first.loss, rel_tol=RTOL)
        for name, grad in first.grads.items():
            torch.testing.assert_close(
                seen["grads"][name][k], grad, rtol=1e-4, atol=1e-6, msg=name
            )
        # AdamW's first step is lr * g / (|g| + eps): where g is zero up to rounding (a
        # key's bias, which softmax ignores) its sign is rounding's, so only the others
        after = member_model(pop, k, models[k])
        for name, p in model.named_parameters():
            moved = first.grads[name].abs() > 1e-6
            torch.testing.assert_close(
                after.get_parameter(name).detach()[moved],
                p.detach()[moved],
                rtol=1e-4,
                atol=1e-5,
            )


def test_sixteen_gate_members_end_as_sixteen_single_runs_do() -> None:
    experiment = get("gate_bottleneck")
    config = _gate_config(arm="autonorm")
    ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=None)
    seeds = list(range(16))
    outcomes = experiment.run_population([{**config, "seed": s} for s in seeds], ctx)
    singles = [experiment.run_one({**config, "seed": s}, ctx) for s in seeds]
    for key in ("test_metric", "val_loss", "final_entropy"):
        a = [o["metrics"][key] for o in outcomes]
        b = [o["metrics"][key] for o in singles]
        diff, half, _ = _interval(a, b)
        assert abs(diff) <= half, (key, diff, half)
    assert outcomes[0].keys() == singles[0].keys()
    assert [r.keys() for r in outcomes[0]["gates"]] == [
        r.keys() for r in singles[0]["gates"]
    ]


def test_a_killed_gate_population_resumes_to_the_same_numbers(
    tmp_path, monkeypatch
) -> None:
    """The stacked ViT, each member's gate noise stream and its telemetry callbacks
    resume from the epoch's checkpoint to exactly the numbers of an uninterrupted run."""
    from normlab.experiments.gate_config import GateConfig
    from normlab.experiments.gate_runs import _gate_start
    from normlab.population_noise import GateNoise

    seeds = [0, 1, 2]

    def fit(**extra):
        starts = [
            _gate_start(
                GateConfig.from_config(_gate_config(arm="autonorm", epochs=3, seed=s))
            )
            for s in seeds
        ]
        models, splits = [s.model for s in starts], starts[0].splits
        recipe = starts[0].settings.config.recipe("classification")
        recipe = {k: v for k, v in recipe.items() if k != "seed"}
        return fit_population(
            models,
            splits["train"],
            splits["val"],
            seeds=seeds,
            device="cpu",
            noise=GateNoise(models[0], seeds),
            member_callbacks=[s.callbacks for s in starts],
            **recipe,
            **extra,
        )

    whole, want = fit()
    assert whole.ensemble is not None  # the stacked ViT, not vmap
    real_epoch = _kill_at_epoch(3, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        fit(checkpoint_dir=tmp_path)
    monkeypatch.setattr(population, "_epoch", real_epoch)
    resumed, got = fit(checkpoint_dir=tmp_path)
    assert [h.without_timing() for h in got] == [h.without_timing() for h in want]
    for name, p in whole.params.items():
        assert torch.equal(resumed.params[name], p), name


# ------------------------------------------------------------------------ the CNN


def _cnn_config(**changes: object) -> dict:
    base = dict(get("cnn_normalisers").runs("quick")[0].config)
    return {**base, "channels": 4, "epochs": 1, **changes}


@pytest.mark.parametrize(
    "normaliser", get("cnn_normalisers").grid("quick").axes["normaliser"]
)
def test_a_cnn_member_starts_as_its_single_run(normaliser: str) -> None:
    """PatchNorm's two modes and the rivals: first batch, loss, gradients and SGD step."""
    from normlab.experiments.part1_conv import _seeded_cnn

    config = _cnn_config(normaliser=normaliser)
    splits = config_splits(config)
    seeds = [4, 1]
    models = [
        _seeded_cnn({**config, "seed": s}, normaliser, splits["train"]) for s in seeds
    ]
    seen: dict = {}

    def on_step(step, x, losses, grads) -> None:
        if step == 0:
            seen.update(losses=losses.clone(), grads=grads)

    pop, _ = fit_population(
        models,
        splits["train"],
        splits["val"],
        epochs=1,
        batch_size=64,
        lr=0.3,
        optimizer="sgd",
        seeds=seeds,
        max_steps=1,
        device="cpu",
        on_step=on_step,
    )
    for k, seed in enumerate(seeds):
        model = _seeded_cnn({**config, "seed": seed}, normaliser, splits["train"])
        for name, p in model.named_parameters():
            assert torch.equal(models[k].get_parameter(name), p.detach()), name
        first = _First()
        training.fit(
            model,
            splits["train"],
            splits["val"],
            seed=seed,
            epochs=1,
            batch_size=64,
            lr=0.3,
            optimizer="sgd",
            max_steps=1,
            callbacks=[first],
            device="cpu",
            progress=False,
        )
        assert math.isclose(float(seen["losses"][k]), first.loss, rel_tol=RTOL)
        for name, grad in first.grads.items():
            torch.testing.assert_close(
                seen["grads"][name][k], grad, rtol=RTOL, atol=ATOL
            )
        after = member_model(pop, k, models[k]).state_dict()
        for name, p in model.state_dict().items():
            torch.testing.assert_close(after[name], p, rtol=RTOL, atol=ATOL)


def test_sixteen_cnn_members_end_as_sixteen_single_runs_do() -> None:
    experiment = get("cnn_normalisers")
    config = _cnn_config(normaliser="norm_like", lr=0.3)
    ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=None)
    seeds = list(range(16))
    outcomes = experiment.run_population([{**config, "seed": s} for s in seeds], ctx)
    singles = [experiment.run_one({**config, "seed": s}, ctx) for s in seeds]
    for key in ("test_metric", "val_loss", "position_coupling"):
        a = [o["metrics"][key] for o in outcomes]
        b = [o["metrics"][key] for o in singles]
        diff, half, _ = _interval(a, b)
        assert abs(diff) <= half, (key, diff, half)
    assert outcomes[0]["metrics"].keys() == singles[0]["metrics"].keys()


@pytest.mark.parametrize(
    "arm",
    [
        {"arm": "freeze_at_1"},
        # AutoNorm-S's rule at an eps_H between these seeds' entropies: some members
        # freeze and some do not, so the freeze is decided per member
        {"arm": "autonorm", "rule": "high", "t_freeze": 1, "eps_h": 0.68},
        {"arm": "sample_at_1"},
    ],
    ids=["freeze_at_1", "autonorm_s", "sample_at_1"],
)
def test_autonorm_s_freezes_each_member_as_its_single_run(arm: dict) -> None:
    experiment = get("gate_bottleneck")
    config = _gate_config(**arm, epochs=2)
    ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=None)
    seeds = [0, 1, 2, 3]
    outcomes = experiment.run_population([{**config, "seed": s} for s in seeds], ctx)
    singles = [experiment.run_one({**config, "seed": s}, ctx) for s in seeds]
    for mine, theirs in zip(outcomes, singles):
        assert mine.get("frozen") == theirs.get("frozen")
        for a, b in zip(mine["history"], theirs["history"]):
            assert math.isclose(a["train_loss"], b["train_loss"], rel_tol=1e-4)
        assert math.isclose(
            mine["metrics"]["decision_entropy"],
            theirs["metrics"]["decision_entropy"],
            rel_tol=1e-5,
        ) or math.isnan(theirs["metrics"]["decision_entropy"])
    if "rule" in arm:
        assert len({len(o["frozen"]) for o in singles}) == 2  # mixed decisions


def test_the_command_line_refuses_a_bad_population(tmp_path, capsys) -> None:
    from normlab.__main__ import main

    out = ["--profile", "quick", "--out", str(tmp_path)]
    assert main(["run", "fc_normalisers", *out, "--population", "0"]) == 2
    assert "--population must be a positive int" in capsys.readouterr().err
    assert main(["run", "fc_normalisers", *out, "--population-rates"]) == 2
    assert "--population-rates needs --population" in capsys.readouterr().err
    assert not (tmp_path / "fc_normalisers").exists()  # refused before any run


def test_a_population_saved_set_verifies_exactly(tmp_path, monkeypatch) -> None:
    """``save --population``: a saved set of population records, which ``verify`` re-runs
    population by population and finds exactly equal (same numerics fingerprint)."""
    from normlab import _provenance, experiments, results, verification
    from normlab.experiments import RunSettings
    from normlab.experiments.grid import Grid
    from normlab.experiments.part1 import train_mlp, train_mlp_population

    name = "_tiny_population_test"
    if name not in experiments.names():
        grid = Grid(
            axes={"normaliser": ["none", "layernorm"], "lr": [0.1]},
            fixed={
                **{
                    k: v
                    for k, v in _config().items()
                    if k not in ("seed", "lr", "normaliser")
                },
                "data_profile": "cpu",
                "epochs": 1,
                "optimizer": "sgd",
            },
            seeds=3,
        )
        experiments.register_experiment(
            experiments.Experiment(
                name=name,
                title="tiny population",
                chapter="-",
                profiles={p: grid for p in ("quick", "cpu", "standard", "paper")},
                run_one=train_mlp,
                run_population=train_mlp_population,
                seconds_per_run={p: 0.3 for p in ("quick", "cpu", "standard", "paper")},
            )
        )
    monkeypatch.setattr(_provenance, "git_commit", lambda: "0" * 40)
    saved = results.save(
        name, RunSettings(profile="cpu", population=3), root=tmp_path, allow_dirty=True
    )
    records = saved.records()
    assert len(records) == 6 and all(r["population"]["size"] == 3 for r in records)
    checked = verification.verify(saved, k=2)
    assert checked.mode == "exact" and checked.ok, checked.problems


def test_a_ready_autonorm_s_member_decides_as_its_single_run() -> None:
    """``gate_regime``'s ``autonorm_s_ready``: each member decides from its own validation
    accuracy, at the epoch its single run decides, after the same first loss. The arm's
    callback at a lead these seeds reach at different epochs (the arm's own lead, which
    the arm name would set, is not reached this soon), so the decisions differ by member."""
    experiment = get("gate_regime")
    config = _gate_config(normaliser="autonorm", ready_lead=0.05, epochs=3)
    ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=None)
    seeds = [0, 1, 2, 3]
    outcomes = experiment.run_population([{**config, "seed": s} for s in seeds], ctx)
    singles = [experiment.run_one({**config, "seed": s}, ctx) for s in seeds]
    for mine, theirs in zip(outcomes, singles):
        assert math.isclose(
            mine["history"][0]["train_loss"],
            theirs["history"][0]["train_loss"],
            rel_tol=1e-4,
        )
        assert mine["metrics"]["decided_at"] == theirs["metrics"]["decided_at"]
        assert mine.get("frozen") == theirs.get("frozen")
    assert len({o["metrics"]["decided_at"] for o in singles}) == 2  # mixed epochs


def test_a_member_is_rerun_with_the_engine_that_made_it(tmp_path) -> None:
    """``verify`` trains a record's population again as it was made: under vmap where the
    record names no engine (made before the gate ViT had a stacked form)."""
    import dataclasses

    used = []

    def run_population(configs, ctx):
        used.append(ctx.population_engine)
        return [{"member": c["seed"]} for c in configs]

    experiment = dataclasses.replace(get("gate_regime"), run_population=run_population)
    ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=tmp_path)
    made = {"size": 2, "member": 1, "members": [[4, 1e-3], [7, 1e-3]]}
    record = {"config": {"arm": "autonorm", "seed": 7, "lr": 1e-3}, "population": made}
    assert rerun_member(experiment, record, ctx) == {"member": 7}
    made["engine"] = "stacked"
    rerun_member(experiment, record, ctx)
    assert used == ["vmap", "stacked"]


def test_the_vmap_engine_runs_the_vit_under_vmap_and_leaves_the_mlp_stacked() -> None:
    """The ``vmap`` engine runs the gate ViT under vmap, as populations ran before it had a
    stacked form; the Part I MLP keeps its own, which those populations already used."""
    from normlab.experiments.gate_config import GateConfig
    from normlab.experiments.gate_runs import _gate_start

    vits = [
        _gate_start(GateConfig.from_config(_gate_config(arm="autonorm", seed=s))).model
        for s in range(2)
    ]
    cpu = torch.device("cpu")
    assert stack_models(vits, cpu).ensemble is not None
    assert stack_models(vits, cpu, engine="vmap").ensemble is None
    config = _config(normaliser="batchnorm", optimizer="sgd")
    train = config_splits(config)["train"]
    mlps = [seeded_mlp({**config, "seed": s}, train) for s in range(2)]
    assert stack_models(mlps, cpu, engine="vmap").ensemble is not None
    with pytest.raises(ValueError, match="engine must be one of"):
        stack_models(mlps, cpu, engine="jit")
