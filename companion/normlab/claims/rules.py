"""The verdict rules: how a confidence interval becomes a verdict, and what it would take.

Each rule reads one effect's interval (:class:`normlab.stats.Interval`: the seeds' spread
and the test set's noise): :class:`Directional` (the claimed sign), :class:`Equivalent` (no
real difference, TOST-style), :class:`AtLeast` (not worse by more than a margin) and
:class:`ConsistentWith` (the sign a mechanism predicts, where no run isolates the
mechanism). A directional claim also has a margin, the smallest effect that matters
(:mod:`normlab.claims.plans`): an interval inside ``±margin`` is :data:`NEGLIGIBLE`, a
decided verdict, and "inconclusive" is left for an interval that reaches past the margin
and still straddles zero; one that excludes zero but reaches across the margin decides the
sign alone (:data:`SIGN_SUPPORTED`, :data:`SIGN_CONTRADICTED`), never a size, so that less
data (a wider interval) never decides a size that more data left open. Each rule gives the p-value of its own test (for Holm's
correction across a claim's effects, :func:`holm_intervals`) and the seeds that would
resolve an inconclusive effect (``seeds_to_resolve``). :func:`combine` joins the verdicts
of a claim's several effects, and :func:`verdict_words` names each where they differ;
:func:`trained` is the learnability rule that comes before any of them (a comparison whose
arm did not beat chance gets no verdict), and :func:`at_ceiling` the ceiling rule (arms at
the task's ceiling cannot show a difference).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .. import stats as _stats
from ..stats import ALPHA, Interval

__all__ = [
    "SUPPORTED",
    "CONTRADICTED",
    "INCONCLUSIVE",
    "CONSISTENT",
    "NEGLIGIBLE",
    "SIGN_SUPPORTED",
    "SIGN_CONTRADICTED",
    "SIGN_CONSISTENT",
    "MIXED",
    "DECIDED",
    "SIZE_DECIDED",
    "size_decided",
    "CEILING",
    "CEILING_MARGIN",
    "AT_CEILING",
    "CEILING_WORDS",
    "at_ceiling",
    "verdict_words",
    "NOT_TRAINED",
    "NOT_YET_TESTED",
    "CONCEPTUAL",
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
    "holm_intervals",
    "COMBINE_WORDS",
    "INTERVAL_WORDS",
    "trained_margin",
    "trained",
]

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
# The predicted sign, seen where the experiment cannot isolate the claimed cause: weaker
# than "supported", and never counted as it.
CONSISTENT = "consistent with"
# Decided, either way: the interval lies inside ±margin, so whatever the true effect is, it
# is smaller than the smallest effect that matters.
NEGLIGIBLE = "smaller than the margin"
# The sign is decided but the size is not: the interval excludes zero and straddles the
# margin, so the effect may be larger or smaller than the smallest that matters.
SIGN_SUPPORTED = "supported in sign, size unresolved"
SIGN_CONTRADICTED = "contradicted in sign, size unresolved"
SIGN_CONSISTENT = "consistent in sign, size unresolved"
VERDICTS: tuple[str, ...] = (
    SUPPORTED,
    SIGN_SUPPORTED,
    CONSISTENT,
    SIGN_CONSISTENT,
    NEGLIGIBLE,
    SIGN_CONTRADICTED,
    CONTRADICTED,
    INCONCLUSIVE,
)
#: The verdicts that settle an effect (every one but "inconclusive").
DECIDED: tuple[str, ...] = tuple(v for v in VERDICTS if v != INCONCLUSIVE)
#: The verdicts that settle an effect's size against its margin, not only its sign.
SIZE_DECIDED: tuple[str, ...] = (SUPPORTED, CONSISTENT, NEGLIGIBLE, CONTRADICTED)
#: A claim whose effects' verdicts differ: :func:`verdict_words` names each.
MIXED = "differs by effect"
NOT_TRAINED = "did not train"  # no verdict: an arm of the comparison did not learn
NOT_YET_TESTED = "not yet tested"
#: A conceptual claim's measurement agrees with the view it proposes: the algebra it rests
#: on holds, which shows a view consistent, never a view "supported" (counted apart).
CONCEPTUAL = "consistent (a view, not a finding)"
# Learnability: at its chosen rate, an arm must beat chance by this much (an accuracy) to be
# compared at all; a two-class task, whose chance is 0.5, needs half as much.
TRAINED_MARGIN = 0.1
TWO_CLASS_MARGIN = 0.05
#: The ceiling rule: the accuracy a task allows where its stand-in defines one (the Bayes
#: accuracy of a generated task), else CEILING; an arm within CEILING_MARGIN of it cannot
#: show a difference, and the verdict says so instead of judging.
CEILING = 0.97
CEILING_MARGIN = 0.01
AT_CEILING = "at the ceiling"
CEILING_WORDS = (
    f"No verdict when every compared arm scores within {CEILING_MARGIN:g} of the task's "
    f"ceiling (its Bayes accuracy where the stand-in defines one, else {CEILING:g}): no "
    "difference can show there"
)
LEARNABILITY_WORDS = (
    f"No verdict when an arm scores within {TRAINED_MARGIN:g} of chance at its chosen rate "
    f"({TWO_CLASS_MARGIN:g} on a two-class task)"
)


def _inside(ci: Interval, margin: float | None) -> bool:
    return margin is not None and -margin < ci.low and ci.high < margin


def _level(ci: Interval) -> str:
    return f"{100 * ci.confidence:g} %"


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
            f"smaller than the margin if the CI lies inside ±margin (whatever its sign); "
            f"else supported if it lies entirely {sign} the margin, contradicted if it "
            f"lies entirely {other} minus the margin; '{SIGN_SUPPORTED}' (or "
            f"'{SIGN_CONTRADICTED}') if it lies {sign} (or {other}) zero but reaches "
            f"across the margin; and inconclusive if it straddles zero"
        )

    def verdict(self, ci: Interval, margin: float | None = None) -> str:
        """The verdict of ``ci``; :data:`NEGLIGIBLE` first when it lies inside ``±margin``."""
        if not ci.defined:
            return INCONCLUSIVE
        if _inside(ci, margin):
            return NEGLIGIBLE
        low, high = (ci.low, ci.high) if self.direction > 0 else (-ci.high, -ci.low)
        if low > 0:
            return SUPPORTED if margin is None or low >= margin else SIGN_SUPPORTED
        if high < 0:
            return (
                CONTRADICTED if margin is None or high <= -margin else SIGN_CONTRADICTED
            )
        return INCONCLUSIVE

    def p_value(self, ci: Interval) -> float:
        """The two-sided p-value of a zero effect (the test of either sign)."""
        return ci.p_value(0.0)

    def target(self, ci: Interval, margin: float) -> float:
        """The effect size the seeds must detect: the margin."""
        return margin

    def seeds_to_resolve(
        self, ci: Interval, margin: float, alpha: float = ALPHA
    ) -> int | None:
        """Seeds for 80 % power against a true effect of the margin's size (the smallest
        that matters), at this spread and test set (:func:`normlab.stats.n_needed`)."""
        return _stats.n_needed(ci.seed_sd, margin, item_var=ci.item_var, alpha=alpha)


@dataclass(frozen=True)
class Equivalent:
    """No real difference: the effect lies within ``±margin`` (TOST-style, on the CI)."""

    margin: float

    def __post_init__(self) -> None:
        if not self.margin > 0:
            raise ValueError(f"margin must be positive, got {self.margin!r}")

    @property
    def words(self) -> str:
        return (
            f"supported if the CI lies inside ±{self.margin:g} (equivalence: two one-sided "
            f"tests, each at half the CI's error rate); contradicted if it lies entirely "
            f"outside ±{self.margin:g}; inconclusive otherwise"
        )

    def seeds_needed(
        self,
        sd: float,
        power: float = 0.8,
        cap: int = 1000,
        *,
        delta: float = 0.0,
        item_var: float = 0.0,
    ) -> int:
        """Seeds for which the 95 % CI of an effect with true value ``delta`` (not only 0)
        and per-seed standard deviation ``sd`` lies inside ``±margin`` with probability
        ``power`` (:func:`normlab.stats.n_needed_equivalence`); ``cap`` when no number up to
        it would do (always so for ``|delta| >= margin``)."""
        if not sd >= 0 or not 0 < power < 1:
            raise ValueError(
                f"sd must be >= 0 and power in (0, 1), got {sd!r}, {power!r}"
            )
        n = _stats.n_needed_equivalence(
            sd, self.margin, delta, item_var=item_var, power=power, cap=cap
        )
        return cap if n is None else n

    def verdict(self, ci: Interval, margin: float | None = None) -> str:
        """The verdict of ``ci`` against this rule's own margin."""
        if not ci.defined:
            return INCONCLUSIVE
        if _inside(ci, self.margin):
            return SUPPORTED
        return (
            CONTRADICTED
            if ci.low > self.margin or ci.high < -self.margin
            else INCONCLUSIVE
        )

    def p_value(self, ci: Interval) -> float:
        """The two one-sided tests' p-value, doubled so that it is below ``alpha`` exactly
        when the two-sided ``1 - alpha`` CI lies inside ``±margin``."""
        if not ci.defined:
            return math.nan
        return min(1.0, 2 * max(ci.p_above(-self.margin), ci.p_below(self.margin)))

    def p_against(self, ci: Interval) -> float:
        """The p-value of the test that contradicts: the effect lies beyond ``±margin``
        (one-sided on the nearer side, doubled as :meth:`p_value` is)."""
        if not ci.defined:
            return math.nan
        return min(1.0, 2 * min(ci.p_above(self.margin), ci.p_below(-self.margin)))

    def target(self, ci: Interval, margin: float | None = None) -> float:
        """The effect size the seeds must resolve: the observed difference's distance
        from the margin."""
        return abs(abs(ci.mean) - self.margin)

    def seeds_to_resolve(
        self, ci: Interval, margin: float | None = None, alpha: float = ALPHA
    ) -> int | None:
        """Seeds to decide at the observed difference (the best guess of the true one):
        inside the margin, 80 % power to show equivalence; outside it, 80 % power to show
        the difference lies beyond it; None exactly at the margin."""
        distance = abs(ci.mean) - self.margin
        sd, v = ci.seed_sd, ci.item_var
        if distance < 0:
            return _stats.n_needed_equivalence(
                sd, self.margin, ci.mean, item_var=v, alpha=alpha
            )
        if distance > 0:
            return _stats.n_needed(sd, distance, item_var=v, alpha=alpha)
        return None


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
                f"supported if the CI lies above -{self.margin:g} (not worse by more than the margin); "
                f"contradicted if it lies entirely below -{self.margin:g}; inconclusive otherwise"
            )
        return (
            f"supported if the CI lies below +{self.margin:g} (no gain beyond the margin); "
            f"contradicted if it lies entirely above +{self.margin:g}; inconclusive otherwise"
        )

    def verdict(self, ci: Interval, margin: float | None = None) -> str:
        """The verdict of ``ci`` against this rule's own margin."""
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

    def p_value(self, ci: Interval) -> float:
        """The one-sided p-value of being worse than the margin, doubled (below ``alpha``
        exactly when the two-sided ``1 - alpha`` CI clears the margin)."""
        if not ci.defined:
            return math.nan
        if self.direction > 0:
            return min(1.0, 2 * ci.p_above(-self.margin))
        return min(1.0, 2 * ci.p_below(self.margin))

    def p_against(self, ci: Interval) -> float:
        """The p-value of the test that contradicts: worse than the margin (one-sided,
        doubled as :meth:`p_value` is)."""
        if not ci.defined:
            return math.nan
        if self.direction > 0:
            return min(1.0, 2 * ci.p_below(-self.margin))
        return min(1.0, 2 * ci.p_above(self.margin))

    def target(self, ci: Interval, margin: float | None = None) -> float:
        """The effect size the seeds must resolve: the observed difference's distance
        from the margin's bound."""
        return abs(self.direction * ci.mean + self.margin)

    def seeds_to_resolve(
        self, ci: Interval, margin: float | None = None, alpha: float = ALPHA
    ) -> int | None:
        """Seeds for 80 % power to decide at the observed difference: its distance from the
        margin's bound is the effect to detect (None exactly on the bound)."""
        distance = self.target(ci)
        if distance == 0:
            return None
        return _stats.n_needed(ci.seed_sd, distance, item_var=ci.item_var, alpha=alpha)


@dataclass(frozen=True)
class ConsistentWith(Directional):
    """A mechanism the experiment cannot isolate: an interval on the side the mechanism
    predicts is :data:`CONSISTENT` ("consistent with"), never "supported"; one on the other
    side is "contradicted"; one inside the margin, :data:`NEGLIGIBLE`; one that straddles
    zero and reaches past the margin, "inconclusive"."""

    @property
    def words(self) -> str:
        return (
            "at most consistent with the mechanism: "
            + super()
            .words.replace("supported if", "consistent with if")
            .replace(SIGN_SUPPORTED, SIGN_CONSISTENT)
            + " (no run here isolates the mechanism, so never supported)"
        )

    def verdict(self, ci: Interval, margin: float | None = None) -> str:
        seen = super().verdict(ci, margin)
        return {SUPPORTED: CONSISTENT, SIGN_SUPPORTED: SIGN_CONSISTENT}.get(seen, seen)


Rule = Directional | Equivalent | AtLeast


INTERVAL_WORDS = (
    "each interval adds the test set's own noise to the seeds' spread: for a paired "
    "accuracy difference whose runs kept which test items they got right, the variance of "
    "the items' differences over the n test items; otherwise, for an accuracy p on n "
    "test items, p(1 - p)/n per arm, summed over the arms it compares (a bound; none for a "
    "quantity that is not an accuracy), with Welch-Satterthwaite degrees of freedom"
)


COMBINE_WORDS = (
    "a claim's several effects are judged together with Holm's step-down correction, so "
    "that the chance of any false verdict stays at 5 %: the effect with the j-th smallest "
    "p-value of k (its rule's own test) is judged on its interval at confidence "
    "1 - 0.05/(k - j + 1), and from the first whose test that level does not decide, it and "
    "the rest keep that level (one effect: the 95 % interval); then the claim has its "
    "effects' verdict where they agree, and where they differ none is hidden: the claim's "
    f"verdict is '{MIXED}' and its words name each effect's verdict"
)


def combine(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its effects' (:data:`COMBINE_WORDS`): theirs where they
    agree, :data:`MIXED` where they differ (no rule lets one effect hide another)."""
    if not verdicts:
        return INCONCLUSIVE
    found = set(verdicts)
    return found.pop() if len(found) == 1 else MIXED


def verdict_words(verdicts: Sequence[tuple[str, str]]) -> str:
    """A claim's verdict in words from its effects' ``(name, verdict)``: the verdict alone
    where they agree, else each verdict with the effects that have it ("supported for
    norm_like; smaller than the margin for affine_like"), in the effects' order."""
    if not verdicts:
        return INCONCLUSIVE
    named: dict[str, list[str]] = {}
    for name, verdict in verdicts:
        named.setdefault(verdict, []).append(name)
    if len(named) == 1:
        return next(iter(named))
    return "; ".join(f"{v} for {', '.join(names)}" for v, names in named.items())


def size_decided(verdict: str) -> bool:
    """Whether ``verdict`` settles an effect's size against its margin
    (:data:`SIZE_DECIDED`), not only its sign."""
    return verdict in SIZE_DECIDED


def at_ceiling(scores: Sequence[float], ceiling: float | None) -> bool:
    """Whether every compared arm's mean accuracy ``scores`` lies within
    :data:`CEILING_MARGIN` of the task's ``ceiling`` (None: :data:`CEILING`), where no
    difference can show."""
    if not scores:
        return False
    top = CEILING if ceiling is None else ceiling
    return all(math.isfinite(s) and s >= top - CEILING_MARGIN for s in scores)


def holm_intervals(
    rules: Sequence[Rule], intervals: Sequence[Interval], alpha: float = ALPHA
) -> list[Interval]:
    """Each effect's interval at its level under Holm's step-down correction over the
    claim's effects (:data:`COMBINE_WORDS`), ranked by each rule's own p-value."""
    if len(rules) != len(intervals):
        raise ValueError(
            f"one rule per interval, got {len(rules)} rules, {len(intervals)} intervals"
        )
    p = [rule.p_value(ci) for rule, ci in zip(rules, intervals)]
    levels = _stats.holm_levels(p, alpha)
    return [ci.at(1 - level) for ci, level in zip(intervals, levels)]


def trained_margin(chance: float) -> float:
    """How far above ``chance`` an arm must score to count as trained."""
    return TWO_CLASS_MARGIN if chance >= 0.5 else TRAINED_MARGIN


def trained(score: float, chance: float | None) -> bool:
    """Whether an arm with mean test metric ``score`` trained: above chance by
    :func:`trained_margin` (always True for a metric without a chance level)."""
    if chance is None:
        return True
    return math.isfinite(score) and score >= chance + trained_margin(chance)
