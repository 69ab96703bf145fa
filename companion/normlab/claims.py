"""Every claim of the two papers as data, each with the test that settles it.

A claim has an id (``A1``–``A15`` for the affine divergence, ``N1``–``N14`` for AutoNorm), its
sentence, the paper's numbers (what the paper reports, never ours), the chapter that tests it,
and a test:

- :class:`Measurement` for the exact claims: run the measurement with the package in float64
  and compare with the formula to a stated tolerance;
- :class:`Test` for the empirical claims: an experiment (by its registered name), a quantity
  (a function of that experiment's results table returning one or more :class:`Effect`, one
  number per seed) and a :class:`Rule` that turns each effect's 95 % CI into a verdict.

To attach a test to a claim, edit its one declaration below (``test=Test(...)``); the
registry checks that the experiment exists. :func:`evaluate` gives a claim's
:class:`Outcome` from the largest saved result set (:mod:`normlab.results`), or from a
results table a chapter passes in; :func:`scorecard` gives every claim's row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from . import results as saved_results
from ._checks import one_of, positive_int
from ._runtime import PROFILES
from .experiments.part1 import CORRECTIONS, PART1_RIVALS, SCALE_INVARIANT
from .normalisers import PART2
from .paper import EPS_H
from .stats import Interval, interval, paired_differences, slopes_log2

__all__ = [
    "SUPPORTED",
    "CONTRADICTED",
    "INCONCLUSIVE",
    "NOT_YET_TESTED",
    "VERDICTS",
    "Directional",
    "Equivalent",
    "AtLeast",
    "Effect",
    "Check",
    "Measurement",
    "Test",
    "Claim",
    "Outcome",
    "Unmeasurable",
    "CLAIMS",
    "get",
    "ids",
    "evaluate",
    "scorecard",
    "verdict_table",
    "markdown",
    "forest",
    "chapter_notebook",
    "chapter_link",
    "part_markdown",
]

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
VERDICTS: tuple[str, ...] = (SUPPORTED, CONTRADICTED, INCONCLUSIVE)
NOT_YET_TESTED = "not yet tested"
BOOK = Path(__file__).resolve().parents[2] / "book"


class Unmeasurable(ValueError):
    """A result set lacks what a quantity needs (a configuration, a second width, a dataset)."""


# ----------------------------------------------------------------------------- rules


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


Rule = Directional | Equivalent | AtLeast


def combine(verdicts: Sequence[str]) -> str:
    """A claim with several effects: contradicted if any is, supported if all are, else inconclusive."""
    if not verdicts:
        return INCONCLUSIVE
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    return SUPPORTED if all(v == SUPPORTED for v in verdicts) else INCONCLUSIVE


# ------------------------------------------------------------------------- the tests


@dataclass(frozen=True)
class Effect:
    """One measured quantity: a label, one value per seed, and optionally its own rule."""

    label: str
    samples: np.ndarray
    rule: Rule | None = None


@dataclass(frozen=True)
class Test:
    """An empirical test: ``quantity(results)`` of ``experiment``'s results table, judged by ``rule``.

    ``min_profile`` is the smallest profile whose saved set may give a verdict (the quick
    profile's two seeds never do): ``cpu`` where stand-in data test the mechanism,
    ``standard`` where the claim is about the paper's real datasets.
    """

    experiment: str
    quantity: Callable[[pd.DataFrame], list[Effect]]
    rule: Rule
    says: str
    min_profile: str = "cpu"


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
            f"supported if every deviation that the algebra says is zero is at most {self.tolerance:g} "
            f"(relative, float64) and every one it says is non-zero exceeds {self.nonzero:g}; else contradicted"
        )


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, with the paper's numbers and the test (None until its chapter lands)."""

    id: str
    part: str
    kind: str
    sentence: str
    chapter: int
    paper: dict[str, float] = field(default_factory=dict)
    test: Test | Measurement | None = None

    @property
    def rule_words(self) -> str:
        if self.test is None:
            return ""
        return (
            self.test.words
            if isinstance(self.test, Measurement)
            else self.test.rule.words
        )


CLAIMS: dict[str, Claim] = {}


def _declare(claim: Claim) -> None:
    from . import experiments

    if claim.id in CLAIMS:
        raise ValueError(f"claim {claim.id!r} is declared twice")
    if claim.kind not in ("exact", "conceptual", "empirical"):
        raise ValueError(
            f"claim {claim.id}: kind={claim.kind!r}; expected exact, conceptual or empirical"
        )
    if isinstance(claim.test, Test):
        experiments.get(
            claim.test.experiment
        )  # a ValueError naming the valid experiments
        if claim.test.min_profile not in PROFILES:
            raise ValueError(
                f"claim {claim.id}: min_profile={claim.test.min_profile!r} is not a profile"
            )
    CLAIMS[claim.id] = claim


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


# ------------------------------------------------------- exact measurements (float64)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def _data(
    batch: int = 5, features: int = 6, outputs: int = 3, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, features, generator=gen, dtype=torch.float64) * 2
    g = torch.randn(batch, outputs, generator=gen, dtype=torch.float64)
    return x, g


def _linear(cls: type, features: int = 6, outputs: int = 3) -> torch.nn.Module:
    torch.manual_seed(0)
    return cls(features, outputs, dtype=torch.float64)


def _measure_a1() -> list[Check]:
    from .divergence import measure_update

    x, g = _data(batch=1)
    m = measure_update(_linear(torch.nn.Linear), x, g, lr=0.1, kernel=False)
    predicted = -0.1 * (x.square().sum() + 1) * g
    return [
        Check("dz against -eta(|x|^2+1) g", _rel(m.effective, predicted)),
        Check(
            "dz against the ideal -eta g (the divergence)",
            _rel(m.effective, m.ideal),
            zero=False,
        ),
    ]


def _measure_a2() -> list[Check]:
    from .divergence import measure_update

    x, g = _data()
    m = measure_update(_linear(torch.nn.Linear), x, g, lr=0.1)
    K = x @ x.T + 1
    off = K - torch.diag(torch.diag(K))
    return [
        Check(
            "dz against -(eta/B) (XX^T+1) g", _rel(m.effective, -(0.1 / len(x)) * K @ g)
        ),
        Check("tangent kernel against XX^T + 1", _rel(m.kernel, K)),
        Check("cross-sample terms of the kernel", float(off.abs().max()), zero=False),
    ]


def _measure_a3() -> list[Check]:
    from .divergence import tangent_kernel
    from .layers import NormLikeLinear

    x, _ = _data()
    layer = _linear(NormLikeLinear)
    xh = x / x.norm(dim=1, keepdim=True)
    K = tangent_kernel(layer, x)
    with torch.no_grad():
        scaled = _rel(layer(3.7 * x), layer(x))
    return [
        Check("kernel against xh_i . xh_j + 1", _rel(K, xh @ xh.T + 1)),
        Check(
            "kernel diagonal against 2",
            _rel(torch.diag(K), torch.full((len(x),), 2.0, dtype=x.dtype)),
        ),
        Check("z(3.7 x) against z(x) (scale invariance)", scaled),
    ]


def _measure_a4() -> list[Check]:
    from .divergence import measure_each_sample, tangent_kernel
    from .layers import AffineLikeLinear

    x, g = _data()
    layer = _linear(AffineLikeLinear)
    aug = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
    aug = aug / aug.norm(dim=1, keepdim=True)
    each = max(
        _rel(m.effective, m.ideal) for m in measure_each_sample(layer, x, g, lr=0.1)
    )
    with torch.no_grad():
        scaled = _rel(layer(3.7 * x), layer(x))
    return [
        Check("single-sample dz against -eta g", each),
        Check(
            "kernel against the cosine Gram of [x; 1]",
            _rel(tangent_kernel(layer, x), aug @ aug.T),
        ),
        Check("z(3.7 x) against z(x) (not scale-invariant)", scaled, zero=False),
    ]


def _measure_a5() -> list[Check]:
    from .divergence import measure_each_sample
    from .layers import AffineLikeLinear, Gain

    x, g = _data()
    layer = torch.nn.Sequential(_linear(AffineLikeLinear), Gain(3, dtype=torch.float64))
    each = max(
        _rel(m.effective, m.ideal) for m in measure_each_sample(layer, x, g, lr=0.1)
    )
    return [
        Check(
            "single-sample dz against -eta g, gain after the correction",
            each,
            zero=False,
        )
    ]


def _measure_a6() -> list[Check]:
    from .divergence import measure_each_sample, tangent_kernel
    from .layers import PatchNormConv2d

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 5, 5, generator=gen, dtype=torch.float64)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(2, 3, 3, padding=1, dtype=torch.float64)
    patches = torch.nn.functional.unfold(x, 3, padding=1)[0].T  # (positions, C*k*k)
    plain = _rel(tangent_kernel(conv, x), patches @ patches.T + 1)
    torch.manual_seed(0)
    corrected = PatchNormConv2d(
        2, 3, 3, padding=1, mode="affine_like", dtype=torch.float64
    )
    K = tangent_kernel(corrected, x)
    g = torch.randn(corrected(x).shape, generator=gen, dtype=torch.float64)
    (m,) = measure_each_sample(corrected, x, g, lr=0.1)
    return [
        Check("conv kernel against patch_p . patch_q + 1", plain),
        Check(
            "PatchNorm kernel diagonal against 1",
            _rel(torch.diag(K), torch.ones(len(K), dtype=K.dtype)),
        ),
        Check(
            "PatchNorm single-sample dz against -eta g (partial correction)",
            _rel(m.effective, m.ideal),
            zero=False,
        ),
    ]


def _measure_a7() -> list[Check]:
    from .layers import Gain, L2Norm

    d = 16
    x, _ = _data(batch=8, features=d)
    rms = torch.nn.RMSNorm(d, eps=0.0, dtype=torch.float64)
    gain = Gain(d, dtype=torch.float64)
    with torch.no_grad():
        rms.weight.normal_(generator=torch.Generator().manual_seed(1))
        gain.weight.copy_(rms.weight)
        return [
            Check(
                "RMSNorm(x) against gain(sqrt(d) * L2(x))",
                _rel(rms(x), gain(math.sqrt(d) * L2Norm()(x))),
            )
        ]


# ----------------------------------------------------------- empirical quantities


_CONFIG = (
    "data",
    "budget",
    "optimizer",
    "activation",
    "width",
    "depth",
    "channels",
    "batch_size",
)


def at_chosen_lr(results: pd.DataFrame) -> pd.DataFrame:
    """Every seed's row at the learning rate chosen per configuration on the val split.

    A configuration is every present axis of :data:`_CONFIG` plus ``normaliser``; the chosen
    ``lr`` has the best mean ``val_metric`` across seeds (as
    :func:`normlab.experiments.select_best`); a NaN mean never wins.
    """
    from .experiments.runner import at_chosen_lr as chosen

    if results.empty:
        raise Unmeasurable("the results table is empty")
    return chosen(
        results, [c for c in (*_CONFIG, "normaliser") if c in results.columns]
    )


def _config(table: pd.DataFrame) -> list[str]:
    return [c for c in _CONFIG if c in table.columns]


def _wide(best: pd.DataFrame, value: str = "test_metric") -> pd.DataFrame:
    """One row per (configuration, seed), one column per normaliser."""
    return best.pivot_table(
        index=[*_config(best), "seed"], columns="normaliser", values=value
    )


def _require(wide: pd.DataFrame, names: Sequence[str]) -> None:
    missing = [n for n in names if n not in wide.columns]
    if missing:
        raise Unmeasurable(f"no runs of {', '.join(missing)}")


def _rival(best: pd.DataFrame, among: Sequence[str]) -> pd.Series:
    """Per (configuration, seed): the test metric of the rival among ``among`` with the best mean
    val metric in that configuration (chosen on val, so the test split picks nothing)."""
    higher = bool(best["higher_is_better"].iloc[0])
    config = _config(best)
    wide = _wide(best)
    among = [n for n in among if n in wide.columns]
    if not among:
        raise Unmeasurable("no runs of any rival")
    val = (
        best[best["normaliser"].isin(among)]
        .groupby([*config, "normaliser"])["val_metric"]
        .mean()
    )
    val = val.unstack("normaliser").fillna(-math.inf if higher else math.inf)
    pick = val.idxmax(axis=1) if higher else val.idxmin(axis=1)
    configs = wide.index.droplevel("seed")
    return pd.Series(
        [wide.at[idx, pick.loc[c]] for idx, c in zip(wide.index, configs)],
        index=wide.index,
    )


def _per_seed(series: pd.Series) -> dict[int, float]:
    """Average a (configuration, seed)-indexed series over configurations: one value per seed."""
    return {int(s): float(v) for s, v in series.groupby(level="seed").mean().items()}


def _diff(best: pd.DataFrame, a: str, b: str | Sequence[str]) -> np.ndarray:
    """Paired by seed: ``a`` minus ``b`` (a name, or the strongest rival among names), mean over configs."""
    wide = _wide(best)
    _require(wide, [a])
    other = (
        _rival(best, b) if not isinstance(b, str) else wide[b] if b in wide else None
    )
    if other is None:
        raise Unmeasurable(f"no runs of {b}")
    return paired_differences(_per_seed(wide[a]), _per_seed(other))


def _lead(best: pd.DataFrame) -> pd.Series:
    """The corrections' lead per (configuration, seed): best correction minus the strongest rival."""
    return _rival(best, CORRECTIONS) - _rival(best, PART1_RIVALS)


def _only(best: pd.DataFrame, **where: Any) -> pd.DataFrame:
    for key, value in where.items():
        if key not in best or value not in set(best[key]):
            raise Unmeasurable(f"no runs with {key}={value!r}")
        best = best[best[key] == value]
    return best


def _a8(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    return [
        Effect("affine_like - norm_like", _diff(best, "affine_like", "norm_like")),
        Effect(
            "norm_like - strongest of none/BN/LN/RMS/L2",
            _diff(best, "norm_like", PART1_RIVALS),
        ),
    ]


def _a9(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    lead = _lead(best).rename("lead").reset_index()
    effects = []
    if lead["width"].nunique() >= 2:
        by_width = lead.groupby(["width", "seed"], as_index=False)["lead"].mean()
        effects.append(
            Effect(
                "slope of the lead per doubling of width",
                slopes_log2(by_width, "width", "lead"),
            )
        )
    if lead["depth"].nunique() >= 2:
        depth = lead.groupby(["depth", "seed"])["lead"].mean()
        deep, shallow = depth.xs(lead["depth"].max()), depth.xs(lead["depth"].min())
        effects.append(
            Effect(
                "lead at the largest minus the smallest depth",
                paired_differences(deep.to_dict(), shallow.to_dict()),
            )
        )
    if not effects:
        raise Unmeasurable("the set has one width and one depth")
    return effects


def _a10(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    tanh, leaky = (
        _lead(_only(best, activation="tanh")),
        _lead(_only(best, activation="leaky_relu")),
    )
    return [
        Effect(
            "lead with tanh - lead with leaky-ReLU",
            paired_differences(_per_seed(tanh), _per_seed(leaky)),
        )
    ]


def _a11(results: pd.DataFrame) -> list[Effect]:
    best = _only(at_chosen_lr(results), depth=3, width=16)
    return [
        Effect(
            "norm_like - affine_like at depth 3, width 16",
            _diff(best, "norm_like", "affine_like"),
        )
    ]


def _per_optimizer(
    quantity: Callable[[pd.DataFrame], list[Effect]],
) -> Callable[[pd.DataFrame], list[Effect]]:
    """Apply ``quantity`` to each optimiser's runs when a set has several, labelling the effects.

    The derivation assumes SGD; chapter 6 also trains with Adam, so a verdict must say
    whether it holds for each. An optimiser whose runs cannot measure the quantity (one width,
    one activation) is left out; the set is unmeasurable only when no optimiser can.
    """

    def split(results: pd.DataFrame) -> list[Effect]:
        if "optimizer" not in results or results["optimizer"].nunique() < 2:
            return quantity(results)
        effects, missing = [], []
        for optimizer, part in results.groupby("optimizer", sort=True):
            try:
                effects += [
                    Effect(f"{e.label} ({optimizer})", e.samples, e.rule)
                    for e in quantity(part)
                ]
            except Unmeasurable as err:
                missing.append(f"{optimizer}: {err}")
        if not effects:
            raise Unmeasurable("; ".join(missing))
        return effects

    return split


def _slopes(
    results: pd.DataFrame, names: Sequence[str], rule: Rule | None = None
) -> list[Effect]:
    """Per budget convention and normaliser, one slope of test accuracy against log2(batch) per
    seed, at the learning rates of :func:`normlab.experiments.part1.batch_slopes` (chosen on val
    per batch size; for ``scaled_lr`` once at the base batch size, then scaled)."""
    from .experiments.part1 import batch_slopes

    if results["batch_size"].nunique() < 2:
        raise Unmeasurable("the set has one batch size")
    _, scores = batch_slopes(results)
    effects = []
    for budget in sorted(scores["budget"].unique()):
        part = scores[scores["budget"] == budget]
        for name in names:
            rows = part[part["normaliser"] == name]
            if rows.empty:
                raise Unmeasurable(f"no runs of {name}")
            label = f"{name}: slope per doubling of batch size ({budget})"
            effects.append(
                Effect(label, slopes_log2(rows, "batch_size", "test_metric"), rule)
            )
    return effects


SLOPE_MARGIN = 0.01  # accuracy per doubling of batch size: one point is "roughly flat"
ACCURACY_MARGIN = 0.01  # one accuracy point: "matches", "on par"


def _a12(results: pd.DataFrame) -> list[Effect]:
    return _slopes(results, CORRECTIONS)


def _a13(results: pd.DataFrame) -> list[Effect]:
    return [
        *_slopes(results, ["layernorm"], Equivalent(SLOPE_MARGIN)),
        *_slopes(results, ["batchnorm", "rmsnorm", "none"], AtLeast(SLOPE_MARGIN)),
    ]


def _a15(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    return [
        Effect(
            "affine_like - strongest scale-invariant normaliser",
            _diff(best, "affine_like", SCALE_INVARIANT),
        )
    ]


def _a14(results: pd.DataFrame) -> list[Effect]:
    """PatchNorm (its better mode, chosen on val) minus the stronger of LayerNorm and RMSNorm
    (chosen on val), per (configuration, seed), averaged over configurations per seed."""
    best = at_chosen_lr(results)
    lead = _rival(best, CORRECTIONS) - _rival(best, ("layernorm", "rmsnorm"))
    seeds = _per_seed(lead)
    return [
        Effect(
            "PatchNorm (better mode) - stronger of LayerNorm/RMSNorm",
            np.array([seeds[s] for s in sorted(seeds)]),
        )
    ]


# Part II: the ``data`` axis names the dataset; the paper's models are the named normalisers.
VISION = ("mnist", "fashion_mnist", "svhn", "cifar10", "cifar100", "cifar10_c")


def _on(
    data: str, a: str, b: str | Sequence[str]
) -> Callable[[pd.DataFrame], list[Effect]]:
    def quantity(results: pd.DataFrame) -> list[Effect]:
        best = _only(at_chosen_lr(results), data=data)
        rival = b if isinstance(b, str) else "strongest other"
        return [Effect(f"{a} - {rival} on {data}", _diff(best, a, b))]

    return quantity


def _part2_lead(best: pd.DataFrame, data: str) -> dict[int, float]:
    wide = _wide(_only(best, data=data))
    _require(wide, ["autonorm_s", "frozen_ln"])
    return _per_seed(wide["autonorm_s"] - wide["frozen_ln"])


def _n4(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    top = _part2_lead(best, "cifar100")
    others = {
        d: _part2_lead(best, d)
        for d in VISION
        if d != "cifar100" and d in set(best["data"])
    }
    if not others:
        raise Unmeasurable("no vision dataset besides cifar100")
    runner_up = max(others, key=lambda d: np.mean(list(others[d].values())))
    return [
        Effect(
            f"lead on cifar100 - lead on {runner_up} (the next largest)",
            paired_differences(top, others[runner_up]),
        )
    ]


def _n12(results: pd.DataFrame) -> list[Effect]:
    best = at_chosen_lr(results)
    effects = []
    for data in sorted(best["data"].unique()):
        wide = _wide(_only(best, data=data))
        _require(wide, ["autonorm_s", "frozen_ln"])
        relative = (wide["autonorm_s"] - wide["frozen_ln"]) / wide["frozen_ln"]
        effects.append(
            Effect(
                f"relative RMSE, autonorm_s vs frozen_ln, {_named(results, data)}",
                np.array(list(_per_seed(relative).values())),
            )
        )
    return effects


def _named(results: pd.DataFrame, task: str) -> str:
    """``task``, with the stand-in that served it when the set ran offline (named in every verdict)."""
    from .data.sources import OFFLINE_PROFILES, source

    profile = (
        str(results["profile"].iloc[0]) if "profile" in results and len(results) else ""
    )
    if profile in OFFLINE_PROFILES:
        return f"{task} (stand-in {source(task, profile).fit})"
    return task


def _versus(
    task: str, a: str, rivals: Sequence[str], value: str = "test_metric", what: str = ""
) -> Callable[[pd.DataFrame], list[Effect]]:
    """``a`` minus each of ``rivals`` in ``value`` on ``task``, paired by seed at the lr chosen on val."""

    def quantity(results: pd.DataFrame) -> list[Effect]:
        best = _only(at_chosen_lr(results), data=task)
        wide = _wide(best, value)
        _require(wide, [a, *rivals])
        return [
            Effect(
                f"{a} - {b}{what} on {_named(results, task)}",
                paired_differences(_per_seed(wide[a]), _per_seed(wide[b])),
            )
            for b in rivals
        ]

    return quantity


def _n7(results: pd.DataFrame) -> list[Effect]:
    task = str(results["data"].iloc[0]) if len(results) else "cifar10"
    return _versus(
        task,
        "autonorm_s",
        ["frozen_ln"],
        "mean_corruption_accuracy",
        " mean corruption accuracy",
    )(results)


GATE_VISION = (
    "fashion_mnist",
    "cifar10",
)  # the image task of autonorm_gates (stand-in, real)
LANGUAGE = ("ptb_pos", "sst2")


def _gates(results: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    vision = [d for d in GATE_VISION if d in set(results.get("data", ()))]
    if not vision or not set(LANGUAGE) <= set(results["data"]):
        raise Unmeasurable("the set needs gate runs on ptb_pos, sst2 and an image task")
    return results, vision[0]


def _gate_metric(results: pd.DataFrame, task: str, key: str) -> dict[int, float]:
    rows = results[results["data"] == task]
    return {int(s): float(v) for s, v in rows.groupby("seed")[key].mean().items()}


def _n10(results: pd.DataFrame) -> list[Effect]:
    results, vision = _gates(results)
    images = _gate_metric(results, vision, "entropy_mean")
    return [
        Effect(
            f"mean gate entropy over training, {_named(results, t)} - {_named(results, vision)}",
            paired_differences(_gate_metric(results, t, "entropy_mean"), images),
        )
        for t in LANGUAGE
    ]


def _n11(results: pd.DataFrame) -> list[Effect]:
    results, vision = _gates(results)
    effects = [
        Effect(
            f"final weight on LayerNorm - 1/2, {_named(results, vision)}",
            np.array(list(_gate_metric(results, vision, "p_ln_final").values())) - 0.5,
        )
    ]
    for task in LANGUAGE:
        effects.append(
            Effect(
                f"final gate entropy - eps_H ({EPS_H}), {_named(results, task)}",
                np.array(list(_gate_metric(results, task, "entropy_final").values()))
                - EPS_H,
            )
        )
        effects.append(
            Effect(
                f"slope of the final weight on DyT over relative depth, {_named(results, task)}",
                np.array(list(_gate_metric(results, task, "depth_slope").values())),
            )
        )
    return effects


# Part II gate studies (chapters 11 and 12): the ``arm`` axis of normlab.experiments.gate_study.
# The cpu sets use stand-ins: ``mnist`` (stationary digits) and ``mnist_restyled`` (the same
# digits, each in its own style: diverse); the GPU profiles add the real vision datasets.
# AutoNorm-S is the paper's rule (H >= 0.1 at T_freeze), composed from the autonorm and the
# freeze_at_<T> runs of the same set (gate_study.compose_schedule).


def _gate_best(results: pd.DataFrame) -> pd.DataFrame:
    """Every arm (AutoNorm-S composed in) at the lr chosen on val per (data, arm)."""
    from .experiments import gate_study

    if results.empty or "arm" not in results:
        raise Unmeasurable("no gate-study runs (an 'arm' column) in this table")
    table = results
    if gate_study.freeze_epochs(results["arm"].unique()) and "autonorm" in set(
        results["arm"]
    ):
        table = gate_study.with_schedules(results, EPS_H)
    return gate_study.chosen(table)


def _gate_seeds(
    best: pd.DataFrame, data: str, arm: str, value: str = "test_metric"
) -> dict[int, float]:
    rows = best[(best["data"] == data) & (best["arm"] == arm)]
    if rows.empty:
        raise Unmeasurable(f"no runs of {arm} on {data}")
    return {int(seed): float(v) for seed, v in zip(rows["seed"], rows[value])}


def _gate_diff(
    best: pd.DataFrame, data: str, a: str, b: str, value: str = "test_metric"
) -> Effect:
    suffix = "" if value == "test_metric" else f" ({value})"
    return Effect(
        f"{a} - {b} on {data}{suffix}",
        paired_differences(
            _gate_seeds(best, data, a, value), _gate_seeds(best, data, b, value)
        ),
    )


def _first(best: pd.DataFrame, *candidates: str) -> str:
    for data in candidates:
        if data in set(best["data"]):
            return data
    raise Unmeasurable(f"none of {', '.join(candidates)} in this set")


def _gate_lead(best: pd.DataFrame, data: str) -> dict[int, float]:
    s, f = _gate_seeds(best, data, "autonorm_s"), _gate_seeds(best, data, "frozen_ln")
    return {seed: s[seed] - f[seed] for seed in set(s) & set(f)}


def _n1_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    return [
        _gate_diff(
            best, _first(best, "cifar10", "mnist"), "autonorm", "autonorm_random"
        )
    ]


def _n2_gate(results: pd.DataFrame) -> list[Effect]:
    """Hottest against coldest temperature: the log of the gate's gradient SNR, and test accuracy."""
    if "tau" not in results or results["tau"].nunique() < 2:
        raise Unmeasurable("needs runs at two or more temperatures")
    from .experiments.runner import at_chosen_lr

    results = at_chosen_lr(results, ["data", "tau"], higher_is_better=True)
    hot, cold = results["tau"].max(), results["tau"].min()
    effects = []
    for data, part in results.groupby("data"):
        at = {
            tau: part[part["tau"] == tau]
            .groupby("seed")[["gate_snr", "test_metric"]]
            .mean()
            for tau in (hot, cold)
        }
        for column, transform, what in (
            ("gate_snr", math.log, "log gate SNR"),
            ("test_metric", float, "test accuracy"),
        ):
            per_seed = {
                tau: {int(k): transform(v) for k, v in at[tau][column].items()}
                for tau in at
            }
            effects.append(
                Effect(
                    f"{what} at tau {hot:g} - at tau {cold:g} on {data}",
                    paired_differences(per_seed[hot], per_seed[cold]),
                )
            )
    return effects


def _n3_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    data = _first(best, "cifar10", "mnist_restyled")
    return [
        _gate_diff(best, data, "autonorm_s", "frozen_ln"),
        _gate_diff(best, data, "autonorm_s", "autonorm"),
    ]


def _n5_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    found = [d for d in ("mnist", "fashion_mnist") if d in set(best["data"])]
    if not found:
        raise Unmeasurable("no MNIST-like dataset in this set")
    return [_gate_diff(best, d, "autonorm_s", "frozen_ln") for d in found]


def _n13_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    return [
        _gate_diff(best, data, "autonorm", "autonorm_hard", "val_curve_mean")
        for data in sorted(set(best["data"]))
    ]


def _n14_gate(results: pd.DataFrame) -> list[Effect]:
    best = _gate_best(results)
    present = set(best["data"])
    if {"cifar100", "cifar10"} <= present:
        pairs = [
            ("cifar100", "cifar10"),
            *[("cifar10", d) for d in ("mnist", "fashion_mnist") if d in present],
        ]
    elif {"mnist_restyled", "mnist"} <= present:
        pairs = [("mnist_restyled", "mnist")]
    else:
        raise Unmeasurable("needs a diverse and a stationary task")
    return [
        Effect(
            f"lead of autonorm_s over frozen_ln on {a} - on {b}",
            paired_differences(_gate_lead(best, a), _gate_lead(best, b)),
        )
        for a, b in pairs
    ]


# ---------------------------------------------------------------------- the claims

_A, _N = "I", "II"
_PAIRED = (
    "paired by seed at the lr chosen on val per configuration, mean over configurations"
)

for _claim in [
    Claim(
        "A1",
        _A,
        "exact",
        "One SGD step on an affine layer z = Wx + b moves z by -eta (|x|^2 + 1) g, not the "
        "ideal -eta g.",
        2,
        test=Measurement(
            _measure_a1, "relative deviation of a real SGD step from the formula"
        ),
    ),
    Claim(
        "A2",
        _A,
        "exact",
        "In a batch, the effective update is -(eta/B) sum_j (x_i . x_j + 1) g_j: kernel XX^T + 1, "
        "with cross-sample terms.",
        2,
        test=Measurement(_measure_a2, "real step and tangent kernel against XX^T + 1"),
    ),
    Claim(
        "A3",
        _A,
        "exact",
        "Norm-like correction W (x/|x|) + b: kernel xh_i . xh_j + 1, diagonal exactly 2; "
        "scale-invariant, loses the radial degree of freedom.",
        3,
        test=Measurement(_measure_a3, "tangent kernel and outputs under rescaling"),
    ),
    Claim(
        "A4",
        _A,
        "exact",
        "Affine-like correction (Wx + b)/sqrt(|x|^2 + 1): single-sample update exactly -eta g "
        "(kernel = cosine Gram of [x; 1]); not scale-invariant.",
        3,
        test=Measurement(
            _measure_a4, "single-sample steps, tangent kernel, outputs under rescaling"
        ),
    ),
    Claim(
        "A5",
        _A,
        "exact",
        "A learned scale placed after the correction breaks the exact cancellation.",
        3,
        test=Measurement(
            _measure_a5, "single-sample step of affine-like followed by a gain"
        ),
    ),
    Claim(
        "A6",
        _A,
        "exact",
        "In a convolution, shared weights couple output positions p, q through "
        "patch_p . patch_q + 1, so the single-sample correction is only partial.",
        4,
        test=Measurement(
            _measure_a6,
            "conv tangent kernel; PatchNorm kernel diagonal and single-sample step",
        ),
    ),
    Claim(
        "A7",
        _A,
        "conceptual",
        "A normaliser is better seen as a nonlinear, activation-like map plus a "
        "parameterised scale (e.g. RMSNorm = sqrt(d) * L2 map, then a gain).",
        3,
        test=Measurement(
            _measure_a7, "RMSNorm against sqrt(d) L2 then a gain", tolerance=1e-12
        ),
    ),
    Claim(
        "A8",
        _A,
        "empirical",
        "Fully-connected nets on CIFAR-10: affine-like is best, norm-like next, both ahead of "
        "none, BatchNorm, LayerNorm, RMSNorm and L2.",
        6,
        test=Test(
            "fc_normalisers",
            _per_optimizer(_a8),
            Directional(+1),
            f"test accuracy differences, {_PAIRED}",
        ),
    ),
    Claim(
        "A9",
        _A,
        "empirical",
        "The lead of the corrections grows with depth and width.",
        6,
        test=Test(
            "fc_normalisers",
            _per_optimizer(_a9),
            Directional(+1),
            "the lead (best correction minus the strongest rival, chosen on val) against log2 width, "
            "and deepest minus shallowest, per seed",
        ),
    ),
    Claim(
        "A10",
        _A,
        "empirical",
        "The lead is clearest with tanh (against leaky-ReLU).",
        6,
        test=Test(
            "fc_normalisers",
            _per_optimizer(_a10),
            Directional(+1),
            f"lead with tanh minus lead with leaky-ReLU, {_PAIRED}",
        ),
    ),
    Claim(
        "A11",
        _A,
        "empirical",
        "One exception: 3 layers, width 16, where norm-like is slightly ahead of "
        "affine-like.",
        6,
        test=Test(
            "fc_normalisers",
            _per_optimizer(_a11),
            Directional(+1),
            "norm_like minus affine_like at depth 3, width 16",
        ),
    ),
    Claim(
        "A12",
        _A,
        "empirical",
        "Accuracy falls as the batch size grows for norm-like and affine-like "
        "(significant negative slopes).",
        7,
        test=Test(
            "batch_size",
            _a12,
            Directional(-1),
            "per seed, the least-squares slope of test accuracy against log2(batch size), per budget",
        ),
    ),
    Claim(
        "A13",
        _A,
        "empirical",
        "LayerNorm is roughly flat over batch size; BatchNorm, RMSNorm and no "
        "normalisation are flat or rising.",
        7,
        test=Test(
            "batch_size",
            _a13,
            AtLeast(SLOPE_MARGIN),
            f"slopes per doubling of batch size; LayerNorm within ±{SLOPE_MARGIN} (equivalence), the others "
            f"at least -{SLOPE_MARGIN}",
        ),
    ),
    Claim(
        "A14",
        _A,
        "empirical",
        "In convolutional nets, PatchNorm is roughly on par with LayerNorm and RMSNorm, "
        "with smaller margins than in fully-connected nets.",
        8,
        test=Test(
            "cnn_normalisers",
            _a14,
            Equivalent(ACCURACY_MARGIN),
            f"PatchNorm's better mode minus the stronger of LayerNorm and RMSNorm, {_PAIRED}; margin "
            f"{ACCURACY_MARGIN} (the margins in fully-connected nets are compared in the chapter, not "
            f"judged)",
        ),
    ),
    Claim(
        "A15",
        _A,
        "empirical",
        "Affine-like, which is not scale-invariant, matches or beats the scale-invariant "
        "normalisers: scale invariance is not what makes normalisation work.",
        6,
        test=Test(
            "fc_normalisers",
            _per_optimizer(_a15),
            AtLeast(ACCURACY_MARGIN),
            f"affine_like minus the strongest scale-invariant normaliser, {_PAIRED}; margin {ACCURACY_MARGIN}",
        ),
    ),
    Claim(
        "N1",
        _N,
        "empirical",
        "On stationary vision, the learned gate (AutoNorm, unfrozen) does worse than the "
        "Random Selector: the stabilisation bottleneck.",
        11,
        {"AutoNorm (CIFAR-10)": 84.35, "Random": 85.48},
        test=Test(
            "gate_bottleneck",
            _n1_gate,
            Directional(-1),
            "autonorm minus autonorm_random test accuracy, paired by seed, lr chosen on val (CIFAR-10 when "
            "present, else the stationary digits)",
        ),
    ),
    Claim(
        "N2",
        _N,
        "empirical",
        "The cause: the Gumbel-Softmax gate's gradient variance is high, so gates cannot "
        "specialise before the backbone's features mature.",
        11,
        test=Test(
            "gate_tau",
            _n2_gate,
            Directional(+1),
            "hottest minus coldest Gumbel-Softmax temperature, paired by seed: the log of the gate's median "
            "gradient SNR, and test accuracy (a quieter gradient should let the gate help)",
        ),
    ),
    Claim(
        "N3",
        _N,
        "empirical",
        "AutoNorm-S recovers and leads on CIFAR-10.",
        12,
        {
            "AutoNorm-S": 86.35,
            "AutoNorm-S CI": 0.22,
            "FrozenLN": 82.97,
            "AdaNorm": 84.20,
        },
        test=Test(
            "gate_bottleneck",
            _n3_gate,
            Directional(+1),
            f"autonorm_s (the paper's rule, eps_H {EPS_H:g}) minus frozen_ln and minus autonorm, paired by seed, on "
            "CIFAR-10 when present, else the restyled (diverse) digits",
        ),
    ),
    Claim(
        "N4",
        _N,
        "empirical",
        "CIFAR-100: AutoNorm-S has its largest vision lead.",
        15,
        {"AutoNorm-S": 67.15, "FrozenLN": 64.82},
        test=Test(
            "autonorm_vision",
            _n4,
            Directional(+1),
            "lead over frozen_ln on CIFAR-100 minus the next largest vision lead",
            "standard",
        ),
    ),
    Claim(
        "N5",
        _N,
        "empirical",
        "MNIST and Fashion-MNIST: no real gain (within the CI, or FrozenLN ahead).",
        12,
        {
            "MNIST AutoNorm-S": 99.18,
            "MNIST CI": 0.10,
            "MNIST FrozenLN": 98.82,
            "MNIST AdaNorm": 98.95,
            "F-MNIST AutoNorm-S": 92.95,
            "F-MNIST FrozenLN": 93.12,
            "F-MNIST AdaNorm": 92.48,
        },
        test=Test(
            "gate_bottleneck",
            _n5_gate,
            AtLeast(0.005, direction=-1),
            "autonorm_s minus frozen_ln on MNIST-like data; no gain beyond 0.005 (half an accuracy point)",
        ),
    ),
    Claim(
        "N6",
        _N,
        "empirical",
        "SVHN: AdaNorm is best.",
        15,
        {"AdaNorm": 91.10, "FrozenLN": 90.37, "AutoNorm-S": 89.38},
        test=Test(
            "autonorm_vision",
            _on("svhn", "adanorm", [n for n in PART2 if n != "adanorm"]),
            Directional(+1),
            "adanorm minus the strongest other normaliser (chosen on val) on SVHN",
            "standard",
        ),
    ),
    Claim(
        "N7",
        _N,
        "empirical",
        "AutoNorm-S is more robust to corruption, significantly (p < 0.05).",
        15,
        {"AutoNorm-S CIFAR-10-C": 72.8, "FrozenLN": 68.2, "AdaNorm": 70.8},
        test=Test(
            "autonorm_robustness",
            _n7,
            Directional(+1),
            "autonorm_s minus frozen_ln mean corruption accuracy (clean training; every corruption and "
            "severity weighted alike), paired by seed at the lr chosen on clean val",
        ),
    ),
    Claim(
        "N8",
        _N,
        "empirical",
        "PTB POS tagging: AutoNorm-S ahead (p < 0.01), lower perplexity.",
        13,
        {
            "AutoNorm-S": 97.42,
            "FrozenLN": 96.80,
            "AdaNorm": 97.15,
            "FiLM": 96.72,
            "AutoNorm-S ppl": 38.6,
            "FrozenLN ppl": 41.9,
        },
        test=Test(
            "autonorm_language",
            _versus("ptb_pos", "autonorm_s", ["frozen_ln"], what=" token accuracy"),
            Directional(+1),
            "autonorm_s minus frozen_ln token accuracy, paired by seed at the lr chosen on "
            "val (the perplexity half: chapter 13's bound)",
        ),
    ),
    Claim(
        "N9",
        _N,
        "empirical",
        "SST-2: AutoNorm-S ahead.",
        13,
        {"AutoNorm-S": 91.25, "FrozenLN": 89.42, "AdaNorm": 90.15, "FiLM": 88.95},
        test=Test(
            "autonorm_language",
            _versus("sst2", "autonorm_s", ["frozen_ln"], what=" accuracy"),
            Directional(+1),
            "autonorm_s minus frozen_ln sentence accuracy, paired by seed at the lr chosen "
            "on val",
        ),
    ),
    Claim(
        "N10",
        _N,
        "empirical",
        "Language gate entropy stays high for longer than vision's.",
        13,
        test=Test(
            "autonorm_gates",
            _n10,
            Directional(+1),
            "learned AutoNorm, one budget: mean gate entropy over layers and epochs, each language task "
            "minus the image task, seeds paired by index (independent runs)",
        ),
    ),
    Claim(
        "N11",
        _N,
        "empirical",
        "Per-layer gates: vision collapses to LayerNorm quickly; language keeps a mixed "
        "gate, deeper layers preferring DyT.",
        13,
        test=Test(
            "autonorm_gates",
            _n11,
            Directional(+1),
            f"at the last epoch: image p_LN - 1/2; per language task, gate entropy - eps_H ({EPS_H}) and the "
            "slope of p_DyT over relative depth; every part must hold",
        ),
    ),
    Claim(
        "N12",
        _N,
        "empirical",
        "Tabular regression: negligible differences.",
        14,
        {
            "California AutoNorm-S": 0.4892,
            "California FrozenLN": 0.4905,
            "Energy AutoNorm-S": 22.75,
            "Energy AdaNorm": 22.78,
            "Energy FiLM": 22.82,
        },
        test=Test(
            "autonorm_tabular",
            _n12,
            Equivalent(0.02),
            "relative RMSE difference (autonorm_s - frozen_ln)/frozen_ln; equivalent within ±2 %",
        ),
    ),
    Claim(
        "N13",
        _N,
        "empirical",
        "Hard (straight-through) gating converges slower than soft gating.",
        11,
        test=Test(
            "gate_bottleneck",
            _n13_gate,
            Directional(+1),
            "soft minus hard gate: mean validation accuracy over the epochs (area under the learning curve), "
            "paired by seed",
        ),
    ),
    Claim(
        "N14",
        _N,
        "empirical",
        "Adaptive selection helps only when features are non-stationary: the lead orders "
        "CIFAR-100 > CIFAR-10 > MNIST / Fashion-MNIST.",
        12,
        test=Test(
            "gate_bottleneck",
            _n14_gate,
            Directional(+1),
            "lead of autonorm_s over frozen_ln on the more diverse data minus on the less diverse, paired by "
            "seed (CIFAR-100 > CIFAR-10 > MNIST on a GPU; restyled > plain digits on the CPU)",
        ),
    ),
]:
    _declare(_claim)


# ------------------------------------------------------------------------ evaluation


@dataclass
class Outcome:
    """A claim's verdict (or status), the effects behind it and where they come from."""

    claim: Claim
    verdict: str
    effects: list[tuple[str, Interval, str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def chapter_notebook(number: int, book: str | Path | None = None) -> Path | None:
    """The chapter's notebook ``book/NN_*.ipynb``, or None when it is not written yet."""
    found = sorted(Path(book or BOOK).glob(f"{number:02d}_*.ipynb"))
    return found[0] if found else None


def judge(claim: Claim, results: pd.DataFrame) -> Outcome:
    """Apply a claim's empirical test to a results table (e.g. a chapter's live run)."""
    if not isinstance(claim.test, Test):
        raise ValueError(f"claim {claim.id} has no empirical test")
    try:
        effects = claim.test.quantity(results)
    except Unmeasurable as err:
        return Outcome(claim, INCONCLUSIVE, note=f"not measurable in this set: {err}")
    rows = []
    for effect in effects:
        ci = interval(effect.samples)
        rows.append((effect.label, ci, (effect.rule or claim.test.rule).verdict(ci)))
    return Outcome(claim, combine([v for _, _, v in rows]), effects=rows)


def evaluate(
    claim: Claim | str,
    *,
    root: str | Path | None = None,
    book: str | Path | None = None,
) -> Outcome:
    """A claim's outcome: run its measurement, or judge the largest saved set of its experiment.

    ``not yet tested`` while the claim has no test or its chapter is not written (only
    checked where the book's folder exists); ``needs the <profile> profile`` while no saved
    set of at least the test's ``min_profile`` exists, with the command that makes one.
    """
    claim = get(claim) if isinstance(claim, str) else claim
    book_dir = Path(book or BOOK)
    if claim.test is None:
        return Outcome(
            claim,
            NOT_YET_TESTED,
            note=f"no test is attached yet (chapter {claim.chapter})",
        )
    if book_dir.is_dir() and chapter_notebook(claim.chapter, book_dir) is None:
        return Outcome(
            claim, NOT_YET_TESTED, note=f"chapter {claim.chapter} is not written yet"
        )
    if isinstance(claim.test, Measurement):
        checks = claim.test.measure()
        ok = all(
            c.value <= claim.test.tolerance if c.zero else c.value > claim.test.nonzero
            for c in checks
        )
        return Outcome(
            claim,
            SUPPORTED if ok else CONTRADICTED,
            checks=checks,
            source={"profile": "exact", "data": "float64 measurement"},
        )
    test = claim.test
    saved = saved_results.largest(test.experiment, root)
    if saved is None or PROFILES.index(saved.profile) < PROFILES.index(
        test.min_profile
    ):
        command = (
            f"python -m normlab save {test.experiment} --profile {test.min_profile}"
        )
        return Outcome(claim, f"needs the {test.min_profile} profile", note=command)
    outcome = judge(claim, saved.results)
    outcome.source = {
        "profile": saved.profile,
        "data": saved.manifest["data"],
        "label": saved.label(),
    }
    return outcome


def _ours(outcome: Outcome) -> str:
    if outcome.checks:
        return "; ".join(f"{c.label}: {c.value:.1e}" for c in outcome.checks)
    return (
        "; ".join(
            f"{label}: {ci.mean:+.4f} ± {ci.half:.4f}"
            for label, ci, _ in outcome.effects
        )
        or outcome.note
    )


def _paper(claim: Claim) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in claim.paper.items()) or "-"


def scorecard(
    *,
    root: str | Path | None = None,
    book: str | Path | None = None,
    outcomes: Sequence[Outcome] | None = None,
) -> pd.DataFrame:
    """One row per claim: id, part, kind, claim, paper's number, ours, n, profile, data, verdict, chapter."""
    outcomes = (
        outcomes
        if outcomes is not None
        else [evaluate(i, root=root, book=book) for i in ids()]
    )
    rows = []
    for out in outcomes:
        c = out.claim
        n = sorted({ci.n for _, ci, _ in out.effects})
        rows.append(
            {
                "id": c.id,
                "part": c.part,
                "kind": c.kind,
                "claim": c.sentence,
                "paper": _paper(c),
                "ours": _ours(out),
                "n": ",".join(map(str, n)) if n else "",
                "profile": out.source.get("profile", ""),
                "data": out.source.get("data", ""),
                "verdict": out.verdict,
                "chapter": c.chapter,
                "rule": c.rule_words,
                "note": out.note,
            }
        )
    return pd.DataFrame(rows)


def verdict_table(
    claim_ids: Sequence[str],
    *,
    live: pd.DataFrame | None = None,
    root: str | Path | None = None,
) -> pd.DataFrame:
    """A chapter's verdict table: one row per effect of each claim, judged on the largest saved set.

    Columns: ``id``, ``claim``, ``effect``, ``ours`` (mean ± 95 % CI across seeds), ``n``,
    ``profile``, ``data``, ``verdict`` (of the effect) and ``claim verdict``. With ``live``
    (a chapter's live results table) a ``live run`` column shows the same quantity measured
    there, which never decides a verdict.
    """
    rows = []
    for claim_id in claim_ids:
        claim = get(claim_id)
        outcome = evaluate(claim, root=root)
        seen = {}
        if live is not None and isinstance(claim.test, Test):
            seen = {label: str(ci) for label, ci, _ in judge(claim, live).effects}
        effects = outcome.effects or [(outcome.note, None, outcome.verdict)]
        for label, ci, verdict in effects:
            row = {
                "id": claim.id,
                "claim": claim.sentence,
                "effect": label,
                "ours": f"{ci.mean:+.4f} ± {ci.half:.4f}" if ci is not None else "",
                "n": ci.n if ci is not None else "",
                "profile": outcome.source.get("profile", ""),
                "data": outcome.source.get("data", ""),
                "verdict": verdict,
                "claim verdict": outcome.verdict,
            }
            if live is not None:
                row["live run"] = seen.get(label, "not measurable")
            rows.append(row)
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    """A table as GitHub/MyST Markdown (``|`` in cells escaped), without extra dependencies."""

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(map(cell, table.columns)) + " |",
        "|" + "---|" * len(table.columns),
    ]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |"
        for row in table.itertuples(index=False)
    ]
    return "\n".join(lines) + "\n"


def forest(outcomes: Sequence[Outcome], ax: Any = None) -> Any:
    """Effect sizes with 95 % CIs, one row per effect of every judged empirical claim.

    Returns the figure; with nothing judged yet it says so instead of drawing an empty axis.
    """
    import matplotlib.pyplot as plt

    rows = [
        (f"{o.claim.id}: {label}", ci, verdict)
        for o in outcomes
        for label, ci, verdict in o.effects
    ]
    if ax is None:
        _, ax = plt.subplots(
            figsize=(8, max(2.0, 0.35 * len(rows) + 1)), layout="constrained"
        )
    if not rows:
        ax.text(
            0.5,
            0.5,
            "No empirical claim has a saved result set yet:\nevery one is 'not yet tested' or "
            "needs a larger profile.",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        return ax.figure
    colours = {SUPPORTED: "#009E73", CONTRADICTED: "#D55E00", INCONCLUSIVE: "#7F7F7F"}
    for y, (_, ci, verdict) in enumerate(rows):
        half = ci.half if math.isfinite(ci.half) else 0.0
        ax.errorbar(ci.mean, y, xerr=half, fmt="o", color=colours[verdict], capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("effect (mean ± 95 % CI across seeds; units of the claim's quantity)")
    for verdict, colour in colours.items():
        ax.plot([], [], "o", color=colour, label=verdict)
    ax.legend(loc="best", fontsize=8)
    return ax.figure


# ---------------------------------------------------------------- chapter 16's tables

_PART_COLUMNS = (
    "id",
    "claim",
    "paper",
    "ours",
    "n",
    "profile",
    "data",
    "verdict",
    "chapter",
)


def chapter_link(number: int, book: str | Path | None = None) -> str:
    """A Markdown link ``[N](NN_name.ipynb)`` to chapter ``number``'s notebook, or the bare
    number while the chapter is not written (:func:`chapter_notebook`)."""
    positive_int("number", number)
    path = chapter_notebook(number, book)
    return f"[{number}]({path.name})" if path is not None else str(number)


def part_markdown(
    card: pd.DataFrame, part: str, *, book: str | Path | None = None
) -> str:
    """The rows of ``card`` (a :func:`scorecard`) for Part ``part`` (``"I"`` or ``"II"``) as
    a Markdown table of id, claim, paper, ours, n, profile, data, verdict and chapter, each
    chapter number linked to its notebook (:func:`chapter_link`)."""
    one_of("part", part, ("I", "II"))
    if not isinstance(card, pd.DataFrame) or not {"part", *_PART_COLUMNS} <= set(
        card.columns
    ):
        raise ValueError(
            f"card must be a scorecard table with the columns part, {', '.join(_PART_COLUMNS)}"
        )
    rows = card[card["part"] == part]
    linked = rows.assign(chapter=[chapter_link(int(n), book) for n in rows["chapter"]])
    return markdown(linked[list(_PART_COLUMNS)])
