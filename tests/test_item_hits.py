"""Per-item test hits: their record format, their paired variance, and its use in verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from normlab import claims, stats
from normlab.claims.pairing import paired_item_variance
from normlab.data.types import DataSplit
from normlab.training import decode_hits, encode_hits, item_hits


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1500])
def test_hits_round_trip_through_text(n: int) -> None:
    hits = np.random.default_rng(n).random(n) < 0.7
    text = encode_hits(hits)
    assert text.startswith(f"{n}:")
    np.testing.assert_array_equal(decode_hits(text), hits)


@pytest.mark.parametrize(
    "text, words",
    [
        ("no colon", "<n>:<base64>"),
        ("x:AAAA", "whole number"),
        ("9:AA==", "cannot hold exactly 9"),
        ("8:@@@@", "base64"),
    ],
)
def test_malformed_hits_are_refused_with_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        decode_hits(text)


def test_item_hits_are_the_items_the_accuracy_counts() -> None:
    torch.manual_seed(0)
    split = DataSplit(
        x=torch.randn(50, 4),
        y=torch.randint(0, 3, (50,)),
        task="classification",
        name="toy",
        split="test",
        meta={"classes": ["0", "1", "2"]},
    )
    model = torch.nn.Linear(4, 3)
    model.train()
    hits = item_hits(model, split, batch_size=16)
    expected = (model(split.x).argmax(1) == split.y).numpy()
    np.testing.assert_array_equal(hits, expected)
    assert model.training  # the mode is restored


def test_paired_item_variance_matches_resampling_the_test_set() -> None:
    """var(d_i)/n is the variance of the accuracy difference over draws of the test items:
    checked against drawing 4,000 test sets from a population of per-item outcomes."""
    rng = np.random.default_rng(0)
    population = 200_000
    a = rng.random(population) < 0.9
    # b agrees with a on most items: correlated arms, as two nets on one test set
    flip = rng.random(population) < 0.06
    b = np.where(flip, ~a, a)
    n = 1500
    draws = np.array(
        [
            (a[idx].mean() - b[idx].mean())
            for idx in (rng.integers(0, population, n) for _ in range(4000))
        ]
    )
    one = rng.integers(0, population, n)
    estimate = stats.paired_item_variance(a[one].astype(float) - b[one])
    assert estimate == pytest.approx(draws.var(), rel=0.15)
    # and far below the bound that ignores the pairing
    bound = stats.accuracy_item_variance([(1, a.mean(), n), (-1, b.mean(), n)])
    assert estimate < bound / 2


def test_paired_item_variance_refuses_too_few_items() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        stats.paired_item_variance(np.array([1.0]))


def _table_with_hits(agree: float) -> pd.DataFrame:
    """Arms a and b, one rate, three seeds, 400 test items; b's hits equal a's except on
    a share ``1 - agree`` of the items."""
    rng = np.random.default_rng(1)
    rows = []
    for seed in range(3):
        a = rng.random(400) < 0.85
        b = np.where(rng.random(400) < 1 - agree, ~a, a)
        for arm, hits in (("a", a), ("b", b)):
            rows.append(
                {
                    "data": "mnist",
                    "data_profile": "cpu",
                    "normaliser": arm,
                    "lr": 0.1,
                    "seed": seed,
                    "metric": "accuracy",
                    "higher_is_better": True,
                    "val_metric": float(hits.mean()),
                    "test_metric": float(hits.mean()),
                    "test_hits": encode_hits(hits),
                }
            )
    return pd.DataFrame(rows)


def test_a_paired_effect_carries_the_item_by_item_variance() -> None:
    best = claims.at_chosen_lr(_table_with_hits(agree=0.95))
    effect = claims.paired(best, "a", "b")
    rows = best.set_index(["seed", "normaliser"])["test_hits"]
    per_item = np.mean(
        [
            decode_hits(rows[(s, "a")]).astype(float) - decode_hits(rows[(s, "b")])
            for s in range(3)
        ],
        axis=0,
    )
    assert effect.item_var == pytest.approx(per_item.var(ddof=1) / per_item.size)
    assert effect.item_var < stats.accuracy_item_variance(effect.items)


def test_without_hits_the_bound_is_kept() -> None:
    best = claims.at_chosen_lr(_table_with_hits(agree=0.95).drop(columns="test_hits"))
    assert claims.paired(best, "a", "b").item_var is None
    assert paired_item_variance(best, "a", "b") is None


def test_the_item_level_share_takes_out_the_runs_disagreement() -> None:
    """Items whose true differences are all zero, on which runs disagree at random: the
    paired variance of their mean over S seeds is the disagreement's sigma^2/(S n), and
    the item-level share is about 0; items with a fixed true difference keep theirs."""
    rng = np.random.default_rng(3)
    seeds, n = 8, 4000
    noise = rng.choice([-1.0, 0.0, 1.0], p=[0.05, 0.9, 0.05], size=(seeds, n))
    whole = stats.paired_item_variance(noise.mean(axis=0))
    assert whole == pytest.approx(0.1 / (seeds * n), rel=0.1)
    assert stats.item_level_variance(noise) < whole / 10
    true = rng.choice([-1.0, 0.0, 1.0], p=[0.1, 0.8, 0.1], size=n)  # var 0.2
    level = stats.item_level_variance(true + noise)
    assert level == pytest.approx(0.2 / n, rel=0.1)
    # one seed: nothing to tell apart, the whole variance
    assert stats.item_level_variance(noise[:1]) == stats.paired_item_variance(noise[0])
    # grouped items (sentences): the same holds over groups
    starts = np.zeros(n, dtype=bool)
    starts[::4] = True
    grouped = stats.item_level_variance(noise, starts)
    assert grouped < stats.paired_item_variance(noise.mean(axis=0), starts) / 5
    with pytest.raises(ValueError, match="seeds, items"):
        stats.item_level_variance(np.ones(5))


def test_a_paired_effect_with_some_seeds_hits_reads_them() -> None:
    """A set where one seed lost its hits: the effect's test-set noise is the item-level
    share on the seeds that kept them, not the per-arm bound."""
    frame = _table_with_hits(agree=0.95)
    full = claims.paired(claims.at_chosen_lr(frame), "a", "b")
    frame.loc[frame["seed"] == 2, "test_hits"] = None
    effect = claims.paired(claims.at_chosen_lr(frame), "a", "b")
    assert effect.item_var is not None and effect.item_var == effect.item_level
    assert effect.item_var < stats.accuracy_item_variance(effect.items)
    assert full.item_level is not None and full.item_level <= full.item_var
    frame.loc[frame["seed"] == 1, "test_hits"] = None  # one seed left: no estimate
    assert claims.paired(claims.at_chosen_lr(frame), "a", "b").item_var is None


def test_hits_of_different_test_sets_are_not_paired() -> None:
    frame = _table_with_hits(agree=0.95)
    frame.loc[0, "test_hits"] = encode_hits(np.ones(300, dtype=bool))
    assert paired_item_variance(claims.at_chosen_lr(frame), "a", "b") is None


def _lead_table() -> pd.DataFrame:
    """The four lead arms at two widths and tanh/leaky-ReLU, two rates, three seeds, 300
    test items; every arm's hits are one shared pattern with a few items flipped."""
    rng = np.random.default_rng(2)
    base = rng.random(300) < 0.8
    rows = []
    for activation in ("tanh", "leaky_relu"):
        for width in (16, 128):
            for name in ("affine_like", "norm_like", "none", "batchnorm"):
                for lr in (0.1, 1.0):
                    for seed in range(3):
                        hits = np.where(rng.random(300) < 0.05, ~base, base)
                        rows.append(
                            {
                                "data": "mnist",
                                "data_profile": "cpu",
                                "activation": activation,
                                "depth": 3,
                                "width": width,
                                "normaliser": name,
                                "lr": lr,
                                "seed": seed,
                                "metric": "accuracy",
                                "higher_is_better": True,
                                "val_metric": float(rng.random()),
                                "test_metric": float(hits.mean()),
                                "test_hits": encode_hits(hits),
                            }
                        )
    return pd.DataFrame(rows)


def _lead_per_item(best: pd.DataFrame, **where: object) -> pd.DataFrame:
    """Per (width, seed): the better correction's hits minus the stronger rival's, each
    picked on validation as :func:`normlab.claims.pairing.difference` picks them."""
    rows = best
    for key, value in where.items():
        rows = rows[rows[key] == value]
    out = {}
    for (width, seed), group in rows.groupby(["width", "seed"]):
        val = rows[rows["width"] == width].groupby("normaliser")["val_metric"].mean()
        hit = group.set_index("normaliser")["test_hits"]
        pick = {
            side: val[list(names)].idxmax()
            for side, names in (
                ("a", ("affine_like", "norm_like")),
                ("b", ("none", "batchnorm")),
            )
        }
        out[width, seed] = decode_hits(hit[pick["a"]]).astype(float) - decode_hits(
            hit[pick["b"]]
        )
    return pd.DataFrame(out).T.rename_axis(["width", "seed"])


def test_the_corrections_lead_carries_its_item_by_item_variance() -> None:
    from normlab.claims import registry

    results = _lead_table()
    best = claims.at_chosen_lr(results)
    # A9's width effect: the lead at width 128 minus at 16, per item, mean over seeds and
    # over the two activations (its groups)
    changes = []
    for activation in ("tanh", "leaky_relu"):
        lead = _lead_per_item(best, activation=activation)
        changes.append(lead.xs(128, level="width") - lead.xs(16, level="width"))
    per_item = np.mean([c.to_numpy() for c in changes], axis=(0, 1))
    (width,) = [
        e for e in registry.get("A9").test.quantity(results) if "width" in e.label
    ]
    assert width.item_var == pytest.approx(per_item.var(ddof=1) / per_item.size)
    # far below the bound that assumes nothing about how the four arms' items agree
    assert width.item_var < stats.accuracy_item_variance(width.items) / 4
    # A10's contrast: the tanh lead minus the leaky-ReLU lead, per seed over the widths
    tanh = _lead_per_item(best, activation="tanh").groupby(level="seed").mean()
    leaky = _lead_per_item(best, activation="leaky_relu").groupby(level="seed").mean()
    contrast = (tanh - leaky).to_numpy().mean(axis=0)
    first, lead_tanh = registry.get("A10").test.quantity(results)
    assert first.item_var == pytest.approx(contrast.var(ddof=1) / contrast.size)
    alone = tanh.to_numpy().mean(axis=0)
    assert lead_tanh.item_var == pytest.approx(alone.var(ddof=1) / alone.size)


def _tagging_split() -> DataSplit:
    """Twelve toy sentences of 2-6 tokens, padded to 6 with IGNORE_INDEX."""
    from normlab.data.types import IGNORE_INDEX

    gen = torch.Generator().manual_seed(3)
    lengths = torch.randint(2, 7, (12,), generator=gen)
    x = torch.randint(1, 10, (12, 6), generator=gen)
    y = torch.randint(0, 3, (12, 6), generator=gen)
    pad = torch.arange(6)[None, :] >= lengths[:, None]
    x[pad] = 0  # PAD_ID
    y[pad] = IGNORE_INDEX
    return DataSplit(
        x=x,
        y=y,
        task="tagging",
        name="toy",
        split="test",
        meta={"tags": ["a", "b", "c"]},
    )


def test_tagging_hits_are_the_scored_tokens_sentence_by_sentence() -> None:
    from normlab.training import evaluate, item_starts

    split = _tagging_split()
    torch.manual_seed(0)
    model = torch.nn.Embedding(10, 3)  # a token's tag scores
    hits = item_hits(model, split, batch_size=5)
    scored = split.y != -100
    assert hits.size == int(scored.sum())  # padding excluded
    expected = (model(split.x).argmax(-1) == split.y)[scored].numpy()
    np.testing.assert_array_equal(hits, expected)
    assert hits.mean() == pytest.approx(evaluate(model, split)["token_accuracy"])
    starts = item_starts(split)
    assert starts.size == hits.size and starts.sum() == len(split)
    # each sentence's tokens run from its start to the next
    bounds = np.flatnonzero(starts)
    np.testing.assert_array_equal(
        np.diff(np.append(bounds, starts.size)), scored.sum(1).numpy()
    )


def test_sentence_grouped_variance_matches_resampling_sentences() -> None:
    """Tokens of one sentence share their fate (the arms disagree on whole sentences): the
    grouped variance follows draws of sentences, the token-level one understates it."""
    rng = np.random.default_rng(4)
    population = 50_000
    sizes = rng.integers(3, 15, population)
    # per sentence: the difference of the two arms' hits, the same on every token
    sentence_d = rng.choice([-1.0, 0.0, 1.0], population, p=[0.04, 0.9, 0.06])
    n = 400

    def draw(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = np.repeat(sentence_d[idx], sizes[idx])
        starts = np.zeros(d.size, dtype=bool)
        starts[np.cumsum(sizes[idx]) - sizes[idx]] = True
        return d, starts

    means = [draw(rng.integers(0, population, n))[0].mean() for _ in range(3000)]
    d, starts = draw(rng.integers(0, population, n))
    grouped = stats.paired_item_variance(d, starts)
    assert grouped == pytest.approx(np.var(means), rel=0.2)
    assert stats.paired_item_variance(d) < grouped / 3
    # groups of one item: the independent items' variance
    assert stats.paired_item_variance(d, np.ones(d.size, bool)) == pytest.approx(
        stats.paired_item_variance(d)
    )


def test_malformed_starts_are_refused() -> None:
    with pytest.raises(ValueError, match="True at the first"):
        stats.paired_item_variance(np.zeros(4), np.array([False, True, False, True]))
    with pytest.raises(ValueError, match="at least 2 groups"):
        stats.paired_item_variance(np.zeros(4), np.array([True, False, False, False]))


def test_a_paired_tagging_effect_groups_its_tokens_by_sentence() -> None:
    frame = _table_with_hits(agree=0.95)
    starts = np.zeros(400, dtype=bool)
    starts[::8] = True  # 50 sentences of 8 tokens
    frame["test_hit_starts"] = encode_hits(starts)
    best = claims.at_chosen_lr(frame)
    rows = best.set_index(["seed", "normaliser"])["test_hits"]
    per_item = np.mean(
        [
            decode_hits(rows[(s, "a")]).astype(float) - decode_hits(rows[(s, "b")])
            for s in range(3)
        ],
        axis=0,
    )
    assert paired_item_variance(best, "a", "b") == pytest.approx(
        stats.paired_item_variance(per_item, starts)
    )
    # runs that disagree on the sentences give no paired variance
    frame.loc[0, "test_hit_starts"] = encode_hits(np.ones(400, dtype=bool))
    assert paired_item_variance(claims.at_chosen_lr(frame), "a", "b") is None


def test_the_drop_under_corruption_has_its_image_by_image_variance() -> None:
    """N7's drop, clean minus mean corruption accuracy, FrozenLN's minus AutoNorm-S's: its
    test-set variance from the runs' clean and corrupted hits matches drawing test sets
    (the first m of n clean images also corrupted under C conditions)."""
    from normlab.claims.part2_tasks import _drop_item_variance

    rng = np.random.default_rng(5)
    population, n, m, conditions = 100_000, 600, 200, 5
    base = rng.random(population)  # an image's easiness, shared by both arms
    clean = {arm: rng.random(population) < 0.6 + 0.35 * base for arm in "fa"}
    corrupt = {
        arm: rng.random((conditions, population)) < 0.3 + 0.5 * base for arm in "fa"
    }

    def effect(idx: np.ndarray) -> float:
        drop = {
            arm: clean[arm][idx].mean() - corrupt[arm][:, idx[:m]].mean()
            for arm in "fa"
        }
        return drop["f"] - drop["a"]

    draws = [effect(rng.integers(0, population, n)) for _ in range(3000)]
    one = rng.integers(0, population, n)
    rows = [
        {
            "data": "mnist",
            "normaliser": name,
            "seed": 0,
            "eval_images": m,
            "test_hits": encode_hits(clean[arm][one]),
            "corruption_hits": encode_hits(corrupt[arm][:, one[:m]]),
        }
        for arm, name in (("f", "frozen_ln"), ("a", "autonorm_s"))
    ]
    estimate = _drop_item_variance(pd.DataFrame(rows), "mnist")
    assert estimate == pytest.approx(np.var(draws), rel=0.2)
    # without the corrupted images' hits there is no measured variance
    frame = pd.DataFrame(rows).drop(columns="corruption_hits")
    assert _drop_item_variance(frame, "mnist") is None


@pytest.mark.parametrize("key", ["test_hits", "test_hit_starts", "corruption_hits"])
def test_an_exact_rerun_must_get_the_same_items_right(key: str) -> None:
    from normlab.verification import _compare

    old = {"diverged": False, "test_metric": 0.5, key: encode_hits(np.ones(8, bool))}
    same = _compare(
        dict(old), old, True, "run", bands={}, mixed=False, metric="accuracy"
    )
    assert same == []
    other = {**old, key: encode_hits(np.zeros(8, bool))}
    found = _compare(other, old, True, "run", bands={}, mixed=False, metric="accuracy")
    assert [m.problem for m in found] == [f"{key} differ from the saved record's"]
