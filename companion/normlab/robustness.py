"""Chapter 15's tables of the robustness runs (accuracy under corruption, measured by
:mod:`normlab.corruption_suite`).

:func:`robustness_run_table` turns run records into one row per run; once each normaliser
is taken at its learning rate chosen on clean validation accuracy
(``normlab.run_tables.at_chosen_lr``), :func:`robustness_summary` gives its accuracies and :func:`paired_rows` the paired tests
across seeds between one normaliser and the others. :func:`matched_rates` compares the
normalisers at each learning rate that they share, and :func:`corruption_ranking` orders
the corruptions by how much accuracy they cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from . import normalisers
from .claims.pairing import paired
from .stats import difference_test

__all__ = [
    "corruption_ranking",
    "matched_rates",
    "paired_rows",
    "robustness_run_table",
    "robustness_summary",
]

# ------------------------------------------------------------------ chapter 15's tables

_RECORD_KEYS = (
    "run_id",
    "config",
    "metrics",
    "clean_accuracy",
    "mean_corruption_accuracy",
)
_CHOSEN_COLUMNS = ("data", "normaliser", "lr", "at_edge", "seed")


def robustness_run_table(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per robustness run record (``part2_tasks.load_records``): its config, ``clean``
    (clean test accuracy, also as ``test_metric``), ``mCA``
    (:func:`normlab.corruption_suite.mean_corruption_accuracy`), ``val_metric`` (clean
    validation accuracy, on which the learning rate is chosen) and ``higher_is_better``."""
    rows = []
    for record in records:
        missing = [key for key in _RECORD_KEYS if key not in record]
        if missing:
            raise ValueError(
                f"records must be robustness run records; one lacks {missing}"
            )
        rows.append(
            {
                "run_id": record["run_id"],
                **record["config"],
                "clean": record["clean_accuracy"],
                "mCA": record["mean_corruption_accuracy"],
                "val_metric": record["metrics"]["val_metric"],
                "test_metric": record["clean_accuracy"],
                "higher_is_better": True,
            }
        )
    if not rows:
        raise ValueError("records is empty: no finished robustness runs were read")
    return pd.DataFrame(rows)


def _check_chosen(chosen: Any, values: Sequence[str] = ("clean", "mCA")) -> None:
    """``chosen`` holds one data set, one learning rate per normaliser and one run per
    normaliser and seed, with the columns ``values``."""
    if not isinstance(chosen, pd.DataFrame) or chosen.empty:
        raise ValueError(
            "chosen must be a non-empty table of runs at their chosen learning rate, got "
            f"{type(chosen).__name__}"
        )
    missing = sorted(set(_CHOSEN_COLUMNS).union(values) - set(chosen.columns))
    if missing:
        raise ValueError(
            f"chosen lacks the columns {missing}; make it with "
            "normlab.run_tables.at_chosen_lr(robustness_run_table(records))"
        )
    if chosen["data"].nunique() != 1:
        raise ValueError(
            f"chosen must hold one data set, got {sorted(chosen['data'].unique())}; "
            "filter it first"
        )
    rates = chosen.groupby("normaliser")["lr"].nunique()
    if (rates > 1).any() or chosen.duplicated(["normaliser", "seed"]).any():
        raise ValueError(
            "chosen must hold one learning rate per normaliser and one run per seed, got "
            f"{rates.to_dict()} rates; choose them with normlab.run_tables.at_chosen_lr"
        )


def _in_book_order(names: Iterable[str]) -> list[str]:
    """``names`` in the registry's order (:func:`normlab.normalisers.names`), unknown ones last."""
    order = {name: i for i, name in enumerate(normalisers.names())}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


def robustness_summary(chosen: pd.DataFrame) -> pd.DataFrame:
    r"""Per normaliser of ``chosen`` (its runs at the learning rate chosen on clean validation
    accuracy), in the registry's order.

    Columns: the means over seeds of the clean accuracy (``clean``) and of the mean
    corruption accuracy (``mCA``), the standard deviation of mCA across seeds (``mCA_sd``),
    the number of seeds ``n``, the chosen ``lr`` and ``at_edge`` (the choice is the smallest
    or largest rate tried), and the share of the clean accuracy kept under corruption,

    .. math::
        \text{mCA / clean} = \overline{\text{mCA}} \,/\, \overline{\text{clean}}.
    """
    _check_chosen(chosen)
    table = chosen.groupby("normaliser").agg(
        clean=("clean", "mean"),
        mCA=("mCA", "mean"),
        mCA_sd=("mCA", "std"),
        n=("seed", "count"),
        lr=("lr", "first"),
        at_edge=("at_edge", "first"),
    )
    table["drop"] = table["clean"] - table["mCA"]
    table["mCA / clean"] = table["mCA"] / table["clean"]
    return table.loc[_in_book_order(table.index)]


def matched_rates(
    runs: pd.DataFrame,
    reference: str = "autonorm_s",
    other: str = "frozen_ln",
    *,
    confidence: float = 0.95,
) -> pd.DataFrame:
    r"""``reference`` against ``other`` at every learning rate both were run at (the rate
    held equal rather than chosen per arm), from a :func:`robustness_run_table` of one
    data set.

    One row per rate: each arm's mean clean accuracy, mean corruption accuracy, drop
    (clean - mCA) and retention (mCA / clean, per seed, then averaged), in columns named
    "clean, FrozenLN" and so on (the arms' labels), and the paired
    difference of the drops, ``other``'s minus ``reference``'s (positive: ``reference``
    loses less to corruption), with its interval ``low``..``high`` at ``confidence`` and
    ``n`` seeds (:func:`normlab.stats.difference_test`).
    """
    missing = {"normaliser", "lr", "seed", "clean", "mCA"} - set(runs.columns)
    if missing:
        raise ValueError(
            f"runs lacks the columns {sorted(missing)}; use robustness_run_table"
        )
    if runs["data"].nunique() != 1:
        raise ValueError("runs must hold one data set; filter it first")
    table = runs.assign(
        drop=runs["clean"] - runs["mCA"], retention=runs["mCA"] / runs["clean"]
    )
    rates = sorted(
        set(table.loc[table["normaliser"] == reference, "lr"])
        & set(table.loc[table["normaliser"] == other, "lr"])
    )
    if not rates:
        raise ValueError(f"{reference!r} and {other!r} share no learning rate")
    rows = []
    for lr in rates:
        at = table[table["lr"] == lr]
        arms = {
            name: at[at["normaliser"] == name].set_index("seed")
            for name in (reference, other)
        }
        seeds = sorted(set(arms[reference].index) & set(arms[other].index))
        d = (
            arms[other].loc[seeds, "drop"] - arms[reference].loc[seeds, "drop"]
        ).to_numpy(dtype=float)
        test = difference_test(d, confidence)
        row: dict[str, Any] = {"lr": lr}
        for name, arm in arms.items():
            for column in ("clean", "mCA", "drop", "retention"):
                row[f"{column}, {normalisers.label(name)}"] = float(arm[column].mean())
        row |= {
            f"drop, {normalisers.label(other)} - {normalisers.label(reference)}": test.mean,
            "low": test.low,
            "high": test.high,
            "n": test.n,
        }
        rows.append(row)
    return pd.DataFrame(rows)


def corruption_ranking(conditions: pd.DataFrame) -> pd.DataFrame:
    """The corruptions ordered by the accuracy they leave, lowest first: from a
    ``normlab.analysis.tasks.corruption_table`` (the runs to average, e.g. each normaliser at its
    chosen rate), per corruption the mean accuracy over severities 1-5, runs and
    normalisers (``accuracy``) and its spread over severities (``worst``, the lowest
    severity's mean, usually severity 5). No clean accuracy is subtracted: a stand-in suite
    may corrupt only the first test images (``eval_images``), while the clean accuracy is
    measured on all of them."""
    corrupted = conditions[conditions["severity"] > 0]
    if corrupted.empty:
        raise ValueError("conditions holds no corrupted rows (severity > 0)")
    by_severity = corrupted.pivot_table(
        index="corruption", columns="severity", values="accuracy", aggfunc="mean"
    )
    ranking = pd.DataFrame(
        {"accuracy": by_severity.mean(axis=1), "worst": by_severity.min(axis=1)}
    )
    return ranking.sort_values("accuracy")


def _others(
    chosen: pd.DataFrame, reference: str, against: Sequence[str] | None
) -> list[str]:
    """``against`` checked against the normalisers of ``chosen``; by default every one but
    ``reference``, in the registry's order."""
    present = set(chosen["normaliser"])
    if reference not in present:
        raise ValueError(
            f"reference={reference!r} has no runs in chosen; it holds {sorted(present)}"
        )
    others = present - {reference}
    if against is None:
        against = _in_book_order(others)
    if isinstance(against, str) or not against or not set(against) <= others:
        raise ValueError(
            f"against must name normalisers of chosen other than {reference!r} "
            f"({sorted(others)}), got {against!r}"
        )
    return list(against)


def paired_rows(
    chosen: pd.DataFrame,
    against: Sequence[str] | None = None,
    *,
    reference: str = "autonorm_s",
    values: Sequence[str] = ("mCA", "clean"),
    confidence: float = 0.95,
) -> pd.DataFrame:
    r"""Paired t-tests across seeds of ``reference`` minus each normaliser of ``against``.

    ``chosen`` holds each normaliser's runs at its learning rate chosen on clean validation
    accuracy. Runs are paired by seed (:func:`normlab.claims.paired`), and for each of
    ``values`` the per-seed differences :math:`d_s = a_s - b_s` give
    (:func:`normlab.stats.difference_test`)

    .. math::
        \bar d, \qquad t = \frac{\bar d}{s_d / \sqrt n}, \qquad d_z = \frac{\bar d}{s_d}
        = \frac{t}{\sqrt n},

    the interval ``low``..``high`` at ``confidence`` and the two-sided ``p``. One row per
    (normaliser, value): ``normaliser`` (the reference), ``minus``, ``on``, ``difference``
    (:math:`\bar d`), ``low``, ``high``, ``p``, ``d_z``, ``n``. ``against`` defaults to every
    other normaliser in ``chosen``, in the registry's order.
    """
    _check_chosen(chosen, values)
    against = _others(chosen, reference, against)
    rows = []
    for other in against:
        for value in values:
            effect = paired(
                chosen, reference, other, value=value, higher_is_better=True
            )
            test = difference_test(effect.samples, confidence)
            rows.append(
                {
                    "normaliser": reference,
                    "minus": other,
                    "on": value,
                    "difference": test.mean,
                    "low": test.low,
                    "high": test.high,
                    "p": test.p,
                    "d_z": test.d_z,
                    "n": test.n,
                }
            )
    return pd.DataFrame(rows)
