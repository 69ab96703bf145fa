"""Chapter 14 (tabular regression): every number and table its prose quotes.

- :func:`constant_bound` and :func:`energy_bounds`: the RMSE no constant prediction can
  exceed on targets in a range, for the Energy Efficiency set's two targets;
- :func:`equivalence`: N12's equivalence table cut to the text column;
- :func:`finding`: the chapter's opening sentence;
- :func:`numbers`: every value the chapter glues (after the prefix ``ch14_``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .. import analysis, claims
from ..claims.tables import equivalence_table
from .part2 import markdown, means, resolve, schedule

__all__ = [
    "PAPER_ENERGY_RMSE",
    "ENERGY_TARGETS",
    "MARGIN",
    "constant_bound",
    "energy_bounds",
    "equivalence",
    "finding",
    "numbers",
]

#: The paper's Energy Efficiency RMSE (AutoNorm-S), the smallest it reports there.
PAPER_ENERGY_RMSE = 22.75
#: The UCI ENB2012 targets' ranges: (name, lowest, highest).
ENERGY_TARGETS = (
    ("heating load", 6.01, 43.1),
    ("cooling load", 10.9, 48.03),
    ("either target", 6.0, 48.0),
)
#: N12's margin: a relative RMSE difference this small counts as negligible.
MARGIN = 0.02


def constant_bound(low: float, high: float, n: int | None = None) -> float:
    """The largest RMSE that the midpoint ``(low + high) / 2`` can have on targets in
    ``[low, high]``: ``(high - low) / 2`` (Popoviciu); with ``n`` training targets, the
    bound on the training mean's expected test RMSE, ``sqrt(1 + 1/n)`` times that."""
    if not high >= low:
        raise ValueError(f"need high >= low, got {low!r} and {high!r}")
    bound = (high - low) / 2
    return bound if n is None else bound * math.sqrt(1 + 1 / n)


def energy_bounds() -> pd.DataFrame:
    """Per Energy Efficiency target (:data:`ENERGY_TARGETS`): its range, the constant
    prediction's RMSE bound, and the paper's RMSE over that bound."""
    return pd.DataFrame(
        {
            "target": name,
            "lowest": low,
            "highest": high,
            "constant's RMSE ≤": constant_bound(low, high),
            "paper / bound": PAPER_ENERGY_RMSE / constant_bound(low, high),
        }
        for name, low, high in ENERGY_TARGETS
    )


def equivalence(runs: pd.DataFrame, margin: float = MARGIN) -> pd.DataFrame:
    """:func:`normlab.claims.tables.equivalence_table` of ``runs`` at ``margin``, cut to
    the columns that fit the text column: the other method, the difference and its 95 %
    interval, the margin, whether equivalent, the smallest margin that would be, seeds."""
    found = equivalence_table(runs, margin)
    keep = ["minus", "difference", "95% low", "95% high", "margin", "equivalent"]
    keep += ["smallest margin", "n"]
    return found[keep].rename(columns={"n": "seeds", "smallest margin": "smallest"})


def finding() -> Any:
    """The chapter's opening sentence (Markdown): the paper's Energy RMSE against the
    constant prediction's bound on either target, and N12's verdict on the stand-in."""
    either = energy_bounds().iloc[-1]
    verdict = claims.evaluate("N12").verdict
    worse = PAPER_ENERGY_RMSE > either["constant's RMSE ≤"]
    energy = (
        f"the paper's Energy Efficiency RMSE of {PAPER_ENERGY_RMSE} is worse than "
        "predicting one constant for every building could ever be"
        if worse
        else f"the paper's Energy Efficiency RMSE of {PAPER_ENERGY_RMSE} is within "
        "what a constant prediction allows"
    )
    return markdown(
        f"{energy[0].upper()}{energy[1:]}, so it is not a trained model's error in the "
        f"target's units; and on a generated stand-in, whether AutoNorm-S and FrozenLN "
        f"are equivalent within {MARGIN:.0%} of RMSE is *{verdict}*."
    )


def numbers(saved: Any, reference_mean: float, test_rows: int) -> Mapping[str, Any]:
    """Every value chapter 14 glues: the saved set's schedule, N12's verdict, relative
    difference and note, the arms' mean RMSE at their chosen rates, the training mean's
    RMSE (``reference_mean``, from the live references), the test split's rows, the
    constant bound on either Energy target and :func:`finding`."""
    runs = saved.results
    outcome = claims.evaluate("N12")
    ((label, effect, _),) = outcome.effects
    summary = analysis.select_best(
        runs, ["data", "normaliser"], "lr", higher_is_better=False
    )
    found: dict[str, Any] = {
        "finding": finding(),
        "N12": markdown(f"*{outcome.verdict}*"),
        "rel": float(effect.mean),
        "rel_half": float(effect.half),
        "power": markdown(outcome.notes.get(label, "the test has the power it needs")),
        "direction": "larger" if effect.mean > 0 else "smaller",
        "rmse_mean_model": float(reference_mean),
        "test_rows": int(test_rows),
        "margin": MARGIN,
        "bound_either": float(energy_bounds().iloc[-1]["constant's RMSE ≤"]),
        "paper_energy": PAPER_ENERGY_RMSE,
        **schedule(runs),
    }
    found |= {f"rmse_{k}": v for k, v in means(summary, ["normaliser"]).items()}
    found["resolve"] = resolve(["N12"])[1]
    return found
