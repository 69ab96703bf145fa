"""Chapter 12's numbers: when AutoNorm-S's rule fires, and the regime its verdicts read.

Every function reads a saved set's table or records given to it and returns plain
values or tables; the chapter glues them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis import gates as ag
from ..claims.tables import paired_table
from ..data.sources import served_by, title
from ..experiments import gate_study as gs
from ..experiments.gate_grids import T_FREEZE
from ..gates import FREEZE_PREFIX
from ..paper import EPS_H
from .ch11 import short_regime
from .part2 import markdown

__all__ = [
    "REGIME_ARMS",
    "freeze_decisions",
    "freeze_effect",
    "freeze_plainly",
    "lead_over_frozen_ln",
    "regime_table",
    "regime_sentence",
]

#: The arms whose regime N3 and N5 read: AutoNorm-S's freeze run, FrozenLN, the plain gate.
REGIME_ARMS: tuple[str, ...] = (
    f"{FREEZE_PREFIX}{T_FREEZE['cpu']}",
    "frozen_ln",
    "autonorm",
)


def regime_table(results: pd.DataFrame, records: list[dict[str, Any]]) -> pd.DataFrame:
    """Per task: the epoch of AutoNorm-S's decision (``decision``), the validation
    accuracy of its runs and of FrozenLN's then, the share of seeds on which the paper's
    rule fired, each arm's final training loss, the loss ratio and whether the gated runs
    are past their plateau (:func:`normlab.analysis.gates.regime`), every arm at its rate
    chosen on validation."""
    runs = ag.at_defaults(results)
    best = ag.chosen(ag.with_schedules(runs))
    fired = best[best["arm"] == "autonorm_s"].groupby("data")["fired"].mean()
    freeze = ag.chosen(runs[runs["arm"].isin(REGIME_ARMS)])
    rows = []
    for task, part in freeze.groupby("data", sort=False):
        lrs = part.groupby("arm")["lr"].first().to_dict()
        regime = short_regime(records, lrs, task).set_index("arm")
        gated, ln = regime.loc[REGIME_ARMS[0]], regime.loc["frozen_ln"]
        rows.append(
            {
                "data": task,
                "epochs": int(gated["epochs"]),
                "decision": T_FREEZE["cpu"],
                "val_gated": float(gated["val_at_decision"]),
                "val_ln": float(ln["val_at_decision"]),
                "fired": float(fired.get(task, float("nan"))),
                "loss_gated": float(gated["train_loss"]),
                "loss_ln": float(ln["train_loss"]),
                "loss_ratio": float(gated["loss_ratio"]),
                "late_gain": float(gated["late_gain"]),
                "plateau": bool(gated["plateau"]),
            }
        )
    return pd.DataFrame(rows)


def regime_sentence(row: pd.Series, name: str) -> str:
    """The regime of one task's verdicts in one sentence (``name``: the task's dataset)."""
    state = (
        "past their plateau"
        if row["plateau"]
        else f"short of their plateau (training loss {row['loss_ratio']:.1f}× "
        f"FrozenLN's, {row['late_gain']:+.3f} of validation accuracy in the last "
        "quarter)"
    )
    return (
        f"On {name} the rule decides at the end of epoch {row['decision']} of "
        f"{row['epochs']}, when the gated runs' validation accuracy is "
        f"{row['val_gated']:.2f} (FrozenLN's {row['val_ln']:.2f}); it fires on "
        f"{100 * row['fired']:.0f} % of seeds; the gated runs end with training loss "
        f"{row['loss_gated']:.2f} against FrozenLN's {row['loss_ln']:.2f}, {state}."
    )


def freeze_decisions(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """When AutoNorm-S's freeze fires, from the gate study's ``runs`` (at the defaults):
    the mean gate entropy at each task's T_freeze over seeds (``mean``, ``std``, ``min``,
    ``max``, ``count``), and the share of seeds where the paper's rule (H >= eps_H) fires,
    a row per task and a column per T_freeze."""
    frozen = runs[runs["arm"].str.startswith(gs.FREEZE_PREFIX)]
    decisions = (
        frozen.assign(
            t_freeze=frozen["arm"].str.removeprefix(gs.FREEZE_PREFIX).astype(int)
        )
        .groupby(["data", "t_freeze"])["decision_entropy"]
        .agg(["mean", "std", "min", "max", "count"])
    )
    paper = pd.concat(
        [
            ag.compose_schedule(runs, t, EPS_H, "high")
            for t in ag.freeze_epochs(runs["arm"].unique())
        ]
    )
    fires = paper.groupby(["data", "t_freeze"])["fired"].mean().unstack()
    return decisions, fires


def freeze_plainly(runs: pd.DataFrame, t_freeze: int, profile: str = "cpu") -> Any:
    """Which task the paper's rule (H >= eps_H at ``t_freeze``) freezes, in words: per
    task, on how many seeds of how many (every learning rate's seed counted once, at the
    plain gate's chosen rate), as Markdown."""
    at = ag.at_lr_of(runs, "autonorm")
    paper = ag.compose_schedule(at, t_freeze, EPS_H, "high")
    parts = []
    for task, part in paper.groupby("data", sort=True):
        source = gs.CPU_TASKS.get(task, {}).get("source") if profile == "cpu" else None
        kind = gs.TASKS.get(str(task), "")
        parts.append(
            f"on {title(served_by(str(task), profile, source))} ({kind}) in "
            f"{int(part['fired'].sum())} of {len(part)} seeds"
        )
    return markdown(
        f"At T_freeze = {t_freeze} and eps_H = {EPS_H:g} the paper's rule froze every "
        f"gate {' and '.join(parts)}."
    )


def freeze_effect(runs: pd.DataFrame, t_freeze: int) -> pd.DataFrame:
    """AutoNorm-S at ``t_freeze`` minus the plain learned gate, per task and reading of
    the rule (at eps_H = 0.1), paired by seed, every arm at the plain gate's learning rate:
    ``data``, ``rule``, ``fired`` (share of seeds), ``mean``, ``low``, ``high``, ``n``.
    Where the rule fired on no seed the two runs are the same and the difference is 0."""
    at = ag.at_lr_of(runs, "autonorm")
    plain = at[at["arm"] == "autonorm"]
    rows = []
    for rule in ("high", "low"):
        arm = ag.compose_schedule(at, t_freeze, EPS_H, rule)
        both = pd.concat([plain, arm], ignore_index=True)
        diff = paired_table(ag.chosen(both), arm["arm"].iloc[0], "autonorm", by="arm")
        fired = arm.groupby("data")["fired"].mean()
        rows.append(diff.merge(fired, on="data").assign(rule=rule))
    effect = pd.concat(rows, ignore_index=True)
    return effect[["data", "rule", "fired", "mean", "low", "high", "n"]]


def lead_over_frozen_ln(runs: pd.DataFrame, t_freeze: int) -> dict[str, float]:
    """AutoNorm-S (the paper's rule, eps_H = 0.1, ``t_freeze``) minus FrozenLN per task,
    paired by seed: ``lead_<task>`` and its 95 % half-width ``lead_half_<task>``."""
    paper = ag.compose_schedule(runs, t_freeze, EPS_H, "high")
    pair = ag.chosen(pd.concat([runs[runs["arm"] == "frozen_ln"], paper]))
    lead = paired_table(pair, "autonorm_s", "frozen_ln", by="arm")
    found: dict[str, float] = {}
    for row in lead.itertuples():
        found[f"lead_{row.data}"] = float(row.mean)
        found[f"lead_half_{row.data}"] = float(row.ci95)
    return found
