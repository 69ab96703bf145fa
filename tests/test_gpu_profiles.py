"""The standard and paper profiles, proven on a CPU: the real loaders read fabricated files in
each dataset's own format (tests/fabricated.py), and every experiment's first standard and
paper run trains two optimiser steps through exactly the runner path a GPU run takes."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fabricated  # noqa: E402
from normlab import data, experiments, training  # noqa: E402
from normlab.experiments.costs import STANDARD_BUDGET_MIN  # noqa: E402

STEPS = 2


@pytest.fixture(scope="session")
def fabricated_files(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("normlab-data")
    return root, fabricated.write_all(root)


@pytest.fixture
def real_data(fabricated_files, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$NORMLAB_DATA`` at the fabricated root, its checksums trusted (the one hook)."""
    root, sums = fabricated_files
    monkeypatch.setenv(data._download.DATA_ENV, str(root))
    monkeypatch.delenv("NORMLAB_PTB_WSJ", raising=False)
    fabricated.trust(monkeypatch, sums)
    return root


EXPECTED = {  # name: (train, val, test) sizes, sample shape
    "mnist": ((1080, 120, 200), (1, 28, 28)),
    "fashion_mnist": ((1080, 120, 200), (1, 28, 28)),
    "cifar10": ((1080, 120, 200), (3, 32, 32)),
    "cifar100": ((1080, 120, 200), (3, 32, 32)),
    "svhn": ((1080, 120, 200), (3, 32, 32)),
    "sst2": ((360, 40, 60), None),
    "energy_efficiency": ((537, 76, 155), (8,)),
    "california_housing": ((420, 60, 120), (8,)),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_loader_reads_fabricated_files(real_data: Path, name: str) -> None:
    sizes, shape = EXPECTED[name]
    splits = [data.load(name, split, download=False) for split in data.SPLITS]
    assert tuple(len(s) for s in splits) == sizes
    for split in splits:
        assert split.meta["stand_in"] is False
        if shape is not None:
            assert tuple(split.x.shape[1:]) == shape
        if split.task == "classification" and split.x.dim() == 4:
            assert 0.0 <= float(split.x.min()) and float(split.x.max()) <= 1.0
    if name == "svhn":  # label 10 (digit 0) became 0
        assert int(splits[0].y.max()) <= 9
    if name == "cifar100":
        assert len(splits[0].meta["classes"]) == 100


def test_checksums_are_checked_without_the_hook(fabricated_files, monkeypatch) -> None:
    """Without :func:`fabricated.trust`, the fabricated SST-2 archive fails its pin."""
    root, _ = fabricated_files
    fresh = root.parent / "untrusted"
    fresh.mkdir(exist_ok=True)
    (fresh / "SST-2.zip").write_bytes((root / "SST-2.zip").read_bytes())
    with pytest.raises(data.ChecksumError, match="sha256"):
        data.load("sst2", "train", root=fresh, download=False)
    assert not (fresh / "SST-2.zip").exists()  # a file failing its pin is deleted


def test_text_loaders_parse_the_formats(real_data: Path) -> None:
    ptb = [data.load("ptb_pos", s, download=False) for s in data.SPLITS]
    assert [len(s) for s in ptb] == [96, 12, 12]  # 10 files split 8 / 1 / 1, 12 each
    tags = ptb[0].meta["tags"]
    assert "-NONE-" not in tags and {"DT", "NN", "VBD", "."} <= set(tags)
    assert ptb[0].x.shape[1] == 6  # 6 tokens once the trace is dropped
    sst = data.load("sst2", "test", download=False)
    assert set(sst.y.tolist()) == {0, 1}


def test_cifar10_c_mixed_split(real_data: Path) -> None:
    split = data.load("cifar10_c", "test", download=False)
    assert len(split) == fabricated.N_C and tuple(split.x.shape[1:]) == (3, 32, 32)
    one = data.load_cifar10_c("fog", 3, download=False)
    assert len(one) == fabricated.N_C and one.meta["severity"] == 3


@pytest.mark.parametrize("name", experiments.names())
def test_standard_grid_fits_one_gpu(name: str) -> None:
    minutes = experiments.get(name).expected_seconds("standard") / 60
    assert minutes <= STANDARD_BUDGET_MIN, f"{name}: standard is ~{minutes:.0f} GPU-min"


@pytest.fixture
def two_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``training.fit`` ends after ``STEPS`` optimiser steps (the only change)."""
    real_fit = training.fit

    def capped(*args, **settings):
        settings["max_steps"] = min(settings.get("max_steps") or STEPS, STEPS)
        return real_fit(*args, **settings)

    monkeypatch.setattr(training, "fit", capped)


@pytest.mark.parametrize("name", experiments.names())
def test_first_standard_and_paper_point_trains(
    name: str, real_data: Path, two_steps: None, tmp_path: Path
) -> None:
    exp = experiments.get(name)
    for profile in ("standard", "paper"):
        runs = exp.runs(profile)
        # shard 0 of len(runs): exactly the first run in id order, as a GPU job would run it
        done = experiments.run(
            name,
            profile=profile,
            out=tmp_path,
            device="cpu",
            shard=(0, len(runs)),
            progress=False,
        )
        assert done.ran == [runs[0].run_id]
        record = json.loads(
            (done.folder / "runs" / f"{runs[0].run_id}.json").read_text()
        )
        assert record["config"] == json.loads(json.dumps(runs[0].config))
        assert record["stand_in"] is False
        assert record["metrics"]["steps"] == STEPS
        assert math.isfinite(record["metrics"]["train_loss"])
        table = experiments.load_results(name, tmp_path, profile)
        assert list(table["run_id"]) == [runs[0].run_id]
        assert torch.device(record["device"]).type == "cpu"


def test_larger_profiles_names_costs_and_commands() -> None:
    text = experiments.larger_profiles("11")
    for name in ("autonorm_vision", "gate_bottleneck", "gate_tau"):
        exp = experiments.get(name)
        minutes = round(exp.expected_seconds("standard") / 60)
        assert f"{exp.grid('standard').size()} runs, ~{minutes} GPU-min" in text
        assert f"python -m normlab run {name} --profile standard" in text
    assert "--executor slurm" in text and "--profile paper" in text
    for chapter in ("6", "7", "8", "10", "11", "12", "13", "14", "15"):
        assert max(map(len, experiments.larger_profiles(chapter).splitlines())) <= 88
    with pytest.raises(ValueError, match="chapter='2' has no experiments"):
        experiments.larger_profiles("2")
