"""Tables of the task chapters' runs (13-15): corruption, data names, references.

:func:`corruption_table` gives one row per robustness run and condition;
:func:`with_sources` names in a table the dataset that served each run; :func:`by_seed`
reads one value per seed; :func:`tagging_baselines` and :func:`regression_references` are
the context-free taggers and the simple regressors the chapters measure methods against.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from .. import data

__all__ = [
    "by_seed",
    "corruption_table",
    "regression_references",
    "tagging_baselines",
    "with_sources",
]


def corruption_table(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per run and (corruption, severity), plus a ``severity`` 0 row for clean accuracy."""
    rows = []
    for record in records:
        config = record["config"]
        rows.append(
            {
                "run_id": record["run_id"],
                **config,
                "corruption": "clean",
                "severity": 0,
                "accuracy": record["clean_accuracy"],
                "val_metric": record["metrics"]["val_metric"],
            }
        )
        for row in record.get("corruption", []):
            rows.append(
                {
                    "run_id": record["run_id"],
                    **config,
                    **row,
                    "val_metric": record["metrics"]["val_metric"],
                }
            )
    return pd.DataFrame(rows)


def with_sources(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each row's ``data`` replaced by its ``source`` where the grid chose
    one (``mnist`` served by ``mnist_5k``, ``energy_efficiency`` by ``friedman``), so that a
    table names the dataset that served the run ("real MNIST, 5,000 digits"), not the
    task's default stand-in; the ``source`` column is dropped."""
    if "source" not in frame or "data" not in frame:
        return frame
    chosen = frame["source"].where(frame["source"].map(lambda v: isinstance(v, str)))
    return frame.assign(data=chosen.fillna(frame["data"])).drop(columns="source")


def by_seed(rows: pd.DataFrame, value: str) -> dict[int, float]:
    """``{seed: value}`` of a table holding one row per seed."""
    if rows["seed"].duplicated().any():
        raise ValueError(
            "rows hold more than one row per seed; filter to one configuration first"
        )
    return {int(s): float(v) for s, v in zip(rows["seed"], rows[value])}


def tagging_baselines(train: data.DataSplit, test: data.DataSplit) -> dict[str, float]:
    """Token accuracy on ``test`` of two taggers that ignore context, fitted on ``train``.

    ``majority_tag``: every token gets the most frequent tag. ``word_majority``: each word
    gets its most frequent tag in ``train`` (unknown words the majority tag): what a tagger
    reaches without looking at the neighbours.
    """
    from ..data.types import IGNORE_INDEX

    if train.task != "tagging" or test.task != "tagging":
        raise ValueError(
            f"tagging_baselines needs tagging splits, got {train.task!r} and {test.task!r}"
        )
    words, tags = train.x.flatten(), train.y.flatten()
    real = tags != IGNORE_INDEX
    counts = np.zeros(
        (int(max(train.x.max(), test.x.max())) + 1, train.num_classes), dtype=np.int64
    )
    np.add.at(counts, (words[real].numpy(), tags[real].numpy()), 1)
    majority = int(counts.sum(0).argmax())
    by_word = np.where(counts.sum(1) > 0, counts.argmax(1), majority)
    test_words, test_tags = test.x.flatten().numpy(), test.y.flatten().numpy()
    keep = test_tags != IGNORE_INDEX
    return {
        "majority_tag": float((test_tags[keep] == majority).mean()),
        "word_majority": float((by_word[test_words[keep]] == test_tags[keep]).mean()),
    }


_Arrays = dict[str, np.ndarray]


def regression_references(
    task: str,
    profile: str | None = None,
    *,
    seeds: int = 5,
    hidden: int = 64,
    chosen: str | None = None,
) -> pd.DataFrame:
    """Test RMSE (original units) of simple models on the same splits as ``autonorm_tabular``
    (``chosen``: the grid's ``source``, e.g. ``"friedman"``).

    - ``mean``: predict the training mean (the floor any model must beat);
    - ``linear``: ridge regression, its penalty chosen on the validation split from
      ``10^-3 .. 10^3``;
    - ``mlp``: scikit-learn's ``MLPRegressor`` with two hidden layers of ``hidden`` units,
      L-BFGS for at most 500 iterations (``capped``: it stopped there), its L2 penalty
      chosen on validation from 0.1 .. 100; one row per seed (the linear and mean models are
      deterministic).
    """
    splits = data.for_profile(task, profile, chosen=chosen)
    train = splits["train"]
    if train.task != "regression":
        raise ValueError(f"task={task!r} is not a regression task")
    scale = float(train.meta.get("target_scale", 1.0))
    xs = {k: s.x.numpy().astype(np.float64) for k, s in splits.items()}
    ys = {
        k: s.y.numpy().astype(np.float64).reshape(len(s), -1).squeeze(-1)
        for k, s in splits.items()
    }
    mean = float(np.sqrt(np.mean((ys["test"] - ys["train"].mean()) ** 2)) * scale)
    ridge = _best_on_val(_ridges(xs, ys), xs, ys, scale)
    rows: list[dict[str, Any]] = [
        {"model": "mean", "seed": 0, "rmse": mean},
        {
            "model": "linear",
            "seed": 0,
            "rmse": _rmse(ridge, xs, ys, "test", scale),
            "alpha": ridge.alpha,
        },
    ]
    for seed in range(seeds):
        mlp = _best_on_val(_mlps(xs, ys, seed, hidden), xs, ys, scale)
        rows.append(
            {
                "model": "mlp",
                "seed": seed,
                "rmse": _rmse(mlp, xs, ys, "test", scale),
                "alpha": mlp.alpha,
                "capped": mlp.n_iter_ >= mlp.max_iter,
            }
        )
    table = pd.DataFrame(rows)
    table["stand_in"] = bool(train.meta.get("stand_in", False))
    table["data"] = train.name
    return table


def _rmse(model: Any, xs: _Arrays, ys: _Arrays, split: str, scale: float) -> float:
    """``model``'s RMSE on ``split``, in the target's original units."""
    return float(np.sqrt(np.mean((model.predict(xs[split]) - ys[split]) ** 2)) * scale)


def _best_on_val(models: Iterable[Any], xs: _Arrays, ys: _Arrays, scale: float) -> Any:
    """The fitted model with the lowest validation RMSE."""
    return min(models, key=lambda m: _rmse(m, xs, ys, "val", scale))


def _ridges(xs: _Arrays, ys: _Arrays) -> list[Any]:
    """Ridge regressions with penalties ``10^-3 .. 10^3``, fitted on the training split."""
    from sklearn.linear_model import Ridge

    return [
        Ridge(alpha=a).fit(xs["train"], ys["train"]) for a in 10.0 ** np.arange(-3, 4)
    ]


def _mlps(xs: _Arrays, ys: _Arrays, seed: int, hidden: int) -> list[Any]:
    """Two-hidden-layer L-BFGS MLPs with L2 penalties 0.1 .. 100, fitted on training."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPRegressor

    with warnings.catch_warnings():
        # 500 iterations is the stated budget; reaching it is recorded in ``capped``
        warnings.simplefilter("ignore", ConvergenceWarning)
        return [
            MLPRegressor(
                hidden_layer_sizes=(hidden, hidden),
                alpha=a,
                solver="lbfgs",
                max_iter=500,
                random_state=seed,
            ).fit(xs["train"], ys["train"])
            for a in (0.1, 1.0, 10.0, 100.0)
        ]
