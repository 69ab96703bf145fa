"""The statistics behind every verdict: intervals, paired differences, slopes, equivalence,
the test set's own noise, power and Holm's correction.

An interval here is a Student-t interval across seeds, :math:`\\bar d \\pm t_{(1+c)/2,\\,\\nu}\\,
\\sqrt{s^2/n + v}`: each seed contributes one number (a paired difference, a slope), so seeds
are the independent replicates and nothing inside a seed is treated as one. ``v`` is the
sampling variance that the *test set* adds (:func:`accuracy_item_variance`): every seed is
scored on the same test items, so the spread across seeds never shows it. It is taken as
known, and the degrees of freedom :math:`\\nu` are Welch and Satterthwaite's,
:math:`(n - 1)(1 + v n / s^2)^2`: ``n - 1`` when ``v`` is 0 (the plain t-interval), growing to
a normal interval as ``v`` dominates.

Power (:func:`power_directional`, :func:`power_equivalence`, :func:`mde`, :func:`n_needed`,
:func:`n_needed_equivalence`) is computed for that same interval, exactly for normal
per-seed values: the sample standard deviation is integrated over its chi distribution.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


class _LazyScipyStats:
    """``scipy.stats``, imported at its first use: it takes most of a second to import,
    which every start of the command line (``python -m normlab``) would pay."""

    def __getattr__(self, name: str) -> Any:
        from scipy import stats as module

        return getattr(module, name)


_stats = _LazyScipyStats()


def _brentq(*args: Any, **kwargs: Any) -> float:
    from scipy.optimize import brentq

    return brentq(*args, **kwargs)


__all__ = [
    "paired_item_variance",
    "ALPHA",
    "POWER",
    "Interval",
    "PairedTest",
    "mean_ci",
    "interval",
    "paired_differences",
    "paired_test",
    "difference_test",
    "slope_log2",
    "slope_weights",
    "slopes_log2",
    "tost",
    "welch_df",
    "accuracy_item_variance",
    "items_needed",
    "item_level_variance",
    "power_directional",
    "power_equivalence",
    "mde",
    "n_needed",
    "n_needed_equivalence",
    "holm",
    "holm_levels",
]

#: The two-sided error rate of every interval (a 95 % interval) and the power every plan aims at.
ALPHA = 0.05
POWER = 0.8


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
        _stats.t.ppf(0.5 + confidence / 2, n - 1) * x.std(ddof=1) / math.sqrt(n)
    )
    return mean, half, n


def welch_df(sd: float, n: int, item_var: float = 0.0) -> float:
    """Welch and Satterthwaite's degrees of freedom of :math:`s^2/n + v` with ``v`` known:
    :math:`(n - 1)(1 + v n / s^2)^2` (``n - 1`` when ``v`` is 0, infinite when ``s`` is)."""
    a = sd**2 / n
    if a > 0:
        return (n - 1) * (1 + item_var / a) ** 2
    return math.inf if item_var > 0 else float(n - 1)


def _t(q: float, df: float) -> float:
    return float(_stats.norm.ppf(q) if math.isinf(df) else _stats.t.ppf(q, df))


@dataclass(frozen=True)
class Interval:
    """A mean with its confidence interval ``[low, high]`` over ``n`` replicates (seeds).

    ``sd`` is the standard deviation across seeds (NaN: derived from ``half``, for an
    interval built from its half-width) and ``item_var`` the test set's sampling variance of
    the mean, added to the seeds' (module docstring); ``se``, ``df``, :meth:`at` and
    :meth:`p_value` follow from them.
    """

    mean: float
    half: float
    n: int
    confidence: float = 0.95
    sd: float = math.nan
    item_var: float = 0.0

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

    @property
    def seed_sd(self) -> float:
        """The standard deviation across seeds (``sd``, or derived from ``half``)."""
        if math.isfinite(self.sd):
            return self.sd
        if self.n >= 2 and math.isfinite(self.half) and self.item_var == 0:
            return (
                self.half
                * math.sqrt(self.n)
                / _t(0.5 + self.confidence / 2, self.n - 1)
            )
        return math.nan

    @property
    def se(self) -> float:
        """The standard error of the mean: seeds and test items together."""
        return (
            math.sqrt(self.seed_sd**2 / self.n + self.item_var) if self.n else math.nan
        )

    @property
    def df(self) -> float:
        """The interval's degrees of freedom (:func:`welch_df`)."""
        return welch_df(self.seed_sd, self.n, self.item_var) if self.n else math.nan

    def at(self, confidence: float) -> Interval:
        """The same estimate's interval at another ``confidence`` level."""
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
        half = math.nan
        if self.defined:
            half = _t(0.5 + confidence / 2, self.df) * self.se
        return Interval(
            self.mean, half, self.n, confidence, self.seed_sd, self.item_var
        )

    def p_value(self, null: float = 0.0) -> float:
        """The two-sided p-value of ``mean == null`` (NaN while the interval is undefined)."""
        if not self.defined:
            return math.nan
        if self.se == 0:
            return 1.0 if self.mean == null else 0.0
        z = abs(self.mean - null) / self.se
        df = self.df
        tail = _stats.norm.sf(z) if math.isinf(df) else _stats.t.sf(z, df)
        return float(min(1.0, 2 * tail))

    def p_above(self, bound: float) -> float:
        """The one-sided p-value of ``mean <= bound`` against ``mean > bound``."""
        if not self.defined:
            return math.nan
        if self.se == 0:
            return 0.0 if self.mean > bound else 1.0
        return self._sf(bound)

    def p_below(self, bound: float) -> float:
        """The one-sided p-value of ``mean >= bound`` against ``mean < bound``."""
        if not self.defined:
            return math.nan
        if self.se == 0:
            return 0.0 if self.mean < bound else 1.0
        return 1.0 - self._sf(bound)

    def _sf(self, bound: float) -> float:
        z = (self.mean - bound) / self.se
        df = self.df
        return float(_stats.norm.sf(z) if math.isinf(df) else _stats.t.sf(z, df))

    def __str__(self) -> str:
        return f"{self.mean:.4g} ± {self.half:.2g} (n={self.n})"


def interval(
    values: Iterable[float], confidence: float = 0.95, *, item_var: float = 0.0
) -> Interval:
    """The interval of the mean of ``values`` (one a seed), with the test set's sampling
    variance ``item_var`` added (module docstring); :func:`mean_ci` when it is 0."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not item_var >= 0:
        raise ValueError(f"item_var must be >= 0, got {item_var!r}")
    x = np.asarray(list(values), dtype=float)
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, 0, confidence, math.nan, item_var)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, n, confidence, math.nan, item_var)
    sd = float(x.std(ddof=1))
    se = math.sqrt(sd**2 / n + item_var)
    half = _t(0.5 + confidence / 2, welch_df(sd, n, item_var)) * se
    return Interval(mean, half, n, confidence, sd, item_var)


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
        ci, float(t), float(2 * _stats.t.sf(abs(t), len(d) - 1)), ci.mean / sd
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


def slope_weights(x: Sequence[float]) -> np.ndarray:
    r"""The weights ``w`` that make :func:`slope_log2` a weighted sum, ``slope = sum(w * y)``:
    :math:`w_k = (\ell_k - \bar\ell) / \sum_j (\ell_j - \bar\ell)^2` with
    :math:`\ell = \log_2 x` (so a test item's hits, weighted so, give its share of the
    slope)."""
    lx = np.log2(np.asarray(x, dtype=float))
    centred = lx - lx.mean() if lx.size else lx
    if lx.ndim != 1 or len(np.unique(lx)) < 2:
        raise ValueError(f"x must hold at least two distinct values, got {list(x)}")
    return centred / float(np.sum(centred**2))


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
        p_low = _stats.t.sf((x.mean() + margin) / se, len(x) - 1)
        p_high = _stats.t.cdf((x.mean() - margin) / se, len(x) - 1)
        p = float(max(p_low, p_high))
    return p, p < alpha


# --------------------------------------------------------------- the test set's noise


def accuracy_item_variance(terms: Iterable[tuple[float, float, int]]) -> float:
    """The test set's sampling variance of :math:`\\sum_k w_k p_k`, a weighted sum of mean
    accuracies each measured on the same kind of test set, given as ``(w_k, p_k, n_k)``
    (weight, mean accuracy across seeds, test items).

    One accuracy ``p`` on ``n`` items varies by at most :math:`p(1-p)/n` over draws of the
    items (equality when every seed gets the same items right). Without per-item
    predictions the correlations between terms are unknown; two networks scored on the same
    items are not negatively correlated, so the bound here takes every correlation between
    0 and 1 at its worst: terms of one sign add their standard deviations, and the two signs
    add their variances, :math:`(\\sum_{w>0} w\\,\\sigma)^2 + (\\sum_{w<0} |w|\\,\\sigma)^2`.
    For ``a - b`` that is :math:`p_a(1-p_a)/n + p_b(1-p_b)/n`, the conservative bound of a
    paired difference. NaN when a term's accuracy is not finite.
    """
    above = below = 0.0
    for weight, p, n in terms:
        if not (math.isfinite(p) and 0 <= p <= 1) or not n > 0:
            return math.nan
        sd = math.sqrt(p * (1 - p) / n)
        if weight > 0:
            above += weight * sd
        else:
            below += -weight * sd
    return above**2 + below**2


def paired_item_variance(
    per_item: np.ndarray, starts: np.ndarray | None = None
) -> float:
    """The test set's sampling variance of a paired accuracy difference, from its per-item
    differences ``per_item`` (each item's hit of one arm minus the other's, averaged over
    seeds and configurations): :math:`\\operatorname{var}(d_i) / n` over the ``n`` items,
    the variance of their mean over draws of the test items. Far below
    :func:`accuracy_item_variance`'s bound when the two arms get mostly the same items right.

    ``starts`` (bools, one per item, True where a group begins: the first scored token of
    each tagged sentence) groups items that are drawn together, as the tokens of one
    sentence are: the variance is then over draws of the groups, the ratio estimator's
    :math:`\\frac{S}{S-1}\\sum_s (D_s - \\bar d\\, m_s)^2 / N^2` for ``S`` groups of
    ``m_s`` items with summed differences ``D_s`` (``N`` items, mean difference
    :math:`\\bar d`), which is ``var(d_i) / n`` when every group holds one item.
    """
    d = np.asarray(per_item, dtype=float).ravel()
    if d.size < 2 or not np.all(np.isfinite(d)):
        raise ValueError(f"per_item needs at least 2 finite values, got {d.size}")
    if starts is None:
        return float(d.var(ddof=1) / d.size)
    first = np.asarray(starts, dtype=bool).ravel()
    if first.size != d.size or not first[0]:
        raise ValueError(
            f"starts needs one bool per item ({d.size}) and True at the first, got "
            f"{first.size} starting with {bool(first[0]) if first.size else None}"
        )
    group = np.cumsum(first) - 1
    count = int(group[-1]) + 1
    if count < 2:
        raise ValueError("starts must mark at least 2 groups")
    sums = np.bincount(group, weights=d, minlength=count)
    sizes = np.bincount(group, minlength=count)
    mean = d.mean()
    return float(count / (count - 1) * np.sum((sums - mean * sizes) ** 2) / d.size**2)


def item_level_variance(per_run: np.ndarray, starts: np.ndarray | None = None) -> float:
    r"""The test set's own share of :func:`paired_item_variance`, run-to-run disagreement
    taken out: ``per_run`` holds one row per seed of per-item differences :math:`d_{is}`
    (or of groups' items, with ``starts``). Over :math:`S` seeds the items' means
    :math:`\bar d_i` vary by :math:`\operatorname{var}(\mu_i) + \overline{\sigma^2_i}/S`:
    the items' true differences and the runs' disagreement on each item, which the seeds'
    spread already holds. Returned: :func:`paired_item_variance` of :math:`\bar d_i` less
    the disagreement's share, :math:`\sum_g s^2_g / (S N^2)` over the groups' (or items')
    summed differences' variances :math:`s^2_g` across seeds (:math:`N` items), at least 0;
    the variance to plan a test set's size with. With one seed, the whole of it."""
    runs = np.asarray(per_run, dtype=float)
    if runs.ndim != 2 or runs.shape[0] < 1:
        raise ValueError(f"per_run must be (seeds, items), got shape {runs.shape}")
    whole = paired_item_variance(runs.mean(axis=0), starts)
    seeds, size = runs.shape
    if seeds < 2:
        return whole
    if starts is None:
        sums = runs
    else:
        group = np.cumsum(np.asarray(starts, dtype=bool).ravel()) - 1
        sums = np.stack([np.bincount(group, weights=row) for row in runs])
    disagreement = float(np.sum(sums.var(axis=0, ddof=1))) / (seeds * size**2)
    return max(0.0, whole - disagreement)


def items_needed(
    item_var: float,
    n_test: int,
    margin: float,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    share: float = 0.5,
) -> int:
    """The test-set size at which the test set's noise alone has a minimum detectable
    effect of ``share`` of ``margin`` (``item_var`` measured on ``n_test`` items, and
    shrinking as ``1/n``), leaving the rest to the seeds."""
    z = _stats.norm.ppf(1 - alpha / 2) + _stats.norm.ppf(power)
    return max(n_test, math.ceil(n_test * item_var * (z / (share * margin)) ** 2))


# --------------------------------------------------------------------------- power

#: Quantiles of the sample standard deviation that the power integrals average over.
_POINTS = 256


def _spread(
    sd: float, n: int, item_var: float, alpha: float
) -> tuple[np.ndarray, float]:
    """The interval's half-width at equally likely values of the sample standard
    deviation, and the true standard error of the mean."""
    df = n - 1
    q = (np.arange(_POINTS) + 0.5) / _POINTS
    s = sd * np.sqrt(_stats.chi2.ppf(q, df) / df)
    a = s**2 / n
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = np.where(a > 0, df * (1 + item_var / np.where(a > 0, a, 1.0)) ** 2, np.inf)
    if item_var == 0:
        nu = np.full_like(a, float(df))
    half = _stats.t.ppf(1 - alpha / 2, nu) * np.sqrt(a + item_var)
    return half, math.sqrt(sd**2 / n + item_var)


def _check_power_args(sd: float, n: int, item_var: float, alpha: float) -> None:
    if not sd >= 0 or not item_var >= 0:
        raise ValueError(f"sd and item_var must be >= 0, got {sd!r}, {item_var!r}")
    if n < 2:
        raise ValueError(f"n must be at least 2 seeds, got {n!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def power_directional(
    delta: float, sd: float, n: int, *, item_var: float = 0.0, alpha: float = ALPHA
) -> float:
    """The chance that the two-sided ``1 - alpha`` interval of :func:`interval` lies entirely
    above zero when the true effect is ``delta`` (the claimed direction taken as positive),
    for ``n`` seeds of standard deviation ``sd`` and the test set's variance ``item_var``."""
    _check_power_args(sd, n, item_var, alpha)
    half, se = _spread(sd, n, item_var, alpha)
    if se == 0:
        return 1.0 if delta > 0 else 0.0
    return float(np.mean(_stats.norm.cdf((delta - half) / se)))


def power_equivalence(
    delta: float,
    sd: float,
    n: int,
    margin: float,
    *,
    item_var: float = 0.0,
    alpha: float = ALPHA,
) -> float:
    """The chance that the two-sided ``1 - alpha`` interval lies inside ``±margin`` when the
    true difference is ``delta`` (not only 0: a difference near the margin needs far more
    seeds, and one at or beyond it can never be shown equivalent)."""
    _check_power_args(sd, n, item_var, alpha)
    if not margin > 0:
        raise ValueError(f"margin must be positive, got {margin!r}")
    half, se = _spread(sd, n, item_var, alpha)
    if se == 0:
        return 1.0 if abs(delta) < margin else 0.0
    inside = _stats.norm.cdf((margin - half - delta) / se) - _stats.norm.cdf(
        (half - margin - delta) / se
    )
    return float(np.mean(np.clip(inside, 0.0, 1.0)))


def mde(
    sd: float,
    n: int,
    *,
    item_var: float = 0.0,
    alpha: float = ALPHA,
    power: float = POWER,
) -> float:
    """The minimum detectable effect: the smallest true effect whose ``1 - alpha`` interval
    excludes zero on its side with probability ``power`` (:func:`power_directional`)."""
    _check_power_args(sd, n, item_var, alpha)
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    _, se = _spread(sd, n, item_var, alpha)
    if se == 0:
        return 0.0

    def short(delta: float) -> float:
        return power_directional(delta, sd, n, item_var=item_var, alpha=alpha) - power

    high = 4 * se
    while short(high) < 0:
        high *= 2
    return float(_brentq(short, 0.0, high, xtol=se * 1e-6))


def _smallest(enough: Callable[[int], bool], cap: int) -> int | None:
    """The smallest ``n`` in ``[2, cap]`` for which ``enough(n)`` holds, assuming it keeps
    holding beyond (every seed only narrows the interval); None when ``cap`` is not enough."""
    if not enough(cap):
        return None
    n = 2
    while n < cap and not enough(min(2 * n, cap)):
        n = min(2 * n, cap)
    if enough(n):
        return n
    low, high = n, min(2 * n, cap)  # not enough at low, enough at high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def n_needed(
    sd: float,
    margin: float,
    *,
    item_var: float = 0.0,
    alpha: float = ALPHA,
    power: float = POWER,
    cap: int = 100_000,
) -> int | None:
    """Seeds for which the :func:`mde` is at most ``margin``: a true effect of the margin's
    size is then found (its interval excludes zero) with probability ``power``.

    None when no number of seeds will do: the test set's own noise (``item_var``, which
    seeds do not average away) already puts the limit above the margin
    (:func:`items_needed` says how many test items would).
    """
    if not margin > 0:
        raise ValueError(f"margin must be positive, got {margin!r}")
    if sd == 0 and item_var == 0:
        return 2
    return _smallest(
        lambda n: (
            power_directional(margin, sd, n, item_var=item_var, alpha=alpha) >= power
        ),
        cap,
    )


def n_needed_equivalence(
    sd: float,
    margin: float,
    delta: float = 0.0,
    *,
    item_var: float = 0.0,
    alpha: float = ALPHA,
    power: float = POWER,
    cap: int = 100_000,
) -> int | None:
    """Seeds for which the interval lies inside ``±margin`` with probability ``power`` when
    the true difference is ``delta``; None when no number will (``|delta| >= margin``, or
    the test set's noise is too large)."""
    if not margin > 0:
        raise ValueError(f"margin must be positive, got {margin!r}")
    if abs(delta) >= margin:
        return None
    if sd == 0 and item_var == 0:
        return 2
    return _smallest(
        lambda n: (
            power_equivalence(delta, sd, n, margin, item_var=item_var, alpha=alpha)
            >= power
        ),
        cap,
    )


# ------------------------------------------------------------------ several effects


def holm_levels(p_values: Sequence[float], alpha: float = ALPHA) -> np.ndarray:
    """Each test's error rate under Holm's step-down correction of ``k`` tests.

    The test with the ``j``-th smallest p-value (``j`` from 1) is decided at ``alpha / (k - j
    + 1)``; at the first that is not rejected the procedure stops, and it and every later
    test keep that level, so none of them is rejected. A NaN p-value counts as 1.
    """
    p = np.array([1.0 if not math.isfinite(v) else v for v in p_values], dtype=float)
    k = len(p)
    levels = np.empty(k)
    stopped: float | None = None
    for j, i in enumerate(np.argsort(p, kind="stable")):
        level = alpha / (k - j) if stopped is None else stopped
        if stopped is None and p[i] > level:
            stopped = level
        levels[i] = level
    return levels


def holm(
    p_values: Sequence[float], alpha: float = ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """Holm's adjusted p-values and which tests are rejected at family-wise ``alpha``
    (rejected exactly when the adjusted p-value is at most ``alpha``)."""
    p = np.array([1.0 if not math.isfinite(v) else v for v in p_values], dtype=float)
    k = len(p)
    adjusted = np.empty(k)
    running = 0.0
    for j, i in enumerate(np.argsort(p, kind="stable")):
        running = max(running, min(1.0, (k - j) * p[i]))
        adjusted[i] = running
    return adjusted, p <= holm_levels(p, alpha)
