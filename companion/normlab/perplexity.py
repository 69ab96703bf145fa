r"""What a tagger's "perplexity" can mean, and what its accuracy allows it to be.

A tagger outputs, for every token :math:`t`, a distribution :math:`q_t` over :math:`K` tags.
Its perplexity is the exponential of the mean per-token cross-entropy over tags,

.. math::
    \mathrm{PPL} = \exp\Big(-\frac1T \sum_t \log q_t(y_t)\Big),

the reciprocal of the geometric mean of the probability on the true tag. (A language
model's perplexity is over the *vocabulary*; a tagger has no such number.) Its
accuracy :math:`a` counts tokens whose true tag is the argmax of :math:`q_t`.

What :func:`perplexity_bounds` proves, for :math:`K` tags and accuracy :math:`a`
(error :math:`e = 1 - a`):

1. **Lower bound, any model.** A wrongly tagged token has :math:`q_t(y_t) \le 1/2` (another
   tag has at least as much), a correct one :math:`q_t(y_t) \le 1`, so
   :math:`\mathrm{PPL} \ge 2^{e}`. The bound is approached by a model certain when right
   and torn between two tags when wrong.
2. **No upper bound.** A wrong token may put :math:`q_t(y_t) \to 0`, so any perplexity
   above :math:`2^{e}` is reachable at accuracy :math:`a`: the pair (accuracy,
   perplexity) cannot be contradictory by itself. A correct token has
   :math:`q_t(y_t) \ge 1/K` (the argmax of :math:`K` probabilities), so the correct tokens
   alone contribute at most :math:`a \log K`; a perplexity :math:`P` then needs the wrong
   tokens to average :math:`-\log q_t(y_t) \ge (\log P - a \log K)/e`. Conversely, if no
   wrong token gives its true tag less than a uniform guess (:math:`q_t(y_t) \ge 1/K`), the
   correct tokens must average :math:`-\log q_t(y_t) \ge (\log P - e \log K)/a`: their
   geometric-mean probability on the (correct) argmax tag is at most
   :math:`\exp(-(\log P - e \log K)/a)`.
3. **What is achievable (Fano).** If some tagger reaches error :math:`e` on a data
   distribution, Fano's inequality bounds the conditional entropy of the tags,
   :math:`H(Y \mid X) \le h(e) + e \log(K - 1)` (:math:`h` the binary entropy in nats).
   The true conditional distribution reaches cross-entropy :math:`H(Y \mid X)` (no model
   goes lower), so the *best* perplexity is at most
   :math:`\exp(h(e) + e \log(K-1))`: 1.28 for :math:`K = 45`, :math:`a = 0.97`.
   A reported perplexity far above it says that the model's probabilities are far from
   calibrated (near-uniform, or confidently wrong), not that tagging is hard.
4. **Label smoothing cannot explain a large value.** Training towards targets smoothed by
   :math:`\varepsilon` has its smallest loss at the smoothed target itself: the entropy
   :math:`H_\varepsilon` of :math:`(1 - \varepsilon + \varepsilon/K, \varepsilon/K, \dots)`.
   :func:`smoothed_floor` returns :math:`\exp H_\varepsilon` (2.0 for :math:`K = 45`,
   :math:`\varepsilon = 0.1`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._checks import fraction, positive_int, positive_number

__all__ = [
    "PerplexityBounds",
    "binary_entropy",
    "perplexity",
    "perplexity_bounds",
    "smoothed_floor",
]


def perplexity(cross_entropy: float) -> float:
    """``exp`` of a mean per-token cross-entropy in nats."""
    if not math.isfinite(cross_entropy) or cross_entropy < 0:
        raise ValueError(
            f"cross_entropy must be a finite number >= 0 (nats), got {cross_entropy!r}"
        )
    return math.exp(cross_entropy)


def binary_entropy(p: float) -> float:
    """:math:`h(p) = -p \\log p - (1-p) \\log(1-p)` in nats, with ``0 log 0 = 0``."""
    p = fraction("p", p, closed_right=True)
    return -sum(x * math.log(x) for x in (p, 1.0 - p) if x > 0)


@dataclass(frozen=True)
class PerplexityBounds:
    """The numbers of the module docstring for one (accuracy, number of tags).

    ``lower``: no model with this accuracy has a smaller perplexity (item 1).
    ``fano_best``: the true conditional distribution's perplexity is at most this (item 3).
    ``uniform``: the perplexity of a uniform guess, :math:`K`.
    """

    accuracy: float
    num_tags: int
    lower: float
    fano_best: float
    uniform: float

    def wrong_token_loss_needed(self, reported: float) -> float:
        r"""The mean :math:`-\log q_t(y_t)` over wrongly tagged tokens that a perplexity of
        ``reported`` needs at least (item 2); 0 when correct tokens alone can supply it."""
        positive_number("reported", reported)
        error = 1.0 - self.accuracy
        if error == 0:
            return 0.0 if reported <= self.uniform else math.inf
        return max(
            0.0, (math.log(reported) - self.accuracy * math.log(self.num_tags)) / error
        )

    def right_token_probability(self, reported: float) -> float:
        r"""The largest geometric-mean probability that correctly tagged tokens can give their
        tag at a perplexity of ``reported``, if no wrong token gives its true tag less than
        :math:`1/K` (item 2)."""
        positive_number("reported", reported)
        if self.accuracy == 0:
            raise ValueError("accuracy 0: no correctly tagged tokens")
        error = 1.0 - self.accuracy
        return min(
            1.0,
            math.exp(
                -(math.log(reported) - error * math.log(self.num_tags)) / self.accuracy
            ),
        )


def perplexity_bounds(accuracy: float, num_tags: int) -> PerplexityBounds:
    """Bounds on a tagger's perplexity from its argmax accuracy (see the module docstring)."""
    accuracy = fraction("accuracy", accuracy, closed_right=True)
    positive_int("num_tags", num_tags)
    if num_tags < 2:
        raise ValueError(f"num_tags must be at least 2, got {num_tags!r}")
    error = 1.0 - accuracy
    fano = binary_entropy(error) + (
        error * math.log(num_tags - 1) if num_tags > 2 else 0.0
    )
    return PerplexityBounds(
        accuracy=accuracy,
        num_tags=num_tags,
        lower=2.0**error,
        fano_best=math.exp(fano),
        uniform=float(num_tags),
    )


def smoothed_floor(num_tags: int, label_smoothing: float) -> float:
    """``exp`` of the smallest label-smoothed cross-entropy: the perplexity of the smoothed target."""
    positive_int("num_tags", num_tags)
    eps = fraction("label_smoothing", label_smoothing, closed_right=True)
    top, rest = 1.0 - eps + eps / num_tags, eps / num_tags
    entropy = -sum(p * math.log(p) for p in (top, *([rest] * (num_tags - 1))) if p > 0)
    return math.exp(entropy)
