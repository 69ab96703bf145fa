"""The analysis behind Part I's fully-connected chapters (6 and 7).

Per-seed scores at the learning rate chosen on validation data (:func:`seed_scores`), slopes
of accuracy against log2(batch size) under each budget convention (:func:`batch_slopes`),
learning-rate sensitivity, the per-epoch histories of saved runs and
whether a run's validation accuracy had reached its plateau (:func:`plateau_gap`). Paired
leads between normalisers are :func:`normlab.claims.paired`; the steps-to-target analysis
of the batch-size study is :mod:`normlab.analysis.batch`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..run_tables import select_best, summarise
from ..stats import mean_ci, slopes_log2

__all__ = [
    "batch_slopes",
    "load_histories",
    "lr_sensitivity",
    "plateau_gap",
    "plateau_table",
    "seed_scores",
]


def seed_scores(
    results: pd.DataFrame, by: Sequence[str], *, lr_from: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per seed, the validation and test metrics at the learning rate chosen per ``by`` group.

    The choice is :func:`~normlab.run_tables.select_best` (the best mean ``val_metric``
    across seeds; the test split plays no part). ``lr_from`` (optional) imposes the learning
    rates instead: a table with the ``by`` columns it shares and ``lr``. Columns: ``by``,
    ``lr``, ``at_edge``, ``seed``, ``val_metric`` and ``test_metric``.
    """
    higher = bool(results["higher_is_better"].iloc[0])
    chosen = select_best(results, by, "lr", higher_is_better=higher)
    if lr_from is not None:  # the imposed rate, and whether *its* choice was at an edge
        shared = [c for c in by if c in lr_from.columns]
        imposed = lr_from[
            [*shared, "lr", *(["at_edge"] if "at_edge" in lr_from else [])]
        ]
        chosen = chosen.drop(
            columns=["lr", *(["at_edge"] if "at_edge" in imposed else [])]
        ).merge(imposed, on=shared)
    picked = results.merge(chosen[[*by, "lr", "at_edge"]], on=[*by, "lr"])
    columns = [*by, "lr", "at_edge", "seed", "val_metric", "test_metric"]
    return picked[columns].sort_values([*by, "seed"]).reset_index(drop=True)


def batch_slopes(results: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Slopes of test accuracy against log2(batch size), per budget convention and normaliser.

    Conventions: ``fixed_epochs`` and ``fixed_steps`` choose the learning rate on validation
    data at every batch size. ``scaled_lr`` chooses it once, at the runs' ``base_batch_size``,
    and multiplies it by ``batch_size / base_batch_size`` (the runs already do the
    multiplying), the linear scaling rule. Per seed, a least-squares slope across batch sizes
    (:func:`normlab.stats.slopes_log2`); then the mean and 95 % CI across seeds.

    Returns ``(slopes, scores)``: the slope table (``budget``, ``normaliser``, ``mean``,
    ``ci95``, ``n``, ``low``, ``high``, ``at_edge``: any chosen rate at the grid's edge) and
    the per-seed scores behind it. For ``scaled_lr``, ``at_edge`` is that of the choice at
    the base batch size, the only choice the convention makes.
    """
    parts = []
    for budget, part in results.groupby("budget"):
        by = ["budget", "normaliser", "batch_size"]
        lr_from = None
        if budget == "scaled_lr":
            base_batch_size = int(part["base_batch_size"].iloc[0])
            base = part[part["batch_size"] == base_batch_size]
            if base.empty:
                raise ValueError(
                    f"scaled_lr needs runs at base_batch_size={base_batch_size}"
                )
            lr_from = select_best(base, ["budget", "normaliser"], "lr")
        parts.append(seed_scores(part, by, lr_from=lr_from))
    scores = pd.concat(parts, ignore_index=True)
    rows = []
    for (budget, normaliser), group in scores.groupby(
        ["budget", "normaliser"], sort=False
    ):
        swept = group.groupby("seed").filter(
            lambda seed: seed["batch_size"].nunique() > 1
        )  # a slope needs two sizes
        mean, half, n = mean_ci(
            slopes_log2(swept, "batch_size", "test_metric") if len(swept) else []
        )
        rows.append(
            {
                "budget": budget,
                "normaliser": normaliser,
                "mean": mean,
                "ci95": half,
                "n": n,
                "low": mean - half,
                "high": mean + half,
                "at_edge": bool(group["at_edge"].any()),
            }
        )
    return pd.DataFrame(rows), scores


def lr_sensitivity(results: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean validation metric (95 % CI across seeds) at every learning rate, per ``by`` group."""
    return summarise(results, [*by, "lr"], value="val_metric")


def load_histories(
    results: pd.DataFrame, folder: str | Path
) -> dict[str, list[dict[str, Any]]]:
    """The per-epoch history of each run in ``results`` (by ``run_id``), from ``folder/runs``."""
    runs = Path(folder) / "runs"
    return {
        run: json.loads((runs / f"{run}.json").read_text())["history"]
        for run in results["run_id"]
    }


def plateau_gap(
    history: Sequence[Mapping[str, Any]], key: str = "val_accuracy"
) -> float:
    """Best ``key`` over the epochs minus its mean over the last quarter of them (at least
    one epoch): 0 when training ended at its best, small once the curve has plateaued."""
    values = [float(row[key]) for row in history]
    if not values:
        raise ValueError("plateau_gap needs a history with at least one epoch")
    tail = values[-max(1, len(values) // 4) :]
    return max(values) - sum(tail) / len(tail)


def plateau_table(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per run (``run_id``), its :func:`plateau_gap` on the validation metric, from saved
    records (:meth:`normlab.results.SavedSet.records`)."""
    rows = [
        {
            "run_id": record["run_id"],
            "plateau_gap": plateau_gap(record["history"], f"val_{record['metric']}"),
        }
        for record in records
        if record.get("history")
    ]
    return pd.DataFrame(rows, columns=["run_id", "plateau_gap"])
