"""The claims as a reader sees them: the chapters' verdict tables, chapter 16's tables from
the scorecard's records (:mod:`normlab.claims.records`), and Markdown with every
``python -m normlab`` command set as code.

Nothing here knows where the book lies: a chapter's link to another chapter's notebook is
made only where the caller names the folder that holds the notebooks (``book``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .._checks import one_of, positive_int
from .judging import chapter_notebook, evaluate, judge
from .records import _interval_words
from .registry import Test, get
from .rules import (
    AT_CEILING,
    CONCEPTUAL,
    CONTRADICTED,
    INCONCLUSIVE,
    MIXED,
    NOT_TRAINED,
    SIGN_CONSISTENT,
    SIGN_CONTRADICTED,
    SIGN_SUPPORTED,
    SUPPORTED,
)

__all__ = [
    "BRIEF_COLUMNS",
    "chapter_link",
    "COMMAND",
    "KIND_WORDS",
    "kind_counts",
    "markdown",
    "part_markdown",
    "plan_table",
    "reading_table",
    "REPRODUCED",
    "reproducibility_markdown",
    "reproducibility_table",
    "verdict_table",
]


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


#: The kinds of claim, each counted apart: what a verdict of each kind can show.
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
    """A Markdown link ``[N](NN_name.ipynb)`` to chapter ``number``'s notebook in the folder
    ``book``, or the bare number where no folder is named or the chapter is not written
    there (:func:`~normlab.claims.chapter_notebook`)."""
    positive_int("number", number)
    path = None if book is None else chapter_notebook(number, book)
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
