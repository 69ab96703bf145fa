"""What chapters 13-15 share: Markdown for ``{glue:md}``, a saved set's schedule (as
numbers and as a table), a summary's means by key, a verdict table narrow enough for the
text column, and what would resolve an inconclusive claim."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

__all__ = [
    "SCHEDULE_WORDS",
    "markdown",
    "schedule",
    "schedule_table",
    "means",
    "verdicts",
    "resolve",
]


def markdown(text: str) -> Any:
    """``text`` as IPython Markdown (for ``{glue:md}``), or the text without IPython."""
    try:
        from IPython.display import Markdown
    except ImportError:  # pragma: no cover - IPython comes with every notebook
        return text
    return Markdown(text)


def schedule(runs: pd.DataFrame) -> dict[str, float]:
    """A saved Part II set's training schedule, from its results table: ``depth`` (when
    recorded), ``epochs``, the median optimiser ``steps`` a run, AutoNorm-S's decision
    epoch ``t_freeze`` and its share of the training, ``t_freeze_share``; and the
    ``seeds`` and learning ``rates`` it holds."""
    first = runs.iloc[0]
    found: dict[str, float] = {
        "epochs": int(first["epochs"]),
        "steps": int(runs["steps"].median()),
        "t_freeze": int(first["t_freeze"]),
        "t_freeze_share": float(first["t_freeze"] / first["epochs"]),
        "seeds": int(runs["seed"].nunique()),
        "rates": int(runs["lr"].nunique()),
    }
    if "depth" in runs:
        found["depth"] = int(first["depth"])
    return found


#: :func:`schedule`'s keys as a reader reads them, in the order a table shows them.
SCHEDULE_WORDS = {
    "depth": "blocks",
    "epochs": "epochs",
    "steps": "optimiser steps a run (median)",
    "t_freeze": "AutoNorm-S decides after epoch",
    "t_freeze_share": "... that is, this share of training",
    "rates": "learning rates (one chosen per arm on validation)",
    "seeds": "seeds at each rate",
}


def schedule_table(runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`schedule` of a saved set's ``runs`` as a two-column table (what, value),
    the share formatted as a percentage."""
    found = schedule(runs)
    return pd.DataFrame(
        {
            "schedule": words,
            "value": f"{found[key]:.0%}"
            if key == "t_freeze_share"
            else f"{found[key]:,}",
        }
        for key, words in SCHEDULE_WORDS.items()
        if key in found
    )


def means(table: pd.DataFrame, keys: Iterable[str], value: str = "mean") -> dict:
    """``value`` per row of a summary ``table``, keyed by its ``keys`` columns joined with
    ``_`` (``ptb_pos_frozen_ln``)."""
    keys = list(keys)
    return {
        "_".join(str(row[k]) for k in keys): float(row[value])
        for _, row in table.iterrows()
    }


def verdicts(claim_ids: Iterable[str]) -> pd.DataFrame:
    """The claims' verdict table (:func:`normlab.claims.verdict_table`, brief) cut to the
    columns that fit the text column: id, effect, ours (mean ± 95 % half-width), seeds
    and verdict; the data each effect reads is named in its effect."""
    from .. import claims

    found = claims.verdict_table(list(claim_ids), brief=True)
    keep = [c for c in ("id", "effect", "ours", "n", "verdict") if c in found]
    return found[keep].rename(columns={"n": "seeds"})


def resolve(claim_ids: Iterable[str]) -> tuple[pd.DataFrame, Any]:
    """What would resolve each inconclusive claim of ``claim_ids``
    (:func:`normlab.facts.resolve_cost`), without the columns no row fills; and one
    sentence (Markdown) naming the inconclusive claims, or saying that none is."""
    from ..facts import resolve_cost

    cost = resolve_cost(claim_ids).dropna(axis=1, how="all")
    if cost.empty:
        return cost, markdown(
            "Every claim of this chapter has a verdict on its saved set."
        )
    named = " and ".join(f"**{i}**" for i in cost["id"])
    verb, pronoun = ("stays", "it") if len(cost) == 1 else ("stay", "them")
    return cost, markdown(
        f"{named} {verb} inconclusive; the table gives the seeds (and test items) that "
        f"would resolve {pronoun} with 80 % power, and their CPU cost at the saved set's pace."
    )
