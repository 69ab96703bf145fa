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
   metric and the task's chance level, so :func:`normlab.claims.judge` can refuse a
   verdict on an arm that did not train, and, for an accuracy, the terms that bound the
   test set's own noise (:func:`item_terms`, :func:`normlab.stats.accuracy_item_variance`).

:mod:`normlab.claims.tables` shows it as the chapters' tables.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import stats
from .._hits import decode_hits
from .registry import Arm, Effect, Unmeasurable
from .rules import Rule

__all__ = [
    "item_differences",
    "paired_item_variance",
    "item_level_variance",
    "CONFIG",
    "at_chosen_lr",
    "chance_level",
    "ceiling_level",
    "source_of",
    "test_items",
    "item_terms",
    "difference",
    "paired",
    "only",
    "per_seed",
    "CLASSIFICATION_METRICS",
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
    diverged (:func:`normlab.run_tables.select_best`), a NaN mean never wins, ``at_edge``
    flags a choice at the grid's edge and ``all_diverged`` one where every rate had a
    diverged seed. A table without an ``lr`` column (one rate
    per arm) is returned whole.
    """
    from ..run_tables import at_chosen_lr as chosen

    if results.empty:
        raise Unmeasurable("the results table is empty")
    if by not in results:
        raise Unmeasurable(f"the results table has no {by!r} column")
    if "lr" not in results:
        return results
    return chosen(results, [*_config(results, by, config), by])


def _source(results: pd.DataFrame) -> tuple[bool, str | None]:
    """Whether the table names one dataset choice (its ``source`` column, where a grid
    chose a task's offline dataset), and that choice (None: the task's default)."""
    if "source" not in results:
        return True, None
    chosen = set(results["source"].dropna())
    if len(chosen) > 1 or (chosen and results["source"].isna().any()):
        return False, None
    return True, (str(chosen.pop()) if chosen else None)


def source_of(results: pd.DataFrame) -> str | None:
    """The table's ``source`` setting (the offline dataset its grid chose for the task, e.g.
    ``mnist_5k``); None without one, or with several."""
    one, chosen = _source(results)
    return chosen if one else None


@functools.cache
def _test_split(task: str, data_profile: str, chosen: str | None) -> tuple[float, int]:
    """The majority class's share and the size of a task's test split."""
    from .. import data
    from ..data.sources import RESTYLED
    from ..data.types import IGNORE_INDEX

    base = task.removesuffix(RESTYLED)  # a restyled task keeps its labels and its size
    labels = data.for_profile(base, data_profile, chosen=chosen)["test"].y
    items = len(labels)  # a tagged sentence is one item
    labels = labels.flatten()
    labels = labels[labels != IGNORE_INDEX]
    return float(labels.bincount().max() / labels.numel()), items


def _one_test_split(results: pd.DataFrame) -> tuple[float, int] | None:
    metric = set(results.get("metric", ()))
    tasks = set(results.get("data", ()))
    if (
        len(metric) != 1
        or metric.pop() not in CLASSIFICATION_METRICS
        or len(tasks) != 1
    ):
        return None
    profiles = set(results.get("data_profile", results.get("profile", ())))
    one, chosen = _source(results)
    if len(profiles) != 1 or not one:
        return None
    return _test_split(str(tasks.pop()), str(profiles.pop()), chosen)


def chance_level(results: pd.DataFrame) -> float | None:
    """The share of the majority class in the test split of the table's task, which a
    network that learned nothing reaches; None for a metric without one or a mixed table."""
    found = _one_test_split(results)
    return None if found is None else found[0]


@functools.cache
def _ceiling(task: str, data_profile: str, chosen: str | None) -> float | None:
    """The best accuracy a task's test split allows, where its data define one (a
    generated task's ``meta["ceiling"]``); None otherwise."""
    from .. import data
    from ..data.sources import RESTYLED

    base = task.removesuffix(RESTYLED)
    found = data.for_profile(base, data_profile, chosen=chosen)["test"].meta
    value = found.get("ceiling") if isinstance(found, dict) else None
    return float(value) if value is not None else None


def ceiling_level(results: pd.DataFrame) -> float | None:
    """The best accuracy the table's task allows where its stand-in defines one (its Bayes
    accuracy under label noise); None for a task without one, another metric or a mixed
    table (then :data:`normlab.claims.rules.CEILING` serves an accuracy)."""
    if _one_test_split(results) is None:
        return None
    profiles = set(results.get("data_profile", results.get("profile", ())))
    _, chosen = _source(results)
    return _ceiling(str(results["data"].iloc[0]), str(profiles.pop()), chosen)


def test_items(results: pd.DataFrame) -> int | None:
    """The number of test items behind each accuracy of the table: test images or sentences
    (a tagged sentence is one item, as its tokens are not independent of each other); None
    for a metric without a chance level or a table of several tasks, data profiles or
    datasets."""
    found = _one_test_split(results)
    return None if found is None else found[1]


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


@dataclass(frozen=True)
class _Side:
    """One side of a comparison per (configuration, seed): its ``value``, its test metric,
    the arm it took (the strongest on validation when several), and its name."""

    value: pd.Series
    test: pd.Series
    pick: pd.Series
    name: str


def _side(
    rows: pd.DataFrame,
    names: str | Sequence[str],
    *,
    by: str,
    value: str,
    config: list[str],
) -> _Side:
    """One side per (configuration, seed)."""
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

    return _Side(taken(wide[value]), taken(wide["test_metric"]), pick, name)


def _sides(
    best: pd.DataFrame,
    a: str | Sequence[str],
    b: str | Sequence[str],
    *,
    by: str,
    value: str,
    within: Mapping[str, Any] | None,
    config: Sequence[str] | None,
) -> tuple[pd.DataFrame, list[str], _Side, _Side]:
    rows = only(best, **dict(within or {}))
    names = _config(rows, by, config)
    left = _side(rows, a, by=by, value=value, config=names)
    right = _side(rows, b, by=by, value=value, config=names)
    return rows, names, left, right


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
    rows, _, left, right = _sides(
        best, a, b, by=by, value=value, within=within, config=config
    )
    higher = _higher(rows) if higher_is_better is None else higher_is_better
    diff = (
        (left.value - right.value) if higher else (right.value - left.value)
    ).dropna()
    if diff.empty:
        raise Unmeasurable(f"no seed has runs of both {left.name} and {right.name}")
    chance, ceiling = chance_level(rows), ceiling_level(rows)
    arms = tuple(
        Arm(
            side.name,
            float(np.nanmean(side.test.to_numpy(dtype=float))),
            chance,
            ceiling,
        )
        for side in (left, right)
    )
    return diff, arms


def item_differences(
    best: pd.DataFrame,
    a: str | Sequence[str],
    b: str | Sequence[str],
    *,
    by: str = "normaliser",
    within: Mapping[str, Any] | None = None,
    config: Sequence[str] | None = None,
    partial: bool = False,
) -> pd.DataFrame | None:
    """Per (configuration, seed), each test item's hit of ``a`` minus ``b`` (1, 0 or -1;
    each side the arm :func:`difference` takes): one row per pair that both sides ran,
    one column per test item, from the runs' ``test_hits`` column. None where a run lacks
    its hits (``partial``: the pairs whose runs kept them, None where none did) or the
    runs were scored on test sets of different sizes."""
    if "test_hits" not in best:
        return None
    rows, names, left, right = _sides(
        best, a, b, by=by, value="test_metric", within=within, config=config
    )
    index = [*names, "seed"]
    hits = rows.set_index([*index, by])["test_hits"]
    if hits.index.has_duplicates or (hits.isna().any() and not partial):
        return None
    hits = hits.dropna()

    def at(key: Any, arm: str) -> Any:
        return hits.get((*key, arm) if isinstance(key, tuple) else (key, arm))

    keys, pairs = [], []
    for key, l_arm, r_arm in zip(left.pick.index, left.pick, right.pick):
        pair = at(key, l_arm), at(key, r_arm)
        if pair[0] is not None and pair[1] is not None:
            keys.append(key)
            pairs.append(pair)
    if not pairs:
        return None
    try:
        decoded = [(decode_hits(x), decode_hits(y)) for x, y in pairs]
    except ValueError:
        return None
    if len({x.size for pair in decoded for x in pair}) != 1:
        return None
    values = np.stack([x.astype(float) - y for x, y in decoded])
    return pd.DataFrame(
        values,
        index=pd.MultiIndex.from_tuples(
            [k if isinstance(k, tuple) else (k,) for k in keys], names=index
        ),
    )


def paired_item_variance(
    best: pd.DataFrame,
    a: str | Sequence[str],
    b: str | Sequence[str],
    *,
    by: str = "normaliser",
    within: Mapping[str, Any] | None = None,
    config: Sequence[str] | None = None,
) -> float | None:
    """The test set's variance of the accuracy difference ``a - b``, from the runs' per-item
    hits (:func:`item_differences`): None where they are missing. Tagging runs' hits are
    per scored token; their ``test_hit_starts`` group the tokens by sentence, the
    independent unit.

    Each test item's difference is averaged over the (configuration, seed) pairs that
    :func:`difference` compares, and :func:`normlab.stats.paired_item_variance` turns the
    items' spread into the variance of their mean.
    """
    per_pair = item_differences(best, a, b, by=by, within=within, config=config)
    if per_pair is None:
        return None
    per_item = per_pair.to_numpy().mean(axis=0)
    starts = _starts(only(best, **dict(within or {})), per_item.size)
    if starts is False:
        return None
    return stats.paired_item_variance(per_item, starts)


def item_level_variance(
    best: pd.DataFrame,
    a: str | Sequence[str],
    b: str | Sequence[str],
    *,
    by: str = "normaliser",
    within: Mapping[str, Any] | None = None,
    config: Sequence[str] | None = None,
    partial: bool = False,
) -> float | None:
    """The test set's own share of :func:`paired_item_variance` for ``a - b``, the runs'
    disagreement item by item taken out (:func:`normlab.stats.item_level_variance`, each
    seed's per-item differences averaged over its configurations): the variance to plan a
    test set's size with. None where the runs lack their hits (``partial``: read on the
    seeds that kept them, None below two such seeds)."""
    per_pair = item_differences(
        best, a, b, by=by, within=within, config=config, partial=partial
    )
    if per_pair is None:
        return None
    per_seed = per_pair.groupby(level="seed").mean().to_numpy()
    if partial and per_seed.shape[0] < 2:
        return None
    starts = _starts(only(best, **dict(within or {})), per_seed.shape[1])
    if starts is False:
        return None
    return stats.item_level_variance(per_seed, starts)


def _starts(rows: pd.DataFrame, size: int) -> np.ndarray | None | bool:
    """The sentences' starts of tagging runs' hits (the ``test_hit_starts`` column): None
    where the items are independent (no such column, or none filled), False where the runs
    disagree on them or they do not fit ``size`` items (then no paired variance)."""
    if "test_hit_starts" not in rows:
        return None
    texts = set(rows["test_hit_starts"].dropna())
    if not texts:
        return None
    if len(texts) != 1 or rows["test_hit_starts"].isna().any():
        return False
    try:
        starts = decode_hits(texts.pop())
    except ValueError:
        return False
    return starts if starts.size == size and starts[:1].all() else False


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
    For a test accuracy, the test set's noise is measured item by item where the runs kept
    their hits (:func:`paired_item_variance`, and its item-level share to plan with); where
    only some seeds did, the item-level share on those seeds serves for both.
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
    item_var = level = None
    if value == "test_metric":
        items = item_terms(
            arms, (1.0, -1.0), test_items(only(best, **dict(within or {})))
        )
        kw: dict[str, Any] = {"by": by, "within": within, "config": config}
        item_var = paired_item_variance(best, a, b, **kw)
        level = item_level_variance(best, a, b, **kw)
        if item_var is None:  # some seeds kept their hits: the test set's own share
            item_var = level = item_level_variance(best, a, b, **kw, partial=True)
    where = ", ".join(f"{k} {v}" for k, v in (within or {}).items())
    text = label or f"{arms[0].name} - {arms[1].name}" + (
        f" ({where})" if where else ""
    )
    if within and "data" in within:
        data: tuple[str, ...] = (str(within["data"]),)
    else:
        data = tuple(sorted(set(best["data"]))) if "data" in best else ()
    samples = np.array([seeds[s] for s in sorted(seeds)])
    return Effect(text, samples, rule, arms, data, items, item_var, item_level=level)
