"""How robust a verdict is to the choices behind it: the rate chosen on validation, and the
specification the claim is judged under.

:func:`rate_choices` finds every compared arm whose runner-up rate is within validation
noise of its chosen one (the two rates' paired validation difference has a 95 % interval
that holds zero) and judges the claim again at the runner-up; :func:`specification_flips`
judges it under each declared specification of its set
(:func:`normlab.experiments.part1.specifications`) and keeps those whose effects' verdicts
differ from the primary one's; :func:`regime_flips` does the same across the other
experiments its test declares as regimes (``Test.regimes``).
:func:`normlab.claims.evaluate` attaches both to an
outcome, so the scorecard shows a verdict at both rates and says "specification-dependent"
where a declared specification flips it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..stats import interval
from .pairing import CONFIG
from .registry import Claim
from .rules import VERDICTS

__all__ = [
    "MAX_CHOICES",
    "MAX_RECHOICES",
    "RateChoice",
    "close_runner_ups",
    "rate_choices",
    "regime_flips",
    "specification_flips",
]

#: The most arms a claim is judged again for at their runner-up rates (the closest first),
#: and the most rate choices its compared arms may make for it to be checked at all: a
#: verdict averaged over many cells rests on no one choice.
MAX_RECHOICES = 4
MAX_CHOICES = 4


@dataclass(frozen=True)
class RateChoice:
    """One arm's rate choice within validation noise: the chosen and runner-up rates,
    their paired validation gap (chosen minus runner-up, per seed) and its 95 % half-width,
    and the claim's verdict in words at the runner-up."""

    arm: str
    config: dict[str, Any]
    chosen: float
    runner_up: float
    gap: float
    half: float
    says: str = ""

    @property
    def words(self) -> str:
        where = ", ".join(f"{k} {v}" for k, v in self.config.items())
        return (
            f"{self.arm}{f' ({where})' if where else ''} at its runner-up rate "
            f"{self.runner_up:g} (validation {self.gap:+.4f} ± {self.half:.4f} from "
            f"{self.chosen:g}): {self.says}"
        )


def _arm_column(table: pd.DataFrame) -> str | None:
    for column in ("arm", "normaliser"):
        if column in table:
            return column
    return None


def close_runner_ups(
    table: pd.DataFrame, arms: tuple[str, ...], by: str
) -> list[RateChoice]:
    """Each group (configuration and arm of ``arms``) whose best rate on mean validation
    and its runner-up differ by less than their paired difference's 95 % half-width
    across the seeds both ran (a choice that the validation split cannot tell apart),
    the closest first."""
    higher = (
        bool(table["higher_is_better"].iloc[0]) if "higher_is_better" in table else True
    )
    config = [c for c in CONFIG if c in table and c != by]
    rows = table[table[by].isin(arms)]
    found = []
    for key, group in rows.groupby([*config, by], sort=True, dropna=False):
        means = group.groupby("lr")["val_metric"].mean().dropna()
        if len(means) < 2:
            continue
        order = means.sort_values(ascending=not higher).index
        best, second = float(order[0]), float(order[1])
        wide = group.pivot_table(index="seed", columns="lr", values="val_metric")
        gap = (wide[best] - wide[second]).dropna()
        ci = interval(gap.to_numpy(dtype=float))
        if not ci.defined or abs(ci.mean) >= ci.half:
            continue
        values = key if isinstance(key, tuple) else (key,)
        where = dict(zip(config, values[:-1]))
        shown = {k: v for k, v in where.items() if rows[k].nunique() > 1}
        found.append(RateChoice(str(values[-1]), shown, best, second, ci.mean, ci.half))
    return sorted(found, key=lambda c: abs(c.gap) / c.half)


def rate_choices(
    claim: Claim,
    table: pd.DataFrame,
    arms: tuple[str, ...],
    judge: Callable[[Claim, pd.DataFrame], Any],
) -> list[RateChoice]:
    """The claim judged again with each close arm (:func:`close_runner_ups`, at most
    :data:`MAX_RECHOICES`) at its runner-up rate: the chosen rate's runs of that group
    are set aside, so the choice falls to the runner-up. Empty for a table without rates,
    validation metrics or an arm column, or whose arms make more than
    :data:`MAX_CHOICES` rate choices."""
    by = _arm_column(table)
    if by is None or not {"lr", "val_metric", "seed"} <= set(table) or not arms:
        return []
    config = [c for c in CONFIG if c in table and c != by]
    rows = table[table[by].isin(arms)]
    if rows.empty or len(rows.drop_duplicates([*config, by])) > MAX_CHOICES:
        return []
    found = []
    for choice in close_runner_ups(table, arms, by)[:MAX_RECHOICES]:
        group = table[by] == choice.arm
        for key, value in choice.config.items():
            group &= table[key] == value
        moved = table[~(group & (table["lr"] == choice.chosen))]
        try:
            found.append(_with(choice, judge(claim, moved).says))
        except ValueError:  # an arm composed from others' runs (AutoNorm-S) needs them
            continue
    return found


def _with(choice: RateChoice, says: str) -> RateChoice:
    return RateChoice(
        choice.arm,
        choice.config,
        choice.chosen,
        choice.runner_up,
        choice.gap,
        choice.half,
        says,
    )


def specification_flips(
    claim: Claim,
    table: pd.DataFrame,
    outcome: Any,
    judge: Callable[[Claim, pd.DataFrame], Any],
) -> list[dict[str, Any]]:
    """Each declared specification of the set other than the primary one
    (:func:`normlab.experiments.part1.specifications`) under which an effect the primary
    judged gets another verdict (of :data:`~normlab.claims.VERDICTS`: a
    specification that gives no verdict, at the ceiling or untrained, flips nothing):
    ``{"specification": ..., "says": ..., "effects": {label: verdict}}``."""
    from ..experiments.part1 import FC_PRIMARY, SPEC_AXES, specifications

    if not any(a in table and table[a].nunique() > 1 for a in SPEC_AXES):
        return []
    specs = specifications(table)
    if any(specs[0][a] != v for a, v in FC_PRIMARY.items() if a in specs[0]):
        return []  # the set holds no run of the primary specification
    primary = {j.label: j.verdict for j in outcome.judged}
    flips = []
    for spec in specs[1:]:
        part = table
        for axis, value in spec.items():
            part = part[part[axis] == value]
        other = judge(claim, part)
        changed = {
            j.label: j.verdict
            for j in other.judged
            if j.label in primary
            and j.verdict in VERDICTS
            and j.verdict != primary[j.label]
        }
        if changed:
            shown = {k: v for k, v in spec.items() if v != specs[0][k]}
            flips.append(
                {"specification": shown, "says": other.says, "effects": changed}
            )
    return flips


def _keys(claim: Claim, table: pd.DataFrame) -> dict[str, str]:
    """Each effect's label in ``table``, mapped to its label without the regime."""
    return {e.label: e.key for e in claim.test.quantity(table)}


def regime_flips(
    claim: Claim,
    table: pd.DataFrame,
    outcome: Any,
    judge: Callable[[Claim, pd.DataFrame], Any],
    others: dict[str, pd.DataFrame],
) -> list[dict[str, Any]]:
    """Each other regime (``others``: a declared regime's name and its set's results
    table) in which an effect the primary judged gets another verdict (of
    :data:`~normlab.claims.VERDICTS`), matched by its label without the regime:
    ``{"specification": {"regime": name}, "says": ..., "effects": {label: verdict}}``,
    the labels the other regime's, so each names the regime it was measured in."""
    primary_keys = _keys(claim, table)
    primary = {primary_keys[j.label]: j.verdict for j in outcome.judged}
    flips = []
    for name, other_table in others.items():
        other = judge(claim, other_table)
        if not other.judged:
            continue
        keys = _keys(claim, other_table)
        changed = {
            j.label: j.verdict
            for j in other.judged
            if keys[j.label] in primary
            and j.verdict in VERDICTS
            and j.verdict != primary[keys[j.label]]
        }
        if changed:
            flips.append(
                {
                    "specification": {"regime": name},
                    "says": other.says,
                    "effects": changed,
                }
            )
    return flips
