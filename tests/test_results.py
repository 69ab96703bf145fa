"""Saved result sets: packed into strict JSON lines with a manifest, found, shown beside a
live run, and checked so that a number edited by hand, a deleted run, a relabelled set or
drift in the code fails, exactly on the numerics that made the set and within the set's
own seed spread elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import normlab
import pandas as pd
import pytest
from normlab import _provenance, experiments, figures, results, verification
from normlab.__main__ import main
from normlab.experiments import RunSettings
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


def _forge(saved: results.SavedSet, edit) -> results.SavedSet:
    """Edit the set's records as a careful forger would: ``edit(records)`` changes the list
    of records, then the table, every digest and the run count are made to agree, so only
    the checks beyond the digests can catch it."""
    records = [json.loads(line) for line in (saved.folder / "runs.jsonl").open()]
    records = edit(records)
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    (saved.folder / "runs.jsonl").write_text("".join(f"{line}\n" for line in lines))
    table = experiments.runner.records_table(records)
    table.to_csv(saved.folder / "results.csv", index=False)
    manifest = dict(saved.manifest)
    ids = [r["run_id"] for r in records]
    manifest["records"] = {i: results._sha(line) for i, line in zip(ids, lines)}
    manifest["runs"] = len(ids)
    manifest["commits"] = {"forged": ids}
    manifest["files"] = {
        name: results._sha((saved.folder / name).read_bytes())
        for name in ("runs.jsonl", "results.csv")
    }
    (saved.folder / "manifest.json").write_text(json.dumps(manifest))
    return results.load(saved.folder)


def _problems(saved: results.SavedSet, **kwargs) -> list[str]:
    return [str(p) for p in verification.verify(saved, **kwargs).problems]


# -------------------------------------------------------------------- making a set


def test_manifest_records_how_the_set_was_made(made: results.SavedSet) -> None:
    m = made.manifest
    assert m["format"] == results.FORMAT and m["experiment"] == TINY
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
    assert _provenance.git_commit() == f"normlab {normlab.__version__}"


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

    forged = _forge(copy, nudge)
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


def _made_on(saved: results.SavedSet, fingerprint) -> results.SavedSet:
    """The set, forged as if every run had been made on ``fingerprint``."""

    def relabel(records):
        for r in records:
            r["made_by"] = {**r["made_by"], "fingerprint": fingerprint}
        return records

    return _forge(saved, relabel)


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
    problems = [
        str(p) for p in verification.check_format(_forge(copy, lambda r: r[1:]))
    ]
    assert any("holds 5 runs, its grid 6" in p for p in problems)


def test_a_metric_set_to_nan_fails(copy: results.SavedSet) -> None:
    def blank(records):
        records[0]["metrics"]["val_metric"] = None
        return records

    problems = [str(p) for p in verification.check_format(_forge(copy, blank))]
    assert any(
        "val_metric is None but the run is not marked diverged" in p for p in problems
    )


def test_a_set_relabelled_as_made_on_a_gpu_fails(
    copy: results.SavedSet, monkeypatch
) -> None:
    manifest = json.loads((copy.folder / "manifest.json").read_text())
    manifest["hardware"]["device"] = "cuda"
    (copy.folder / "manifest.json").write_text(json.dumps(manifest))
    outcome = verification.verify(results.load(copy.folder))
    assert not outcome.ok and outcome.mode.startswith("format only")
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
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
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
