"""The statistics behind every verdict: t-intervals, paired differences, slopes, equivalence.

Every interval here is a Student-t interval across seeds, :math:`\\bar d \\pm t_{(1+c)/2,\\,n-1}\\,
s/\\sqrt{n}`: each seed contributes one number (a paired difference, a slope), so seeds are the
independent replicates and nothing inside a seed is treated as one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "Interval",
    "PairedTest",
    "mean_ci",
    "interval",
    "paired_differences",
    "paired_test",
    "difference_test",
    "slope_log2",
    "slopes_log2",
    "tost",
]


def mean_ci(
    values: Iterable[float], confidence: float = 0.95
) -> tuple[float, float, int]:
    """Mean, half-width of the t-distribution confidence interval, and n.

    The half-width is :math:`t_{(1+c)/2,\\,n-1}\\, s/\\sqrt{n}` with the sample standard
    deviation :math:`s`; it is NaN for fewer than two values.
    """
    x = np.asarray(list(values), dtype=float)
    n = len(x)
    if n == 0:
        return float("nan"), float("nan"), 0
    mean = float(x.mean())
    if n < 2:
        return mean, float("nan"), n
    half = float(
        stats.t.ppf(0.5 + confidence / 2, n - 1) * x.std(ddof=1) / math.sqrt(n)
    )
    return mean, half, n


@dataclass(frozen=True)
class Interval:
    """A mean with its confidence interval ``[low, high]`` over ``n`` replicates (seeds)."""

    mean: float
    half: float
    n: int
    confidence: float = 0.95

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    @property
    def defined(self) -> bool:
        """True when the interval is finite (at least two replicates that are not NaN)."""
        return self.n >= 2 and math.isfinite(self.half) and math.isfinite(self.mean)

    def __str__(self) -> str:
        return f"{self.mean:.4g} ± {self.half:.2g} (n={self.n})"


def interval(values: Iterable[float], confidence: float = 0.95) -> Interval:
    """:func:`mean_ci` as an :class:`Interval`."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return Interval(*mean_ci(values, confidence), confidence=confidence)


def paired_differences(a: dict[int, float], b: dict[int, float]) -> np.ndarray:
    """``a[s] - b[s]`` for every seed ``s`` present in both (sorted by seed).

    Pairing by seed removes what two runs of one seed share (the data split, the
    initialisation stream); an unpaired seed is dropped, never compared to another seed.
    """
    common = sorted(set(a) & set(b))
    return np.array([a[s] - b[s] for s in common], dtype=float)


@dataclass(frozen=True)
class PairedTest:
    """A paired t-test across seeds of ``a - b``.

    ``ci``: the mean difference with its t-interval; ``t`` and ``p`` (two-sided); ``d_z``:
    Cohen's effect size for paired data, the mean over the standard deviation of the
    differences (infinite when every difference is the same non-zero number).
    """

    ci: Interval
    t: float
    p: float
    d_z: float

    @property
    def mean(self) -> float:
        return self.ci.mean

    @property
    def low(self) -> float:
        return self.ci.low

    @property
    def high(self) -> float:
        return self.ci.high

    @property
    def n(self) -> int:
        return self.ci.n

    def __str__(self) -> str:
        return (
            f"{self.mean:+.4g} [{self.low:+.4g}, {self.high:+.4g}], t = {self.t:.2f}, p = {self.p:.3g}, "
            f"d_z = {self.d_z:.2f}, n = {self.n}"
        )


def paired_test(
    a: dict[int, float], b: dict[int, float], confidence: float = 0.95
) -> PairedTest:
    """Paired t-test of ``a[s] - b[s]`` over the seeds ``s`` present in both (:func:`paired_differences`)."""
    return difference_test(paired_differences(a, b), confidence)


def difference_test(
    differences: Iterable[float], confidence: float = 0.95
) -> PairedTest:
    """The t-test of :func:`paired_test` on paired differences already taken, one a seed
    (e.g. the samples of a :func:`normlab.claims.paired` effect)."""
    d = np.asarray(list(differences), dtype=float)
    if len(d) < 2:
        raise ValueError(f"a paired test needs at least 2 common seeds, got {len(d)}")
    ci = interval(d, confidence)
    sd = float(d.std(ddof=1))
    if sd == 0:
        t = 0.0 if ci.mean == 0 else math.copysign(math.inf, ci.mean)
        return PairedTest(ci, t, 1.0 if ci.mean == 0 else 0.0, t)
    t = ci.mean / (sd / math.sqrt(len(d)))
    return PairedTest(
        ci, float(t), float(2 * stats.t.sf(abs(t), len(d) - 1)), ci.mean / sd
    )


def slope_log2(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``y`` against ``log2(x)``: the change in ``y`` per doubling of ``x``."""
    lx = np.log2(np.asarray(x, dtype=float))
    yy = np.asarray(y, dtype=float)
    if lx.shape != yy.shape or len(np.unique(lx)) < 2:
        raise ValueError(
            f"x and y must have equal lengths and x at least two distinct values, got x={list(x)}"
        )
    return float(np.polyfit(lx, yy, 1)[0])


def slopes_log2(table: pd.DataFrame, x: str, y: str, seed: str = "seed") -> np.ndarray:  # noqa: F821
    """One :func:`slope_log2` of column ``y`` against ``x`` per seed of ``table``."""
    return np.array(
        [slope_log2(part[x], part[y]) for _, part in table.groupby(seed, sort=True)],
        dtype=float,
    )


def tost(
    values: Iterable[float], margin: float, alpha: float = 0.05
) -> tuple[float, bool]:
    """Two one-sided t-tests of ``|mean| < margin``: the p-value and whether it is below ``alpha``.

    Equivalent to the :math:`1 - 2\\alpha` confidence interval lying inside
    ``(-margin, margin)``.
    """
    if not margin > 0:
        raise ValueError(f"margin must be positive, got {margin!r}")
    x = np.asarray(list(values), dtype=float)
    if len(x) < 2:
        return float("nan"), False
    se = x.std(ddof=1) / math.sqrt(len(x))
    if se == 0:
        p = 0.0 if abs(x.mean()) < margin else 1.0
    else:
        p_low = stats.t.sf((x.mean() + margin) / se, len(x) - 1)
        p_high = stats.t.cdf((x.mean() - margin) / se, len(x) - 1)
        p = float(max(p_low, p_high))
    return p, p < alpha
