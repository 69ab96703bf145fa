"""The papers' language datasets: Penn Treebank POS tagging and SST-2.

Tokenisation is part of the loader. Vocabularies are built on the train split only:
id 0 is ``<pad>`` (``PAD_ID``), id 1 is ``<unk>``, then the words seen at least twice in
train (rarer words become ``<unk>``, so the model meets ``<unk>`` in training too).
Sequences are padded with ``PAD_ID`` to the longest sentence of the whole dataset (no
truncation), so every split has the same length ``meta["max_len"]``.
"""

from __future__ import annotations

import csv
import os
import re
from functools import lru_cache
from pathlib import Path

import torch

from .._extras import require
from ._common import build_vocab, carve_val, check_split, encode, encode_tags
from ._download import Resource, cache_root, check_reachable, ensure_extracted, extract
from .types import DataSplit

__all__ = [
    "MIN_FREQ",
    "WSJ_ENV",
    "TREEBANK_URL",
    "SST2",
    "SST2_VAL_SIZE",
    "read_treebank",
    "ptb_pos",
    "read_glue_tsv",
    "sst2",
    "LOADERS",
]

MIN_FREQ = 2
WSJ_ENV = "NORMLAB_PTB_WSJ"
TREEBANK_URL = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/treebank.zip"
SST2 = Resource(
    url="https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",
    filename="SST-2.zip",
    sha256="d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa",
)
SST2_VAL_SIZE = 872  # the size of GLUE's dev set


def _text_split(
    name: str,
    split: str,
    sentences: dict,
    labels: dict,
    meta: dict,
    task: str,
    tags: list[str] | None = None,
) -> DataSplit:
    vocab = build_vocab(sentences["train"], MIN_FREQ)
    max_len = max(len(s) for part in sentences.values() for s in part)
    x = encode(sentences[split], vocab, max_len)
    if task == "tagging":
        y = encode_tags(labels[split], tags, max_len)
        meta = {**meta, "tags": tags}
    else:
        y = torch.tensor(labels[split], dtype=torch.long)
    return DataSplit(
        x=x,
        y=y,
        task=task,
        name=name,
        split=split,
        meta={"vocab": vocab, "max_len": max_len, "stand_in": False, **meta},
    )


# ---------------------------------------------------------------- Penn Treebank POS


def read_treebank(
    folder: str | Path, fileids: str | list[str] = r"(?:.*/)?wsj_\d+\.mrg"
) -> list[tuple[str, list[tuple[str, str]]]]:
    """(file id, tagged sentence) pairs from bracketed ``.mrg`` files under ``folder``,
    parsed by NLTK's ``BracketParseCorpusReader``; ``-NONE-`` trace tokens are dropped.

    ``folder`` is appended to ``nltk.data.path``: NLTK (3.9+) reads corpora only from its
    data path."""
    nltk = require("nltk", "reading the Penn Treebank (normlab.data.text)")
    reader_module = require("nltk.corpus.reader", "normlab.data.text")

    folder = str(Path(folder).resolve())
    if folder not in nltk.data.path:
        nltk.data.path.append(folder)
    reader = reader_module.BracketParseCorpusReader(str(folder), fileids)
    out = []
    for fileid in sorted(reader.fileids()):
        for sentence in reader.tagged_sents(fileid):
            kept = [(word, tag) for word, tag in sentence if tag != "-NONE-"]
            if kept:
                out.append((fileid, kept))
    return out


def _treebank_folder(root: str | Path | None, download: bool) -> Path:
    base = cache_root(root) / "nltk_data"
    folder = base / "corpora" / "treebank" / "combined"
    if folder.is_dir():
        return folder
    if not download:
        raise FileNotFoundError(
            f"{folder} is missing and download=False. Run nltk.download('treebank', download_dir={str(base)!r}), "
            f"set ${WSJ_ENV} to a licensed WSJ copy, or use the quick-profile stand-in 'pos_grammar'."
        )
    nltk = require("nltk", "downloading the Penn Treebank (normlab.data.text)")
    check_reachable(
        TREEBANK_URL,
        resource_name="treebank.zip",
        folder=base / "corpora",
        standin="pos_grammar",
    )
    # NLTK's downloader checks the zip against the checksum in NLTK's data index, writes
    # through a temporary file, and unzips it.
    nltk.download("treebank", download_dir=str(base), quiet=True, raise_on_error=True)
    if not folder.is_dir():
        extract(base / "corpora" / "treebank.zip", base / "corpora", "treebank")
    return folder


def _wsj_section(fileid: str) -> int:
    match = re.search(r"wsj_(\d\d)\d\d\.mrg$", fileid)
    if match is None:
        raise ValueError(f"{fileid!r} is not named like a WSJ file (wsj_SSNN.mrg)")
    return int(match.group(1))


@lru_cache(maxsize=2)
def _ptb_sentences(
    root: str | None, download: bool, wsj: str | None
) -> tuple[dict, dict, str]:
    if wsj:
        pairs = read_treebank(wsj)
        # The standard tagging split (Collins 2002): sections 0-18 / 19-21 / 22-24.
        part = {"train": range(0, 19), "val": range(19, 22), "test": range(22, 25)}
        chosen = {
            k: [s for f, s in pairs if _wsj_section(f) in sections]
            for k, sections in part.items()
        }
        source = f"WSJ Penn Treebank at {wsj}"
    else:
        pairs = read_treebank(_treebank_folder(root, download))
        files = sorted({f for f, _ in pairs})
        n_train, n_val = round(0.8 * len(files)), round(0.1 * len(files))
        groups = {
            "train": set(files[:n_train]),
            "val": set(files[n_train : n_train + n_val]),
            "test": set(files[n_train + n_val :]),
        }
        chosen = {k: [s for f, s in pairs if f in group] for k, group in groups.items()}
        source = "NLTK treebank sample (wsj_0001-wsj_0199)"
    words = {k: [[w for w, _ in s] for s in v] for k, v in chosen.items()}
    tags = {k: [[t for _, t in s] for s in v] for k, v in chosen.items()}
    return words, tags, source


def ptb_pos(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """Penn Treebank part-of-speech tagging (Marcus et al. 1993).

    Source: NLTK's free 10 % sample of the WSJ treebank (199 files wsj_0001-wsj_0199,
    3,914 sentences, ``nltk.download("treebank")`` into ``<root>/nltk_data``), read with
    NLTK's ``BracketParseCorpusReader`` from the ``.mrg`` files. ``-NONE-`` trace tokens
    (empty elements) are dropped. Split by file, in file order: the first 80 % of files
    train (159), the next 10 % val (20), the last 10 % test (20). Licence: the NLTK sample
    is for non-commercial use (LDC); the full WSJ needs an LDC licence.

    A licensed full WSJ copy is used instead when ``$NORMLAB_PTB_WSJ`` names a folder of
    ``.mrg`` files (``wsj_SSNN.mrg`` under any sub-folders, e.g. ``parsed/mrg/wsj/00/``);
    then the split is the standard one by section: 0-18 train, 19-21 val, 22-24 test.

    Words keep their case; vocabulary from train (``MIN_FREQ`` = 2), ``meta["tags"]`` is
    the sorted tag set of the whole corpus. ``x``, ``y`` long ``(N, max_len)``: tag
    ``IGNORE_INDEX`` at padding. Quick-profile stand-in: ``pos_grammar``.
    """
    check_split(split)
    wsj = os.environ.get(WSJ_ENV) or None
    words, tags, source = _ptb_sentences(
        None if root is None else str(root), download, wsj
    )
    tag_set = sorted({t for part in tags.values() for s in part for t in s})
    return _text_split(
        "ptb_pos", split, words, tags, {"source": source}, "tagging", tag_set
    )


# ---------------------------------------------------------------- SST-2


def read_glue_tsv(path: str | Path) -> tuple[list[list[str]], list[int]]:
    """Sentences (whitespace tokens) and 0/1 labels from a GLUE SST-2 ``.tsv`` with a
    ``sentence<TAB>label`` header."""
    sentences, labels = [], []
    with open(path, newline="", encoding="utf-8") as stream:
        reader = csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE)
        if reader.fieldnames is None or not {"sentence", "label"} <= set(
            reader.fieldnames
        ):
            raise ValueError(
                f"{path} has columns {reader.fieldnames}, expected 'sentence' and 'label'"
            )
        for row in reader:
            sentences.append(row["sentence"].split())
            labels.append(int(row["label"]))
    return sentences, labels


@lru_cache(maxsize=1)
def _sst2_sentences(root: str, download: bool) -> tuple[dict, dict]:
    folder = ensure_extracted(
        SST2, root, "SST-2", download_ok=download, standin="sentiment_grammar"
    )
    train_s, train_y = read_glue_tsv(folder / "train.tsv")
    test_s, test_y = read_glue_tsv(folder / "dev.tsv")
    parts = carve_val(len(train_y), min(SST2_VAL_SIZE, max(1, len(train_y) // 10)))
    sentences = {k: [train_s[i] for i in idx] for k, idx in parts.items()} | {
        "test": test_s
    }
    labels = {k: [train_y[i] for i in idx] for k, idx in parts.items()} | {
        "test": test_y
    }
    return sentences, labels


def sst2(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """SST-2, binary sentence sentiment (Socher et al. 2013), in its GLUE form.

    Source: GLUE's ``SST-2.zip`` (SHA-256 d67e16fb...6deaa, 7.4 MB): ``train.tsv`` 67,349
    labelled sentences, ``dev.tsv`` 872; GLUE's test set is unlabelled and not used.
    Splits: val = 872 sentences carved from ``train.tsv`` (seed 0), train = the other
    66,477, test = GLUE dev. Tokens: GLUE's lower-cased, pre-tokenised text split on
    whitespace. Classes ``["negative", "positive"]``. Licence: SST is released for research
    (no explicit licence; GLUE asks to cite the original). Quick-profile stand-in:
    ``sentiment_grammar``.
    """
    check_split(split)
    sentences, labels = _sst2_sentences(str(cache_root(root)), download)
    return _text_split(
        "sst2",
        split,
        sentences,
        labels,
        {"classes": ["negative", "positive"], "source": "GLUE SST-2.zip"},
        "classification",
    )


LOADERS = {"ptb_pos": ptb_pos, "sst2": sst2}
