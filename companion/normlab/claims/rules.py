"""The verdict rules: how a 95 % confidence interval across seeds becomes a verdict.

Each rule reads one effect's interval (:class:`normlab.stats.Interval`): :class:`Directional`
(the claimed sign), :class:`Equivalent` (no real difference, TOST-style),
:class:`AtLeast` (not worse by more than a margin) and :class:`ConsistentWith` (the sign a
mechanism predicts, where no run isolates the mechanism). :func:`combine` joins the verdicts of a
claim's several effects; :func:`trained` is the learnability rule that comes before any of
them: a comparison whose arm did not beat chance gets no verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as _scipy_stats

from ..stats import Interval

__all__ = [
    "SUPPORTED",
    "CONTRADICTED",
    "INCONCLUSIVE",
    "CONSISTENT",
    "NOT_TRAINED",
    "NOT_YET_TESTED",
    "VERDICTS",
    "TRAINED_MARGIN",
    "TWO_CLASS_MARGIN",
    "LEARNABILITY_WORDS",
    "Directional",
    "Equivalent",
    "AtLeast",
    "ConsistentWith",
    "Rule",
    "combine",
    "COMBINE_WORDS",
    "trained_margin",
    "trained",
]

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
# The predicted sign, seen where the experiment cannot isolate the claimed cause: weaker
# than "supported", and never counted as it.
CONSISTENT = "consistent with"
VERDICTS: tuple[str, ...] = (SUPPORTED, CONSISTENT, CONTRADICTED, INCONCLUSIVE)
NOT_TRAINED = "did not train"  # no verdict: an arm of the comparison did not learn
NOT_YET_TESTED = "not yet tested"
# Learnability: at its chosen rate, an arm must beat chance by this much (an accuracy) to be
# compared at all; a two-class task, whose chance is 0.5, needs half as much.
TRAINED_MARGIN = 0.1
TWO_CLASS_MARGIN = 0.05
LEARNABILITY_WORDS = (
    f"No verdict when an arm scores within {TRAINED_MARGIN:g} of chance at its chosen rate "
    f"({TWO_CLASS_MARGIN:g} on a two-class task)"
)


@dataclass(frozen=True)
class Directional:
    """The claimed effect has a sign: ``direction=+1`` (positive) or ``-1`` (negative)."""

    direction: int = 1

    def __post_init__(self) -> None:
        if self.direction not in (1, -1):
            raise ValueError(f"direction must be +1 or -1, got {self.direction!r}")

    @property
    def words(self) -> str:
        sign = "above" if self.direction > 0 else "below"
        other = "below" if self.direction > 0 else "above"
        return (
            f"supported if the 95 % CI across seeds lies entirely {sign} zero; contradicted if it lies "
            f"entirely {other} zero; inconclusive otherwise"
        )

    def verdict(self, ci: Interval) -> str:
        if not ci.defined:
            return INCONCLUSIVE
        low, high = (ci.low, ci.high) if self.direction > 0 else (-ci.high, -ci.low)
        return SUPPORTED if low > 0 else CONTRADICTED if high < 0 else INCONCLUSIVE


@dataclass(frozen=True)
class Equivalent:
    """No real difference: the effect lies within ``±margin`` (TOST-style, on the 95 % CI)."""

    margin: float

    def __post_init__(self) -> None:
        if not self.margin > 0:
            raise ValueError(f"margin must be positive, got {self.margin!r}")

    @property
    def words(self) -> str:
        return (
            f"supported if the 95 % CI lies inside ±{self.margin:g} (equivalence, two one-sided tests at "
            f"2.5 %); contradicted if it lies entirely outside ±{self.margin:g}; inconclusive otherwise"
        )

    def seeds_needed(self, sd: float, power: float = 0.8, cap: int = 1000) -> int:
        """Seeds for which the 95 % CI of an effect with true value 0 and per-seed standard
        deviation ``sd`` lies inside ``±margin`` with probability ``power`` (normal-theory
        approximation with the t quantile: ``n >= ((t_0.975 + z_(1+power)/2) sd / margin)^2``).
        ``cap`` when even that many would not do."""
        if not sd >= 0 or not 0 < power < 1:
            raise ValueError(
                f"sd must be >= 0 and power in (0, 1), got {sd!r}, {power!r}"
            )
        if sd == 0:
            return 2
        z = _scipy_stats.norm.ppf((1 + power) / 2)
        for n in range(2, cap + 1):
            t = _scipy_stats.t.ppf(0.975, n - 1)
            if n >= ((t + z) * sd / self.margin) ** 2:
                return n
        return cap

    def verdict(self, ci: Interval) -> str:
        if not ci.defined:
            return INCONCLUSIVE
        if -self.margin < ci.low and ci.high < self.margin:
            return SUPPORTED
        return (
            CONTRADICTED
            if ci.low > self.margin or ci.high < -self.margin
            else INCONCLUSIVE
        )


@dataclass(frozen=True)
class AtLeast:
    """Not worse by more than ``margin``: ``direction * effect >= -margin`` (non-inferiority).

    ``direction=-1`` states "no real gain": the effect is at most ``+margin``.
    """

    margin: float
    direction: int = 1

    def __post_init__(self) -> None:
        if not self.margin > 0:
            raise ValueError(f"margin must be positive, got {self.margin!r}")
        if self.direction not in (1, -1):
            raise ValueError(f"direction must be +1 or -1, got {self.direction!r}")

    @property
    def words(self) -> str:
        if self.direction > 0:
            return (
                f"supported if the 95 % CI lies above -{self.margin:g} (not worse by more than the margin); "
                f"contradicted if it lies entirely below -{self.margin:g}; inconclusive otherwise"
            )
        return (
            f"supported if the 95 % CI lies below +{self.margin:g} (no gain beyond the margin); "
            f"contradicted if it lies entirely above +{self.margin:g}; inconclusive otherwise"
        )

    def verdict(self, ci: Interval) -> str:
        if not ci.defined:
            return INCONCLUSIVE
        low, high = (ci.low, ci.high) if self.direction > 0 else (-ci.high, -ci.low)
        return (
            SUPPORTED
            if low > -self.margin
            else CONTRADICTED
            if high < -self.margin
            else INCONCLUSIVE
        )


@dataclass(frozen=True)
class ConsistentWith(Directional):
    """A mechanism the experiment cannot isolate: an interval on the side the mechanism
    predicts is :data:`CONSISTENT` ("consistent with"), never "supported"; one on the other
    side is "contradicted"; one that straddles zero, "inconclusive"."""

    @property
    def words(self) -> str:
        return (
            "at most consistent with the mechanism: "
            + super().words.replace("supported if", "consistent with if")
            + " (no run here isolates the mechanism, so never supported)"
        )

    def verdict(self, ci: Interval) -> str:
        seen = super().verdict(ci)
        return CONSISTENT if seen == SUPPORTED else seen


Rule = Directional | Equivalent | AtLeast


COMBINE_WORDS = (
    "a claim with several effects is contradicted if any effect is, supported if every one "
    "is, consistent with if every one is supported or consistent with, and inconclusive "
    "otherwise"
)


def combine(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its effects' (:data:`COMBINE_WORDS`)."""
    if not verdicts:
        return INCONCLUSIVE
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    if all(v == SUPPORTED for v in verdicts):
        return SUPPORTED
    if all(v in (SUPPORTED, CONSISTENT) for v in verdicts):
        return CONSISTENT
    return INCONCLUSIVE


def trained_margin(chance: float) -> float:
    """How far above ``chance`` an arm must score to count as trained."""
    return TWO_CLASS_MARGIN if chance >= 0.5 else TRAINED_MARGIN


def trained(score: float, chance: float | None) -> bool:
    """Whether an arm with mean test metric ``score`` trained: above chance by
    :func:`trained_margin` (always True for a metric without a chance level)."""
    if chance is None:
        return True
    return math.isfinite(score) and score >= chance + trained_margin(chance)
