"""The claims registry: what a claim is, the tests that settle one, and the table of claims.

A claim has an id (``A1``-``A15`` for the affine divergence, ``N1``-``N14`` for AutoNorm), its
sentence, the paper's numbers (what the paper reports, never ours), the real datasets it names,
the chapter that tests it, and a test:

- :class:`Measurement` for the exact claims: a float64 measurement compared with the formula
  to a stated tolerance;
- :class:`Test` for the empirical claims: an experiment (by its registered name), a quantity
  (a function of that experiment's results table returning :class:`Effect` values, one number
  per seed) and a rule (:mod:`normlab.claims.rules`) for each effect's 95 % CI.

Declare a claim with :func:`declare`, by keyword; the registry checks its experiment exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._runtime import PROFILES
from .rules import (
    CEILING_WORDS,
    COMBINE_WORDS,
    INTERVAL_WORDS,
    LEARNABILITY_WORDS,
    Rule,
)

__all__ = [
    "Unmeasurable",
    "Arm",
    "Effect",
    "Test",
    "Check",
    "Measurement",
    "Claim",
    "CLAIMS",
    "declare",
    "ids",
    "get",
]

KINDS = ("exact", "conceptual", "empirical")
PARTS = ("I", "II")


class Unmeasurable(ValueError):
    """A results table that cannot measure a claim's quantity (a missing arm or axis)."""


@dataclass(frozen=True)
class Arm:
    """One compared network: its mean test metric across seeds at its chosen rate, the
    task's chance level (None for a metric without one, e.g. an RMSE) and its ceiling, the
    best accuracy the task allows where its stand-in defines one (None: the default of
    :data:`normlab.claims.rules.CEILING` for a metric with a chance level)."""

    name: str
    score: float
    chance: float | None = None
    ceiling: float | None = None


@dataclass(frozen=True)
class Effect:
    """One measured quantity: a label, one value per seed, optionally its own rule (else the
    test's), the arms it compares (checked for learnability before any verdict), the
    datasets it read (empty: the whole results table's) and, for a weighted sum of mean
    accuracies, its terms ``(weight, accuracy, test items)``, which bound the test set's own
    noise (:func:`normlab.stats.accuracy_item_variance`; empty: not an accuracy, and the
    interval holds the seeds' spread only); ``item_var``, where the runs kept their per-item
    hits, is that noise measured item by item (:func:`normlab.stats.paired_item_variance`),
    which replaces the bound. ``name`` is the effect's short name in its claim's verdict
    words ("supported for norm_like; ...", :func:`normlab.claims.verdict_words`;
    empty: the label). ``item_level`` is the test set's own share of ``item_var``, the
    runs' disagreement item by item taken out (:func:`normlab.stats.item_level_variance`),
    which sizes a test set in a plan (None: ``item_var`` does). ``regime`` is the regime
    the effect was measured in, in words (schedule, freeze, final losses), which its label
    ends with in brackets; the same effect in another regime has the same label without
    it."""

    label: str
    samples: np.ndarray
    rule: Rule | None = None
    arms: tuple[Arm, ...] = ()
    data: tuple[str, ...] = ()
    items: tuple[tuple[float, float, int], ...] = ()
    item_var: float | None = None
    name: str = ""
    item_level: float | None = None
    regime: str = ""

    @property
    def key(self) -> str:
        """The label without the regime: what names the effect across regimes."""
        return (
            self.label.removesuffix(f" ({self.regime})") if self.regime else self.label
        )


@dataclass(frozen=True)
class Test:
    """An empirical test: ``quantity(results)`` of ``experiment``'s results table, judged by ``rule``.

    ``min_profile`` is the smallest profile whose saved set may give a verdict: ``cpu`` where
    stand-in data test the mechanism, ``standard`` where only the real datasets can.
    ``regimes`` names other experiments that measure the same quantity in another declared
    regime (a shorter schedule, another freeze timing): the claim is judged again on each,
    and an effect whose verdict differs there says so on the claim's row
    (:func:`normlab.claims.robust.regime_flips`).
    """

    experiment: str
    quantity: Callable[[pd.DataFrame], list[Effect]]
    rule: Rule
    says: str
    min_profile: str = "cpu"
    regimes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """One number an exact measurement produced, and whether it must be zero or non-zero."""

    label: str
    value: float
    zero: bool = True


@dataclass(frozen=True)
class Measurement:
    """An exact test: ``measure()`` returns :class:`Check` values computed in float64.

    Supported when every "zero" check is at most ``tolerance`` and every "non-zero" one
    exceeds ``nonzero`` (far above rounding, so a broken cancellation is not mistaken for it).
    """

    measure: Callable[[], list[Check]]
    says: str
    tolerance: float = 1e-10
    nonzero: float = 1e-6

    @property
    def words(self) -> str:
        return (
            f"supported if every deviation that the algebra says is zero is at most "
            f"{self.tolerance:g} (relative, float64) and every one it says is non-zero "
            f"exceeds {self.nonzero:g}; else contradicted"
        )


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, with the paper's numbers and its test (None until its chapter).

    ``datasets`` are the real datasets the claim's sentence is about (names of
    :data:`normlab.data.REAL`); a verdict from a stand-in for them tests the mechanism only.
    """

    id: str
    part: str
    kind: str
    sentence: str
    chapter: int
    paper: dict[str, float] = field(default_factory=dict)
    datasets: tuple[str, ...] = ()
    test: Test | Measurement | None = None

    @property
    def rule_words(self) -> str:
        if self.test is None:
            return ""
        if isinstance(self.test, Measurement):
            return self.test.words
        margin = MARGIN_WORDS.get(self.id, "")
        margin = f" {margin}." if margin else ""
        return (
            f"{self.test.rule.words}.{margin} {INTERVAL_WORDS[0].upper()}"
            f"{INTERVAL_WORDS[1:]}. {LEARNABILITY_WORDS}. {CEILING_WORDS}; {COMBINE_WORDS}."
        )


CLAIMS: dict[str, Claim] = {}
#: Each planned claim's margin in words, which :mod:`normlab.claims.plans` fills in.
MARGIN_WORDS: dict[str, str] = {}


def declare(**fields: Any) -> Claim:
    """Add the claim with these fields (by keyword, as :class:`Claim`) to :data:`CLAIMS`."""
    from .. import experiments
    from ..data import REAL

    claim = Claim(**fields)
    if claim.id in CLAIMS:
        raise ValueError(f"claim {claim.id!r} is declared twice")
    if claim.kind not in KINDS or claim.part not in PARTS:
        raise ValueError(
            f"claim {claim.id}: kind={claim.kind!r}, part={claim.part!r}; expected a kind "
            f"of {', '.join(KINDS)} and a part of {', '.join(PARTS)}"
        )
    unknown = [d for d in claim.datasets if d not in REAL]
    if unknown:
        raise ValueError(f"claim {claim.id}: datasets {unknown} are not real datasets")
    if isinstance(claim.test, Test):
        experiments.get(claim.test.experiment)  # a ValueError naming the valid ones
        if claim.test.min_profile not in PROFILES:
            raise ValueError(
                f"claim {claim.id}: min_profile={claim.test.min_profile!r} is not a profile"
            )
    CLAIMS[claim.id] = claim
    return claim


def ids() -> list[str]:
    """Every claim id, in the papers' order (A1..A15, N1..N14)."""
    return sorted(CLAIMS, key=lambda i: (i[0] != "A", int(i[1:])))


def get(claim_id: str) -> Claim:
    """The claim with this id; a ValueError lists the ids otherwise."""
    if claim_id not in CLAIMS:
        raise ValueError(
            f"claim {claim_id!r} is not known; expected one of {', '.join(ids())}"
        )
    return CLAIMS[claim_id]
