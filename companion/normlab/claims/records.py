"""The scorecard: one row per claim (:func:`scorecard`) and the same as plain data
(:func:`scorecard_records`, ``python -m normlab scorecard --json``), from the outcomes of
:mod:`normlab.claims.judging`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..stats import Interval
from . import plans
from .judging import Judged, Outcome, _pieces, _spreads, evaluate
from .registry import Claim, Measurement, Test, ids

__all__ = [
    "scorecard",
    "scorecard_records",
]


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


def _every_outcome(
    outcomes: Sequence[Outcome] | None,
    root: str | Path | None,
    book: str | Path | None,
) -> Sequence[Outcome]:
    """``outcomes`` where given, else every claim evaluated (:func:`evaluate`)."""
    if outcomes is not None:
        return outcomes
    return [evaluate(i, root=root, book=book) for i in ids()]


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
    outcomes = _every_outcome(outcomes, root, book)
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
    outcomes = _every_outcome(outcomes, root, book)
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
