"""Judging the claims and reporting them: outcomes, the scorecard and the chapters' tables.

:func:`evaluate` gives a claim's :class:`Outcome` from the largest saved result set of its
experiment (:mod:`normlab.results`), or :func:`judge` from a table a chapter passes in. Before
any rule, the learnability rule (:func:`normlab.claims.rules.trained`) checks every compared
arm; an equivalence that ends inconclusive says how many seeds its margin needs. Every
outcome names what it was tested on: the paper's dataset, or a stand-in (a mechanism test).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import results as saved_results
from .._checks import one_of, positive_int
from .._runtime import PROFILES
from ..stats import Interval, interval
from .registry import Check, Claim, Measurement, Test, Unmeasurable, get, ids
from .rules import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TRAINED,
    NOT_YET_TESTED,
    SUPPORTED,
    Equivalent,
    combine,
    trained,
    trained_margin,
)

BOOK = Path(__file__).resolve().parents[3] / "book"


@dataclass
class Outcome:
    """A claim's verdict (or status), the effects behind it and where they come from."""

    claim: Claim
    verdict: str
    effects: list[tuple[str, Interval, str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    notes: dict[str, str] = field(
        default_factory=dict
    )  # per effect label: power, training
    data: tuple[str, ...] = ()  # the datasets the effects read (empty: the table's)


def chapter_notebook(number: int, book: str | Path | None = None) -> Path | None:
    """The chapter's notebook ``book/NN_*.ipynb``, or None when it is not written yet."""
    found = sorted(Path(book or BOOK).glob(f"{number:02d}_*.ipynb"))
    return found[0] if found else None


def _untrained(effect_arms: Sequence[Any]) -> list[str]:
    return [
        f"{arm.name} at {arm.score:.3f} (chance {arm.chance:.3f}, needs "
        f"+{trained_margin(arm.chance):g})"
        for arm in effect_arms
        if not trained(arm.score, arm.chance)
    ]


def _power_note(rule: Any, samples: np.ndarray, ci: Interval, verdict: str) -> str:
    if not isinstance(rule, Equivalent) or verdict != INCONCLUSIVE or ci.n < 2:
        return ""
    needed = rule.seeds_needed(float(np.std(samples, ddof=1)))
    if ci.n >= needed:
        return ""
    return f"underpowered: {ci.n} seeds, about {needed} needed for ±{rule.margin:g}"


def judge(claim: Claim, results: pd.DataFrame) -> Outcome:
    """Apply a claim's empirical test to a results table (e.g. a chapter's live run).

    An effect with an arm that did not train gets :data:`NOT_TRAINED` instead of its rule's
    verdict, and so does the claim; otherwise the verdicts combine as
    :data:`~normlab.claims.rules.COMBINE_WORDS` says.
    """
    if not isinstance(claim.test, Test):
        raise ValueError(f"claim {claim.id} has no empirical test")
    try:
        effects = claim.test.quantity(results)
    except Unmeasurable as err:
        return Outcome(claim, INCONCLUSIVE, note=f"not measurable in this set: {err}")
    rows, notes, untrained = [], {}, []
    read = (
        tuple(dict.fromkeys(d for e in effects for d in e.data))
        if all(e.data for e in effects)
        else ()
    )
    for effect in effects:
        ci = interval(effect.samples)
        rule = effect.rule or claim.test.rule
        failed = _untrained(effect.arms)
        verdict = NOT_TRAINED if failed else rule.verdict(ci)
        note = (
            "did not train: " + "; ".join(failed)
            if failed
            else _power_note(rule, effect.samples, ci, verdict)
        )
        if note:
            notes[effect.label] = note
        untrained += [f for f in failed if f not in untrained]
        rows.append((effect.label, ci, verdict))
    if untrained:
        return Outcome(
            claim,
            NOT_TRAINED,
            effects=rows,
            notes=notes,
            note="no verdict: did not train: " + "; ".join(untrained),
            data=read,
        )
    verdict = combine([v for _, _, v in rows])
    return Outcome(claim, verdict, effects=rows, notes=notes, data=read)


def tested_on(
    claim: Claim, results: pd.DataFrame, profile: str, data: Sequence[str] = ()
) -> str:
    """What a verdict was measured on: the paper's dataset, or "mechanism, on <stand-in>".

    ``data`` are the datasets its effects read (:attr:`Outcome.data`); empty: every
    dataset of ``results``."""
    from ..data import REAL, served_by, title
    from ..data.sources import RESTYLED

    tasks = (
        sorted(data)
        if data
        else sorted(set(results["data"]))
        if "data" in results
        else []
    )
    used = ", ".join(dict.fromkeys(title(served_by(t, profile)) for t in tasks))
    real = [t.removesuffix(RESTYLED) for t in tasks]
    if all(t in REAL for t in real) and used == ", ".join(
        dict.fromkeys(title(t) for t in tasks)
    ):
        return f"on {used}" if used else ""
    if claim.datasets:
        named = ", ".join(title(d) for d in claim.datasets)
        return f"mechanism, on {used} (a stand-in for {named})"
    return f"on {used}"


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
        "data": tested_on(claim, saved.results, saved.profile, outcome.data),
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
    tested (exact, paper's data or mechanism on a stand-in), verdict, chapter, rule, note."""
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
                "verdict": out.verdict,
                "chapter": c.chapter,
                "rule": c.rule_words,
                "note": out.note or "; ".join(out.notes.values()),
            }
        )
    return pd.DataFrame(rows)


def verdict_table(
    claim_ids: Sequence[str],
    *,
    live: pd.DataFrame | None = None,
    root: str | Path | None = None,
    brief: bool = False,
) -> pd.DataFrame:
    """A chapter's verdict table: one row per effect of each claim, judged on the largest saved set.

    Columns, the verdict first so that a reader sees it at any width: ``verdict`` (of the
    effect), ``id``, ``effect``, ``ours`` (mean ± 95 % CI across seeds), ``n``, ``claim
    verdict``, ``claim``, ``profile``, ``data`` and ``note`` (why no verdict, or the seeds an
    equivalence needs). With ``live``
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
                "ours": f"{ci.mean:+.4f} ± {ci.half:.4f}" if ci is not None else "",
                "n": ci.n if ci is not None else "",
                "claim verdict": outcome.verdict,
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
