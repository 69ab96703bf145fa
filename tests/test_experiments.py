"""normlab.experiments: grids, stable ids, shards, CI summaries, best-of selection, the runner."""

from __future__ import annotations

import dataclasses
import json
import math

import normlab
import numpy as np
import pandas as pd
import pytest
from normlab import experiments
from normlab.analysis import at_chosen_lr, choice_edges, select_best, summarise
from normlab.experiments import (
    Experiment,
    Grid,
    parse_shard,
    part1,
    part1_batch,
    run_id,
    shard,
)
from normlab.figures.reports import report_figures
from normlab.stats import mean_ci
from scipy import stats


def test_grid_is_the_cross_product_with_seeds() -> None:
    grid = Grid(
        axes={"normaliser": ["none", "affine_like"], "lr": [0.1, 1.0, 10.0]},
        fixed={"epochs": 3},
        seeds=2,
    )
    configs = grid.configs()
    assert len(configs) == grid.size() == 12
    assert {(c["normaliser"], c["lr"], c["seed"]) for c in configs} == {
        (n, lr, s)
        for n in ("none", "affine_like")
        for lr in (0.1, 1.0, 10.0)
        for s in (0, 1)
    }
    assert all(c["epochs"] == 3 for c in configs)
    assert len(grid.configs(seeds=1)) == 6
    with pytest.raises(ValueError, match="both swept and fixed: lr"):
        Grid(axes={"lr": [1.0]}, fixed={"lr": 2.0})
    with pytest.raises(ValueError, match="seed"):
        Grid(axes={"seed": [1, 2]})


def test_grid_gives_some_points_fewer_seeds() -> None:
    # the cells a plan needs more seeds of (here lr 1.0) have them; the others keep fewer
    grid = Grid(
        axes={"normaliser": ["none", "affine_like"], "lr": [0.1, 1.0]},
        seeds=4,
        seeds_of=lambda c: 4 if c["lr"] == 1.0 else 2,
    )
    configs = grid.configs()
    seeds = {(c["normaliser"], c["lr"]): set() for c in configs}
    for c in configs:
        seeds[c["normaliser"], c["lr"]].add(c["seed"])
    assert seeds == {
        ("none", 0.1): {0, 1},
        ("affine_like", 0.1): {0, 1},
        ("none", 1.0): {0, 1, 2, 3},
        ("affine_like", 1.0): {0, 1, 2, 3},
    }
    assert grid.size() == len(configs) == 12
    # an override caps every point's own count
    assert grid.size(seeds=3) == 2 * 2 + 2 * 3 and grid.size(seeds=1) == 4
    for bad in (0, 5, 2.0, True):
        broken = dataclasses.replace(grid, seeds_of=lambda c, bad=bad: bad)
        with pytest.raises(ValueError, match="seeds_of must give an int from 1 to"):
            broken.configs()


def test_run_ids_are_stable_hashes() -> None:
    config = {"lr": 0.1, "normaliser": "none", "seed": 0}
    assert run_id("exp", config) == run_id("exp", dict(reversed(list(config.items()))))
    assert run_id("exp", config) != run_id("exp", {**config, "seed": 1})
    assert (
        run_id("exp", config).startswith("exp-")
        and len(run_id("exp", config)) == len("exp-") + 12
    )
    # A fixed value: the id of a configuration must not change between releases or machines.
    assert (
        run_id("exp", config)
        == "exp-"
        + __import__("hashlib")
        .sha256(b'{"lr":0.1,"normaliser":"none","seed":0}')
        .hexdigest()[:12]
    )


def test_shards_partition_the_grid() -> None:
    runs = experiments.get("fc_normalisers").runs("quick")
    parts = [shard(runs, f"{k}/5") for k in range(5)]
    ids = [r.run_id for part in parts for r in part]
    assert sorted(ids) == sorted(r.run_id for r in runs) and len(set(ids)) == len(ids)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert shard(runs, "2/5") == shard(
        list(reversed(runs)), (2, 5)
    )  # independent of input order


@pytest.mark.parametrize("bad", ["3", "a/b", "5/5", "-1/4", "1/0", "1/2/3"])
def test_bad_shard(bad: str) -> None:
    with pytest.raises(ValueError, match="shard"):
        parse_shard(bad)


def test_mean_ci_matches_scipy() -> None:
    sample = [0.91, 0.87, 0.95, 0.89, 0.93]
    mean, half, n = mean_ci(sample)
    low, high = stats.t.interval(
        0.95, len(sample) - 1, loc=np.mean(sample), scale=stats.sem(sample)
    )
    assert n == 5 and mean == pytest.approx(np.mean(sample))
    assert mean - half == pytest.approx(low) and mean + half == pytest.approx(high)
    assert math.isnan(mean_ci([0.5])[1])


def _table() -> pd.DataFrame:
    """Two normalisers x two lrs x 3 seeds; test would pick the other lr than val does."""
    rows = []
    for normaliser, lrs in {
        "none": {0.1: (0.90, 0.50), 1.0: (0.80, 0.99)},
        "affine_like": {0.1: (float("nan"), 0.99), 1.0: (0.70, 0.60)},
    }.items():
        for lr, (val, test) in lrs.items():
            for seed in range(3):
                rows.append(
                    {
                        "normaliser": normaliser,
                        "lr": lr,
                        "seed": seed,
                        "val_metric": val + 0.01 * seed,
                        "test_metric": test + 0.02 * seed,
                    }
                )
    return pd.DataFrame(rows)


def test_select_best_uses_validation_only() -> None:
    best = select_best(_table(), ["normaliser"], "lr").set_index("normaliser")
    assert best.loc["none", "lr"] == 0.1  # val says 0.1 although test would say 1.0
    assert best.loc["none", "mean"] == pytest.approx(0.52)
    assert best.loc["none", "ci95"] == pytest.approx(mean_ci([0.50, 0.52, 0.54])[1])
    assert best.loc["affine_like", "lr"] == 1.0  # a NaN (diverged) mean never wins
    assert (
        best.loc["affine_like", "n"] == 3 and best.loc["affine_like", "candidates"] == 2
    )
    lower = select_best(
        _table(), ["normaliser"], "lr", higher_is_better=False
    ).set_index("normaliser")
    assert lower.loc["none", "lr"] == 1.0  # e.g. RMSE: the smaller val mean wins
    assert lower.loc["affine_like", "lr"] == 1.0  # NaN loses in both directions


def test_select_best_flags_a_choice_at_the_edge_of_the_grid() -> None:
    rows = [
        {"normaliser": n, "lr": lr, "seed": 0, "val_metric": v, "test_metric": v}
        for n, scores in {
            "edge": {0.1: 0.2, 1.0: 0.5, 10.0: 0.9},
            "inside": {0.1: 0.2, 1.0: 0.9, 10.0: 0.5},
        }.items()
        for lr, v in scores.items()
    ]
    best = select_best(pd.DataFrame(rows), ["normaliser"], "lr").set_index("normaliser")
    assert best.loc["edge", "at_edge"] and best.loc["edge", "lr"] == 10.0
    assert not best.loc["inside", "at_edge"]


def test_choice_edges_names_the_side_of_the_grid_a_choice_sits_on() -> None:
    """Each cell's choice against the values that cell tried (not the union of all
    cells'): the lowest, the highest, inside, a single value and no choice."""
    tried = {
        "low": (0.1, 0.3, 1.0),
        "high": (1.0, 3.0),
        "inside": (0.03, 0.1, 0.3),
        "single": (0.1,),
        "none": (0.1, 1.0),
    }
    rows = [
        {"normaliser": n, "depth": 2, "lr": lr, "seed": s}
        for n, rates in tried.items()
        for lr in rates
        for s in range(2)
    ]
    picks = {"low": 0.1, "high": 3.0, "inside": 0.1, "single": 0.1, "none": math.nan}
    chosen = pd.DataFrame(
        [{"normaliser": n, "depth": 2, "lr": lr} for n, lr in picks.items()]
    )
    edges = choice_edges(pd.DataFrame(rows), chosen, ["normaliser", "depth"])
    edges = edges.set_index("normaliser")
    assert edges["edge"].to_dict() == {
        "low": "low",
        "high": "high",
        "inside": "",
        "single": "",
        "none": "",
    }
    assert edges.loc["inside", "tried"] == 3 and edges.loc["single", "tried"] == 1
    assert (edges.loc["inside", "lowest"], edges.loc["inside", "highest"]) == (
        0.03,
        0.3,
    )
    # select_best's own at_edge agrees with it on a table it chose from
    table = pd.DataFrame(rows).assign(val_metric=lambda t: -abs(t["lr"] - 0.2))
    best = select_best(table.assign(test_metric=0.0), ["normaliser", "depth"])
    flagged = choice_edges(table, best, ["normaliser", "depth"])["edge"] != ""
    assert flagged.tolist() == best["at_edge"].tolist()
    with pytest.raises(ValueError, match="not in the results"):
        choice_edges(
            pd.DataFrame(rows), chosen.assign(depth=3), ["normaliser", "depth"]
        )


def test_seeds_that_confirm_a_choice_cannot_move_it() -> None:
    """Three seeds run both rates (0.1 wins on val); five more run only 0.1 and score
    badly on val. Compared on every seed, 1.0 would win; the choice uses only the seeds
    that ran every rate, and the report at the choice uses all eight."""
    rows = [
        {
            "normaliser": "none",
            "lr": lr,
            "seed": seed,
            "val_metric": v,
            "test_metric": v,
        }
        for seed in range(3)
        for lr, v in ((0.1, 0.9), (1.0, 0.8))
    ]
    rows += [
        {
            "normaliser": "none",
            "lr": 0.1,
            "seed": seed,
            "val_metric": 0.5,
            "test_metric": 0.5,
        }
        for seed in range(3, 8)
    ]
    table = pd.DataFrame(rows).assign(higher_is_better=True)
    assert table.groupby("lr")["val_metric"].mean()[1.0] > 0.65  # 1.0 on every seed
    best = select_best(table, ["normaliser"], "lr").iloc[0]
    assert best["lr"] == 0.1 and best["val_mean"] == pytest.approx(
        (3 * 0.9 + 5 * 0.5) / 8
    )
    assert best["n"] == 8 and best["mean"] == pytest.approx((3 * 0.9 + 5 * 0.5) / 8)
    assert len(at_chosen_lr(table, ["normaliser"])) == 8
    # where no seed ran every rate, every seed takes part
    apart = table[~((table["lr"] == 1.0) & (table["seed"] < 3))]
    apart = pd.concat([apart, table[(table["lr"] == 1.0)].assign(seed=99)])
    assert select_best(apart, ["normaliser"], "lr").iloc[0]["lr"] == 1.0


def _two_of_three_diverged(column: bool) -> pd.DataFrame:
    """At lr 1.0 two of three seeds diverged: the survivor's 0.99 is the best non-NaN mean."""
    rows = []
    for lr, vals in {0.1: (0.90, 0.91, 0.92), 1.0: (0.99, math.nan, math.nan)}.items():
        for seed, val in enumerate(vals):
            row = {"normaliser": "none", "lr": lr, "seed": seed, "val_metric": val}
            rows.append({**row, "test_metric": val, "higher_is_better": True})
            if column:
                rows[-1]["diverged"] = math.isnan(val)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("column", [True, False], ids=["diverged", "nan_only"])
def test_select_best_never_picks_a_rate_at_which_a_seed_diverged(column: bool) -> None:
    best = select_best(_two_of_three_diverged(column), ["normaliser"], "lr").iloc[0]
    assert best["lr"] == 0.1 and best["val_mean"] == pytest.approx(0.91)
    assert not best["all_diverged"] and best["candidates"] == 2
    chosen = at_chosen_lr(_two_of_three_diverged(column), ["normaliser"])
    assert set(chosen["lr"]) == {0.1} and len(chosen) == 3
    assert not chosen["all_diverged"].any()


def test_select_best_flags_a_choice_where_every_rate_had_a_divergence() -> None:
    table = _two_of_three_diverged(True)
    # one seed at 0.1 diverged too, with a finite (exploded) val metric: no rate is clean
    table.loc[(table["lr"] == 0.1) & (table["seed"] == 2), "diverged"] = True
    best = select_best(table, ["normaliser"], "lr").iloc[0]
    assert best["all_diverged"] and best["lr"] == 1.0  # the old rule: best non-NaN mean
    lower = select_best(table, ["normaliser"], "lr", higher_is_better=False).iloc[0]
    assert lower["all_diverged"] and lower["lr"] == 0.1


def test_summarise_groups_across_seeds() -> None:
    out = summarise(_table(), ["normaliser", "lr"]).set_index(["normaliser", "lr"])
    assert out.loc[("none", 1.0), "mean"] == pytest.approx(1.01)
    assert (out["n"] == 3).all()


def test_part1_declarations() -> None:
    assert {"fc_normalisers", "batch_size"} <= set(experiments.names())
    for name in ("fc_normalisers", "batch_size"):
        exp = experiments.get(name)
        for profile in exp.profiles:
            grid = exp.grid(profile)
            assert len(grid.axes["lr"]) >= 3, (
                "normalisers must be compared at their own learning rates"
            )
            # the book's sets compare a fixed tuple; the live quick grid, every Part I name
            names = part1.NORMALISERS if profile == "quick" else part1.BOOK_NORMALISERS
            assert grid.axes["normaliser"] == list(names)
            budget = grid.axes.get("budget", [grid.fixed.get("budget")])
            known = {*part1.BUDGETS, *part1_batch.BATCH_BUDGETS}
            assert set(budget) <= known and None not in budget
        assert exp.grid("quick").fixed["data"] == "mnist"
        assert exp.grid("standard").fixed["data"] == "cifar10"
        assert exp.expected_seconds("quick") <= 60


def test_every_grid_loads_its_data_through_the_sources_table() -> None:
    """Part I and Part II name a task and a profile; ``data.SOURCES`` decides what loads."""
    from normlab.data.sources import RESTYLED

    checked = 0
    for name in experiments.names():
        exp = experiments.get(name)
        if name.startswith("_") or not exp.run_one.__module__.startswith("normlab."):
            continue  # a toy experiment registered by another test
        for profile in exp.profiles:
            for config in exp.grid(profile).configs(seeds=1):
                task = config["data"].removesuffix(RESTYLED)
                assert (task, config["data_profile"]) in normlab.data.SOURCES, (
                    name,
                    profile,
                )
                # the offline profiles run on stand-ins, the GPU profiles on real data
                offline = profile in ("quick", "cpu")
                assert (config["data_profile"] in ("quick", "cpu")) == offline
                checked += 1
    assert checked > 100


def test_registry_errors() -> None:
    with pytest.raises(ValueError, match="not known; expected one of .*fc_normalisers"):
        experiments.get("nope")
    grid = Grid(axes={"lr": [0.1]})
    with pytest.raises(ValueError, match="already registered"):
        experiments.register_experiment(experiments.get("fc_normalisers"))
    with pytest.raises(ValueError, match="paper"):
        Experiment(
            name="x",
            title="x",
            chapter="0",
            profiles={"quick": grid, "standard": grid},
            run_one=lambda c, ctx: {},
            seconds_per_run={"quick": 1, "standard": 1},
        )


def test_runner_writes_records_then_skips_without_rewriting(
    tmp_path, monkeypatch
) -> None:
    out = tmp_path / "results"
    runs = experiments.get("fc_normalisers").runs("quick", seeds=1)
    part = f"0/{len(runs) // 3}"  # a few runs
    done = experiments.run(
        "fc_normalisers",
        profile="quick",
        out=out,
        seeds=1,
        shard=part,
        device="cpu",
        progress=False,
    )
    assert (
        sorted(done.ran) == sorted(r.run_id for r in shard(runs, part))
        and len(done.ran) >= 2
    )
    assert not done.skipped
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert [p.name for p in files if p.suffix == ".json"] == sorted(
        f"{r}.json" for r in done.ran
    )
    assert not (
        done.folder / "checkpoints"
    ).exists()  # finished runs leave no checkpoints behind
    record = json.loads((done.folder / "runs" / f"{done.ran[0]}.json").read_text())
    assert record["run_id"] == run_id("fc_normalisers", record["config"])
    assert (
        0.0 <= record["metrics"]["test_metric"] <= 1.0
        and len(record["history"]) == record["config"]["epochs"]
    )
    table = pd.read_csv(done.results_csv)
    assert sorted(table["run_id"]) == sorted(done.ran)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}

    def no_training(*args, **kwargs):
        raise AssertionError("fit must not be called for finished runs")

    monkeypatch.setattr(normlab.training, "fit", no_training)
    again = experiments.run(
        "fc_normalisers",
        profile="quick",
        out=out,
        seeds=1,
        shard=part,
        device="cpu",
        progress=False,
    )
    assert again.ran == [] and sorted(again.skipped) == sorted(done.ran)
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files} == before
    assert sorted(p for p in out.rglob("*") if p.is_file()) == files


def test_runner_resumes_an_interrupted_run(tmp_path, monkeypatch) -> None:
    """A run killed mid-way leaves a checkpoint; the next runner call continues from it."""
    from normlab.callbacks import Callback

    out = tmp_path / "results"
    exp = experiments.get("fc_normalisers")
    runs = exp.runs("quick", seeds=1)
    one = f"0/{len(runs)}"  # a shard of exactly one run
    (target,) = shard(runs, one)
    real_fit = normlab.training.fit

    class Interrupt(Callback):
        def on_epoch_end(self, state):
            if state.epoch == 2:
                raise KeyboardInterrupt

    def interrupted_fit(*args, **kwargs):
        return real_fit(*args, callbacks=[Interrupt()], **kwargs)

    monkeypatch.setattr(normlab.training, "fit", interrupted_fit)
    with pytest.raises(KeyboardInterrupt):
        experiments.run(
            "fc_normalisers",
            profile="quick",
            out=out,
            seeds=1,
            shard=one,
            device="cpu",
            progress=False,
        )
    folder = experiments.results_folder("fc_normalisers", out, "quick")
    assert (folder / "checkpoints" / target.run_id / "last.pt").exists()
    assert not (folder / "runs").exists()

    epochs_trained = []

    def counting_fit(*args, **kwargs):
        history = real_fit(*args, **kwargs)
        epochs_trained.append(history)
        return history

    monkeypatch.setattr(normlab.training, "fit", counting_fit)
    done = experiments.run(
        "fc_normalisers",
        profile="quick",
        out=out,
        seeds=1,
        shard=one,
        device="cpu",
        progress=False,
    )
    assert done.ran == [target.run_id]
    # The resumed history has every epoch; reference: the same run uninterrupted.
    monkeypatch.setattr(normlab.training, "fit", real_fit)
    fresh = experiments.run(
        "fc_normalisers",
        profile="quick",
        out=tmp_path / "fresh",
        seeds=1,
        shard=one,
        device="cpu",
        progress=False,
    )
    resumed = json.loads((folder / "runs" / f"{target.run_id}.json").read_text())
    reference = json.loads(
        (fresh.folder / "runs" / f"{target.run_id}.json").read_text()
    )

    def strip(h):
        return [
            {k: v for k, v in r.items() if k not in normlab.training.TIMING_KEYS}
            for r in h
        ]

    assert strip(resumed["history"]) == strip(reference["history"])
    assert resumed["metrics"] == reference["metrics"]


def test_report_writes_summary_and_figures(tmp_path) -> None:
    out = tmp_path / "results"
    experiments.run(
        "fc_normalisers",
        profile="quick",
        out=out,
        seeds=2,
        shard="0/30",
        device="cpu",
        progress=False,
    )
    rep = experiments.report(
        "fc_normalisers",
        profile="quick",
        out=out,
        figures=report_figures("fc_normalisers"),
    )
    assert (rep.folder / "summary.csv").exists()
    assert {"lr", "mean", "ci95", "n", "val_mean"} <= set(rep.summary.columns)
    assert all(p.exists() and p.stat().st_size > 0 for p in rep.paths.values())
    assert "lr_sensitivity" in rep.figures
    assert {f"best_by_width_{o}" for o in rep.results["optimizer"].unique()} <= set(
        rep.figures
    )
    with pytest.raises(ValueError, match="no run records"):
        experiments.report("batch_size", profile="quick", out=out)
    experiments.run(
        "batch_size",
        profile="quick",
        out=out,
        seeds=2,
        shard="0/45",
        device="cpu",
        progress=False,
    )
    rep = experiments.report(
        "batch_size", profile="quick", out=out, figures=report_figures("batch_size")
    )
    assert {"normaliser", "batch_size", "lr", "mean", "ci95"} <= set(
        rep.summary.columns
    )
    assert {"steps_to_target", "chosen_lr", "scaling_slopes"} <= set(rep.figures)


def test_cpu_profile_is_optional_and_named_when_missing() -> None:
    full = experiments.get("fc_normalisers")
    assert "cpu" in full.profiles
    required = normlab._runtime.REQUIRED_PROFILES
    without_cpu = dataclasses.replace(
        full,
        profiles={p: full.profiles[p] for p in required},
        seconds_per_run={p: full.seconds_per_run[p] for p in required},
    )
    assert without_cpu.grid("quick") is full.grid("quick")
    with pytest.raises(ValueError, match="declares no 'cpu' grid") as info:
        without_cpu.grid("cpu")
    assert ", ".join(required) in str(info.value)  # it names the grids it has
    with pytest.raises(ValueError, match="profile\\(s\\) paper"):
        dataclasses.replace(
            full,
            profiles={p: full.profiles[p] for p in ("quick", "standard")},
        )
