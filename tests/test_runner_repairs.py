"""The runner's records: strict JSON, damaged records named, a stale table rebuilt, files
written with the umask's mode, and ``report`` over every experiment in every profile."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from normlab import _io, _records, experiments, results
from normlab.__main__ import main
from normlab.figures.reports import report_figures

EXPERIMENT = "cnn_normalisers"


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A few finished quick runs of one experiment (the folder they are in)."""
    out = tmp_path_factory.mktemp("runs")
    done = experiments.run(
        EXPERIMENT,
        profile="quick",
        out=out,
        seeds=1,
        shard="0/9",
        device="cpu",
        progress=False,
    )
    assert len(done.ran) >= 2
    return done.folder


@pytest.fixture
def folder(finished: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / EXPERIMENT / "quick"
    shutil.copytree(finished, copy)
    return copy


def _run(folder: Path) -> experiments.RunReport:
    return experiments.run(
        EXPERIMENT,
        profile="quick",
        out=folder.parent.parent,
        seeds=1,
        shard="0/9",
        device="cpu",
        progress=False,
    )


# ----------------------------------------------------------------- strict JSON


def test_non_finite_numbers_are_null_and_the_run_is_marked_diverged() -> None:
    record = {
        "run_id": "x-0123456789ab",
        "experiment": "x",
        "profile": "quick",
        "config": {"patch_size": None, "lr": 0.1},
        "metric": "accuracy",
        "higher_is_better": True,
        "metrics": {
            "train_loss": math.nan,
            "val_loss": math.inf,
            "val_metric": 0.1,
            "test_loss": math.nan,
            "test_metric": 0.1,
            "diverged": False,
            "decision_entropy": math.nan,
        },
        "history": [{"train_loss": -math.inf}],
        "seconds": 1.0,
    }
    line = _records.dumps(record)
    assert "NaN" not in line and "Infinity" not in line
    back = _records.parse(line, "test")
    assert back["metrics"]["diverged"] is True
    assert math.isnan(back["metrics"]["val_loss"]) and math.isnan(
        back["history"][0]["train_loss"]
    )
    assert back["config"]["patch_size"] is None  # a setting left at None stays None
    with pytest.raises(ValueError, match="NaN is not JSON"):
        _records.parse(json.dumps(record), "strict.jsonl")  # a bare NaN is refused
    assert _records.parse(json.dumps(record), "old.json", strict=False)["metrics"][
        "diverged"
    ]


def test_json_nested_too_deep_is_refused_by_name() -> None:
    """Whether or not json itself could parse it, no RecursionError escapes; brackets in
    strings (escaped quotes among them) do not count."""
    depth = _records.MAX_DEPTH
    for text in ("[" * 100_000, "[" * (depth + 1) + "]" * (depth + 1)):
        with pytest.raises(
            _records.RecordError,
            match=f"^runs.jsonl line 3: nested deeper than {depth} levels$",
        ):
            _records.parse(text, "runs.jsonl line 3")
    _records.loads("[" * depth + "]" * depth, "x")  # exactly as deep as allowed
    tricky = json.dumps({"s": '"[{' * 100, "t": ["\\"]})
    assert _records.loads(tricky, "x")["s"].startswith('"[{')


def test_the_runner_writes_strict_json(finished: Path) -> None:
    for path in (finished / "runs").glob("*.json"):
        json.loads(path.read_text(), parse_constant=pytest.fail)


# ------------------------------------------------------------- damaged records


@pytest.mark.parametrize(
    "damage", ['{"run_id": "cnn_norm', "", "{}", "[1, 2]"], ids=repr
)
def test_a_damaged_record_is_named_not_dropped(
    folder: Path, damage: str, capsys
) -> None:
    path = sorted((folder / "runs").glob("*.json"))[0]
    path.write_text(damage)
    out = folder.parent.parent
    with pytest.raises(ValueError, match=path.name):
        experiments.load_records(EXPERIMENT, out, "quick")
    with pytest.raises(ValueError, match=path.name):
        experiments.report(EXPERIMENT, out=out, profile="quick")
    assert main(["report", EXPERIMENT, "--profile", "quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and path.name in err and len(err.splitlines()) == 1


def test_a_saved_set_is_left_to_the_reader_that_checks_it(folder: Path) -> None:
    """A folder with a manifest is a saved set: only normlab.results.load reads it."""
    (folder / "manifest.json").write_text("{}")
    with pytest.raises(ValueError, match=r"results\.load\(.*\)\.records\(\)"):
        experiments.load_records(EXPERIMENT, folder.parent.parent, "quick")


def test_the_runner_redoes_a_damaged_record_and_says_so(folder: Path) -> None:
    path = sorted((folder / "runs").glob("*.json"))[0]
    path.write_text(path.read_text()[:40])
    with pytest.warns(UserWarning, match=path.name):
        again = _run(folder)
    assert again.ran == [path.stem]
    assert experiments.load_records(EXPERIMENT, folder.parent.parent, "quick")


# --------------------------------------------------------------- a stale table


def test_a_table_cut_short_is_rebuilt(folder: Path) -> None:
    """As after a SIGKILL while results.csv was written by an older runner: every run is
    finished, nothing needs to run, and the table is still made whole again."""
    table = folder / "results.csv"
    full = table.read_text()
    table.write_text("\n".join(full.splitlines()[:2]) + "\n")
    again = _run(folder)
    assert again.ran == [] and table.read_text() == full
    table.write_text(full[: len(full) // 2])  # cut mid-line
    _run(folder)
    assert table.read_text() == full
    table.unlink()
    _run(folder)
    assert table.read_text() == full


def test_a_sound_table_is_not_rewritten(folder: Path) -> None:
    table = folder / "results.csv"
    before = table.stat().st_mtime_ns
    _run(folder)
    assert table.stat().st_mtime_ns == before


# ------------------------------------------------------------------- file modes


@pytest.mark.parametrize(
    "umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)]
)
def test_atomic_writes_honour_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        path = _io.write_text_atomic(tmp_path / "shared" / "file.txt", "x")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == mode


# ------------------------------------------------- report, every experiment


def _fabricate(name: str, profile: str, out: Path) -> int:
    """Records for (one seed of) every configuration of a grid, with the metric
    names of the experiment's shipped set where it has one (every name some record of it
    has: a set's budgets may record different ones), and random values."""
    experiment = experiments.get(name)
    saved = results.largest(name)
    records = saved.records() if saved is not None else []
    template = {k: v for record in records for k, v in record["metrics"].items()}
    rng = np.random.default_rng(0)
    folder = out / name / profile / "runs"
    folder.mkdir(parents=True)
    runs = [r for r in experiment.runs(profile) if r.config["seed"] == 0]
    for run in runs:
        metrics = {
            k: float(rng.random()) for k, v in template.items() if isinstance(v, float)
        }
        metrics.update(
            {
                **{k: float(rng.random()) for k in _records.CORE_METRICS},
                "diverged": False,
                "epochs_run": 1,
                "steps": 1,
            }
        )
        record = {
            "run_id": run.run_id,
            "experiment": name,
            "profile": profile,
            "config": run.config,
            "metric": "accuracy",
            "higher_is_better": True,
            "metrics": metrics,
            "seconds": 0.0,
        }
        (folder / f"{run.run_id}.json").write_text(_records.dumps(record))
    return len(runs)


@pytest.mark.parametrize(
    "name, profile",
    [(n, p) for n in experiments.names() for p in experiments.get(n).profiles],
)
def test_report_works_for_every_experiment_and_profile(
    name: str, profile: str, tmp_path: Path
) -> None:
    """The summary and the figures are made for every declared grid (the figures are built,
    not rendered to PNG: drawing a paper grid's heat maps takes longer than the check)."""
    import matplotlib.pyplot as plt

    experiment = experiments.get(name)
    n = _fabricate(name, profile, tmp_path)
    rep = experiments.report(name, out=tmp_path, profile=profile)
    assert len(rep.results) == n and not rep.summary.empty
    assert set(experiment.group_by(profile)) <= set(rep.summary.columns)
    assert pd.read_csv(rep.paths["summary"]).shape[0] == len(rep.summary)
    figures = report_figures(name)
    if figures is not None:
        made = figures(rep.results, rep.summary)
        assert made and all(hasattr(f, "savefig") for f in made.values())
    plt.close("all")
