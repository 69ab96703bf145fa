"""Saved result sets: made resumably with a manifest, found, shown beside a live run, and
checked so that a number edited by hand, or drift in the code, fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from normlab import experiments, results
from normlab.__main__ import main
from normlab.experiments.grid import Grid
from normlab.experiments.part1 import train_mlp

TINY = "_tiny_saved_set_test"
_FIXED = {
    "data": "mnist",
    "data_profile": "cpu",
    "schedule": "constant",
    "budget": "fixed_epochs",
    "epochs": 1,
    "batch_size": 64,
    "optimizer": "sgd",
    "activation": "tanh",
    "width": 16,
    "depth": 2,
}


def _tiny() -> str:
    """A two-run experiment with a ``cpu`` grid (registered once per process)."""
    if TINY not in experiments.names():
        grid = Grid(
            axes={"normaliser": ["none", "affine_like"], "lr": [0.1]},
            fixed=_FIXED,
            seeds=1,
        )
        experiments.register_experiment(
            experiments.Experiment(
                name=TINY,
                title="tiny",
                chapter="-",
                profiles={p: grid for p in ("quick", "cpu", "standard", "paper")},
                run_one=train_mlp,
                seconds_per_run={p: 0.3 for p in ("quick", "cpu", "standard", "paper")},
            )
        )
    return TINY


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> results.SavedSet:
    root = tmp_path_factory.mktemp("saved")
    return results.save(
        _tiny(),
        profile="cpu",
        root=root,
        command="python -m normlab save tiny --profile cpu",
    )


@pytest.fixture
def copy(made: results.SavedSet, tmp_path: Path) -> results.SavedSet:
    folder = tmp_path / TINY / "cpu"
    shutil.copytree(made.folder, folder)
    return results.load(folder)


def test_manifest_records_how_the_set_was_made(made: results.SavedSet) -> None:
    m = made.manifest
    assert (
        m["experiment"] == TINY
        and m["profile"] == "cpu"
        and m["command"].startswith("python -m normlab save")
    )
    assert m["data"] == "stand-in" and m["datasets"] == ["mnist"] and m["seeds"] == 1
    assert (
        m["hardware"]["device"] == "cpu"
        and m["hardware"]["cpu_model"]
        and m["wall_seconds"] > 0
    )
    assert m["torch_version"] and m["normlab_version"] and "git_commit" in m
    assert len(m["records"]) == 2 and len(made.results) == 2
    assert "cpu profile, stand-in data" in made.label()


def test_save_resumes_and_accumulates(made: results.SavedSet, tmp_path: Path) -> None:
    shutil.copytree(made.folder, tmp_path / TINY / "cpu")
    again = results.save(_tiny(), profile="cpu", root=tmp_path, command="second")
    assert (
        again.manifest["commands"][-1] == "second"
        and len(again.manifest["commands"]) == 2
    )
    assert (
        again.manifest["records"] == made.manifest["records"]
    )  # nothing re-ran, nothing rewritten


def test_save_refuses_the_quick_profile(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="quick"):
        results.save(_tiny(), profile="quick", root=tmp_path)


def test_a_sound_set_verifies_exactly(made: results.SavedSet) -> None:
    assert results.verify(made) == []


def test_a_number_edited_by_hand_fails(copy: results.SavedSet) -> None:
    path = sorted((copy.folder / "runs").glob("*.json"))[0]
    record = json.loads(path.read_text())
    record["metrics"]["test_metric"] += 0.05
    path.write_text(json.dumps(record, indent=1))
    problems = [str(p) for p in results.verify(copy, run_id=path.stem)]
    assert any("digest differs" in p for p in problems)
    assert any("re-run" in p and "test_metric" in p for p in problems)
    assert any("results.csv" in p and "test_metric differs" in p for p in problems)


def test_an_edited_table_fails(copy: results.SavedSet) -> None:
    table = copy.results
    table.loc[0, "val_metric"] = 0.999
    table.to_csv(copy.folder / "results.csv", index=False)
    problems = [str(p) for p in results.check_format(copy)]
    assert any("results.csv" in p and "digest" in p for p in problems)
    assert any("val_metric differs" in p for p in problems)


def test_drift_in_the_code_fails(copy: results.SavedSet, monkeypatch) -> None:
    """Same machine, so the comparison is exact: a change of one step size is caught."""

    def drifted(config, ctx):
        return train_mlp({**config, "lr": config["lr"] * 1.001}, ctx)

    monkeypatch.setattr(
        experiments.registry,
        "_EXPERIMENTS",
        {
            **experiments.registry._EXPERIMENTS,
            TINY: experiments.Experiment(
                **{**experiments.get(TINY).__dict__, "run_one": drifted}
            ),
        },
    )
    assert any("re-run" in str(p) for p in results.verify(copy))


def test_another_machine_uses_the_tolerance(copy: results.SavedSet) -> None:
    manifest = {**copy.manifest, "torch_version": "0.0.0-elsewhere"}
    (copy.folder / "manifest.json").write_text(json.dumps(manifest))
    assert results.verify(results.load(copy.folder)) == []
    assert results._close(0.90, 0.90 + results.RERUN_ATOL / 2, False, "test_metric")
    assert not results._close(0.90, 0.90 + 2 * results.RERUN_ATOL, False, "test_metric")
    assert not results._close(0.90, 0.90 + 1e-12, True, "test_metric")


def test_gpu_sets_are_checked_for_format_only(
    copy: results.SavedSet, monkeypatch
) -> None:
    manifest = json.loads((copy.folder / "manifest.json").read_text())
    manifest["hardware"]["device"] = "cuda"
    (copy.folder / "manifest.json").write_text(json.dumps(manifest))
    gpu = results.load(copy.folder)

    def no_rerun(*args, **kwargs):
        raise AssertionError("a GPU set must not be re-run")

    monkeypatch.setattr(experiments, "get", no_rerun)
    assert gpu.on_gpu and results.verify(gpu) == []


def test_largest_and_beside(made: results.SavedSet) -> None:
    root = made.folder.parent.parent
    assert results.largest(TINY, root).folder == made.folder
    assert results.largest("no_such_experiment", root) is None
    live = made.results.assign(profile="quick")

    def draw(table: pd.DataFrame, ax) -> None:
        ax.bar(table["normaliser"], table["test_metric"])

    both = results.beside(TINY, live, draw, root=root)
    titles = [ax.get_title() for ax in both.figure.axes]
    assert (
        len(titles) == 2
        and titles[0].startswith("live run: quick profile")
        and "saved set: cpu" in titles[1]
    )
    alone = results.beside(TINY, live, draw, root=root / "empty")
    assert len(alone.figure.axes) == 1 and alone.saved is None
    plt.close("all")
    with pytest.raises(ValueError, match="live"):
        results.beside(TINY, pd.DataFrame(), draw, root=root)


def test_load_names_a_folder_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="manifest.json"):
        results.load(tmp_path)


@pytest.mark.parametrize(
    "saved", results.saved_sets(), ids=lambda s: f"{s.experiment}-{s.profile}"
)
def test_every_shipped_set_verifies(saved: results.SavedSet) -> None:
    """Each set in the tracked results/ folder: digests, table, and one configuration re-run."""
    assert [str(p) for p in results.verify(saved)] == []


def test_cli_verify_reports_an_edit(copy: results.SavedSet, capsys) -> None:
    root = copy.folder.parent.parent
    assert main(["verify", TINY, "--root", str(root)]) == 0
    assert "ok" in capsys.readouterr().out
    (copy.folder / "results.csv").write_text(
        (copy.folder / "results.csv").read_text().replace("mnist", "mnisz", 1)
    )
    assert main(["verify", TINY, "--root", str(root)]) == 1
    assert "FAILED" in capsys.readouterr().out
