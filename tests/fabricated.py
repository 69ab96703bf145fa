"""Small fabricated copies of the papers' real datasets, each in its source's own format.

:func:`write_all` writes into a data root exactly the files a real download leaves there
(archives included, so the loaders' extraction runs too):

================================  =============================================================
dataset                           files (format)
================================  =============================================================
mnist, fashion_mnist              ``MNIST/raw/*-ubyte.gz``, ``FashionMNIST/raw/*-ubyte.gz`` (IDX)
cifar10, cifar100                 ``cifar-10-python.tar.gz``, ``cifar-100-python.tar.gz``
                                  (python pickles of ``data`` rows and labels, and the meta file)
svhn                              ``svhn/train_32x32.mat``, ``svhn/test_32x32.mat`` (MATLAB v5,
                                  ``X`` of shape 32 x 32 x 3 x N, ``y`` in 1..10)
cifar10_c                         ``CIFAR-10-C.tar``: 19 ``<corruption>.npy`` of 5 x N x 32 x 32
                                  x 3 uint8 and ``labels.npy``
ptb_pos                           ``nltk_data/corpora/treebank/combined/wsj_00NN.mrg``
                                  (bracketed parses with ``-NONE-`` traces)
sst2                              ``SST-2.zip``: ``SST-2/train.tsv``, ``SST-2/dev.tsv``
energy_efficiency                 ``energy_efficiency/ENB2012_data.xlsx`` (768 rows, X1..Y2)
california_housing                ``scikit_learn_data/cal_housing_py3.pkz`` (scikit-learn's
                                  joblib cache of the 9 raw columns)
================================  =============================================================

The files hold random values, so they fail every published checksum. :func:`trust` is the
one test hook that replaces the checksum tables (normlab's and torchvision's) with the
fabricated files' digests; everything else runs the loaders' real code.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

N_TRAIN = 1200  # >= 1024 after the 10 % val split: the largest batch of any grid fits
N_TEST = 200
N_C = 8  # CIFAR-10-C images per severity (x 95 conditions)
RNG = np.random.default_rng(0)


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _images(n: int, shape: tuple[int, ...]) -> np.ndarray:
    return RNG.integers(0, 256, size=(n, *shape), dtype=np.uint8)


def _labels(n: int, classes: int) -> np.ndarray:
    return RNG.integers(0, classes, size=n).astype(np.uint8)


# ------------------------------------------------------------------------- images


def _idx(array: np.ndarray) -> bytes:
    """IDX bytes of a uint8 array: magic 0x0000080N (N dimensions), big-endian sizes."""
    head = struct.pack(">I", 0x0800 + array.ndim) + b"".join(
        struct.pack(">I", d) for d in array.shape
    )
    return head + array.tobytes()


def write_idx(root: Path, folder: str) -> dict[str, str]:
    """MNIST-style gzipped IDX files in ``root/folder/raw``; their MD5s by file name."""
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    parts = {
        "train-images-idx3-ubyte.gz": _images(N_TRAIN, (28, 28)),
        "train-labels-idx1-ubyte.gz": _labels(N_TRAIN, 10),
        "t10k-images-idx3-ubyte.gz": _images(N_TEST, (28, 28)),
        "t10k-labels-idx1-ubyte.gz": _labels(N_TEST, 10),
    }
    sums = {}
    for name, array in parts.items():
        (raw / name).write_bytes(gzip.compress(_idx(array)))
        sums[name] = md5(raw / name)
    return sums


def _pickled(obj: dict) -> bytes:
    return pickle.dumps(obj, protocol=2)


def write_cifar(root: Path, classes: int) -> dict[str, str]:
    """``cifar-10-python.tar.gz`` or ``cifar-100-python.tar.gz`` in ``root``; the MD5s of the
    archive (key ``archive``) and of every member, by member name."""
    if classes == 10:
        folder, archive, key, meta_name = (
            "cifar-10-batches-py",
            "cifar-10-python.tar.gz",
            "labels",
            "batches.meta",
        )
        per = N_TRAIN // 5
        members = {
            f"data_batch_{i}": {"data": _images(per, (3072,)), key: None}
            for i in range(1, 6)
        }
        members["test_batch"] = {"data": _images(N_TEST, (3072,)), key: None}
        meta = {"label_names": [f"class{c}" for c in range(classes)]}
    else:
        folder, archive, key, meta_name = (
            "cifar-100-python",
            "cifar-100-python.tar.gz",
            "fine_labels",
            "meta",
        )
        members = {
            "train": {"data": _images(N_TRAIN, (3072,)), key: None},
            "test": {"data": _images(N_TEST, (3072,)), key: None},
        }
        meta = {"fine_label_names": [f"class{c}" for c in range(classes)]}
    blobs = {}
    for name, entry in members.items():
        entry[key] = _labels(len(entry["data"]), classes).tolist()
        blobs[name] = _pickled(entry)
    blobs[meta_name] = _pickled(meta)
    with tarfile.open(root / archive, "w:gz") as tar:
        for name, blob in blobs.items():
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    sums = {name: hashlib.md5(blob).hexdigest() for name, blob in blobs.items()}
    return {**sums, "archive": md5(root / archive)}


def write_svhn(root: Path) -> dict[str, str]:
    """``svhn/{train,test}_32x32.mat`` (labels 1..10, 10 meaning digit 0); MD5s by split."""
    from scipy.io import savemat

    folder = root / "svhn"
    folder.mkdir()
    sums = {}
    for split, n in (("train", N_TRAIN), ("test", N_TEST)):
        x = np.ascontiguousarray(np.transpose(_images(n, (32, 32, 3)), (1, 2, 3, 0)))
        y = (_labels(n, 10).astype(np.uint8) + 1).reshape(-1, 1)
        savemat(folder / f"{split}_32x32.mat", {"X": x, "y": y})
        sums[split] = md5(folder / f"{split}_32x32.mat")
    return sums


def write_cifar10_c(root: Path) -> str:
    """``CIFAR-10-C.tar`` with every corruption's ``.npy`` and ``labels.npy``; its MD5."""
    from normlab.data.vision import CIFAR10_C_CORRUPTIONS

    labels = np.tile(_labels(N_C, 10), 5)
    with tarfile.open(root / "CIFAR-10-C.tar", "w") as tar:
        for name in (*CIFAR10_C_CORRUPTIONS, "labels"):
            array = labels if name == "labels" else _images(5 * N_C, (32, 32, 3))
            buffer = io.BytesIO()
            np.save(buffer, array)
            info = tarfile.TarInfo(f"CIFAR-10-C/{name}.npy")
            info.size = buffer.tell()
            buffer.seek(0)
            tar.addfile(info, buffer)
    return md5(root / "CIFAR-10-C.tar")


# --------------------------------------------------------------------------- text

_WORDS = {
    "DT": ["the", "a", "every"],
    "NN": ["company", "share", "market", "year", "price"],
    "NNP": ["Vinken", "Elsevier", "Lorillard"],
    "VBD": ["rose", "fell", "said", "bought"],
    "JJ": ["new", "big", "late"],
}


def _tree(i: int) -> str:
    """A bracketed WSJ-style parse with an empty ``-NONE-`` element."""
    pick = lambda tag, k: _WORDS[tag][(i + k) % len(_WORDS[tag])]  # noqa: E731
    return (
        f"( (S (NP-SBJ (DT {pick('DT', 0)}) (JJ {pick('JJ', 1)}) (NN {pick('NN', 2)}) )\n"
        f"    (VP (VBD {pick('VBD', 3)}) (NP (NNP {pick('NNP', 4)}) ) (-NONE- *T*-1) )\n"
        "    (. .) ))\n"
    )


def write_treebank(root: Path, files: int = 10, sentences: int = 12) -> None:
    """NLTK's treebank sample layout: ``combined/wsj_00NN.mrg`` of bracketed parses."""
    folder = root / "nltk_data" / "corpora" / "treebank" / "combined"
    folder.mkdir(parents=True)
    for f in range(1, files + 1):
        text = "\n".join(_tree(f * 31 + s) for s in range(sentences))
        (folder / f"wsj_{f:04d}.mrg").write_text(text)


def _sentence(i: int) -> tuple[str, int]:
    adjective = ["good", "great", "bad", "dull"][i % 4]
    words = ["the", "film", "is", adjective, ["indeed", "overall", "really"][i % 3]]
    return " ".join(words), int(adjective in ("good", "great"))


def write_sst2(root: Path) -> str:
    """``SST-2.zip`` with GLUE's ``train.tsv`` and ``dev.tsv``; its SHA-256."""
    tables = {}
    for name, n in (("train", 400), ("dev", 60)):
        rows = [_sentence(i + (1000 if name == "dev" else 0)) for i in range(n)]
        tables[name] = "sentence\tlabel\n" + "".join(f"{s} \t{y}\n" for s, y in rows)
    with zipfile.ZipFile(root / "SST-2.zip", "w") as bundle:
        for name, text in tables.items():
            bundle.writestr(f"SST-2/{name}.tsv", text)
    return hashlib.sha256((root / "SST-2.zip").read_bytes()).hexdigest()


# ------------------------------------------------------------------------ tabular


def write_energy(root: Path) -> None:
    """``energy_efficiency/ENB2012_data.xlsx``: 768 rows of X1..X8, Y1, Y2 (as UCI's)."""
    from normlab.data.tabular import ENERGY_ROWS

    features = RNG.uniform(0.5, 2.0, size=(ENERGY_ROWS, 8))
    targets = features @ RNG.uniform(1, 5, size=(8, 2)) + RNG.normal(
        0, 0.1, (ENERGY_ROWS, 2)
    )
    table = pd.DataFrame(
        np.hstack([features, targets]),
        columns=[*(f"X{i}" for i in range(1, 9)), "Y1", "Y2"],
    )
    (root / "energy_efficiency").mkdir()
    table.to_excel(root / "energy_efficiency" / "ENB2012_data.xlsx", index=False)


def write_california(root: Path, n: int = 600) -> None:
    """scikit-learn's cache ``scikit_learn_data/cal_housing_py3.pkz``: the raw columns
    (value, income, age, rooms, bedrooms, population, households, latitude, longitude)."""
    import joblib

    households = RNG.uniform(100, 1000, n)
    table = np.column_stack(
        [
            RNG.uniform(5e4, 5e5, n),
            RNG.uniform(0.5, 15, n),
            RNG.uniform(1, 52, n),
            households * RNG.uniform(3, 8, n),
            households * RNG.uniform(0.8, 1.5, n),
            households * RNG.uniform(2, 4, n),
            households,
            RNG.uniform(32, 42, n),
            RNG.uniform(-124, -114, n),
        ]
    )
    folder = root / "scikit_learn_data"
    folder.mkdir()
    joblib.dump(table, folder / "cal_housing_py3.pkz", compress=6)


# -------------------------------------------------------------------------- all


def write_all(root: Path) -> dict[str, object]:
    """Every fabricated dataset in ``root``; the checksums :func:`trust` installs."""
    return {
        "mnist": write_idx(root, "MNIST"),
        "fashion_mnist": write_idx(root, "FashionMNIST"),
        "cifar10": write_cifar(root, 10),
        "cifar100": write_cifar(root, 100),
        "svhn": write_svhn(root),
        "cifar10_c": write_cifar10_c(root),
        "sst2": write_sst2(root),
        "ptb_pos": write_treebank(root),
        "energy_efficiency": write_energy(root),
        "california_housing": write_california(root),
    }


def trust(monkeypatch: pytest.MonkeyPatch, sums: dict[str, object]) -> None:
    """The test hook: replace the published checksums with the fabricated files' digests,
    in normlab's resources and in torchvision's dataset classes, and nothing else."""
    import torchvision.datasets as tvd
    from normlab.data import text, vision
    from normlab.data._download import Resource

    for cls, key in ((tvd.MNIST, "mnist"), (tvd.FashionMNIST, "fashion_mnist")):
        monkeypatch.setattr(
            cls, "resources", [(name, digest) for name, digest in sums[key].items()]
        )
    for cls, key in ((tvd.CIFAR10, "cifar10"), (tvd.CIFAR100, "cifar100")):
        digests = sums[key]
        monkeypatch.setattr(cls, "tgz_md5", digests["archive"])
        for table in ("train_list", "test_list"):
            monkeypatch.setattr(
                cls, table, [[name, digests[name]] for name, _ in getattr(cls, table)]
            )
        monkeypatch.setattr(
            cls, "meta", {**cls.meta, "md5": digests[cls.meta["filename"]]}
        )
    monkeypatch.setattr(
        tvd.SVHN,
        "split_list",
        {
            split: [url, name, sums["svhn"].get(split, digest)]
            for split, (url, name, digest) in tvd.SVHN.split_list.items()
        },
    )
    c = vision.CIFAR10_C
    monkeypatch.setattr(
        vision, "CIFAR10_C", Resource(c.url, c.filename, md5=sums["cifar10_c"])
    )
    s = text.SST2
    monkeypatch.setattr(text, "SST2", Resource(s.url, s.filename, sha256=sums["sst2"]))
