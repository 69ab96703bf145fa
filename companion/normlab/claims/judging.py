"""Judging the claims: a claim's :class:`Outcome` from a saved set or a chapter's table.

:func:`evaluate` gives a claim's :class:`Outcome` from the largest saved result set of its
experiment (:mod:`normlab.results`), or :func:`judge` from a table a chapter passes in. Before
any rule, the learnability rule (:func:`normlab.claims.rules.trained`) checks every compared
arm. Each effect's interval holds the seeds' spread and the test set's own noise
(:func:`normlab.stats.accuracy_item_variance`), at its level under Holm's correction across
the claim's effects; each effect carries its margin (:mod:`normlab.claims.plans`), its
minimum detectable effect, and, when inconclusive, the seeds (and, where the test set is too
small for any number of seeds, the test items) that would resolve it (:class:`Judged`).
Every outcome names what it was tested on: the paper's dataset, or a stand-in (a mechanism
test). The scorecard's records are :mod:`normlab.claims.records`; the chapters' tables and
Markdown, :mod:`normlab.claims.rendering`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import results as saved_results
from .. import stats
from .._runtime import PROFILES
from ..run_tables import duplicated_runs
from ..stats import Interval, interval
from . import plans, robust
from .plans import data_words
from .registry import Check, Claim, Effect, Measurement, Test, Unmeasurable, get
from .rules import (
    AT_CEILING,
    CEILING,
    CONCEPTUAL,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TRAINED,
    NOT_YET_TESTED,
    SIGN_CONTRADICTED,
    SUPPORTED,
    Equivalent,
    Rule,
    at_ceiling,
    combine,
    holm_intervals,
    trained,
    trained_margin,
    verdict_words,
)

__all__ = [
    "chapter_notebook",
    "evaluate",
    "judge",
    "Judged",
    "Outcome",
    "planned_from",
    "primary_source",
    "specification_curve",
    "tested_on",
]


@dataclass(frozen=True)
class Judged:
    """One effect, judged: what its verdict read and what it can resolve.

    ``interval`` is the interval the verdict read (seeds and test items, at ``confidence``,
    its level under Holm's correction); ``seeds_only`` the 95 % interval of the seeds'
    spread alone, as before the test set's noise was counted; ``item_var`` that noise's
    variance (0 where the effect is not an accuracy: ``note`` says so). ``margin`` is the
    smallest effect that matters (in ``units``), ``mde`` the minimum detectable effect at
    80 % power and this level, ``n`` the seeds. For an inconclusive effect, ``n_needed``
    is the seeds that would resolve it (each rule's ``seeds_to_resolve``):
    at this test set of ``n_test`` items, or, where its noise alone is too large for any
    number of seeds, at ``n_test_needed`` items; both None once resolved.
    """

    label: str
    verdict: str
    interval: Interval
    seeds_only: Interval
    p: float
    margin: float | None
    units: str
    tie: str
    mde: float
    n_needed: int | None = None
    n_test: int | None = None
    n_test_needed: int | None = None
    note: str = ""
    equivalence: bool = False  # judged by an equivalence rule (for the plan's power)
    p_test: str = "zero effect, two-sided"  # the test whose p-value ``p`` is
    name: str = ""  # the effect's short name in the claim's words (else its label)
    # the test set's own share of ``item_var``, the runs' disagreement taken out (None:
    # not measured), which sizes a test set
    item_level: float | None = None

    @property
    def n(self) -> int:
        return self.interval.n

    @property
    def confidence(self) -> float:
        return self.interval.confidence

    @property
    def item_var(self) -> float:
        return self.interval.item_var

    @property
    def needs(self) -> str:
        """What would resolve it, in words ("" once resolved)."""
        if self.n_needed is None and self.n_test_needed is None:
            return ""
        seeds = (
            f"about {self.n_needed} seeds"
            if self.n_needed
            else f"the {self.n} seeds in hand"
            if self.n_test_needed
            else "more seeds"
        )
        margin = f" for the margin ±{self.margin:g}" if self.margin else ""
        if self.n_test_needed:
            return (
                f"needs {seeds} and about {self.n_test_needed:,} test items (not "
                f"{self.n_test:,}){margin}"
            )
        return f"needs {seeds}{margin}"


@dataclass
class Outcome:
    """A claim's verdict (or status), the effects behind it and where they come from.

    ``effects`` holds ``(label, interval, verdict)`` per effect, the interval the verdict
    read; ``judged`` the same effects with everything else a verdict rests on."""

    claim: Claim
    verdict: str
    effects: list[tuple[str, Interval, str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    notes: dict[str, str] = field(
        default_factory=dict
    )  # per effect label: what would resolve it, training
    data: tuple[str, ...] = ()  # the datasets the effects read (empty: the table's)
    judged: list[Judged] = field(default_factory=list)
    # the arms the effects compare (empty: not every effect names its arms)
    arms: tuple[str, ...] = ()
    # the plan's seeds and test items, from the pilot (:func:`planned_from`); None: not
    # computed (an outcome judged on a chapter's table), then read from ``judged``
    planned: tuple[int | None, int | None] | None = None
    # the verdict in words, naming each effect's verdict where they differ ("" : the verdict)
    words: str = ""
    # the verdict at each close arm's runner-up rate (:func:`normlab.claims.robust.
    # rate_choices`), and the declared specifications that flip an effect's verdict
    rates: list[Any] = field(default_factory=list)
    flips: list[dict[str, Any]] = field(default_factory=list)

    @property
    def says(self) -> str:
        """The verdict in words: each effect's named where they differ, "rate-dependent"
        where a close runner-up rate gives another, and "specification-dependent" where a
        declared specification flips an effect."""
        words = self.words or self.verdict
        moved = [r for r in self.rates if r.says != words]
        if moved:
            words += "; rate-dependent: " + "; ".join(r.words for r in moved)
        if self.flips:
            words += "; specification-dependent: " + "; ".join(
                f"{_spec_words(f['specification'])}: "
                + ", ".join(f"{v} for {k}" for k, v in f["effects"].items())
                for f in self.flips
            )
        return words

    @property
    def n_needed(self) -> int | None:
        """The most seeds any inconclusive effect needs (None when none is inconclusive)."""
        found = [j.n_needed for j in self.judged if j.n_needed is not None]
        return max(found) if found else None

    @property
    def n_test_needed(self) -> int | None:
        """The most test items any inconclusive effect needs (None where none needs more)."""
        found = [j.n_test_needed for j in self.judged if j.n_test_needed is not None]
        return max(found) if found else None


def _spec_words(spec: Mapping[str, Any]) -> str:
    return "under " + ", ".join(f"{k} {v}" for k, v in spec.items())


def chapter_notebook(number: int, book: str | Path) -> Path | None:
    """The chapter's notebook ``NN_*.ipynb`` in the folder ``book``, or None when it is not
    written yet. The library does not know where the book lies: its caller names it."""
    found = sorted(Path(book).glob(f"{number:02d}_*.ipynb"))
    return found[0] if found else None


def _untrained(effect_arms: Sequence[Any]) -> list[str]:
    return [
        f"{arm.name} at {arm.score:.3f} (chance {arm.chance:.3f}, needs "
        f"+{trained_margin(arm.chance):g})"
        for arm in effect_arms
        if not trained(arm.score, arm.chance)
    ]


def _margin(claim: Claim, effect: Effect, rule: Rule) -> plans.Margin | None:
    found = plans.margin_for(claim.id, effect.label)
    if found is None and hasattr(rule, "margin"):
        return plans.Margin(rule.margin, "the rule's margin", "")
    return found


def _item_variance(effect: Effect) -> tuple[float, int | None, str]:
    """The test set's variance of the effect, its number of test items, and a note where
    the interval holds the seeds' spread only (not an accuracy, or no test-set size)."""
    if not effect.items:
        return 0.0, None, "seeds' spread only: no test-set noise is known for it"
    if effect.item_var is not None:
        return effect.item_var, min(n for _, _, n in effect.items), ""
    v = stats.accuracy_item_variance(effect.items)
    if not math.isfinite(v):
        return 0.0, None, "seeds' spread only: an arm's accuracy is not finite"
    return v, min(n for _, _, n in effect.items), ""


def _resolve(
    rule: Rule,
    ci: Interval,
    margin: float | None,
    n_test: int | None,
    alpha: float,
    level: float | None = None,
) -> tuple[int | None, int | None]:
    """Seeds (and test items, where this test set is too small for any number of seeds)
    to resolve ``ci``: the test set is sized so that its own noise takes at most half of
    the effect the seeds must resolve (:func:`normlab.stats.items_needed`), that noise
    being its item-level share ``level`` where known (the runs' disagreement item by item
    is in the seeds' spread already)."""
    if level is not None:
        ci = dataclasses.replace(ci, item_var=level)
    margin = getattr(rule, "margin", margin)
    if margin is None or not ci.defined or not math.isfinite(ci.seed_sd):
        return None, None
    n = rule.seeds_to_resolve(ci, margin, alpha)
    target = rule.target(ci, margin)
    if n is not None or not (ci.item_var > 0 and n_test and target > 0):
        return n, None
    items = stats.items_needed(ci.item_var, n_test, target, alpha=alpha)
    larger = dataclasses.replace(ci, item_var=ci.item_var * n_test / items)
    return rule.seeds_to_resolve(larger, margin, alpha), items


#: What an inconclusive effect says when its seeds already give the plan's power.
IN_HAND = (
    "inconclusive with the seeds in hand that 80 % power against the margin needs: its "
    "estimate lies between zero and the margin, and more seeds narrow the interval"
)


def _ceiling_of(effect: Effect) -> list[str]:
    """The arms of ``effect`` at the task's ceiling, in words, where every one is
    (:func:`normlab.claims.rules.at_ceiling`); empty otherwise."""
    arms = [a for a in effect.arms if a.chance is not None or a.ceiling is not None]
    if not arms or len(arms) < len(effect.arms):
        return []
    tops = {a.ceiling for a in arms}
    if len(tops) != 1 or not at_ceiling([a.score for a in arms], tops.pop()):
        return []
    return [
        f"{a.name} at {a.score:.3f} (ceiling "
        f"{a.ceiling if a.ceiling is not None else CEILING:.4g})"
        for a in arms
    ]


def _p_of(rule: Rule, ci: Interval, verdict: str) -> tuple[float, str]:
    """The p-value of the test that matters for ``verdict``, and that test in words: for
    a contradicted non-inferiority or equivalence effect the test that it lies beyond
    the margin, else the rule's own test."""
    if verdict in (CONTRADICTED, SIGN_CONTRADICTED) and hasattr(rule, "p_against"):
        return rule.p_against(ci), "beyond the margin (the contradiction)"
    if isinstance(rule, Equivalent):
        return rule.p_value(ci), "inside the margin (two one-sided tests)"
    if hasattr(rule, "p_against"):
        return rule.p_value(ci), "not beyond the margin (one-sided)"
    return rule.p_value(ci), "zero effect, two-sided"


def _judge_one(
    claim: Claim, effect: Effect, rule: Rule, ci: Interval, failed: list[str]
) -> Judged:
    margin = _margin(claim, effect, rule)
    item_var, n_test, note = _item_variance(effect)
    value = margin.margin if margin else None
    ceiling = [] if failed else _ceiling_of(effect)
    verdict = (
        NOT_TRAINED if failed else AT_CEILING if ceiling else rule.verdict(ci, value)
    )
    alpha = 1 - ci.confidence
    mde = math.nan
    if ci.n >= 2 and math.isfinite(ci.seed_sd):
        mde = stats.mde(ci.seed_sd, ci.n, item_var=ci.item_var, alpha=alpha)
    needed = items = None
    if verdict == INCONCLUSIVE:
        needed, items = _resolve(rule, ci, value, n_test, alpha, effect.item_level)
        if needed is not None and needed <= ci.n:  # the seeds in hand would do
            if items is None:
                note = "; ".join(filter(None, (IN_HAND, note)))
            needed = None
    if failed:
        note = "did not train: " + "; ".join(failed)
    if ceiling:
        note = "at the ceiling, where no difference can show: " + "; ".join(ceiling)
    p, test = _p_of(rule, ci, verdict)
    return Judged(
        effect.label,
        verdict,
        ci,
        interval(effect.samples),
        p,
        value,
        margin.units if margin else "",
        margin.tie if margin else "",
        mde,
        needed,
        n_test,
        items,
        note,
        isinstance(rule, Equivalent),
        test,
        effect.name or effect.label,
        effect.item_level,
    )


def _pieces(notes: Any) -> str:
    """Notes joined once each (an effect's note may hold several parts)."""
    parts = (part for note in notes for part in str(note).split("; ") if part)
    return "; ".join(dict.fromkeys(parts))


def judge(claim: Claim, results: pd.DataFrame) -> Outcome:
    """Apply a claim's empirical test to a results table (e.g. a chapter's live run).

    Each effect's interval adds the test set's noise to the seeds' spread and is read at
    its level under Holm's correction; an effect with an arm that did not train gets
    :data:`NOT_TRAINED` instead of its rule's verdict, and so does the claim; otherwise the
    verdicts combine as :data:`~normlab.claims.rules.COMBINE_WORDS` says. A table that
    repeats a run (the same configuration and seed twice) is a ValueError.
    """
    if not isinstance(claim.test, Test):
        raise ValueError(f"claim {claim.id} has no empirical test")
    repeated = duplicated_runs(results)
    if repeated:  # pooled, a repeated run would count one seed twice
        raise ValueError(f"claim {claim.id}: the table cannot be judged: {repeated}")
    try:
        effects = claim.test.quantity(results)
    except Unmeasurable as err:
        return Outcome(claim, INCONCLUSIVE, note=f"not measurable in this set: {err}")
    read = (
        tuple(dict.fromkeys(d for e in effects for d in e.data))
        if all(e.data for e in effects)
        else ()
    )
    compared = (
        tuple(dict.fromkeys(a.name for e in effects for a in e.arms))
        if all(e.arms for e in effects)
        else ()
    )
    rules = [effect.rule or claim.test.rule for effect in effects]
    whole = [
        interval(effect.samples, item_var=_item_variance(effect)[0])
        for effect in effects
    ]
    at_level = holm_intervals(rules, whole)
    judged, notes, untrained = [], {}, []
    for effect, rule, ci in zip(effects, rules, at_level):
        failed = _untrained(effect.arms)
        one = _judge_one(claim, effect, rule, ci, failed)
        judged.append(one)
        note = one.note if failed else "; ".join(filter(None, (one.needs, one.note)))
        if note:
            notes[effect.label] = note
        untrained += [f for f in failed if f not in untrained]
    rows = [(j.label, j.interval, j.verdict) for j in judged]
    if untrained:
        return Outcome(
            claim,
            NOT_TRAINED,
            effects=rows,
            notes=notes,
            note="no verdict: did not train: " + "; ".join(untrained),
            data=read,
            judged=judged,
            arms=compared,
        )
    verdict = combine([v for _, _, v in rows])
    return Outcome(
        claim,
        verdict,
        effects=rows,
        notes=notes,
        data=read,
        judged=judged,
        arms=compared,
        words=verdict_words([(j.name, j.verdict) for j in judged]),
    )


def primary_source(claim: Claim, results: pd.DataFrame) -> str | dict[str, str] | None:
    """The dataset a claim's verdict reads where its set chose one per run (a ``source``
    column): its plan's primary one, else the set's only one, else (a set whose tasks
    chose different ones, one each) the source per task; None: the task's default."""
    if "source" not in results:
        return None
    found = plans.plan(claim.id)
    if found is not None and "source" in found.primary:
        return str(found.primary["source"])
    chosen = set(results["source"].dropna())
    if len(chosen) == 1:
        return str(chosen.pop())
    if "data" in results:
        pairs = results[["data", "source"]].dropna().drop_duplicates()
        if pairs["data"].is_unique:
            return {str(d): str(s) for d, s in zip(pairs["data"], pairs["source"])}
    return None


def tested_on(
    claim: Claim, results: pd.DataFrame, profile: str, data: Sequence[str] = ()
) -> str:
    """What a verdict was measured on: the paper's dataset, or "mechanism, on <stand-in>".

    ``data`` are the datasets its effects read (:attr:`Outcome.data`); empty: every
    dataset of ``results``."""
    tasks = (
        sorted(data)
        if data
        else sorted(set(results["data"]))
        if "data" in results
        else []
    )
    words, stand_in = data_words(claim, tasks, profile, primary_source(claim, results))
    if not stand_in:
        return f"on {words}" if words else ""
    if claim.datasets:
        used, named = words.split(", a stand-in for ", 1)
        return f"mechanism, on {used} (a stand-in for {named})"
    return f"on {words.removesuffix(' (a stand-in; the claim names no dataset)')}"


def evaluate(
    claim: Claim | str,
    *,
    root: str | Path | None = None,
    book: str | Path | None = None,
) -> Outcome:
    """A claim's outcome: run its measurement, or judge the largest saved set of its experiment.

    ``not yet tested`` while the claim has no test or, where ``book`` names the folder of
    the book's notebooks, its chapter is not written there; ``needs the <profile>
    profile`` while no saved set of at least the test's ``min_profile`` exists, with the
    command that makes one.
    """
    claim = get(claim) if isinstance(claim, str) else claim
    if claim.test is None:
        return Outcome(
            claim,
            NOT_YET_TESTED,
            note=f"no test is attached yet (chapter {claim.chapter})",
        )
    if book is not None and chapter_notebook(claim.chapter, book) is None:
        return Outcome(
            claim, NOT_YET_TESTED, note=f"chapter {claim.chapter} is not written yet"
        )
    if isinstance(claim.test, Measurement):
        checks = claim.test.measure()
        ok = all(
            c.value <= claim.test.tolerance if c.zero else c.value > claim.test.nonzero
            for c in checks
        )
        verdict = SUPPORTED if ok else CONTRADICTED
        if ok and claim.kind == "conceptual":
            verdict = CONCEPTUAL
        return Outcome(
            claim,
            verdict,
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
    table = saved.results
    outcome = judge(claim, table)
    if outcome.judged:
        outcome.rates = robust.rate_choices(claim, table, outcome.arms, judge)
        outcome.flips = robust.specification_flips(claim, table, outcome, judge)
        outcome.flips += robust.regime_flips(
            claim, table, outcome, judge, _regime_tables(test, root)
        )
    if plans.plan(claim.id) is not None:
        outcome.planned = planned_from(claim, table, outcome)
    tasks = outcome.data or (sorted(set(table["data"])) if "data" in table else ())
    words, stand_in = data_words(
        claim, tasks, saved.profile, primary_source(claim, table)
    )
    outcome.source = {
        "profile": saved.profile,
        "data": tested_on(claim, table, saved.profile, outcome.data),
        "label": saved.label(),
        "datasets": words,
        "stand_in": stand_in,
    }
    return outcome


def _regime_tables(test: Test, root: str | Path | None) -> dict[str, pd.DataFrame]:
    """The results of each regime ``test`` declares beside its own, where a saved set of at
    least its ``min_profile`` exists, keyed by the experiment's name."""
    found = {}
    for name in test.regimes:
        saved = saved_results.largest(name, root)
        if saved is not None and PROFILES.index(saved.profile) >= PROFILES.index(
            test.min_profile
        ):
            found[name] = saved.results
    return found


def _spreads(
    judged: Sequence[Judged],
) -> list[tuple[float, float, float, int | None, bool]]:
    """What :func:`normlab.claims.plans.planned` reads of each effect with a margin."""
    return [
        (
            j.seeds_only.seed_sd,
            j.item_var if j.item_level is None else j.item_level,
            j.margin,
            j.n_test,
            j.equivalence,
        )
        for j in judged
        if j.margin is not None
    ]


def planned_from(
    claim: Claim, results: pd.DataFrame, outcome: Outcome | None = None
) -> tuple[int | None, int | None]:
    """The planned seeds and test items of ``claim`` (:func:`normlab.claims.plans.planned`)
    from the pilot's runs of ``results`` (:func:`normlab.claims.plans.pilot`): seeds run
    beyond the pilot do not move the plan. ``outcome``, the judgement of the whole table,
    is reused where the table holds the pilot only."""
    first = plans.pilot(results)
    if outcome is None or len(first) < len(results):
        outcome = judge(claim, first)
    return plans.planned(_spreads(outcome.judged))


def specification_curve(
    results: pd.DataFrame,
    claim_ids: Sequence[str],
    specifications: Sequence[Mapping[str, Any]],
    primary: Mapping[str, Any],
) -> pd.DataFrame:
    """Every claim of ``claim_ids`` judged under every one of ``specifications`` (each a
    mapping of axis to value, e.g. from
    :func:`normlab.experiments.part1.specifications`): one row per (specification, claim)
    with its verdict, whether it is the ``primary`` one, and per effect its mean and
    interval. A claim a specification cannot measure says so in ``effect``."""
    rows = []
    for spec in specifications:
        part = results
        for axis, value in spec.items():
            part = part[part[axis] == value]
        is_primary = all(primary.get(a) == v for a, v in spec.items())
        for claim_id in claim_ids:
            outcome = judge(get(claim_id), part)
            base = {**spec, "primary": is_primary, "claim": claim_id}
            if not outcome.judged:
                rows.append(
                    {**base, "verdict": outcome.verdict, "effect": outcome.note}
                )
            for one in outcome.judged:
                rows.append(
                    {
                        **base,
                        "verdict": outcome.verdict,
                        "effect": one.label,
                        "mean": one.interval.mean,
                        "low": one.interval.low,
                        "high": one.interval.high,
                        "effect_verdict": one.verdict,
                    }
                )
    return pd.DataFrame(rows)
