"""Chapter 12's numbers: when AutoNorm-S's rule fires, and the regime its verdicts read.

Every function reads a saved set's table or records given to it and returns plain
values or tables; the chapter glues them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis import gates as ag
from ..experiments.gate_grids import T_FREEZE
from ..gates import FREEZE_PREFIX
from .ch11 import short_regime

__all__ = ["REGIME_ARMS", "regime_table", "regime_sentence"]

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
