"""Tables of runs: one row per run, summaries across seeds, the rate chosen on validation.

Every experiment's records become a tidy table with :func:`records_table` (config and
metrics as columns); :func:`summarise` gives mean, 95 % CI and ``n`` across seeds per group;
:func:`select_best` chooses a hyperparameter (the learning rate) per group on the
validation metric alone and reports the test metric there; :func:`at_chosen_lr` keeps the
runs at that choice, one row per seed, for the paired comparisons of :mod:`normlab.claims`.

Below the experiments (the runner writes each set's table with them) and knowing nothing of
any study; the studies' own tables are :mod:`normlab.analysis`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd

from .stats import mean_ci

__all__ = [
    "at_chosen_lr",
    "choice_edges",
    "common_seeds",
    "cross_fit",
    "duplicated_runs",
    "records_table",
    "seed_halves",
    "select_best",
    "summarise",
]


def _groups(
    results: pd.DataFrame, by: Sequence[str]
) -> Iterable[tuple[Any, pd.DataFrame]]:
    """``groupby(by)``, or the whole table as one group when ``by`` is empty."""
    return results.groupby(list(by), sort=True, dropna=False) if by else [((), results)]


def common_seeds(results: pd.DataFrame, cells: Sequence[str]) -> pd.DataFrame:
    """The rows of the seeds that every cell (a value of each of ``cells``) ran: a set
    that runs some cells for more seeds than others (a claim's plan) read balanced, so that
    what is averaged over cells per seed averages the same cells at every seed."""
    if results.empty:
        return results
    seeds = results.groupby(list(cells), dropna=False)["seed"]
    common = set.intersection(*(set(s) for _, s in seeds))
    return results[results["seed"].isin(common)]


def summarise(
    results: pd.DataFrame, by: Sequence[str], value: str = "test_metric"
) -> pd.DataFrame:
    """Mean, 95 % CI half-width (``ci95``) and ``n`` of ``value`` across seeds, per ``by`` group."""
    rows = []
    for key, group in _groups(results, by):
        mean, half, n = mean_ci(group[value])
        rows.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,))),
                "mean": mean,
                "ci95": half,
                "n": n,
            }
        )
    return pd.DataFrame(rows)


def _swept_seeds(group: pd.DataFrame, select: str) -> pd.DataFrame:
    """The rows of ``group`` whose seed ran every value of ``select`` in it: seeds added
    later at the chosen value alone (a plan's confirmation seeds) do not take part in the
    choice, so every value is compared on the same seeds. The whole group where no seed ran
    them all, or where the table has no ``seed`` column."""
    if "seed" not in group:
        return group
    values = group[select].nunique()
    per_seed = group.groupby("seed")[select].nunique()
    full = per_seed.index[per_seed == values]
    return group[group["seed"].isin(full)] if len(full) else group


def select_best(
    results: pd.DataFrame,
    by: Sequence[str],
    select: str = "lr",
    *,
    higher_is_better: bool = True,
    on: str = "val_metric",
    report: str = "test_metric",
) -> pd.DataFrame:
    """Choose ``select`` per configuration on validation data; report the test metric there.

    For each ``by`` group, the value of ``select`` with the best mean ``on`` (validation
    metric) across seeds wins, among the values at which no seed diverged (its ``diverged``
    is true, where the table has that column, or its ``on`` is NaN): a mean over the seeds
    that survived would hide those that did not, and a rate at which 2 of 3 seeds diverge is
    no rate to recommend. Only when every value has a diverged seed is the choice made among
    them all (the best mean over the surviving seeds; a NaN mean never wins), and
    ``all_diverged`` says so. Only the seeds that ran every value take part in the choice
    (seeds run later at the chosen value alone confirm it, and cannot move it); the report
    at the choice uses every seed. The test split plays no part in the choice. Columns: ``by``,
    the chosen ``select``, ``val_mean``, ``mean``/``ci95``/``n`` of ``report`` at that
    choice, ``candidates``, ``at_edge``: True when the choice is the smallest or largest
    value tried, so the grid may not contain the true optimum and should be widened before
    the comparison is trusted, and ``all_diverged``.
    """
    rows = []
    worst = -math.inf if higher_is_better else math.inf
    for key, group in _groups(results, by):
        swept = _swept_seeds(group, select)
        val_means = swept.groupby(select)[on].mean()
        failed = swept[on].isna()
        if "diverged" in swept:
            failed = failed | swept["diverged"].fillna(False).astype(bool)
        failed_at = failed.groupby(swept[select]).any().reindex(val_means.index)
        all_diverged = bool(failed_at.all())
        eligible = (val_means if all_diverged else val_means[~failed_at]).fillna(worst)
        chosen = eligible.idxmax() if higher_is_better else eligible.idxmin()
        at = group[group[select] == chosen]
        mean, half, n = mean_ci(at[report])
        keys = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        rows.append(
            {
                **keys,
                select: chosen,
                "val_mean": float(at[on].mean()),
                "mean": mean,
                "ci95": half,
                "n": n,
                "candidates": len(val_means),
                "at_edge": len(val_means) > 1
                and chosen in (val_means.index.min(), val_means.index.max()),
                "all_diverged": all_diverged,
            }
        )
    return pd.DataFrame(rows)


def choice_edges(
    results: pd.DataFrame,
    chosen: pd.DataFrame,
    by: Sequence[str],
    select: str = "lr",
) -> pd.DataFrame:
    """Where each cell's chosen ``select`` lies among the values that cell tried.

    ``chosen`` has a row per cell (the ``by`` columns and its chosen ``select``, as
    :func:`select_best` gives; NaN where no value was chosen), ``results`` the runs the
    choice was made from. Columns: ``by``, ``select``, ``tried`` (how many values the cell
    of ``results`` ran), ``lowest``, ``highest`` and ``edge``: ``"low"`` or ``"high"`` when
    the choice is the smallest or largest of two or more values tried (the optimum may lie
    beyond it: widen the grid that way), else ``""``. A cell of ``chosen`` that
    ``results`` lacks is a ValueError.
    """
    by = list(by)
    tried = results.groupby(by, dropna=False)[select].agg(["nunique", "min", "max"])
    cells = chosen[[*by, select]].drop_duplicates(by).set_index(by)
    lacking = cells.index.difference(tried.index)
    if len(lacking):
        raise ValueError(f"cells chosen but not in the results: {list(lacking)[:3]}")
    tried = tried.reindex(cells.index)
    value = cells[select]
    several = tried["nunique"] > 1
    low = several & (value == tried["min"])
    high = several & (value == tried["max"]) & ~low
    edge = pd.Series("", index=cells.index).mask(low, "low").mask(high, "high")
    out = pd.DataFrame(
        {
            select: value,
            "tried": tried["nunique"].astype(int),
            "lowest": tried["min"],
            "highest": tried["max"],
            "edge": edge,
        }
    )
    return out.reset_index()


def at_chosen_lr(
    results: pd.DataFrame,
    by: Sequence[str] = ("data", "normaliser"),
    *,
    higher_is_better: bool | None = None,
) -> pd.DataFrame:
    """The rows of ``results`` (one per run) at the learning rate chosen on validation data.

    The choice is :func:`select_best`'s per ``by`` group (best mean ``val_metric`` across
    seeds, at a rate where no seed diverged; the test split plays no part). ``at_edge``,
    ``candidates`` and ``all_diverged`` are carried over so a table can flag a choice at the
    grid's edge, or one made where every rate had a diverged seed. ``higher_is_better``
    None reads the results' own ``higher_is_better`` column.
    """
    if higher_is_better is None:
        higher_is_better = bool(results["higher_is_better"].iloc[0])
    best = select_best(
        results, list(by), "lr", higher_is_better=higher_is_better, report="val_metric"
    )
    keep = best[[*by, "lr", "at_edge", "candidates", "all_diverged"]]
    return results.merge(keep, on=[*by, "lr"], how="inner")


def seed_halves(seeds: Iterable[int]) -> tuple[list[int], list[int]]:
    """The seeds in two halves, the folds of :func:`cross_fit`: even and odd seeds, so
    that leaving a seed out moves no other seed to the other half (by alternate rank, 0,
    2, 4, ... and 1, 3, 5, ... of the sorted seeds, where one parity would be empty). A
    ValueError below two seeds."""
    ranked = sorted({int(s) for s in seeds})
    if len(ranked) < 2:
        raise ValueError(f"seeds must hold at least two seeds to split, got {ranked}")
    even = [s for s in ranked if s % 2 == 0]
    odd = [s for s in ranked if s % 2 == 1]
    return (even, odd) if even and odd else (ranked[0::2], ranked[1::2])


def cross_fit(
    results: pd.DataFrame,
    choose: Callable[[pd.DataFrame], pd.DataFrame],
    on: Sequence[str],
) -> pd.DataFrame:
    """Cross-fitting: each half of the seeds (:func:`seed_halves`) at the choice made on
    the other half, so that no seed's value is read at a choice it took part in.

    ``choose`` takes the rows of one half and returns the choice, a table whose columns
    ``on`` (the cell's axes and the chosen value, e.g. ``lr``) say which rows of a cell
    are kept; the other half's rows that match a row of it are returned, each with
    ``fold`` (0 or 1, the half it belongs to)."""
    if "seed" not in results:
        raise ValueError("results must have a 'seed' column to cross-fit")
    missing = [c for c in on if c not in results]
    if missing:
        raise ValueError(f"on names columns the results lack: {missing}")
    first, second = seed_halves(results["seed"])
    parts = []
    for fold, (estimate, chooser) in enumerate(((first, second), (second, first))):
        chosen = choose(results[results["seed"].isin(chooser)])
        keep = chosen[list(on)].drop_duplicates()
        rows = results[results["seed"].isin(estimate)].merge(keep, on=list(on))
        parts.append(rows.assign(fold=fold))
    return pd.concat(parts, ignore_index=True)


def _table_value(value: Any) -> Any:
    return (
        value
        if value is None or isinstance(value, (str, int, float, bool))
        else json.dumps(value)
    )


def records_table(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Run records as a tidy table: one row per run, config and metrics as columns."""
    rows = []
    for record in records:
        rows.append(
            {
                "run_id": record["run_id"],
                "experiment": record["experiment"],
                "profile": record["profile"],
                **{k: _table_value(v) for k, v in record["config"].items()},
                "metric": record["metric"],
                "higher_is_better": record["higher_is_better"],
                **record["metrics"],
                "seconds": record["seconds"],
            }
        )
    return pd.DataFrame(rows)


def duplicated_runs(results: pd.DataFrame) -> str | None:
    """What repeats in a table of runs, or None: a run is one configuration and seed (the
    columns from after ``profile`` to before ``metric``, as
    :func:`records_table` writes them), else one ``run_id``. Pooling a
    repeated run would count one seed twice, so a statistic refuses such a table
    (:func:`normlab.claims.judge`)."""
    columns = list(results.columns)
    if {"profile", "metric", "seed"} <= set(columns):
        config = columns[columns.index("profile") + 1 : columns.index("metric")]
    else:
        config = ["run_id"] if "run_id" in columns else []
    if not config or results.empty:
        return None
    repeated = results[results.duplicated(subset=config, keep=False)]
    if repeated.empty:
        return None
    first = repeated.iloc[0]
    shown = ["arm", "normaliser", "seed", "run_id"]
    where = ", ".join(f"{c}={first[c]!r}" for c in shown if c in config)
    return (
        f"{len(repeated)} rows repeat a run (the same configuration and seed), e.g. "
        f"{where or dict(first[config])}; each run must appear once"
    )
