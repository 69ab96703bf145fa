"""The one paired comparison: two arms, each at its learning rate chosen on validation data,
paired by seed, oriented by the metric.

Every empirical rule and every chapter compares arms this way:

1. :func:`at_chosen_lr` keeps every seed's row at the rate whose mean validation metric is
   best for its configuration (the test split chooses nothing);
2. :func:`paired` takes ``a`` minus ``b`` for each (configuration, seed), where a side named
   by several arms is the strongest of them on validation in that configuration, averages
   over configurations per seed, and turns the sign so that positive means ``a`` is better
   (also for a lower-is-better metric such as an RMSE);
3. the :class:`~normlab.claims.registry.Effect` it returns carries each side's mean test
   metric and the task's chance level, so :func:`normlab.claims.report.judge` can refuse a
   verdict on an arm that did not train, and, for an accuracy, the terms that bound the
   test set's own noise (:func:`item_terms`, :func:`normlab.stats.accuracy_item_variance`).

:mod:`normlab.claims.tables` shows it as the chapters' tables.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .registry import Arm, Effect, Unmeasurable
from .rules import Rule

__all__ = [
    "CONFIG",
    "at_chosen_lr",
    "chance_level",
    "source_of",
    "test_items",
    "item_terms",
    "difference",
    "paired",
    "only",
    "per_seed",
]

#: The axes that make a configuration (those present in a table; the compared axis excluded).
CONFIG: tuple[str, ...] = (
    "data",
    "budget",
    "optimizer",
    "activation",
    "init",
    "head",
    "readout",
    "width",
    "depth",
    "channels",
    "batch_size",
    "selector_lr",
    "tau",
)
#: Metrics with a chance level: the majority class's share of the task's test split.
CLASSIFICATION_METRICS = ("accuracy", "token_accuracy")


def _config(table: pd.DataFrame, by: str, config: Sequence[str] | None) -> list[str]:
    names = CONFIG if config is None else config
    return [c for c in names if c in table.columns and c != by]


def at_chosen_lr(
    results: pd.DataFrame,
    *,
    by: str = "normaliser",
    config: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every seed's row at the learning rate chosen per configuration and arm on validation.

    A configuration is every present axis of :data:`CONFIG` (or of ``config``); the chosen
    ``lr`` has the best mean ``val_metric`` across seeds among the rates where no seed
    diverged (:func:`normlab.experiments.select_best`), a NaN mean never wins, ``at_edge``
    flags a choice at the grid's edge and ``all_diverged`` one where every rate had a
    diverged seed. A table without an ``lr`` column (one rate
    per arm) is returned whole.
    """
    from ..experiments.runner import at_chosen_lr as chosen

    if results.empty:
        raise Unmeasurable("the results table is empty")
    if by not in results:
        raise Unmeasurable(f"the results table has no {by!r} column")
    if "lr" not in results:
        return results
    return chosen(results, [*_config(results, by, config), by])


def source_of(results: pd.DataFrame) -> str | None:
    """The table's ``source`` setting (the offline dataset its grid chose for the task, e.g.
    ``mnist_5k``); None without one, or with several."""
    if "source" not in results:
        return None
    chosen = set(results["source"].dropna())
    return str(chosen.pop()) if len(chosen) == 1 else None


@functools.cache
def _majority_share(task: str, data_profile: str, chosen: str | None = None) -> float:
    from .. import data
    from ..data.sources import RESTYLED
    from ..data.types import IGNORE_INDEX

    base = task.removesuffix(RESTYLED)  # a restyled task keeps its labels
    labels = data.for_profile(base, data_profile, chosen=chosen)["test"].y.flatten()
    labels = labels[labels != IGNORE_INDEX]
    return float(labels.bincount().max() / labels.numel())


def chance_level(results: pd.DataFrame) -> float | None:
    """The share of the majority class in the test split of the table's task, which a
    network that learned nothing reaches; None for a metric without one or a mixed table."""
    metric = set(results.get("metric", ()))
    tasks = set(results.get("data", ()))
    if (
        len(metric) != 1
        or metric.pop() not in CLASSIFICATION_METRICS
        or len(tasks) != 1
    ):
        return None
    profiles = set(results.get("data_profile", results.get("profile", ())))
    if len(profiles) != 1:
        return None
    return _majority_share(tasks.pop(), profiles.pop(), source_of(results))


@functools.cache
def _test_items(task: str, data_profile: str, chosen: str | None = None) -> int:
    from .. import data
    from ..data.sources import RESTYLED

    base = task.removesuffix(RESTYLED)  # a restyled task keeps its test split's size
    return len(data.for_profile(base, data_profile, chosen=chosen)["test"].y)


def test_items(results: pd.DataFrame) -> int | None:
    """The number of test items behind each accuracy of the table: test images or sentences
    (a tagged sentence is one item, as its tokens are not independent of each other); None
    for a metric without a chance level or a table of several tasks or data profiles."""
    if chance_level(results) is None:
        return None
    profile = set(results.get("data_profile", results.get("profile", ()))).pop()
    return _test_items(str(results["data"].iloc[0]), str(profile), source_of(results))


def item_terms(
    arms: Sequence[Arm], weights: Sequence[float], n_test: int | None
) -> tuple[tuple[float, float, int], ...]:
    """The terms ``(weight, mean accuracy, test items)`` of an effect that is the weighted sum
    ``weights`` of the ``arms``' mean accuracies (an arm's pooled mean over configurations
    only loosens the bound, which is concave in the accuracy); empty without ``n_test``."""
    if n_test is None:
        return ()
    return tuple((float(w), arm.score, n_test) for arm, w in zip(arms, weights))


def only(best: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """The rows with every ``axis == value`` of ``where``; Unmeasurable when one is absent."""
    for key, value in where.items():
        if key not in best or value not in set(best[key]):
            raise Unmeasurable(f"no runs with {key}={value!r}")
        best = best[best[key] == value]
    return best


def per_seed(series: pd.Series) -> dict[int, float]:
    """A (configuration, seed)-indexed series averaged over configurations: one value a seed."""
    return {int(s): float(v) for s, v in series.groupby(level="seed").mean().items()}


def _higher(table: pd.DataFrame) -> bool:
    if "higher_is_better" not in table or table["higher_is_better"].nunique() != 1:
        raise Unmeasurable("the table needs one higher_is_better value")
    return bool(table["higher_is_better"].iloc[0])


def _side(
    rows: pd.DataFrame,
    names: str | Sequence[str],
    *,
    by: str,
    value: str,
    config: list[str],
) -> tuple[pd.Series, pd.Series, str]:
    """One side per (configuration, seed): its ``value`` and test metric, and its name."""
    group = [names] if isinstance(names, str) else list(names)
    present = [n for n in group if n in set(rows[by])]
    if not present:
        raise Unmeasurable(f"no runs of {' or '.join(group)}")
    part = rows[rows[by].isin(present)]
    index = [*config, "seed"]
    wide = {
        column: part.pivot_table(index=index, columns=by, values=column)
        for column in {value, "test_metric"}
    }
    if len(present) == 1:
        pick = pd.Series(present[0], index=wide[value].index)
        name = present[0]
    else:  # the strongest of the group on validation, per configuration
        higher = _higher(part)
        val = part.groupby([*config, by])["val_metric"].mean()
        val = val.fillna(-math.inf if higher else math.inf)
        if config:
            table = val.unstack(by).fillna(-math.inf if higher else math.inf)
            best = table.idxmax(axis=1) if higher else table.idxmin(axis=1)
            configs = wide[value].index.droplevel("seed")
            pick = pd.Series([best.loc[c] for c in configs], index=wide[value].index)
        else:
            top = val.idxmax() if higher else val.idxmin()
            pick = pd.Series(top, index=wide[value].index)
        name = f"strongest of {'/'.join(present)}"

    def taken(frame: pd.DataFrame) -> pd.Series:
        return pd.Series(
            [frame.at[i, arm] for i, arm in pick.items()], index=frame.index
        )

    return taken(wide[value]), taken(wide["test_metric"]), name


def difference(
    best: pd.DataFrame,
    a: str | Sequence[str],
    b: str | Sequence[str],
    *,
    by: str = "normaliser",
    value: str = "test_metric",
    within: Mapping[str, Any] | None = None,
    config: Sequence[str] | None = None,
    higher_is_better: bool | None = None,
) -> tuple[pd.Series, tuple[Arm, Arm]]:
    """``a`` minus ``b`` per (configuration, seed), oriented as :func:`paired`, and the arms."""
    rows = only(best, **dict(within or {}))
    names = _config(rows, by, config)
    left, left_test, left_name = _side(rows, a, by=by, value=value, config=names)
    right, right_test, right_name = _side(rows, b, by=by, value=value, config=names)
    higher = _higher(rows) if higher_is_better is None else higher_is_better
    diff = ((left - right) if higher else (right - left)).dropna()
    if diff.empty:
        raise Unmeasurable(f"no seed has runs of both {left_name} and {right_name}")
    chance = chance_level(rows)
    arms = tuple(
        Arm(name, float(np.nanmean(test.to_numpy(dtype=float))), chance)
        for name, test in ((left_name, left_test), (right_name, right_test))
    )
    return diff, arms


def paired(
    best: pd.DataFrame,
    a: str | Sequence[str],
    b: str | Sequence[str],
    *,
    by: str = "normaliser",
    value: str = "test_metric",
    within: Mapping[str, Any] | None = None,
    config: Sequence[str] | None = None,
    higher_is_better: bool | None = None,
    label: str | None = None,
    rule: Rule | None = None,
) -> Effect:
    """``a`` minus ``b`` in ``value``, paired by seed, averaged over configurations per seed.

    ``best`` is :func:`at_chosen_lr`'s table; ``within`` keeps the rows with those axis
    values; each of ``a`` and ``b`` is an arm (a value of ``by``) or several (the strongest on
    validation per configuration). The sign is turned so that positive means ``a`` is better:
    by the table's metric direction, or by ``higher_is_better`` for a ``value`` that is not
    the metric. The effect's arms hold each side's mean test metric and the chance level.
    """
    diff, arms = difference(
        best,
        a,
        b,
        by=by,
        value=value,
        within=within,
        config=config,
        higher_is_better=higher_is_better,
    )
    seeds = per_seed(diff)
    items: tuple[tuple[float, float, int], ...] = ()
    if value == "test_metric":
        items = item_terms(
            arms, (1.0, -1.0), test_items(only(best, **dict(within or {})))
        )
    where = ", ".join(f"{k} {v}" for k, v in (within or {}).items())
    text = label or f"{arms[0].name} - {arms[1].name}" + (
        f" ({where})" if where else ""
    )
    if within and "data" in within:
        data: tuple[str, ...] = (str(within["data"]),)
    else:
        data = tuple(sorted(set(best["data"]))) if "data" in best else ()
    samples = np.array([seeds[s] for s in sorted(seeds)])
    return Effect(text, samples, rule, arms, data, items)
