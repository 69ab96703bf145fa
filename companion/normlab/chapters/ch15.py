"""Chapter 15 (robustness under corruption): every number and table its prose quotes.

- :func:`plateau`: whether the saved set's runs had levelled off on the clean task;
- :func:`matched`: both arms at each matched learning rate, in two tables that fit the
  text column (each arm's accuracies; the paired difference of their drops);
- :func:`finding`: the chapter's opening sentence;
- :func:`numbers`: every value the chapter glues (after the prefix ``ch15_``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from .. import claims, run_tables
from ..analysis import tasks as task_analysis
from ..robustness import (
    corruption_ranking,
    matched_rates,
    robustness_run_table,
    robustness_summary,
)
from .part2 import markdown, resolve, schedule

__all__ = [
    "ARMS",
    "LEVELLED",
    "plateau",
    "plateau_table",
    "matched",
    "finding",
    "numbers",
]

#: The two arms N7 compares.
ARMS = ("frozen_ln", "autonorm_s")
#: A run has levelled off when its late change is under this share of its early rise.
LEVELLED = 0.1


def plateau(records: Iterable[Mapping[str, Any]], share: float = 1 / 3) -> dict:
    """Whether a saved set's runs had levelled off: per normaliser at its rate chosen on
    validation, the mean over seeds of the validation metric's change over the last
    ``share`` of the epochs (``late_<normaliser>``) and over the rest (``early_<...>``),
    and ``late_epochs``, the epochs that the last share spans."""
    records = list(records)
    table = pd.DataFrame(
        {
            "run_id": r["run_id"],
            "data": r["config"]["data"],
            "normaliser": r["config"]["normaliser"],
            "lr": r["config"]["lr"],
            "seed": r["config"]["seed"],
            "val_metric": r["metrics"]["val_metric"],
            "higher_is_better": r["higher_is_better"],
        }
        for r in records
    )
    chosen = set(run_tables.at_chosen_lr(table)["run_id"])
    epochs = len(records[0]["history"])
    late = max(1, round(epochs * share))
    found: dict[str, float] = {"late_epochs": late}
    changes: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        if r["run_id"] not in chosen:
            continue
        curve = [row[f"val_{r['metric']}"] for row in r["history"]]
        split = curve[-late - 1]
        changes.setdefault(r["config"]["normaliser"], []).append(
            (split - curve[0], curve[-1] - split)
        )
    for name, pairs in changes.items():
        found[f"early_{name}"] = float(sum(p[0] for p in pairs) / len(pairs))
        found[f"late_{name}"] = float(sum(p[1] for p in pairs) / len(pairs))
    return found


def plateau_table(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """:func:`plateau` as a table: per arm, the clean validation accuracy's rise before
    the last third of the epochs, its change during it, and whether it levelled off (a
    late change under :data:`LEVELLED` of the rise)."""
    found = plateau(records)
    names = sorted(k.removeprefix("early_") for k in found if k.startswith("early_"))
    return pd.DataFrame(
        {
            "normaliser": name,
            "rise before": found[f"early_{name}"],
            f"change, last {found['late_epochs']} epochs": found[f"late_{name}"],
            "levelled off": abs(found[f"late_{name}"])
            < LEVELLED * found[f"early_{name}"],
        }
        for name in names
    )


def matched(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both arms at each matched rate (:func:`normlab.robustness.matched_rates` of a run
    table), as two tables: per rate and arm, the clean accuracy, the mean corruption
    accuracy, the drop and the retention; and per rate, FrozenLN's drop minus
    AutoNorm-S's (positive: AutoNorm-S loses less), its 95 % interval and the seeds."""
    wide = matched_rates(runs)
    measures = ("clean", "mCA", "drop", "retention")
    arms = sorted(
        {c.split(", ", 1)[1] for c in wide.columns if c.startswith("clean, ")}
    )
    per_arm = pd.DataFrame(
        {"lr": row["lr"], "arm": arm, **{m: row[f"{m}, {arm}"] for m in measures}}
        for _, row in wide.iterrows()
        for arm in arms
    )
    difference = next(c for c in wide.columns if c.startswith("drop, FrozenLN -"))
    paired = wide[["lr", difference, "low", "high", "n"]].rename(
        columns={difference: "FrozenLN − AutoNorm-S", "n": "seeds"}
    )
    return per_arm, paired


def finding(saved: Any) -> Any:
    """The chapter's opening sentence (Markdown): N7's verdict and which arm loses more
    to corruption on the saved set, each at its own rate."""
    outcome = claims.evaluate("N7")
    ((_, effect, _),) = outcome.effects
    chosen = run_tables.at_chosen_lr(robustness_run_table(saved.records()))
    loses = "less" if effect.mean > 0 else "more"
    return markdown(
        f"Trained on clean real MNIST digits and tested under ten corruptions, "
        f"AutoNorm-S loses {loses} accuracy to corruption than FrozenLN, paired by "
        f"seed over {int(chosen['seed'].nunique())} seeds: the paper's robustness "
        f"claim N7 is *{outcome.verdict}* on this stand-in for CIFAR-10-C."
    )


def numbers(saved: Any, test_images: int) -> Mapping[str, Any]:
    """Every value chapter 15 glues: the saved set's schedule, chance and the trained
    threshold, N7's verdict and paired drop, each arm's clean accuracy, mean corruption
    accuracy, drop and retention, whether the runs levelled off, the matched rates at
    which AutoNorm-S loses less, the worst and mildest corruptions, the images the
    corrupted copies and the clean accuracy read (``test_images``), :func:`finding`."""
    records = saved.records()
    chosen = run_tables.at_chosen_lr(robustness_run_table(records))
    summary = robustness_summary(chosen)
    outcome = claims.evaluate("N7")
    ((_, effect, _),) = outcome.effects
    chance = claims.chance_level(saved.results)
    found: dict[str, Any] = {
        "finding": finding(saved),
        "N7": markdown(f"*{outcome.verdict}*"),
        "drop": float(effect.mean),
        "drop_half": float(effect.half),
        "direction": "less" if effect.mean > 0 else "more",
        "chance": chance,
        "needs": chance + claims.rules.trained_margin(chance),
        "plateau": "long enough"
        if plateau_table(records)["levelled off"].all()
        else "not long enough",
        **schedule(saved.results),
    }
    for name in summary.index:
        for column, key in (("clean", "clean"), ("mCA", "mca"), ("drop", "drop")):
            found[f"{key}_{name}"] = float(summary.loc[name, column])
    _, paired = matched(robustness_run_table(records))
    column = "FrozenLN − AutoNorm-S"
    found["matched_rates"] = len(paired)
    found["matched_less"] = int((paired[column] > 0).sum())
    conditions = task_analysis.corruption_table(records).merge(
        chosen[["run_id"]], on="run_id"
    )
    ranking = corruption_ranking(conditions)
    found["worst"] = ranking.index[0].replace("_", " ")
    found["mildest"] = ranking.index[-1].replace("_", " ")
    found["eval_images"] = int(saved.results["eval_images"].iloc[0])
    found["test_images"] = int(test_images)
    found["resolve"] = resolve(["N7"])[1]
    return found
