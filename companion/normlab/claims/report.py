"""Judging the claims and reporting them: outcomes, the scorecard and the chapters' tables.

:func:`evaluate` gives a claim's :class:`Outcome` from the largest saved result set of its
experiment (:mod:`normlab.results`), or :func:`judge` from a table a chapter passes in. Before
any rule, the learnability rule (:func:`normlab.claims.rules.trained`) checks every compared
arm. Each effect's interval holds the seeds' spread and the test set's own noise
(:func:`normlab.stats.accuracy_item_variance`), at its level under Holm's correction across
the claim's effects; each effect carries its margin (:mod:`normlab.claims.plans`), its
minimum detectable effect, and, when inconclusive, the seeds (and, where the test set is too
small for any number of seeds, the test items) that would resolve it (:class:`Judged`).
Every outcome names what it was tested on: the paper's dataset, or a stand-in (a mechanism
test). :func:`scorecard_records` is the scorecard as plain data (``python -m normlab
scorecard --json``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import results as saved_results
from .. import stats
from .._checks import one_of, positive_int
from .._runtime import PROFILES
from ..analysis.runs import duplicated_runs
from ..stats import Interval, interval
from . import plans, robust
from .plans import data_words
from .registry import Check, Claim, Effect, Measurement, Test, Unmeasurable, get, ids
from .rules import (
    AT_CEILING,
    CEILING,
    CONCEPTUAL,
    CONTRADICTED,
    INCONCLUSIVE,
    MIXED,
    NOT_TRAINED,
    NOT_YET_TESTED,
    SIGN_CONSISTENT,
    SIGN_CONTRADICTED,
    SIGN_SUPPORTED,
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
    "BRIEF_COLUMNS",
    "chapter_link",
    "chapter_notebook",
    "COMMAND",
    "evaluate",
    "judge",
    "Judged",
    "KIND_WORDS",
    "kind_counts",
    "markdown",
    "Outcome",
    "planned_from",
    "part_markdown",
    "plan_table",
    "primary_source",
    "reading_table",
    "REPRODUCED",
    "reproducibility_markdown",
    "reproducibility_table",
    "scorecard",
    "scorecard_records",
    "specification_curve",
    "tested_on",
    "verdict_table",
]

_BOOK = Path(__file__).resolve().parents[3] / "book"


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


def chapter_notebook(number: int, book: str | Path | None = None) -> Path | None:
    """The chapter's notebook ``book/NN_*.ipynb``, or None when it is not written yet."""
    found = sorted(Path(book or _BOOK).glob(f"{number:02d}_*.ipynb"))
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

    ``not yet tested`` while the claim has no test or its chapter is not written (only
    checked where the book's folder exists); ``needs the <profile> profile`` while no saved
    set of at least the test's ``min_profile`` exists, with the command that makes one.
    """
    claim = get(claim) if isinstance(claim, str) else claim
    book_dir = Path(book or _BOOK)
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


def _interval_words(ci: Interval) -> str:
    """``+0.0123 ± 0.0045``, with the level when it is not 95 % (Holm's correction)."""
    level = "" if round(ci.confidence, 6) == 0.95 else f" ({100 * ci.confidence:.1f} %)"
    return f"{ci.mean:+.4f} ± {ci.half:.4f}{level}"


def _ours(outcome: Outcome) -> str:
    if outcome.checks:
        return "; ".join(f"{c.label}: {c.value:.1e}" for c in outcome.checks)
    return (
        "; ".join(f"{label}: {_interval_words(ci)}" for label, ci, _ in outcome.effects)
        or outcome.note
    )


def _paper(claim: Claim) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in claim.paper.items()) or "-"


def _tested(outcome: Outcome) -> str:
    if outcome.checks:
        return "exact"
    data = outcome.source.get("data", "")
    if not data:
        return ""
    return "mechanism (stand-in)" if data.startswith("mechanism") else "paper's data"


def scorecard(
    *,
    root: str | Path | None = None,
    book: str | Path | None = None,
    outcomes: Sequence[Outcome] | None = None,
) -> pd.DataFrame:
    """One row per claim: id, part, kind, claim, paper's number, ours, n, profile, data,
    tested (exact, paper's data or mechanism on a stand-in), verdict (in words, each
    effect's named where they differ: :attr:`Outcome.says`), category (the verdict
    alone, :func:`normlab.claims.combine`'s), chapter, rule, note (what would
    resolve an inconclusive claim, or why there is no verdict)."""
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
                "tested": _tested(out),
                "verdict": out.says,
                "category": out.verdict,
                "chapter": c.chapter,
                "rule": c.rule_words,
                "note": out.note or _pieces(out.notes.values()),
            }
        )
    return pd.DataFrame(rows)


def _number(value: Any) -> Any:
    """``value`` as strict JSON: a non-finite float becomes None."""
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _effect_record(j: Judged) -> dict[str, Any]:
    ci = j.interval
    return {
        "label": j.label,
        "verdict": j.verdict,
        "estimate": _number(ci.mean),
        "low": _number(ci.low),
        "high": _number(ci.high),
        "confidence": _number(ci.confidence),
        "seeds_only": {
            "low": _number(j.seeds_only.low),
            "high": _number(j.seeds_only.high),
            "confidence": _number(j.seeds_only.confidence),
        },
        "test_items_se": _number(math.sqrt(j.item_var)),
        "test_items_se_item_level": None
        if j.item_level is None
        else _number(math.sqrt(j.item_level)),
        "margin": _number(j.margin),
        "units": j.units,
        "margin_tie": j.tie,
        "mde": _number(j.mde),
        "p": _number(j.p),
        "p_test": j.p_test,
        "n": j.n,
        "n_needed": j.n_needed,
        "n_test": j.n_test,
        "n_test_needed": j.n_test_needed,
        "needs": j.needs,
        "note": j.note,
    }


def _robustness(out: Outcome) -> dict[str, Any]:
    """An outcome's close rate choices and flipping specifications, as plain data (empty
    where it has none)."""
    found: dict[str, Any] = {}
    if out.rates:
        found["rate_choices"] = [
            {
                "arm": r.arm,
                "where": r.config,
                "chosen": r.chosen,
                "runner_up": r.runner_up,
                "validation_gap": _number(r.gap),
                "validation_half_width": _number(r.half),
                "verdict_words": r.says,
            }
            for r in out.rates
        ]
    if out.flips:
        found["specification_dependent"] = out.flips
    return found


def _data_of(out: Outcome) -> tuple[str, bool | None]:
    """The data an outcome read, in words, and whether a stand-in served it."""
    from ..data import title

    c = out.claim
    if out.checks or isinstance(c.test, Measurement):
        return "none: float64 measurement of the algebra on random inputs", None
    if "datasets" in out.source:
        return out.source["datasets"], out.source["stand_in"]
    named = ", ".join(title(d) for d in c.datasets) or "the claim's task"
    return f"{named} (no saved set judged yet)", None


def scorecard_records(
    *,
    root: str | Path | None = None,
    book: str | Path | None = None,
    outcomes: Sequence[Outcome] | None = None,
) -> list[dict[str, Any]]:
    """The scorecard as plain data, one object per claim (all of them), strict JSON once
    dumped (every non-finite number is None).

    Each object: ``id``, ``part``, ``kind`` (exact, conceptual, empirical), ``claim``,
    ``chapter``, ``paper`` (the paper's numbers), ``verdict``, ``data`` (what the effects
    read, a stand-in named as such), ``stand_in``, ``profile``, ``compute`` (the saved set
    behind the verdict), ``note``, ``n_needed`` and ``n_test_needed`` (the most any
    inconclusive effect needs; None when resolved), the plan of an empirical claim
    (``estimand``, ``specification``, ``margin_tie``, ``planned_seeds``,
    ``planned_test_items``: from the pilot, :func:`planned_from`), ``checks`` of an exact one, and ``effects``: per effect its
    ``label``, ``verdict``, ``estimate``, ``low`` and ``high`` (seeds and test items, at
    ``confidence``, its Holm level), ``seeds_only``, ``test_items_se``, ``margin``,
    ``units``, ``mde``, ``p``, ``n`` (seeds), ``n_needed``, ``n_test``,
    ``n_test_needed`` and ``needs`` (those in words).
    """
    outcomes = (
        outcomes
        if outcomes is not None
        else [evaluate(i, root=root, book=book) for i in ids()]
    )
    records = []
    for out in outcomes:
        c = out.claim
        data, stand_in = _data_of(out)
        record: dict[str, Any] = {
            "id": c.id,
            "part": c.part,
            "kind": c.kind,
            "claim": c.sentence,
            "chapter": c.chapter,
            "paper": {k: _number(float(v)) for k, v in c.paper.items()},
            "verdict": out.verdict,
            "verdict_words": out.says,
            "data": data,
            "stand_in": stand_in,
            "profile": out.source.get("profile") or None,
            "compute": out.source.get("label", "").removeprefix("saved set: ") or None,
            "note": out.note or _pieces(out.notes.values()),
            "n_needed": out.n_needed,
            "n_test_needed": out.n_test_needed,
            "effects": [_effect_record(j) for j in out.judged],
        }
        record.update(_robustness(out))
        if out.checks:
            record["checks"] = [
                {"label": k.label, "value": _number(k.value), "zero": k.zero}
                for k in out.checks
            ]
        plan = plans.plan(c.id)
        if plan is not None:
            profile = record["profile"] or (
                c.test.min_profile if isinstance(c.test, Test) else "cpu"
            )
            seeds, items = (
                out.planned
                if out.planned is not None
                else plans.planned(_spreads(out.judged))
            )
            record.update(
                estimand=plan.estimand,
                specification=plans.specification(c.id, profile),
                margin_tie=plan.tie,
                planned_seeds=seeds,
                planned_test_items=items,
            )
        records.append(record)
    return records


def verdict_table(
    claim_ids: Sequence[str],
    *,
    live: pd.DataFrame | None = None,
    root: str | Path | None = None,
    brief: bool = False,
) -> pd.DataFrame:
    """A chapter's verdict table: one row per effect of each claim, judged on the largest saved set.

    Columns, the verdict first so that a reader sees it at any width: ``verdict`` (of the
    effect), ``id``, ``effect``, ``ours`` (mean ± the CI its verdict read: seeds and test
    items, 95 % or its Holm level), ``n``, ``claim verdict``, ``claim``, ``profile``,
    ``data`` and ``note`` (why no verdict, or the seeds and test items that would resolve
    it). With ``live``
    (a chapter's live results table) a ``live run`` column shows the same quantity measured
    there, which never decides a verdict. ``brief`` keeps :data:`BRIEF_COLUMNS` (and the live
    run), the columns that fit a chapter's text column.
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
                "verdict": verdict,
                "id": claim.id,
                "effect": label,
                "ours": _interval_words(ci) if ci is not None else "",
                "n": ci.n if ci is not None else "",
                "claim verdict": outcome.says,
                "claim": claim.sentence,
                "profile": outcome.source.get("profile", ""),
                "data": outcome.source.get("data", ""),
                "note": _code(outcome.notes.get(label, "")),
            }
            if live is not None:
                row["live run"] = seen.get(label, "not measurable")
            rows.append(row)
    frame = pd.DataFrame(rows)
    if brief:
        frame = frame[[c for c in (*BRIEF_COLUMNS, "live run") if c in frame]]
    return frame


def reading_table(
    records: Sequence[dict[str, Any]], claim_ids: Sequence[str] = ("A12", "A13")
) -> pd.DataFrame:
    """Every effect of ``claim_ids`` from :func:`scorecard_records`, one row each: the
    claim, the effect, its verdict, the interval its verdict read (at its Holm level),
    its margin and units; for the claims read two ways (A12, A13: accuracy at fixed
    epochs, the paper's quantity, and steps to a target, the mechanism) both readings."""
    rows = []
    for r in records:
        if r["id"] not in claim_ids:
            continue
        for e in r["effects"]:
            rows.append(
                {
                    "id": r["id"],
                    "effect": e["label"],
                    "verdict": e["verdict"],
                    "interval": _span(e),
                    "margin": "-" if e["margin"] is None else f"±{e['margin']:g}",
                    "units": e["units"],
                }
            )
    return pd.DataFrame(rows)


#: The verdict table's columns in a chapter: the verdict, what was measured and on what data.
BRIEF_COLUMNS = ("verdict", "id", "effect", "ours", "n", "data", "note")


def _code(text: str) -> str:
    """``text`` with each ``python -m normlab ...`` command in it set as code, so that the
    book shows it as typed (in prose, ``--`` would become an en dash) and it can be copied."""
    return COMMAND.sub(lambda m: f"`{m.group(0).strip()}`", str(text))


#: A command a reader can copy, up to the end of its clause.
COMMAND = re.compile(r"(?<!`)python -m normlab [^;,()`]*[^;,()`\s.]")


def markdown(table: pd.DataFrame) -> str:
    """A table as GitHub/MyST Markdown (``|`` in cells escaped, commands set as code),
    without extra dependencies."""

    def cell(value: Any) -> str:
        return _code(str(value)).replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(map(cell, table.columns)) + " |",
        "|" + "---|" * len(table.columns),
    ]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |"
        for row in table.itertuples(index=False)
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- chapter 16's tables

#: What each verdict says about reproducing the paper, in the reproducibility table.
REPRODUCED = {
    SUPPORTED: "reproduced",
    SIGN_SUPPORTED: "reproduced in sign; its size unresolved",
    "consistent with": "partly: the predicted sign, not the mechanism",
    SIGN_CONSISTENT: "partly: the predicted sign, its size unresolved",
    CONTRADICTED: "not reproduced: the opposite",
    SIGN_CONTRADICTED: "not reproduced: the opposite sign, its size unresolved",
    "smaller than the margin": "not at a size that matters",
    INCONCLUSIVE: "not resolved",
    MIXED: "in part: each effect's verdict is named",
    NOT_TRAINED: "no verdict: an arm did not train",
    AT_CEILING: "no verdict: the arms are at the task's ceiling",
    CONCEPTUAL: "a view, consistent with the algebra",
}


def _span(effect: dict[str, Any]) -> str:
    def number(value: Any) -> str:
        return "?" if value is None else f"{value:+.4f}"

    level = ""
    if effect["confidence"] is not None and round(effect["confidence"], 6) != 0.95:
        level = f" ({100 * effect['confidence']:.1f} %)"
    return (
        f"{number(effect['estimate'])} [{number(effect['low'])}, "
        f"{number(effect['high'])}]{level}"
    )


def _margin_words(e: dict[str, Any]) -> str:
    return f"±{e['margin']:g}" if e["margin"] is not None else "its margin"


def _effect_why(e: dict[str, Any]) -> str:
    """Why one effect (a record of :func:`scorecard_records`) has its verdict."""
    verdict = e["verdict"]
    if verdict == INCONCLUSIVE:
        return e["needs"] or e["note"] or "its interval straddles zero"
    if verdict in (CONTRADICTED, SIGN_CONTRADICTED):
        return f"its interval lies on the other side (margin {_margin_words(e)})"
    if verdict == "smaller than the margin":
        return f"its interval lies inside {_margin_words(e)} ({e['margin_tie']})"
    if verdict in (SIGN_SUPPORTED, SIGN_CONSISTENT):
        return (
            f"its interval excludes zero but reaches across the margin "
            f"{_margin_words(e)}: its size is unresolved"
        )
    if verdict in (NOT_TRAINED, AT_CEILING):
        return e["note"]
    return f"its interval clears its rule's bound (margin {_margin_words(e)})"


def _why(record: dict[str, Any]) -> str:
    """Why the verdict is what it is, from its effects and their margins."""
    effects = record["effects"]
    verdict = record["verdict"]
    if record.get("checks"):
        return "every deviation the algebra says is zero is at rounding error"
    if not effects:
        return record["note"]
    if verdict == INCONCLUSIVE:
        open_ = [e for e in effects if e["needs"]]
        if len(open_) == 1:
            return open_[0]["needs"]
        return "; ".join(f"{e['label']}: {e['needs']}" for e in open_) or record["note"]
    if len(effects) == 1:
        return _effect_why(effects[0])
    if verdict == SUPPORTED:
        return (
            "every effect's interval clears its rule's bound (margin "
            + ", ".join(dict.fromkeys(_margin_words(e) for e in effects))
            + ")"
        )
    return "; ".join(f"{e['label']}: {_effect_why(e)}" for e in effects)


def reproducibility_table(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Chapter 16's reproducibility table from :func:`scorecard_records`: per claim, the
    verdict, the paper's statement (and numbers), our setting (with the data on its face:
    real, or which stand-in for which dataset), each effect with the interval its verdict
    read, whether that reproduces the paper (:data:`REPRODUCED`), why, and the compute
    behind it."""
    rows = []
    for r in records:
        paper = r["claim"]
        if r["paper"]:
            paper += " (" + ", ".join(f"{k} {v:g}" for k, v in r["paper"].items()) + ")"
        if r.get("checks"):
            setting = "float64 measurement of the algebra; no data"
            worst = max((c["value"] for c in r["checks"] if c["zero"]), default=0.0)
            effect = f"largest deviation that must be zero: {worst:.1e}"
        else:
            spec = r.get("specification") or {}
            setting = r["data"]
            if r["stand_in"] is not None:
                setting += " [stand-in]" if r["stand_in"] else " [real data]"
            if spec:
                setting += f"; {spec['model']}; {spec['optimiser']}; {spec['budget']}"
            effect = "; ".join(f"{e['label']}: {_span(e)}" for e in r["effects"])
        reproduced = REPRODUCED.get(r["verdict"], "not run: " + r["verdict"])
        if r["stand_in"] and r["verdict"] in REPRODUCED:
            reproduced += " (mechanism, on a stand-in)"
        rows.append(
            {
                "verdict": r.get("verdict_words") or r["verdict"],
                "id": r["id"],
                "reproduced": reproduced,
                "paper": paper,
                "our setting": setting,
                "effect": effect or "-",
                "why": _why(r),
                "compute": r["compute"] or "-",
            }
        )
    return pd.DataFrame(rows)


#: The kinds of claim, each counted apart: what a verdict of each kind can show.
def reproducibility_markdown(records: Sequence[dict[str, Any]]) -> str:
    """:func:`reproducibility_table` as a Markdown list, one entry per claim: its id and
    verdict, then the paper's statement, our setting, the effects, why and the compute,
    each on a line of its own. Eight columns of sentences fit no text column side by
    side; a list reads the same at any width."""
    fields = ("paper", "our setting", "effect", "why", "compute")

    def text(value: Any) -> str:
        return _code(str(value)).replace("\n", " ")

    entries = []
    for row in reproducibility_table(records).to_dict("records"):
        lines = [
            f"- **{row['id']}**: {text(row['verdict'])} ({text(row['reproduced'])})"
        ]
        lines += [f"  - *{name}*: {text(row[name])}" for name in fields]
        entries.append("\n".join(lines))
    return "\n".join(entries) + "\n"


KIND_WORDS = {
    "exact": "the algebra is right (exact claims, measured in float64)",
    "conceptual": "a way of seeing it (conceptual claims: consistent, never supported)",
    "empirical": "the algebra explains performance (empirical claims, trained nets)",
}


def kind_counts(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Chapter 16's first table from :func:`scorecard_records`: how many claims of each
    kind (:data:`KIND_WORDS`: ``exact``, ``conceptual``, ``empirical``) have each verdict,
    so that an exact identity is never added to an empirical finding. One row per verdict
    that occurs (the claims' verdicts, "differs by effect" where their effects' verdicts
    differ) and a last row ``claims``, each kind's total; one column per kind present. A
    column per kind, not per verdict, keeps the table as narrow as three numbers."""
    kinds = [k for k in KIND_WORDS if any(r["kind"] == k for r in records)]
    verdicts = list(dict.fromkeys(r["verdict"] for r in records))
    rows = [
        {
            "verdict": verdict,
            **{
                k: sum(r["kind"] == k and r["verdict"] == verdict for r in records)
                for k in kinds
            },
        }
        for verdict in verdicts
    ]
    rows.append(
        {
            "verdict": "claims",
            **{k: sum(r["kind"] == k for r in records) for k in kinds},
        }
    )
    return pd.DataFrame(rows, columns=["verdict", *kinds])


def plan_table(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Each empirical claim's plan from :func:`scorecard_records`: the estimand, the margin
    and its tie to the paper, the seeds (and test items) the saved set's spread says the
    margin needs, against the seeds and test items in hand."""
    rows = []
    for r in records:
        if "estimand" not in r:
            continue
        margins = ", ".join(
            dict.fromkeys(
                f"±{e['margin']:g} {e['units']}"
                for e in r["effects"]
                if e["margin"] is not None
            )
        )
        hand = sorted({e["n"] for e in r["effects"]})
        items = sorted({e["n_test"] for e in r["effects"] if e["n_test"]})
        rows.append(
            {
                "id": r["id"],
                "estimand": r["estimand"],
                "margin": margins or "-",
                "why this margin": r["margin_tie"],
                "seeds (planned / in hand)": (
                    f"{r['planned_seeds'] or '-'} / {','.join(map(str, hand)) or '-'}"
                ),
                "test items (planned / in hand)": (
                    f"{r['planned_test_items'] or 'as now'} / "
                    f"{','.join(map(str, items)) or '-'}"
                ),
            }
        )
    return pd.DataFrame(rows)


#: The scorecard's table, short enough to fit a phone: the verdict first.
_PART_COLUMNS = ("verdict", "id", "claim", "chapter")
#: What each claim's evidence says below the table.
_EVIDENCE_COLUMNS = ("paper", "ours", "n", "profile", "data", "note")


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
    Markdown: a table of verdict, id, claim and chapter (each chapter number linked to its
    notebook, :func:`chapter_link`), then the evidence behind each verdict (the paper's
    number, ours, n, profile, data and note), one item per claim, folded behind a click."""
    one_of("part", part, ("I", "II"))
    needed = {"part", *_PART_COLUMNS, *_EVIDENCE_COLUMNS}
    if not isinstance(card, pd.DataFrame) or not needed <= set(card.columns):
        raise ValueError(
            f"card must be a scorecard table with the columns {', '.join(sorted(needed))}"
        )
    rows = card[card["part"] == part]
    linked = rows.assign(chapter=[chapter_link(int(n), book) for n in rows["chapter"]])
    items = []
    for row in linked.itertuples(index=False):
        facts = "; ".join(
            f"{column}: {_code(getattr(row, column))}"
            for column in _EVIDENCE_COLUMNS
            if str(getattr(row, column)).strip()
        )
        items.append(f"- **{row.id}** ({row.verdict}, chapter {row.chapter}): {facts}")
    evidence = (
        f"<details><summary>The evidence behind each verdict of Part {part}</summary>\n\n"
        + "\n".join(items)
        + "\n\n</details>\n"
    )
    return markdown(linked[list(_PART_COLUMNS)]) + "\n" + evidence


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
