"""Steps to a target accuracy against the batch size (chapter 7, claims A12 and A13).

:func:`steps_scores` chooses each cell's rate (the one with the fewest mean steps among the
rates at which every seed reached the target, as Shallue et al. (2019) choose it);
:func:`scaling_slopes` fits, per seed, the slope of log2(epochs to the target) against
log2(batch size): 0 under perfect scaling, 1 where a doubling of the batch saves no step;
:func:`scaling_summary` averages the slopes across seeds; :func:`accuracy_scores` and
:func:`accuracy_slopes` give the paper's own quantity, the test accuracy after a fixed
number of epochs per doubling of the batch, each cell's rate chosen on validation; :func:`critical_batch` reads
where the data needed has doubled (McCandlish et al., 2018). The runs are
:mod:`normlab.experiments.part1_batch`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..run_tables import cross_fit, seed_halves, select_best
from ..stats import mean_ci, slope_log2

__all__ = [
    "CELL",
    "accuracy_scores",
    "accuracy_slopes",
    "critical_batch",
    "scaling_slopes",
    "scaling_summary",
    "steps_scores",
]

#: What makes a cell of the design: its rate is chosen per cell.
CELL: tuple[str, ...] = ("optimizer", "init", "budget", "normaliser", "batch_size")


def _cell(results: pd.DataFrame) -> list[str]:
    return [c for c in CELL if c in results.columns]


def _fewest_steps(cell: pd.DataFrame, seeds: Sequence[int] | None) -> float:
    """The rate of ``cell`` with the fewest mean steps over ``seeds`` (None: every seed)
    among the rates at which every seed of the cell reached the target; NaN where none
    did (ties go to the smaller rate)."""
    reached = cell["steps_to_target"].notna().groupby(cell["lr"]).all()
    rows = cell if seeds is None else cell[cell["seed"].isin(seeds)]
    means = rows.groupby("lr")["steps_to_target"].mean()
    means = means[reached.reindex(means.index, fill_value=False)]
    return float(means.idxmin()) if not means.empty else math.nan


def steps_scores(results: pd.DataFrame, *, cross_fitted: bool = False) -> pd.DataFrame:
    """Per seed, the steps to the target at the rate chosen per cell (:data:`CELL`).

    A cell's rate is the one with the fewest mean steps across seeds among the rates at
    which every seed reached the target (a rate with a censored or diverged seed is no
    rate to recommend, as :func:`~normlab.run_tables.select_best` treats a diverged one);
    ties go to the smaller rate. ``cross_fitted``: each half of the seeds
    (:func:`~normlab.run_tables.seed_halves`) at the rate with the fewest mean steps
    over the other half, so that no seed's steps choose the rate they are read at (which
    rates every seed reached stays a fact of the whole cell). A cell where no rate
    qualifies is *censored*: its rows keep the seeds, with ``lr`` and the steps NaN.
    Columns: the cell's axes, ``lr``, ``at_edge`` (the choice is the smallest or largest
    rate tried), ``censored``, ``seed``, ``steps_to_target``, ``epochs_to_target``,
    ``val_metric`` and ``test_metric``, and ``test_hits`` where the runs kept them.
    """
    runs = results[results["budget"] == "to_target"] if "budget" in results else results
    if runs.empty:
        raise ValueError("steps_scores needs runs under the to_target budget")
    by = _cell(runs)
    keep = ["seed", "steps_to_target", "epochs_to_target", "val_metric", "test_metric"]
    keep += [c for c in ("test_hits",) if c in runs]
    folds = seed_halves(runs["seed"]) if cross_fitted else None
    parts = []
    for key, cell in runs.groupby(by, sort=True):
        keys = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        rates = sorted(cell["lr"].unique())
        pairs = [(None, None)] if folds is None else [folds, folds[::-1]]
        for estimate, chooser in pairs:
            lr = _fewest_steps(cell, chooser)
            rows = cell if estimate is None else cell[cell["seed"].isin(estimate)]
            if math.isnan(lr):
                seeds = rows.drop_duplicates("seed")[keep].assign(
                    steps_to_target=math.nan, epochs_to_target=math.nan
                )
                parts.append(
                    seeds.assign(**keys, lr=math.nan, at_edge=False, censored=True)
                )
                continue
            edge = len(rates) > 1 and lr in (rates[0], rates[-1])
            chosen = rows[rows["lr"] == lr][keep]
            parts.append(chosen.assign(**keys, lr=lr, at_edge=edge, censored=False))
    columns = [*by, "lr", "at_edge", "censored", *keep]
    table = pd.concat(parts, ignore_index=True)[columns]
    return table.sort_values([*by, "seed"]).reset_index(drop=True)


def accuracy_scores(
    results: pd.DataFrame, *, cross_fitted: bool = True
) -> pd.DataFrame:
    """Per seed, the test accuracy at the end of a ``fixed_epochs`` run, at the rate
    chosen per cell (:data:`CELL`) on the validation accuracy (the paper's convention;
    :func:`~normlab.run_tables.select_best`'s rule, a rate with a diverged seed never
    chosen while another qualifies). ``cross_fitted`` (the default): each half of the
    seeds at the rate chosen on the other half (:func:`~normlab.run_tables.cross_fit`).
    Columns: the cell's axes, ``lr``, ``at_edge``, ``seed``, ``val_metric``,
    ``test_metric`` and ``test_hits`` where the runs kept them."""
    runs = (
        results[results["budget"] == "fixed_epochs"] if "budget" in results else results
    )
    if runs.empty:
        raise ValueError("accuracy_scores needs runs under the fixed_epochs budget")
    by = _cell(runs)

    def choose(rows: pd.DataFrame) -> pd.DataFrame:
        return select_best(rows, by, "lr", higher_is_better=True)

    if cross_fitted:
        table = cross_fit(runs, choose, [*by, "lr"])
        edges = pd.concat(
            [choose(runs[runs["seed"].isin(h)]) for h in seed_halves(runs["seed"])]
        )
        edge = edges.groupby(by)["at_edge"].any().rename("at_edge").reset_index()
        table = table.merge(edge, on=by)
    else:
        chosen = choose(runs)[[*by, "lr", "at_edge"]]
        table = runs.merge(chosen, on=[*by, "lr"])
    keep = ["seed", "val_metric", "test_metric"]
    keep += [c for c in ("test_hits",) if c in table]
    table = table[[*by, "lr", "at_edge", *keep]]
    return table.sort_values([*by, "seed"]).reset_index(drop=True)


def accuracy_slopes(scores: pd.DataFrame) -> pd.DataFrame:
    """Per seed, the least-squares slope of the test accuracy against log2(batch size),
    per cell without its batch size (:func:`accuracy_scores`'s table): the paper's
    quantity, negative where accuracy falls as the batch grows. Columns: the cell's other
    axes, ``seed``, ``slope`` (NaN for a seed with fewer than two batch sizes) and
    ``weakest`` (the lowest mean test accuracy of its batch sizes, for learnability)."""
    by = [c for c in _cell(scores) if c != "batch_size"]
    rows = []
    for key, group in scores.groupby(by, sort=True):
        keys = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        weakest = float(group.groupby("batch_size")["test_metric"].mean().min())
        for seed, part in group.groupby("seed", sort=True):
            slope = math.nan
            if part["batch_size"].nunique() > 1:
                slope = slope_log2(part["batch_size"], part["test_metric"])
            rows.append({**keys, "seed": int(seed), "slope": slope, "weakest": weakest})
    return pd.DataFrame(rows)


def scaling_slopes(scores: pd.DataFrame) -> pd.DataFrame:
    """Per seed, the slope of log2(epochs to the target) against log2(batch size), per
    cell without its batch size (:func:`steps_scores`'s table).

    0 is perfect scaling (each doubling of the batch halves the steps), 1 a doubling that
    saves no step. A normaliser with a censored batch size gets NaN (its curve is not
    known there). Columns: the cell's other axes, ``seed``, ``slope``, ``censored`` and
    ``weakest`` (the lowest mean test metric of its batch sizes, for learnability).
    """
    by = [c for c in _cell(scores) if c != "batch_size"]
    rows = []
    for key, group in scores.groupby(by, sort=True):
        keys = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        censored = bool(group["censored"].any())
        weakest = float(group.groupby("batch_size")["test_metric"].mean().min())
        for seed, part in group.groupby("seed", sort=True):
            slope = math.nan
            if not censored and part["batch_size"].nunique() > 1:
                slope = slope_log2(
                    part["batch_size"], np.log2(part["epochs_to_target"])
                )
            rows.append(
                {
                    **keys,
                    "seed": int(seed),
                    "slope": slope,
                    "censored": censored,
                    "weakest": weakest,
                }
            )
    return pd.DataFrame(rows)


def scaling_summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Per cell without its batch size: the mean slope of :func:`scaling_slopes` with its
    95 % CI across seeds (``mean``, ``ci95``, ``n``, ``low``, ``high``), ``censored`` (how
    many batch sizes are) and ``at_edge`` (how many rates were chosen at the grid's edge)."""
    slopes = scaling_slopes(scores)
    by = [c for c in _cell(scores) if c != "batch_size"]
    cells = scores.drop_duplicates([*by, "batch_size"])
    flags = cells.groupby(by)[["censored", "at_edge"]].sum().astype(int).reset_index()
    rows = []
    for key, group in slopes.groupby(by, sort=True):
        mean, half, n = mean_ci(group["slope"].dropna())
        keys = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        rows.append(
            {
                **keys,
                "mean": mean,
                "ci95": half,
                "n": n,
                "low": mean - half,
                "high": mean + half,
            }
        )
    return pd.DataFrame(rows).merge(flags, on=by)


def critical_batch(scores: pd.DataFrame, factor: float = 2.0) -> pd.DataFrame:
    """Where perfect scaling ends, per cell without its batch size: the batch size at which
    the mean epochs to the target first reach ``factor`` times their value at the smallest
    batch (interpolated in log2 between batch sizes), the critical batch size of
    McCandlish et al. (2018), at which the samples needed have doubled. NaN when they never
    do in the range (``beyond`` True) or a batch size is censored.
    Columns: the cell's other axes, ``critical_batch``, ``beyond``, ``largest``."""
    if not factor > 1:
        raise ValueError(f"factor must be above 1, got {factor!r}")
    by = [c for c in _cell(scores) if c != "batch_size"]
    rows = []
    for key, group in scores.groupby(by, sort=True):
        keys = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        curve = group.groupby("batch_size")["epochs_to_target"].mean().sort_index()
        found, beyond = math.nan, False
        if not group["censored"].any():
            level = math.log2(factor * curve.iloc[0])
            lx, ly = np.log2(curve.index.to_numpy(float)), np.log2(curve.to_numpy())
            above = np.nonzero(ly >= level)[0]
            if len(above) == 0:
                beyond = True
            else:
                i = int(above[0])  # i >= 1: the first point is below the level
                share = (level - ly[i - 1]) / (ly[i] - ly[i - 1])
                found = float(2 ** (lx[i - 1] + share * (lx[i] - lx[i - 1])))
        rows.append(
            {
                **keys,
                "critical_batch": found,
                "beyond": beyond,
                "largest": int(curve.index.max()),
            }
        )
    return pd.DataFrame(rows)
