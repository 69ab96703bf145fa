"""Saved result sets: packed into strict JSON lines with a manifest, found, shown beside a
live run, and checked so that a number edited by hand, a deleted run, a relabelled set or
drift in the code fails, exactly on the numerics that made the set and within the set's
own seed spread elsewhere."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import normlab
import numpy as np
import pandas as pd
import pytest
import torch
from normlab import (
    _provenance,
    _saved_io,
    analysis,
    claims,
    experiments,
    figures,
    results,
    verification,
)
from normlab.__main__ import main
from normlab._records import MAX_DEPTH
from normlab.experiments import RunSettings
from normlab.experiments.grid import Grid, run_id
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
    """A six-run experiment (two normalisers, three seeds) with a ``cpu`` grid."""
    if TINY not in experiments.names():
        grid = Grid(
            axes={"normaliser": ["none", "affine_like"], "lr": [0.1]},
            fixed=_FIXED,
            seeds=3,
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


GIT_COMMIT = _provenance.git_commit  # the real one, for the test of it


@pytest.fixture(autouse=True)
def committed(monkeypatch) -> None:
    """Every save here runs as if from a clean commit, whatever state this checkout is in;
    the tests of the clean-tree rule set the commit themselves."""
    monkeypatch.setattr(_provenance, "git_commit", lambda: "0" * 40)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> results.SavedSet:
    root = tmp_path_factory.mktemp("saved")
    return results.save(
        _tiny(),
        RunSettings(profile="cpu"),
        root=root,
        command="python -m normlab save tiny --profile cpu",
        allow_dirty=True,  # provenance has tests of its own; this set is about the rest
    )


@pytest.fixture
def copy(made: results.SavedSet, tmp_path: Path) -> results.SavedSet:
    folder = tmp_path / TINY / "cpu"
    shutil.copytree(made.folder, folder)
    return results.load(folder)


def _forge(saved: results.SavedSet, edit) -> None:
    """Edit the set's records as a careful forger would: ``edit(records)`` changes the list
    of records, then the table, every digest and the run count are made to agree, so only
    the checks beyond the digests can catch it."""
    records = [json.loads(line) for line in (saved.folder / "runs.jsonl").open()]
    records = edit(records)
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    (saved.folder / "runs.jsonl").write_text("".join(f"{line}\n" for line in lines))
    table = analysis.records_table(records)
    table.to_csv(saved.folder / "results.csv", index=False)
    manifest = dict(saved.manifest)
    ids = [r["run_id"] for r in records]
    manifest["records"] = {i: results._sha(line) for i, line in zip(ids, lines)}
    manifest["runs"] = len(manifest["records"])
    manifest["commits"] = {"forged": sorted(manifest["records"])}
    _sign(saved.folder, manifest)


def _sign(folder: Path, manifest: dict) -> None:
    """Write ``manifest`` with the file digests of ``folder`` and its own digest, as a
    forger who knows the format would."""
    manifest["files"] = {
        name: results._sha((folder / name).read_bytes())
        for name in ("runs.jsonl", "results.csv")
    }
    (folder / "manifest.json").write_text(_saved_io.signed(manifest))


def _problems(saved: results.SavedSet, **kwargs) -> list[str]:
    return [str(p) for p in verification.verify(saved, **kwargs).problems]


# -------------------------------------------------------------------- making a set


def test_manifest_records_how_the_set_was_made(made: results.SavedSet) -> None:
    m = made.manifest
    assert m["format"] == results.FORMAT == 3 and m["experiment"] == TINY
    assert m["digest"] == _saved_io.manifest_digest(m) and list(m)[-1] == "digest"
    assert m["profile"] == "cpu" and m["command"].startswith("python -m normlab save")
    assert m["data"] == "stand-in" and m["datasets"] == ["mnist"] and m["seeds"] == 3
    assert m["hardware"]["device"] == "cpu" and m["wall_seconds"] > 0
    assert m["exact_on"] == results.fingerprint("cpu", m["hardware"]["torch_threads"])
    assert m["runs"] == len(m["records"]) == 6 == len(made.results)
    assert sum(len(ids) for ids in m["commits"].values()) == 6
    assert "cpu profile, stand-in data" in made.label()
    # three files, no scratch left behind
    assert sorted(p.name for p in made.folder.iterdir()) == [
        "manifest.json",
        "results.csv",
        "runs.jsonl",
    ]


def test_the_packed_set_is_strict_sorted_json(made: results.SavedSet) -> None:
    def refuse(name: str):
        raise AssertionError(f"{name} in a packed set")

    lines = (made.folder / "runs.jsonl").read_text().splitlines()
    ids = [json.loads(line, parse_constant=refuse)["run_id"] for line in lines]
    assert ids == sorted(ids) and len(set(ids)) == 6
    assert [r["run_id"] for r in made.records()] == ids


def test_save_resumes_and_says_which_commit_made_which_runs(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(_provenance, "git_commit", lambda: "old")
    first = results.save(
        _tiny(), RunSettings(profile="cpu", seeds=2), root=tmp_path, command="a"
    )
    monkeypatch.setattr(_provenance, "git_commit", lambda: "new")
    again = results.save(
        _tiny(), RunSettings(profile="cpu", seeds=3), root=tmp_path, command="b"
    )
    old_ids = sorted(first.manifest["records"])
    assert again.manifest["commands"] == ["a", "b"]
    assert again.manifest["commits"]["old"] == old_ids  # kept, not re-run
    assert len(again.manifest["commits"]["new"]) == 2
    assert {i: again.manifest["records"][i] for i in old_ids} == first.manifest[
        "records"
    ]
    assert again.manifest["exact_on"] == first.manifest["exact_on"] is not None
    assert verification.check_format(again) == []


def test_a_pruning_save_drops_only_the_runs_its_grid_no_longer_holds(
    tmp_path: Path, monkeypatch
) -> None:
    """A grid that moved some runs (here: one seed fewer) leaves a set that no longer
    loads; ``prune`` re-packs the grid's runs, their records, digests and commits as they
    were, and the manifest keeps its history and names the command that pruned."""
    monkeypatch.setattr(_provenance, "git_commit", lambda: "made")
    full = results.save(
        _tiny(), RunSettings(profile="cpu", seeds=3), root=tmp_path, command="a"
    )
    monkeypatch.setattr(_provenance, "git_commit", lambda: "pruned")
    fewer = RunSettings(profile="cpu", seeds=2)
    kept = results.save(_tiny(), fewer, root=tmp_path, command="b", prune=True)
    grid = {run_id(_tiny(), c) for c in experiments.get(_tiny()).grid("cpu").configs(2)}
    assert set(kept.manifest["records"]) == grid and kept.runs == 4
    assert kept.manifest["records"] == {
        i: d for i, d in full.manifest["records"].items() if i in grid
    }
    assert kept.manifest["commits"] == {"made": sorted(grid)}
    assert kept.manifest["commands"] == ["a", "b"]
    assert verification.check_format(kept) == []


def test_an_interrupted_save_keeps_its_provenance(tmp_path: Path, monkeypatch) -> None:
    """A save stopped before it packs leaves scratch records only; the save that resumes
    it still names the commit and numerics of every run, none ``unknown``."""
    monkeypatch.setattr(_provenance, "git_commit", lambda: "first")
    interrupted = RunSettings(profile="cpu", seeds=2, device="cpu").run(
        _tiny(), tmp_path
    )
    assert not (interrupted.folder / "manifest.json").exists()
    monkeypatch.setattr(_provenance, "git_commit", lambda: "second")
    resumed = results.save(_tiny(), RunSettings(profile="cpu"), root=tmp_path)
    commits = resumed.manifest["commits"]
    assert sorted(commits) == ["first", "second"]
    assert (
        sorted(commits["first"]) == sorted(interrupted.ran)
        and len(interrupted.ran) == 4
    )
    assert resumed.manifest["exact_on"] == _provenance.fingerprint("cpu")
    assert all(r["made_by"]["commit"] in commits for r in resumed.records())


def test_save_refuses_a_dirty_checkout_unless_told(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_provenance, "git_commit", lambda: "abc123+dirty")
    with pytest.raises(ValueError, match="allow_dirty"):
        results.save(_tiny(), RunSettings(profile="cpu", seeds=1), root=tmp_path)
    assert not (tmp_path / TINY).exists()  # refused before any run
    saved = results.save(
        _tiny(), RunSettings(profile="cpu", seeds=1), root=tmp_path, allow_dirty=True
    )
    assert list(saved.manifest["commits"]) == ["abc123+dirty"]
    code = main(
        ["save", TINY, "--profile", "cpu", "--seeds", "1", "--root", str(tmp_path)]
    )
    assert code == 2


def test_the_commit_outside_a_checkout_is_the_version(monkeypatch) -> None:
    def no_git(*args):
        raise OSError("git: not found")

    monkeypatch.setattr(_provenance, "_git", no_git)
    assert GIT_COMMIT() == f"normlab {normlab.__version__}"


def test_the_fingerprint_names_the_kernels_libraries_dispatch_on(monkeypatch) -> None:
    """MKL and oneDNN pick their kernels from the CPU, not from torch's capability: the
    fingerprint names the CPU's instruction set, and a cap on them changes it."""
    here = _provenance.fingerprint("cpu", 1)
    assert (
        here["kernels"] == _provenance.kernels() and len(here["kernels"].split()) >= 2
    )
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    capped = _provenance.fingerprint("cpu", 1)
    assert capped["kernels"].endswith("MKL_ENABLE_INSTRUCTIONS=AVX2") and capped != here
    # torch's own capability, lowered for ATen only, shows in the fingerprint too
    code = "import json, normlab._provenance as p; print(json.dumps(p.fingerprint('cpu', 1)))"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    env.pop("MKL_ENABLE_INSTRUCTIONS")
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    forced = json.loads(done.stdout)
    assert (
        forced["cpu_capability"] == "DEFAULT" and forced["kernels"] == here["kernels"]
    )


def test_save_refuses_the_quick_profile(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="quick"):
        results.save(_tiny(), RunSettings(profile="quick"), root=tmp_path)
    with pytest.raises(ValueError, match="quick"):
        results.save(_tiny(), RunSettings(), root=tmp_path)  # quick by default


# ------------------------------------------------------------ verify: the re-runs


def test_a_sound_set_verifies_exactly_and_within_tolerance(
    made: results.SavedSet,
) -> None:
    exact = verification.verify(made)
    assert exact.mode == "exact" and exact.ok and len(exact.sampled) == 3
    assert verification.verify(made, mode="tolerance").ok


def test_the_sample_is_spread_across_arms_and_the_same_everywhere(
    made: results.SavedSet,
) -> None:
    chosen = verification.sample(made, 3)
    assert chosen == verification.sample(made, 3) and len(set(chosen)) == 3
    by_id = {r["run_id"]: r for r in made.records()}
    assert {by_id[i]["config"]["normaliser"] for i in chosen[:2]} == {
        "none",
        "affine_like",
    }
    assert len(verification.sample(made, 50)) == 6
    with pytest.raises(ValueError, match="sample"):
        verification.sample(made, 0)


def _drifted(monkeypatch, change) -> None:
    """Register TINY again with a ``run_one`` whose metrics pass through ``change``."""

    def drifted(config, ctx):
        outcome = train_mlp(config, ctx)
        change(outcome["metrics"])
        return outcome

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


def test_exact_mode_catches_the_smallest_change(copy: results.SavedSet) -> None:
    target = verification.sample(copy, 1)[0]

    def nudge(records):
        for r in records:
            if r["run_id"] == target:
                r["metrics"]["test_loss"] *= 1 + 1e-9
        return records

    _forge(copy, nudge)
    forged = results.load(copy.folder)
    assert verification.check_format(forged) == []  # the digests were forged too
    problems = _problems(forged, k=1, mode="exact")
    assert any(target in p and "test_loss" in p and "exactly" in p for p in problems)
    # within the band: a re-run on other numerics cannot tell this from rounding
    assert verification.verify(forged, k=1, mode="tolerance").ok


def test_tolerance_mode_catches_a_changed_metric(
    copy: results.SavedSet, monkeypatch
) -> None:
    """On another machine a re-run is one more draw of its configuration: code that moves
    a metric out of the band of the configuration's seeds fails, in both directions."""
    records = copy.records()
    high = max(r["metrics"]["test_metric"] for r in records)
    assert high < 0.5  # so a drift of +0.5 leaves every seed's band
    _drifted(monkeypatch, lambda m: m.update(test_metric=m["test_metric"] + 0.5))
    problems = _problems(copy, k=2, mode="tolerance")
    assert any("test_metric" in p and "outside the band" in p for p in problems)
    _drifted(monkeypatch, lambda m: m.update(train_loss=m["train_loss"] * 0.5))
    problems = _problems(copy, k=2, mode="tolerance")
    assert any("train_loss" in p and "outside the band" in p for p in problems)


def test_the_band_counts_the_seeds_and_the_last_epochs() -> None:
    """A band holds every seed's final value and their late history, widened by z sd and a
    resolution floor; the record itself counts, so a bimodal configuration (one seed that
    escaped a plateau) has a band wide enough for a re-run in either mode."""
    band = verification._Band(0.5, 0.7, 0.05)
    assert band.margin(bounded=True) == pytest.approx(
        verification.TOLERANCE_Z * 0.05 + verification.ACCURACY_FLOOR
    )
    assert band.margin(bounded=False) == pytest.approx(
        verification.TOLERANCE_Z * 0.05 + verification.RELATIVE_FLOOR * 0.7
    )
    zero = verification._Band(
        0.5, 0.5, 0.0
    )  # every seed at chance: a few flips allowed
    assert zero.margin(bounded=True) == verification.ACCURACY_FLOOR


def test_a_run_stopped_at_a_target_may_end_at_another_step() -> None:
    """On other numerics a budget's steps must still match exactly, but a run stopped at a
    target ends where its training takes it: its steps are held to the seeds' band."""
    bands = {"steps": verification._Band(73.0, 110.0, 14.0)}
    fixed_old, fixed_new = (
        {"diverged": False, "steps": 91.0},
        {"diverged": False, "steps": 103.0},
    )
    found = verification._compare(
        fixed_new, fixed_old, False, "run", bands=bands, mixed=False, metric="accuracy"
    )
    assert any("exactly" in m.problem for m in found)
    old = {**fixed_old, "steps_to_target": 91.0}
    new = {**fixed_new, "steps_to_target": 103.0}
    bands["steps_to_target"] = bands["steps"]
    kept = verification._compare(
        new, old, False, "run", bands=bands, mixed=False, metric="accuracy"
    )
    assert kept == []
    far = {**new, "steps": 400.0, "steps_to_target": 400.0}
    outside = verification._compare(
        far, old, False, "run", bands=bands, mixed=False, metric="accuracy"
    )
    assert {m.problem.split(" ")[0] for m in outside} == {"steps", "steps_to_target"}


def _made_on(saved: results.SavedSet, fingerprint) -> results.SavedSet:
    """The set, forged as if every run had been made on ``fingerprint``."""

    def relabel(records):
        for r in records:
            r["made_by"] = {**r["made_by"], "fingerprint": fingerprint}
        return records

    _forge(saved, relabel)
    return results.load(saved.folder)


def test_the_fingerprint_decides_the_mode(copy: results.SavedSet) -> None:
    here = results.fingerprint("cpu", copy.manifest["hardware"]["torch_threads"])
    for part in here:  # any part that differs, the kernels' instruction set included
        other = _made_on(copy, {**here, part: "ELSEWHERE"})
        assert verification.verify(other, k=1).mode == "tolerance", part
    assert verification.verify(_made_on(copy, None), k=1).mode == "tolerance"
    assert verification.verify(_made_on(copy, here), k=1).mode == "exact"


def test_a_budget_keeps_the_re_runs_short(copy: results.SavedSet) -> None:
    quickest = min(copy.records(), key=lambda r: r["seconds"])
    cheap = verification.sample(copy, 3, max_seconds=quickest["seconds"])
    assert quickest["run_id"] in cheap
    assert verification.sample(copy, 3, max_seconds=0.0) == [quickest["run_id"]]
    outcome = verification.verify(copy, k=3, budget=1e-9)
    assert outcome.ok and len(outcome.sampled) == 1  # the first re-run always runs
    with pytest.raises(ValueError, match="budget"):
        verification.verify(copy, budget=0)


def test_a_population_members_re_run_costs_its_whole_population() -> None:
    """A member records its share of its population's time but is re-run with all of
    it, so a budget weighs the population: of two records that each took 5 s, the one
    made in a population of 16 is not cheap."""
    single = {"run_id": "a", "seconds": 5.0}
    member = {
        "run_id": "b",
        "seconds": 5.0,
        "population": {"members": [[0, 1e-3]] * 16},
    }
    assert verification.rerun_seconds(single) == 5.0
    assert verification.rerun_seconds(member) == 80.0


def test_drift_in_the_code_fails(copy: results.SavedSet, monkeypatch) -> None:
    """Same machine, so the comparison is exact: a change in the 7th digit is caught."""
    _drifted(monkeypatch, lambda m: m.update(val_loss=m["val_loss"] * (1 + 1e-7)))
    assert any("re-run" in p and "val_loss" in p for p in _problems(copy, k=1))


# ------------------------------------------------------------- verify: the format


def test_a_number_edited_by_hand_fails(copy: results.SavedSet) -> None:
    path = copy.folder / "runs.jsonl"
    path.write_text(
        path.read_text().replace('"test_metric":0.', '"test_metric":0.9', 1)
    )
    problems = [str(p) for p in verification.check_format(copy)]
    assert any("runs.jsonl" in p and "digest differs" in p for p in problems)
    assert any("results.csv" in p and "test_metric differs" in p for p in problems)


def test_an_edited_table_fails(copy: results.SavedSet) -> None:
    table = copy.results
    table.loc[0, "val_metric"] = 0.999
    table.to_csv(copy.folder / "results.csv", index=False)
    problems = [str(p) for p in verification.check_format(copy)]
    assert any("results.csv" in p and "digest" in p for p in problems)
    assert any("val_metric differs" in p for p in problems)


def test_a_deleted_run_fails(copy: results.SavedSet) -> None:
    _forge(copy, lambda r: r[1:])
    problems = [str(p) for p in verification.check_format(copy)]
    assert any("holds 5 runs, its grid 6" in p for p in problems)


def test_a_metric_set_to_nan_fails(copy: results.SavedSet) -> None:
    def blank(records):
        records[0]["metrics"]["val_metric"] = None
        return records

    _forge(copy, blank)
    problems = [str(p) for p in verification.check_format(copy)]
    assert any(
        "val_metric is None but the run is not marked diverged" in p for p in problems
    )


def test_a_set_relabelled_as_made_on_a_gpu_fails(copy: results.SavedSet) -> None:
    manifest = json.loads((copy.folder / "manifest.json").read_text())
    manifest["hardware"]["device"] = "cuda"
    _sign(copy.folder, manifest)
    with pytest.raises(
        results.SetError, match="made on cpu, but the manifest says cuda"
    ):
        results.load(copy.folder)
    outcome = verification.verify(copy)  # loaded before the relabelling
    assert not outcome.ok and outcome.mode == "format only"
    assert any(
        "made on cpu, but the manifest says cuda" in str(p) for p in outcome.problems
    )


def test_a_record_name_outside_the_set_is_refused(
    copy: results.SavedSet, capsys
) -> None:
    manifest = json.loads((copy.folder / "manifest.json").read_text())
    first = next(iter(manifest["records"]))
    manifest["records"]["../../../../outside_record.json"] = manifest["records"].pop(
        first
    )
    (copy.folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="plain name"):
        results.load(copy.folder)
    assert main(["verify", TINY, "--root", str(copy.folder.parent.parent)]) == 1
    assert "plain name" in capsys.readouterr().out


def test_an_old_or_broken_manifest_is_named(copy: results.SavedSet) -> None:
    (copy.folder / "manifest.json").write_text('{"experiment": "x"}')
    with pytest.raises(ValueError, match="missing"):
        results.load(copy.folder)
    (copy.folder / "manifest.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        results.load(copy.folder)


def test_load_names_a_folder_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="manifest.json"):
        results.load(tmp_path)


# ---------------------------------------------------------------- one door into a set


@contextlib.contextmanager
def _within(seconds: int):
    """Fail, instead of hanging the suite, if the block takes longer than ``seconds``."""

    def late(*_):
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _refused(folder: Path, match: str) -> results.SetError:
    """The SetError that loading ``folder`` raises, its message matching ``match``."""
    with _within(20), pytest.raises(results.SetError, match=match) as caught:
        results.load(folder)
    return caught.value


def _nan_row(name: str, lines: list[str]) -> list[str]:
    """The last row with its val_metric made NaN: a bare NaN in a record (not strict
    JSON), an empty cell in the table."""
    if name == "runs.jsonl":
        last = re.sub(r'"val_metric":[^,}]+', '"val_metric":NaN', lines[-1], count=1)
    else:
        cells = lines[-1].split(",")
        cells[lines[0].split(",").index("val_metric")] = ""
        last = ",".join(cells)
    return [*lines[:-1], last]


ROW_DAMAGE = {
    "duplicated": lambda name, lines: [*lines, lines[-1]],
    "dropped": lambda name, lines: lines[:-1],
    "NaN": _nan_row,
    "half-written": lambda name, lines: [*lines[:-1], lines[-1][: len(lines[-1]) // 2]],
}


@pytest.mark.parametrize("forged", [False, True], ids=["as edited", "digests forged"])
@pytest.mark.parametrize("damage", list(ROW_DAMAGE))
@pytest.mark.parametrize("name", ["runs.jsonl", "results.csv"])
def test_a_damaged_row_is_refused_naming_its_file(
    copy: results.SavedSet, name: str, damage: str, forged: bool
) -> None:
    """Whether or not the forger also rewrote the file digests (and the manifest's own)."""
    path = copy.folder / name
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(ROW_DAMAGE[damage](name, lines)))
    if forged:
        _sign(copy.folder, dict(copy.manifest))
    error = _refused(copy.folder, name)
    assert str(error).startswith(f"{TINY}/cpu: {name}")
    assert [str(p) for p in verification.check_format(copy)] == [
        str(p) for p in error.problems
    ]


@pytest.mark.parametrize("edit", ["duplicated", "dropped"])
def test_a_careful_forger_still_cannot_add_or_drop_a_run(
    copy: results.SavedSet, edit: str
) -> None:
    """Records, table, every digest and the run count made to agree: the run ids must
    still be the grid's, each once."""
    _forge(copy, (lambda r: [*r, r[-1]]) if edit == "duplicated" else (lambda r: r[1:]))
    why = (
        "not unique and sorted" if edit == "duplicated" else "holds 5 runs, its grid 6"
    )
    error = _refused(copy.folder, f"^{TINY}/cpu: runs.jsonl: ")
    assert any(p.where == "runs.jsonl" and why in p.problem for p in error.problems)


def _scorecard_cli(root: Path, capsys) -> tuple[int, str]:
    """``python -m normlab scorecard --root root``, in this process: status and stderr."""
    status = main(["scorecard", "--format", "csv", "--root", str(root)])
    return status, capsys.readouterr().err


@pytest.fixture(scope="module")
def claimed(tmp_path_factory) -> Path:
    """A copy of the shipped batch_size set (claims A12, A13), re-packed in this format."""
    folder = tmp_path_factory.mktemp("claimed") / "batch_size" / "cpu"
    shutil.copytree(results.default_root() / "batch_size" / "cpu", folder)
    results.repack(folder)
    return folder


@pytest.fixture
def claimed_copy(claimed: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "batch_size" / "cpu"
    shutil.copytree(claimed, folder)
    return folder


def _flipped(folder: Path, verdict: str) -> pd.DataFrame:
    """The set's table with the corrections' steps (and epochs) to the target multiplied by
    (B / 4) ** k: their scaling slopes move by k, against the way ``verdict`` went."""
    table = pd.read_csv(folder / "results.csv")
    k = -1.0 if verdict == claims.SUPPORTED else 1.0
    corrections = table["normaliser"].isin(["affine_like", "norm_like"])
    factor = np.where(corrections, (table["batch_size"] / 4.0) ** k, 1.0)
    return table.assign(
        steps_to_target=table["steps_to_target"] * factor,
        epochs_to_target=table["epochs_to_target"] * factor,
    )


def test_an_edited_table_no_longer_changes_a_verdict(
    claimed_copy: Path, tmp_path: Path, capsys
) -> None:
    """Edited so that the corrections' steps to the target scale the other way, the table
    alone would flip A12's verdict; the scorecard refuses the set instead, naming the file,
    as a link to an outside file too."""
    a12 = claims.get("A12")
    table = results.load(claimed_copy).results
    verdict = claims.judge(a12, table).verdict
    rising = _flipped(claimed_copy, verdict)
    assert claims.judge(a12, rising).verdict != verdict
    root = claimed_copy.parent.parent
    assert _scorecard_cli(root, capsys)[0] == 0
    rising.to_csv(claimed_copy / "results.csv", index=False)
    status, err = _scorecard_cli(root, capsys)
    assert status == 1 and len(err.splitlines()) == 1
    assert err.startswith("error: batch_size/cpu: results.csv: edited since the set")
    outside = tmp_path / "outside.csv"
    (claimed_copy / "results.csv").rename(outside)
    (claimed_copy / "results.csv").symlink_to(outside)
    status, err = _scorecard_cli(root, capsys)
    assert status == 1
    assert "results.csv: is a symbolic link, not a regular file" in err


def test_the_widget_reads_a_saved_set_through_the_door(tmp_path: Path) -> None:
    from normlab.widgets import GateRuns

    folder = tmp_path / "gate_widget" / "cpu"
    shutil.copytree(results.default_root() / "gate_widget" / "cpu", folder)
    results.repack(folder)
    saved = results.load(folder)
    # one run a setting: seed 0's, of each of the grid's points
    points = saved.runs // saved.manifest["seeds"]
    assert len(GateRuns.load(tmp_path, "cpu").records) == points
    path = folder / "runs.jsonl"
    path.write_text(path.read_text().replace('"seconds":', '"seconds":1', 1))
    with pytest.raises(results.SetError, match="runs.jsonl: edited"):
        GateRuns.load(tmp_path, "cpu")


def test_a_manifest_with_another_profile_is_refused(copy: results.SavedSet) -> None:
    manifest = json.loads((copy.folder / "manifest.json").read_text())
    manifest["profile"] = "standard"
    (copy.folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    _refused(copy.folder, "manifest.json: edited since the set was made")
    _sign(copy.folder, manifest)  # the manifest's own digest forged too
    _refused(
        copy.folder,
        f"manifest.json: is the manifest of {TINY}/standard, but the set is in the "
        f"folder {TINY}/cpu",
    )


def test_a_set_in_another_experiments_folder_is_refused(
    made: results.SavedSet, tmp_path: Path
) -> None:
    """Copied, or linked, into another experiment's folder: the folder's name is what the
    set must be, so a chapter or claim of that experiment never reads it."""
    shutil.copytree(made.folder, tmp_path / "fc_normalisers" / "cpu")
    (tmp_path / "gate_tau").mkdir()
    (tmp_path / "gate_tau" / "cpu").symlink_to(made.folder, target_is_directory=True)
    for name in ("fc_normalisers", "gate_tau"):
        with pytest.raises(
            results.SetError,
            match=f"{name}/cpu: manifest.json: is the manifest of {TINY}/cpu",
        ):
            results.largest(name, tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_refused_at_once(copy: results.SavedSet, capsys) -> None:
    path = copy.folder / "runs.jsonl"
    path.unlink()
    os.mkfifo(path)
    _refused(copy.folder, "runs.jsonl: is a named pipe, not a regular file")
    with _within(20):
        assert main(["verify", TINY, "--root", str(copy.folder.parent.parent)]) == 1
    assert "runs.jsonl: is a named pipe" in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_pipe_put_in_place_after_the_lstat_is_refused(
    copy: results.SavedSet, monkeypatch
) -> None:
    """The lstat and the open are two steps: the open neither follows a link nor waits for
    a writer, and what it opened is checked again."""
    regular = os.lstat(copy.folder / "results.csv")
    monkeypatch.setattr(_saved_io.os, "lstat", lambda path: regular)
    path = copy.folder / "runs.jsonl"
    path.unlink()
    os.mkfifo(path)
    _refused(copy.folder, "runs.jsonl: is a named pipe, not a regular file")


def test_the_cli_refuses_a_named_pipe_within_seconds(
    claimed_copy: Path, tmp_path: Path
) -> None:
    """In a fresh process, so a reader that blocked on the pipe would be killed, not hang."""
    path = claimed_copy / "runs.jsonl"
    path.unlink()
    os.mkfifo(path)
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "companion"),
        "OMP_NUM_THREADS": "1",
    }
    root = str(claimed_copy.parent.parent)
    for command in (["verify", "batch_size"], ["scorecard"]):
        done = subprocess.run(
            [sys.executable, "-m", "normlab", *command, "--root", root],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert "batch_size/cpu" in done.stdout + done.stderr
        assert "runs.jsonl: is a named pipe" in done.stdout + done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["manifest.json", "runs.jsonl", "results.csv"])
def test_a_link_to_dev_zero_is_refused(copy: results.SavedSet, name: str) -> None:
    path = copy.folder / name
    path.unlink()
    path.symlink_to("/dev/zero")
    _refused(copy.folder, f"{name}: is a symbolic link, not a regular file")


def test_a_file_over_its_size_limit_is_refused(
    copy: results.SavedSet, monkeypatch
) -> None:
    monkeypatch.setitem(_saved_io.LIMITS, "results.csv", 100)
    _refused(copy.folder, "results.csv: is larger than the 100 bytes a set's results")


def test_a_forged_file_of_many_lines_or_columns_costs_little(
    copy: results.SavedSet,
) -> None:
    """A few MB of short lines, or of commas, is refused after reading as many lines as
    the manifest lists records, or the table's first line."""
    packed, table = (copy.folder / "runs.jsonl"), (copy.folder / "results.csv")
    good = packed.read_text()
    packed.write_text("1\n" * 2_000_000)
    _sign(copy.folder, dict(copy.manifest))
    error = _refused(copy.folder, "runs.jsonl: has more lines than the 6 records")
    assert len(error.problems) < 12
    packed.write_text(good)
    table.write_text("," * 4_000_000 + "\n" + table.read_text())
    _sign(copy.folder, dict(copy.manifest))
    _refused(copy.folder, "results.csv: its header is not the records' columns")


def test_a_huge_seed_count_is_refused_before_any_grid_is_built(
    copy: results.SavedSet, monkeypatch
) -> None:
    manifest = dict(copy.manifest, seeds=10**9)
    _sign(copy.folder, manifest)

    def no_grid(name: str):
        raise AssertionError(f"the grid of {name} was built")

    monkeypatch.setattr(_saved_io, "get_experiment", no_grid)
    _refused(copy.folder, "manifest.json: seeds=1000000000: a set has from 1 to 1000")


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000, "[" * 500 + "]" * 500],
    ids=["100000 open brackets", "500 levels"],
)
def test_deeply_nested_json_is_refused_without_a_traceback(
    copy: results.SavedSet, text: str, capsys
) -> None:
    deep = f"nested deeper than {MAX_DEPTH} levels"
    root = str(copy.folder.parent.parent)
    manifest = copy.folder / "manifest.json"
    good = manifest.read_text()
    manifest.write_text(text)
    _refused(copy.folder, f"manifest.json: {deep}")
    assert main(["verify", TINY, "--root", root]) == 1
    assert f"manifest.json: {deep}" in capsys.readouterr().out
    manifest.write_text(good)
    (copy.folder / "runs.jsonl").write_text(text + "\n")
    _sign(copy.folder, dict(copy.manifest))
    _refused(copy.folder, f"runs.jsonl line 1: {deep}")
    assert main(["verify", TINY, "--root", root]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_a_set_is_checked_once_until_a_byte_changes(
    copy: results.SavedSet, monkeypatch
) -> None:
    checks = []
    examine = _saved_io._examine
    monkeypatch.setattr(
        _saved_io, "_examine", lambda *args: checks.append(args) or examine(*args)
    )
    again = results.load(copy.folder)  # the fixture loaded it: not checked again
    assert checks == [] and again.manifest == copy.manifest
    again.records()[0]["metrics"]["test_metric"] = 2.0  # a reader's edit stays its own
    assert results.load(copy.folder).records()[0]["metrics"]["test_metric"] != 2.0
    path = copy.folder / "results.csv"
    was = path.stat()
    path.write_bytes(path.read_bytes().replace(b"mnist", b"mnisz", 1))
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))  # same size, same time
    _refused(copy.folder, "results.csv: edited since the set was made")
    assert len(checks) == 1


def test_save_refuses_to_extend_an_edited_set(copy: results.SavedSet) -> None:
    path = copy.folder / "runs.jsonl"
    path.write_text(path.read_text().replace('"seconds":', '"seconds":1', 1))
    with pytest.raises(results.SetError, match="runs.jsonl: edited"):
        results.save(
            _tiny(),
            RunSettings(profile="cpu"),
            root=copy.folder.parent.parent,
            command="python -m normlab save tiny --profile cpu",
        )


def test_a_sharded_save_is_read_only_once_every_shard_is_in(tmp_path: Path) -> None:
    first = results.save(
        _tiny(), RunSettings(profile="cpu", shard="0/3"), root=tmp_path, command="a"
    )
    assert first.runs < 6
    _refused(first.folder, r"runs.jsonl: holds \d runs, its grid \d: \d missing")
    assert results.load(first.folder, partial=True).runs == first.runs


def test_repack_renews_an_old_manifest_and_keeps_the_rest(
    copy: results.SavedSet,
) -> None:
    path = copy.folder / "manifest.json"
    old = json.loads(path.read_text())
    del old["digest"]
    old["format"] = 2
    path.write_text(json.dumps(old, indent=1) + "\n")
    _refused(copy.folder, "manifest.json: format 2, this normlab reads 3")
    files = {n: (copy.folder / n).read_bytes() for n in ("runs.jsonl", "results.csv")}
    renewed = results.repack(copy.folder)
    assert {n: (copy.folder / n).read_bytes() for n in files} == files
    assert renewed.manifest == {
        **old,
        "format": 3,
        "digest": _saved_io.manifest_digest(renewed.manifest),
    }
    assert list(renewed.manifest)[-1] == "digest"
    # a re-pack never makes an edited file pass
    path.write_text(json.dumps(old, indent=1) + "\n")
    runs = copy.folder / "runs.jsonl"
    runs.write_text(runs.read_text().replace('"seconds":', '"seconds":1', 1))
    with pytest.raises(results.SetError, match="runs.jsonl: edited"):
        results.repack(copy.folder)
    assert json.loads(path.read_text()) == old


# --------------------------------------------------------------------- the others


def test_largest_and_beside(made: results.SavedSet) -> None:
    root = made.folder.parent.parent
    assert results.largest(TINY, root).folder == made.folder
    assert results.largest("no_such_experiment", root) is None
    live = made.results.assign(profile="quick")

    def draw(table: pd.DataFrame, ax) -> None:
        ax.bar(table["normaliser"], table["test_metric"])

    both = figures.beside(TINY, live, draw, root=root)
    titles = [ax.get_title() for ax in both.figure.axes]
    assert (
        len(titles) == 2
        and titles[0].startswith("live run: quick profile")
        and "saved set: cpu" in titles[1]
    )
    alone = figures.beside(TINY, live, draw, root=root / "empty")
    assert len(alone.figure.axes) == 1 and alone.saved is None
    plt.close("all")
    with pytest.raises(ValueError, match="live"):
        figures.beside(TINY, pd.DataFrame(), draw, root=root)


def test_cli_verify_exit_codes(copy: results.SavedSet, capsys) -> None:
    root = str(copy.folder.parent.parent)
    assert main(["verify", TINY, "--root", root, "--sample", "1"]) == 0
    assert "re-ran 1 record(s), compared exactly" in capsys.readouterr().out
    assert main(["verify", "no_such_set", "--root", root]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no saved set named 'no_such_set'") and TINY in err
    assert main(["verify", "--root", root, "--sample", "0"]) == 2
    assert main(["verify", "--root", str(copy.folder)]) == 2  # no sets under it
    (copy.folder / "results.csv").write_text(
        (copy.folder / "results.csv").read_text().replace("mnist", "mnisz", 1)
    )
    assert main(["verify", TINY, "--root", root]) == 1
    assert "FAILED" in capsys.readouterr().out


# ------------------------------------------------------------ the shipped sets


def test_the_shipped_sets_are_few_files() -> None:
    root = results.shipped_root()
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) <= 50
    assert {p.name for p in files} <= {"runs.jsonl", "results.csv", "manifest.json"}


def test_other_kernels_verify_a_set_within_its_bands(copy: results.SavedSet) -> None:
    """Another machine, as near as this one can come: torch's portable DEFAULT kernels
    instead of its vectorised ones round differently (the re-runs are not bit-identical),
    so the fingerprint differs and each re-run must fall within its configuration's band.
    (The shipped sets are re-run the same way by ``make verify``, outside the unit tests.)"""
    code = (
        "import sys, test_results; from normlab.__main__ import main; "
        "test_results._tiny(); sys.exit(main(sys.argv[1:]))"
    )
    # other kernels than this suite's own (it may itself run under DEFAULT)
    here = torch.backends.cpu.get_cpu_capability()
    other = "avx2" if here == "DEFAULT" else "default"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": other}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).parent), env.get("PYTHONPATH", "")]
    )
    root = copy.folder.parents[1]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "verify",
            TINY,
            "--root",
            str(root),
            "--sample",
            "2",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "compared with the band of each configuration's seeds" in done.stdout


def test_the_command_names_a_root_relative_to_where_it_ran(
    tmp_path: Path, monkeypatch
) -> None:
    sets = tmp_path / "sets"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        sys, "argv", ["normlab", "save", TINY, "--root", str(sets), "--profile", "cpu"]
    )
    command = results._command(sets)
    assert command == f"python -m normlab save {TINY} --root sets --profile cpu"
    assert str(tmp_path) not in command
    monkeypatch.setattr(sys, "argv", ["normlab", "save", TINY, "--root", str(sets)])
    monkeypatch.setenv(results.RESULTS_ENV, str(sets))
    assert results._command(sets) == f"python -m normlab save {TINY}"  # the default


# ------------------------------------------------------- the reader's folder and the shipped


def test_save_writes_where_the_reader_keeps_it(tmp_path: Path, monkeypatch) -> None:
    """``$NORMLAB_RESULTS``; else, in a git checkout, the package's saved/ (where the shipped
    sets are made); else a folder in the reader's home, never site-packages."""
    monkeypatch.delenv(results.RESULTS_ENV, raising=False)
    assert (results.ROOT / ".git").exists()  # this test runs from a checkout
    assert results.default_root() == results.shipped_root()
    assert results.roots() == [results.shipped_root()]
    monkeypatch.setattr(
        results, "ROOT", tmp_path / "site-packages"
    )  # an installed package
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert results.default_root() == tmp_path / "home" / "normlab-results"
    assert results.roots() == [results.default_root(), results.shipped_root()]
    monkeypatch.setenv(results.RESULTS_ENV, "~/drive/normlab")
    assert results.default_root() == tmp_path / "home" / "drive" / "normlab"


def test_reads_look_at_the_readers_sets_then_the_shipped_ones(
    made: results.SavedSet, tmp_path: Path, monkeypatch
) -> None:
    mine, shipped = tmp_path / "mine", tmp_path / "shipped"
    monkeypatch.setattr(results, "shipped_root", lambda: shipped)
    monkeypatch.setenv(results.RESULTS_ENV, str(mine))
    assert (
        results.saved_sets() == [] and results.largest(TINY) is None
    )  # neither exists
    shutil.copytree(made.folder, shipped / TINY / "cpu")
    assert results.largest(TINY).folder == shipped / TINY / "cpu"
    shutil.copytree(made.folder, mine / TINY / "cpu")
    found = [s.folder for s in results.saved_sets(TINY)]
    assert found == [mine / TINY / "cpu", shipped / TINY / "cpu"]
    assert (
        results.largest(TINY).folder == mine / TINY / "cpu"
    )  # a tie: the reader's own
    assert [s.folder for s in results.saved_sets(root=shipped)] == [found[1]]
    assert main(["verify", TINY, "--sample", "1", "--budget", "1"]) == 0  # both roots


def test_a_pack_removes_only_the_scratch_records_it_packed(
    copy: results.SavedSet, monkeypatch
) -> None:
    """Shards pack into one set as each finishes: a record another shard writes while a
    pack runs must stay on disk for the next pack, not be swept away with the scratch."""
    folder = copy.folder
    first, second = [json.loads(line) for line in (folder / "runs.jsonl").open()][:2]
    (folder / "runs").mkdir()
    (folder / "runs" / f"{first['run_id']}.json").write_text(json.dumps(first))
    read = results.finished_records

    def then_another_shard_finishes(where: Path) -> dict:
        found = read(where)
        late = where / "runs" / f"{second['run_id']}.json"
        late.write_text(json.dumps(second))
        return found

    monkeypatch.setattr(results, "finished_records", then_another_shard_finishes)
    packed = results.pack(folder, command="pack", wall_seconds=1.0, device="cpu")
    assert packed.runs == copy.runs
    assert not (folder / "runs" / f"{first['run_id']}.json").exists()  # packed: gone
    assert (
        folder / "runs" / f"{second['run_id']}.json"
    ).exists()  # written after: kept
    assert not (folder / "checkpoints").exists()  # the pack's lock went with it


def test_a_label_gives_the_fewest_and_most_seeds_a_configuration_ran() -> None:
    from normlab.experiments import gate_grids

    bottleneck = results.largest("gate_bottleneck")
    most = gate_grids.N3_SEEDS
    assert bottleneck.seed_range() == (gate_grids.SEEDS["cpu"], most)
    assert f", {gate_grids.SEEDS['cpu']} to {most} seeds, " in bottleneck.label()
    widget = results.largest("gate_widget")  # every configuration ran the same seeds
    fewest, most = widget.seed_range()
    assert fewest == most and f", {most} seeds, " in widget.label()


# ------------------------------------------- issue 52: a record cannot lie about its config


def _relabelled(records: list[dict]) -> list[dict]:
    """The first record's arm relabelled (its run id kept)."""
    first = records[0]["config"]
    first["normaliser"] = "affine_like" if first["normaliser"] == "none" else "none"
    return records


def _widened(records: list[dict]) -> list[dict]:
    """The first record's width made 2**22 (a re-run would allocate gigabytes)."""
    records[0]["config"]["width"] = 2**22
    return records


def _rehashed(records: list[dict]) -> list[dict]:
    """The first record's width made 2**22 and its run id the hash of that config, so the
    id agrees with the config but is no run of the grid."""
    from normlab.experiments.grid import run_id

    records[0]["config"]["width"] = 2**22
    records[0]["run_id"] = run_id(TINY, records[0]["config"])
    return sorted(records, key=lambda r: r["run_id"])


@pytest.mark.parametrize(
    "edit, why",
    [
        (_relabelled, "its config does not hash to its run id"),
        (_widened, "its config does not hash to its run id"),
        (_rehashed, "not in the grid"),
    ],
    ids=["arm relabelled", "width 2**22", "re-hashed"],
)
def test_a_re_signed_set_with_an_edited_config_is_refused_naming_the_run(
    copy: results.SavedSet, edit, why: str, capsys
) -> None:
    """Digests, table and run count made to agree after the edit: ``load`` and ``verify``
    still refuse the set, naming the file and the run, and nothing is re-run."""
    _forge(copy, edit)
    forged = [json.loads(line) for line in (copy.folder / "runs.jsonl").open()]
    grid = {r.run_id: r.config for r in experiments.get(TINY).runs("cpu", 3)}
    wide = next(r["run_id"] for r in forged if grid.get(r["run_id"]) != r["config"])
    error = _refused(copy.folder, f"^{TINY}/cpu: runs.jsonl: ")
    assert any(why in p.problem for p in error.problems)
    outcome = verification.verify(copy, k=3)
    assert not outcome.ok and outcome.sampled == []
    assert any(p.where == "runs.jsonl" and wide in str(p) for p in outcome.problems)
    root = copy.folder.parent.parent
    assert main(["verify", "--root", str(root)]) == 1
    assert wide in capsys.readouterr().out


def test_the_config_check_holds_on_a_grid_value_moved_to_another_run(
    copy: results.SavedSet,
) -> None:
    """A config that hashes to its id but differs from the grid's point of that id (as no
    real run could) is named with the setting that differs."""
    grid = {r.run_id: r.config for r in experiments.get(TINY).runs("cpu", 3)}
    record = copy.records()[0]
    forged = {**record, "config": {**record["config"], "lr": 0.5}}
    own = {record["run_id"]: {**grid[record["run_id"]]}}
    assert _saved_io._config_problem(TINY, record, own) is None
    forged["run_id"] = experiments.grid.run_id(TINY, forged["config"])
    mine = {forged["run_id"]: record["config"]}
    assert "lr=0.5, the grid gives 0.1" in _saved_io._config_problem(TINY, forged, mine)


def test_a_re_signed_thread_count_is_capped(copy: results.SavedSet) -> None:
    """``torch_threads: 1000000`` re-signed into the manifest: re-runs use at most this
    machine's CPUs."""
    manifest = dict(copy.manifest)
    manifest["hardware"] = {**manifest["hardware"], "torch_threads": 1_000_000}
    _sign(copy.folder, manifest)
    forged = results.load(copy.folder)
    assert verification.rerun_threads(forged) == os.cpu_count()
    assert verification.rerun_threads(copy) == 1


def test_a_budget_is_enforced_on_a_re_run_that_overstays(
    copy: results.SavedSet, monkeypatch
) -> None:
    """A re-run that takes far longer than its record says is stopped at the stated limit
    (BUDGET_LIMIT times the budget plus BUDGET_GRACE), a problem naming the run."""
    import time as _time

    monkeypatch.setattr(verification, "BUDGET_GRACE", 0.0)
    monkeypatch.setattr(verification, "_rerun", lambda *a: _time.sleep(60) or [])
    started = _time.perf_counter()
    with _within(20):
        outcome = verification.verify(copy, k=3, budget=0.2)
    assert _time.perf_counter() - started < 10
    assert len(outcome.problems) == 1
    problem = outcome.problems[0]
    assert problem.where.startswith(f"re-run of {TINY}-")
    assert "may take at most 0.6 s" in problem.problem


def test_the_scorecard_refuses_a_re_signed_set_with_a_relabelled_arm(
    claimed_copy: Path, capsys
) -> None:
    """batch_size's first record relabelled to another normaliser, every digest re-signed:
    the scorecard stops with one error naming the set, the file and the run."""
    saved = results.load(claimed_copy)
    run = saved.records()[0]["run_id"]

    def relabel(records: list[dict]) -> list[dict]:
        config = records[0]["config"]
        config["normaliser"] = "none" if config["normaliser"] != "none" else "layernorm"
        return records

    _forge(saved, relabel)
    status, err = _scorecard_cli(claimed_copy.parent.parent, capsys)
    assert status == 1 and len(err.splitlines()) == 1
    assert err.startswith("error: batch_size/cpu: runs.jsonl: ") and run in err


# ------------------------------------------------ issue 52: a save killed between its writes


class _Killed(BaseException):
    """A kill, as the process would see it: nothing after it runs."""


def _killed_at(monkeypatch, step: int, death: BaseException | None = None) -> None:
    """Make the ``step``-th write or rename of the package's files (counting from 0) die
    before it happens (by ``death``, a kill unless given)."""
    from normlab import _io

    seen = {"n": 0}

    def dying(real):
        def call(*args, **kwargs):
            if seen["n"] == step:
                raise death or _Killed(f"killed before step {step}")
            seen["n"] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(results, "write_text_atomic", dying(_io.write_text_atomic))
    monkeypatch.setattr(results, "_move", dying(results._move))


def _save_tiny(root: Path, seeds: int) -> results.SavedSet:
    return results.save(
        _tiny(), RunSettings(profile="cpu", seeds=seeds), root=root, allow_dirty=True
    )


def _metrics(saved: results.SavedSet) -> dict[str, dict]:
    return {r["run_id"]: r["metrics"] for r in saved.records()}


@pytest.fixture(scope="module")
def extended(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """A two-seed set, and the metrics of the three-seed set that extending it makes."""
    base = tmp_path_factory.mktemp("two_seeds")
    _save_tiny(base, 2)
    whole = tmp_path_factory.mktemp("whole")
    shutil.copytree(base, whole, dirs_exist_ok=True)
    return base, _metrics(_save_tiny(whole, 3))


@pytest.mark.parametrize("step", range(6))
def test_a_save_killed_between_any_two_writes_resumes(
    extended, step: int, tmp_path: Path, monkeypatch
) -> None:
    """Extending a two-seed set to three seeds, the save is killed before each of its
    writes and renames in turn (three files staged, three moved into place): the old
    set's manifest and records stand until the new manifest is staged, and the same save then completes it with
    the records of an uninterrupted save."""
    base, whole = extended
    root = tmp_path / "root"
    shutil.copytree(base, root)
    folder = root / TINY / "cpu"
    with monkeypatch.context() as patch:
        _killed_at(patch, step)
        with pytest.raises(_Killed):
            _save_tiny(root, 3)
    if not (folder / results.STAGING / "manifest.json").exists():
        # not committed: the old manifest and runs.jsonl stand (results.csv is the
        # runner's to rewrite while a save is under way)
        assert _saved_io.previous_manifest(folder)["runs"] == 4
    if (folder / results.STAGING).exists():
        with pytest.raises(results.SetError) as caught:
            results.load(folder)
        assert any(
            "run the same save again" in p.problem for p in caught.value.problems
        )
    resumed = _save_tiny(root, 3)
    assert _metrics(resumed) == whole
    assert not (folder / results.STAGING).exists()
    assert results.load(folder).runs == 6


# ------------------------------------------------- issue 52: the reader's own results folder


def test_a_broken_set_in_the_readers_folder_is_named_and_skipped(
    made: results.SavedSet, tmp_path: Path, monkeypatch, capsys
) -> None:
    """The reader's own set fails its checks: it is skipped with a warning naming its
    folder, and the shipped set of the same name is read (a broken shipped set raises)."""
    mine, shipped = tmp_path / "mine", tmp_path / "shipped"
    monkeypatch.setattr(results, "shipped_root", lambda: shipped)
    monkeypatch.setenv(results.RESULTS_ENV, str(mine))
    shutil.copytree(made.folder, shipped / TINY / "cpu")
    shutil.copytree(made.folder, mine / TINY / "cpu")
    broken = mine / TINY / "cpu"
    (broken / "results.csv").write_text("run_id\n")
    with pytest.warns(results.SkippedSetWarning, match=re.escape(str(broken))) as seen:
        assert results.largest(TINY).folder == shipped / TINY / "cpu"
    assert "results.csv: edited since the set was made" in str(seen[0].message)
    (shipped / TINY / "cpu" / "results.csv").write_text("run_id\n")
    with pytest.raises(results.SetError), pytest.warns(results.SkippedSetWarning):
        results.saved_sets(TINY)


def test_which_of_two_sets_of_one_name_is_read_is_printed(
    made: results.SavedSet, tmp_path: Path, monkeypatch, capsys
) -> None:
    mine, shipped = tmp_path / "mine", tmp_path / "shipped"
    monkeypatch.setattr(results, "shipped_root", lambda: shipped)
    monkeypatch.setenv(results.RESULTS_ENV, str(mine))
    shutil.copytree(made.folder, shipped / TINY / "cpu")
    results.largest(TINY)
    assert capsys.readouterr().err == ""  # one set of that name: nothing to say
    shutil.copytree(made.folder, mine / TINY / "cpu")
    assert results.largest(TINY).folder == mine / TINY / "cpu"
    err = capsys.readouterr().err
    assert f"{TINY}/cpu: reading your set in {mine / TINY / 'cpu'}" in err
    assert f"not the one of the same name in {shipped / TINY / 'cpu'}" in err


def test_the_scorecard_of_an_empty_root_is_an_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["scorecard", "--root", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --root ") and "holds no saved sets" in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("step", [1, 2])
def test_a_save_stopped_by_a_full_disk_resumes(
    extended, step: int, tmp_path: Path, monkeypatch
) -> None:
    """The disk fills between two of the staged writes: the save fails with the OS's
    error, the old set stands, and the same save completes it once there is room."""
    import errno

    base, whole = extended
    root = tmp_path / "root"
    shutil.copytree(base, root)
    full = OSError(errno.ENOSPC, "No space left on device")
    with monkeypatch.context() as patch:
        _killed_at(patch, step, full)
        with pytest.raises(OSError, match="No space left"):
            _save_tiny(root, 3)
    assert _saved_io.previous_manifest(root / TINY / "cpu")["runs"] == 4
    assert _metrics(_save_tiny(root, 3)) == whole
