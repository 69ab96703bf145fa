"""The tagger-perplexity bounds of normlab.perplexity, checked on constructed and random models."""

from __future__ import annotations

import math

import numpy as np
import pytest
from normlab.perplexity import (
    binary_entropy,
    perplexity,
    perplexity_bounds,
    smoothed_floor,
)


def cross_entropy_and_accuracy(probs: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    true = probs[np.arange(len(y)), y]
    return float(-np.log(true).mean()), float((probs.argmax(1) == y).mean())


@pytest.mark.parametrize("k", [2, 8, 45])
def test_no_model_goes_below_the_lower_bound(k: int) -> None:
    rng = np.random.default_rng(0)
    for sharpness in (0.1, 1.0, 5.0, 50.0):
        logits = sharpness * rng.normal(size=(2000, k))
        probs = np.exp(logits - logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        y = rng.integers(0, k, 2000)
        ce, acc = cross_entropy_and_accuracy(probs, y)
        assert perplexity(ce) >= perplexity_bounds(acc, k).lower - 1e-12


def test_lower_bound_is_approached() -> None:
    # Certain when right; (1/2 + d, 1/2 - d) on a wrong tag and the true one when wrong.
    k, n, wrong, d = 8, 1000, 30, 1e-9
    probs = np.zeros((n, k))
    y = np.zeros(n, dtype=int)
    probs[:, 0] = 1.0
    probs[:wrong, 0], probs[:wrong, 1] = 0.5 - d, 0.5 + d
    ce, acc = cross_entropy_and_accuracy(probs, y)
    assert acc == pytest.approx(1 - wrong / n)
    assert perplexity(ce) == pytest.approx(perplexity_bounds(acc, k).lower, rel=1e-6)


def test_any_perplexity_above_the_bound_is_reachable() -> None:
    # Wrong tokens' true-tag probability can be made as small as we like.
    k, n, wrong = 45, 1000, 30
    for target in (38.6, 41.9, 1e3):
        q = math.exp(-math.log(target) * n / wrong)  # right tokens at probability 1
        probs = np.zeros((n, k))
        y = np.zeros(n, dtype=int)
        probs[:, 0] = 1.0
        probs[:wrong, 0], probs[:wrong, 1] = q, 1 - q
        ce, acc = cross_entropy_and_accuracy(probs, y)
        assert acc == pytest.approx(0.97)
        assert perplexity(ce) == pytest.approx(target, rel=1e-9)


def test_fano_bounds_the_best_perplexity() -> None:
    # Random joint distributions p(x, y): the Bayes error e and H(Y|X) obey Fano.
    rng = np.random.default_rng(1)
    for k in (3, 8, 45):
        for _ in range(200):
            joint = (
                rng.dirichlet(np.full(k, rng.uniform(0.05, 2.0)), size=20)
                * rng.dirichlet(np.ones(20))[:, None]
            )
            conditional = joint / joint.sum(1, keepdims=True)
            entropy = float(
                -(joint * np.log(np.where(conditional > 0, conditional, 1.0))).sum()
            )
            accuracy = float(joint.max(1).sum())
            assert math.exp(entropy) <= perplexity_bounds(accuracy, k).fano_best * (
                1 + 1e-9
            )


def test_right_and_wrong_token_limits() -> None:
    bounds = perplexity_bounds(0.97, 45)
    # Correct tokens alone can supply 38.6 (a log K > log 38.6): nothing is needed from errors.
    assert bounds.wrong_token_loss_needed(38.6) == 0.0
    assert bounds.wrong_token_loss_needed(1e6) == pytest.approx(
        (math.log(1e6) - 0.97 * math.log(45)) / 0.03
    )
    # Wrong tokens at 1/K and right ones at p: perplexity exp(-(a log p + e log(1/K))).
    p = bounds.right_token_probability(38.6)
    assert math.exp(-(0.97 * math.log(p) - 0.03 * math.log(45))) == pytest.approx(38.6)
    assert 1 / 45 < p < 1 / 38.6 + 1e-3


def test_smoothed_floor_is_the_entropy_of_the_smoothed_target() -> None:
    k, eps = 45, 0.1
    target = np.full(k, eps / k)
    target[0] += 1 - eps
    assert smoothed_floor(k, eps) == pytest.approx(
        math.exp(-(target * np.log(target)).sum())
    )
    assert smoothed_floor(k, 0.0) == 1.0


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="accuracy"):
        perplexity_bounds(1.5, 45)
    with pytest.raises(ValueError, match="num_tags"):
        perplexity_bounds(0.9, 1)
    with pytest.raises(ValueError, match="cross_entropy"):
        perplexity(-1.0)
    assert binary_entropy(0.5) == pytest.approx(math.log(2))
