"""Every real loader parses a tiny fixture written in its source's own file format.

Fixtures are written into a temporary data root exactly where the loader expects the
source's files; the loaders run with ``download=False`` (or, where an archive is tested, a
checksum patched to the fixture's own), so no test touches the network.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import pickle
import shutil
import struct
import sys
import tarfile
import zipfile
from pathlib import Path

import normlab.data as data
import numpy as np
import pytest
import torch
import torchvision.datasets as tvd
from normlab.data import IGNORE_INDEX, PAD_ID
from normlab.data import text as text_module
from normlab.data._common import UNK_ID, carve_val, split_indices
from normlab.data._download import Resource


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def write_idx(path: Path, array: np.ndarray) -> None:
    """IDX file: magic (0, 0, type 0x08 = uint8, ndim), big-endian dims, then the bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def mnist_fixture(
    raw: Path, n_train: int = 20, n_test: int = 6, compress: bool = False
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28)),
        "train-labels-idx1-ubyte": np.arange(n_train) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28)),
        "t10k-labels-idx1-ubyte": (np.arange(n_test) * 3) % 10,
    }
    raw.mkdir(parents=True)
    for name, array in arrays.items():
        write_idx(raw / name, array)
        if compress:
            with (
                open(raw / name, "rb") as source,
                gzip.open(raw / f"{name}.gz", "wb") as sink,
            ):
                shutil.copyfileobj(source, sink)
            (raw / name).unlink()
    return arrays


def check_vision_split(split: data.DataSplit, shape: tuple[int, ...], n: int) -> None:
    assert split.x.shape == (n, *shape) and split.x.dtype == torch.float32
    assert split.y.shape == (n,) and split.y.dtype == torch.long
    assert 0.0 <= float(split.x.min()) and float(split.x.max()) <= 1.0
    assert split.task == "classification" and split.meta["stand_in"] is False


@pytest.mark.parametrize(
    "name,folder", [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")]
)
def test_idx_loaders_parse_raw_files(tmp_path: Path, name: str, folder: str) -> None:
    arrays = mnist_fixture(tmp_path / folder / "raw")
    splits = {s: data.load(name, s, root=tmp_path, download=False) for s in data.SPLITS}
    check_vision_split(splits["train"], (1, 28, 28), 18)
    check_vision_split(splits["val"], (1, 28, 28), 2)
    check_vision_split(splits["test"], (1, 28, 28), 6)
    parts = carve_val(20, 2)
    expected = (
        torch.from_numpy(arrays["train-images-idx3-ubyte"][parts["val"]]).float()[
            :, None
        ]
        / 255
    )
    torch.testing.assert_close(splits["val"].x, expected)
    assert splits["test"].y.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    assert len(splits["train"].meta["classes"]) == 10
    # train statistics only, per channel
    assert splits["test"].meta["channel_mean"] == pytest.approx(
        [float(splits["train"].x.mean())], rel=1e-5
    )


def test_mnist_gz_files_are_checked_and_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The downloaded form (.gz, torchvision's names) is verified against the pinned MD5s."""
    raw = tmp_path / "MNIST" / "raw"
    arrays = mnist_fixture(raw, compress=True)
    monkeypatch.setattr(
        tvd.MNIST, "resources", [(f"{n}.gz", md5(raw / f"{n}.gz")) for n in arrays]
    )
    test = data.load("mnist", "test", root=tmp_path, download=False)
    assert test.y.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    assert (raw / "t10k-images-idx3-ubyte").is_file()


def test_mnist_gz_with_wrong_md5_is_deleted(tmp_path: Path) -> None:
    raw = tmp_path / "MNIST" / "raw"
    mnist_fixture(raw, compress=True)
    with pytest.raises(data.ChecksumError, match="deleted"):
        data.load("mnist", "train", root=tmp_path, download=False)
    assert not (raw / "train-images-idx3-ubyte.gz").exists()


def write_pickle(path: Path, obj: dict) -> None:
    with open(path, "wb") as stream:
        pickle.dump(obj, stream)


def pin_cifar_md5s(monkeypatch: pytest.MonkeyPatch, cls: type, folder: Path) -> None:
    """Point torchvision's per-file MD5s at the fixture's files, as the real ones pin the real batches."""
    for attribute in ("train_list", "test_list"):
        monkeypatch.setattr(
            cls,
            attribute,
            [[name, md5(folder / name)] for name, _ in getattr(cls, attribute)],
        )
    monkeypatch.setattr(
        cls, "meta", {**cls.meta, "md5": md5(folder / cls.meta["filename"])}
    )


def cifar_fixture(
    root: Path,
    which: str,
    monkeypatch: pytest.MonkeyPatch,
    per_batch: int = 4,
    n_test: int = 5,
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    cls = tvd.CIFAR10 if which == "cifar10" else tvd.CIFAR100
    folder = root / cls.base_folder
    folder.mkdir(parents=True)
    label_key = "labels" if which == "cifar10" else "fine_labels"
    k = 10 if which == "cifar10" else 100
    train_x, train_y = [], []
    for i, (filename, _) in enumerate(cls.train_list):
        x = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        y = [int(v) for v in (np.arange(per_batch) + i) % k]
        write_pickle(
            folder / filename,
            {"data": x, label_key: y, "coarse_labels": [0] * per_batch},
        )
        train_x.append(x), train_y.extend(y)
    test_x = rng.integers(0, 256, (n_test, 3072), dtype=np.uint8)
    test_y = [int(v) for v in np.arange(n_test) * 7 % k]
    write_pickle(folder / cls.test_list[0][0], {"data": test_x, label_key: test_y})
    write_pickle(
        folder / cls.meta["filename"],
        {cls.meta["key"]: [f"class{i}" for i in range(k)]},
    )
    pin_cifar_md5s(monkeypatch, cls, folder)
    return {
        "train_x": np.concatenate(train_x),
        "train_y": np.array(train_y),
        "test_x": test_x,
        "test_y": np.array(test_y),
    }


@pytest.mark.parametrize("which", ["cifar10", "cifar100"])
def test_cifar_loaders_parse_pickle_batches(
    tmp_path: Path, which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrays = cifar_fixture(tmp_path, which, monkeypatch)
    n_train = len(arrays["train_y"])
    train = data.load(which, "train", root=tmp_path, download=False)
    test = data.load(which, "test", root=tmp_path, download=False)
    n_val = max(1, round(0.1 * n_train))
    check_vision_split(train, (3, 32, 32), n_train - n_val)
    check_vision_split(test, (3, 32, 32), 5)
    # row-major 3072 = 3 channels x 32 x 32, red plane first
    torch.testing.assert_close(
        test.x[2, 1, 3, 4],
        torch.tensor(arrays["test_x"][2, 1024 + 3 * 32 + 4] / 255.0).float(),
    )
    assert test.y.tolist() == arrays["test_y"].tolist()
    assert len(test.meta["classes"]) == (10 if which == "cifar10" else 100)


def test_cifar_archive_is_verified_and_extracted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staging = tmp_path / "staging"
    arrays = cifar_fixture(staging, "cifar10", monkeypatch)
    root = tmp_path / "root"
    root.mkdir()
    archive = root / tvd.CIFAR10.filename
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(staging / tvd.CIFAR10.base_folder, arcname=tvd.CIFAR10.base_folder)
    monkeypatch.setattr(tvd.CIFAR10, "tgz_md5", md5(archive))
    test = data.load("cifar10", "test", root=root, download=False)
    assert test.y.tolist() == arrays["test_y"].tolist()
    assert (root / tvd.CIFAR10.base_folder / "test_batch").is_file()
    assert not [p for p in root.iterdir() if p.name.startswith(".extract")]


def test_cifar_batch_failing_torchvisions_md5_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cifar_fixture(tmp_path, "cifar10", monkeypatch)
    batch = tmp_path / tvd.CIFAR10.base_folder / "data_batch_3"
    batch.write_bytes(batch.read_bytes()[:-1] + b"\0")
    with pytest.raises(data.ChecksumError, match="CIFAR10.*no offline stand-in"):
        data.load("cifar10", "train", root=tmp_path, download=False)


def test_svhn_loader_parses_mat_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scipy.io import savemat

    rng = np.random.default_rng(2)
    folder = tmp_path / "svhn"
    folder.mkdir()
    mats = {}
    for part, n in (("train", 30), ("test", 12)):
        x = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
        y = (np.arange(n) % 10 + 1).reshape(n, 1)  # SVHN stores digit 0 as 10
        savemat(folder / f"{part}_32x32.mat", {"X": x, "y": y})
        mats[part] = (x, y)
    monkeypatch.setattr(
        tvd.SVHN,
        "split_list",
        {
            part: [url, name, md5(folder / name) if part in mats else digest]
            for part, (url, name, digest) in tvd.SVHN.split_list.items()
        },
    )
    train = data.load("svhn", "train", root=tmp_path, download=False)
    val = data.load("svhn", "val", root=tmp_path, download=False)
    test = data.load("svhn", "test", root=tmp_path, download=False)
    check_vision_split(train, (3, 32, 32), 27)
    check_vision_split(val, (3, 32, 32), 3)
    check_vision_split(test, (3, 32, 32), 12)
    x, y = mats["test"]
    assert (
        test.y.tolist() == [v % 10 for v in y[:, 0].tolist()] and 0 in test.y.tolist()
    )
    # X is (H, W, C, N): pixel (h=5, w=9) of channel 2 of image 4
    assert float(test.x[4, 2, 5, 9]) == pytest.approx(x[5, 9, 2, 4] / 255.0)


def cifar10_c_fixture(root: Path, per: int = 3) -> Path:
    """Each .npy holds 5 blocks of ``per`` images; every pixel of image j of block s of
    corruption c equals 5 * c + s (so the loader's choice of rows can be read back)."""
    folder = root / "CIFAR-10-C"
    folder.mkdir(parents=True)
    for c, name in enumerate(data.CIFAR10_C_CORRUPTIONS):
        values = np.repeat(5 * c + np.arange(1, 6), per).astype(np.uint8)
        np.save(
            folder / f"{name}.npy",
            np.broadcast_to(values[:, None, None, None], (5 * per, 32, 32, 3)).copy(),
        )
    np.save(folder / "labels.npy", np.tile(np.arange(per) % 10, 5).astype(np.uint8))
    return folder


def test_cifar10_c_one_condition(tmp_path: Path) -> None:
    cifar10_c_fixture(tmp_path)
    fog = data.load_cifar10_c("fog", 3, root=tmp_path, download=False)
    c = data.CIFAR10_C_CORRUPTIONS.index("fog")
    assert fog.x.shape == (3, 3, 32, 32)
    assert torch.all(fog.x == (5 * c + 3) / 255.0)
    assert fog.y.tolist() == [0, 1, 2] and fog.meta["severity"] == 3
    with pytest.raises(ValueError, match="corruption"):
        data.load_cifar10_c("rain", 1, root=tmp_path, download=False)
    with pytest.raises(ValueError, match="severity"):
        data.load_cifar10_c("fog", 6, root=tmp_path, download=False)


def test_cifar10_c_mixed_split_and_test_only(tmp_path: Path) -> None:
    cifar10_c_fixture(tmp_path, per=12)
    mixed = data.load("cifar10_c", "test", root=tmp_path, download=False)
    assert mixed.x.shape == (12, 3, 32, 32) and mixed.y.tolist() == list(
        np.arange(12) % 10
    )
    expected = 5 * mixed.meta["corruption_index"] + mixed.meta["severity"]
    assert torch.equal(mixed.x[:, 0, 0, 0], expected.float() / 255.0)
    assert mixed.meta["severity"].tolist()[:6] == [1, 2, 3, 4, 5, 1]
    for split in ("train", "val"):
        with pytest.raises(ValueError, match="only a test split"):
            data.load("cifar10_c", split, root=tmp_path, download=False)


MRG = """( (S
    (NP-SBJ (NNP Pierre) (NNP Vinken) )
    (VP (MD will)
      (VP (VB join)
        (NP (DT the) (NN board) )
        (NP-TMP (NNP Nov.) (CD {n}) )))
    (. .) ))
( (S
    (NP-SBJ-1 (DT The) (NN can) )
    (VP (VBD was)
      (VP (VBN {verb})
        (NP (-NONE- *-1) )))
    (. .) ))
"""


def write_treebank(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, verb in files.items():
        (folder / name).write_text(MRG.format(n=name[4:8], verb=verb))


def test_ptb_pos_parses_treebank_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NORMLAB_PTB_WSJ", raising=False)
    combined = tmp_path / "nltk_data" / "corpora" / "treebank" / "combined"
    write_treebank(
        combined,
        {f"wsj_{i:04d}.mrg": ("opened" if i < 9 else "sealed") for i in range(1, 11)},
    )
    train = data.load("ptb_pos", "train", root=tmp_path, download=False)
    test = data.load("ptb_pos", "test", root=tmp_path, download=False)
    val = data.load("ptb_pos", "val", root=tmp_path, download=False)
    assert (len(train), len(val), len(test)) == (
        16,
        2,
        2,
    )  # 10 files: 8 / 1 / 1, two sentences each
    tags, vocab = test.meta["tags"], test.meta["vocab"]
    assert "-NONE-" not in tags and "VBN" in tags
    assert vocab[PAD_ID] == "<pad>" and vocab[UNK_ID] == "<unk>"
    second = test.x[1].tolist()
    n = sum(t != PAD_ID for t in second)
    assert [vocab[t] for t in second[:n]] == [
        "The",
        "can",
        "was",
        "<unk>",
        ".",
    ]  # "sealed" is not in train
    assert [tags[t] for t in test.y[1, :n].tolist()] == ["DT", "NN", "VBD", "VBN", "."]
    assert torch.all(test.y[1, n:] == IGNORE_INDEX) and torch.all(
        test.x[1, n:] == PAD_ID
    )
    assert test.x.shape[1] == train.x.shape[1] == val.x.shape[1] == test.meta["max_len"]
    assert test.task == "tagging" and test.num_classes == len(tags)


def test_ptb_pos_accepts_a_licensed_wsj_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wsj = tmp_path / "wsj"
    for section, verb in (("00", "opened"), ("19", "opened"), ("23", "opened")):
        write_treebank(wsj / section, {f"wsj_{section}01.mrg": verb})
    monkeypatch.setenv("NORMLAB_PTB_WSJ", str(wsj))
    sizes = {
        s: len(data.load("ptb_pos", s, root=tmp_path / "empty", download=False))
        for s in data.SPLITS
    }
    assert sizes == {"train": 2, "val": 2, "test": 2}
    assert (
        "WSJ"
        in data.load("ptb_pos", "test", root=tmp_path / "empty", download=False).meta[
            "source"
        ]
    )


def write_tsv(path: Path, rows: list[tuple[str, int]]) -> None:
    with open(path, "w", newline="") as stream:
        writer = csv.writer(
            stream, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"
        )
        writer.writerow(["sentence", "label"])
        writer.writerows(rows)


def sst2_rows() -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    train = [
        (f"a {'fine' if i % 2 else 'dull'} film , number {i % 3} ", i % 2)
        for i in range(40)
    ]
    dev = [("a fine film", 1), ("an unseen word", 0), ("dull", 0)]
    return train, dev


def test_sst2_parses_glue_tsv(tmp_path: Path) -> None:
    folder = tmp_path / "SST-2"
    folder.mkdir()
    train_rows, dev_rows = sst2_rows()
    write_tsv(folder / "train.tsv", train_rows)
    write_tsv(folder / "dev.tsv", dev_rows)
    splits = {
        s: data.load("sst2", s, root=tmp_path, download=False) for s in data.SPLITS
    }
    assert {s: len(v) for s, v in splits.items()} == {"train": 36, "val": 4, "test": 3}
    test = splits["test"]
    vocab = test.meta["vocab"]
    assert test.y.tolist() == [1, 0, 0] and test.meta["classes"] == [
        "negative",
        "positive",
    ]
    assert [vocab[t] for t in test.x[1].tolist() if t != PAD_ID] == [
        "<unk>",
        "<unk>",
        "<unk>",
    ]
    assert [vocab[t] for t in test.x[0].tolist() if t != PAD_ID] == [
        "a",
        "fine",
        "film",
    ]
    assert test.x.shape[1] == splits["train"].x.shape[1] == 6
    assert sorted(splits["train"].y.tolist() + splits["val"].y.tolist()) == sorted(
        y for _, y in train_rows
    )


def test_sst2_zip_is_verified_and_extracted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    train_rows, dev_rows = sst2_rows()
    write_tsv(staging / "train.tsv", train_rows)
    write_tsv(staging / "dev.tsv", dev_rows)
    root = tmp_path / "root"
    root.mkdir()
    with zipfile.ZipFile(root / "SST-2.zip", "w") as bundle:
        for name in ("train.tsv", "dev.tsv"):
            bundle.write(staging / name, f"SST-2/{name}")
    digest = hashlib.sha256((root / "SST-2.zip").read_bytes()).hexdigest()
    monkeypatch.setattr(
        text_module,
        "SST2",
        Resource(url="file:///nowhere", filename="SST-2.zip", sha256=digest),
    )
    assert len(data.load("sst2", "test", root=root, download=False)) == 3


def energy_table(n: int = 60) -> np.ndarray:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (n, 8)) * np.array([1, 800, 400, 200, 7, 5, 0.4, 5])
    return np.column_stack(
        [x, 10 + 30 * x[:, 0] + rng.normal(0, 1, n), 20 + 10 * x[:, 0]]
    )


def test_energy_parses_csv_copy(tmp_path: Path) -> None:
    table = energy_table()
    folder = tmp_path / "energy_efficiency"
    folder.mkdir()
    header = [f"X{i}" for i in range(1, 9)] + ["Y1", "Y2"]
    with open(folder / "ENB2012_data.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(table.tolist())
        writer.writerow([""] * 10)  # the UCI sheet has blank trailing rows
    splits = {
        s: data.load("energy_efficiency", s, root=tmp_path, download=False)
        for s in data.SPLITS
    }
    parts = split_indices(60)
    assert {s: len(v) for s, v in splits.items()} == {
        s: len(parts[s]) for s in data.SPLITS
    }
    train, test = splits["train"], splits["test"]
    assert (
        train.x.shape == (42, 8)
        and train.y.shape == (42,)
        and train.task == "regression"
    )
    torch.testing.assert_close(train.x.mean(0), torch.zeros(8), atol=1e-5, rtol=0)
    torch.testing.assert_close(
        train.x.std(0, unbiased=False), torch.ones(8), atol=1e-5, rtol=0
    )
    original = test.y.double() * test.meta["target_scale"] + test.meta["target_mean"]
    np.testing.assert_allclose(original.numpy(), table[parts["test"], 8], rtol=1e-5)
    assert (
        test.meta["target_names"] == ["heating_load"]
        and len(test.meta["feature_names"]) == 8
    )


def test_energy_xlsx_without_openpyxl_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # as if not installed
    folder = tmp_path / "energy_efficiency"
    folder.mkdir()
    with zipfile.ZipFile(
        folder / "ENB2012_data.xlsx", "w"
    ) as workbook:  # what pandas sniffs for .xlsx
        workbook.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(ImportError, match="openpyxl.*ENB2012_data.csv"):
        data.load("energy_efficiency", "train", root=tmp_path, download=False)


def test_california_reads_sklearn_cache(tmp_path: Path) -> None:
    import joblib

    rng = np.random.default_rng(4)
    n = 50
    households = rng.uniform(100, 500, n)
    # sklearn's cache columns: value, income, age, rooms, bedrooms, population, households, lat, lon
    raw = np.column_stack(
        [
            rng.uniform(5e4, 5e5, n),
            rng.uniform(1, 10, n),
            rng.uniform(1, 50, n),
            households * 5,
            households,
            households * 3,
            households,
            rng.uniform(32, 42, n),
            rng.uniform(-124, -114, n),
        ]
    )
    home = tmp_path / "scikit_learn_data"
    home.mkdir()
    joblib.dump(raw.copy(), home / "cal_housing_py3.pkz", compress=6)
    test = data.load("california_housing", "test", root=tmp_path, download=False)
    train = data.load("california_housing", "train", root=tmp_path, download=False)
    parts = split_indices(n)
    assert train.x.shape == (35, 8) and test.x.shape == (len(parts["test"]), 8)
    original = test.y.double() * test.meta["target_scale"] + test.meta["target_mean"]
    np.testing.assert_allclose(original.numpy(), raw[parts["test"], 0] / 1e5, rtol=1e-5)
    assert test.meta["feature_names"][2] == "AveRooms"
    # AveRooms = rooms / households = 5 everywhere: a constant column standardises to 0
    assert torch.all(train.x[:, 2].abs() < 1e-4)


def test_missing_files_without_download_name_the_stand_in(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no offline stand-in.*STAND_INS"):
        data.load("cifar10", "train", root=tmp_path, download=False)
    with pytest.raises(FileNotFoundError, match="diabetes"):
        data.load("california_housing", "train", root=tmp_path, download=False)


def test_cache_root_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NORMLAB_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data.cache_root() == tmp_path / "xdg" / "normlab"
    monkeypatch.setenv("NORMLAB_DATA", str(tmp_path / "env"))
    assert data.cache_root() == tmp_path / "env"
    assert data.cache_root(tmp_path / "arg") == tmp_path / "arg"
