"""A gated run's telemetry as tables: its gates per epoch and layer, and what a run's
record keeps of them.

:func:`gate_table` turns run records into one row per run, epoch and gated layer;
:func:`gate_summary` reads what chapter 13 asks of a run's gates, :func:`gate_progress` its
gates at matched training progress. The task studies write both into each run's metrics
(:mod:`normlab.experiments.part2_tasks`), so they sit below the experiments; the studies'
own tables are :mod:`normlab.analysis.gates`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .gates import FREEZE_PREFIX

__all__ = [
    "GATE_SUMMARY",
    "PROGRESS",
    "PROGRESS_METRICS",
    "gate_progress",
    "gate_summary",
    "gate_table",
    "progress_epoch",
]

#: What :func:`gate_summary` reads off a gate table.
GATE_SUMMARY: tuple[str, ...] = (
    "entropy_mean",
    "entropy_final",
    "p_ln_final",
    "depth_slope",
)
#: What :func:`gate_progress` reads at matched training progress.
PROGRESS_METRICS: tuple[str, ...] = (
    "progress_epoch",
    "entropy_at_progress",
    "p_ln_at_progress",
)
# Matched training progress (chapter 13, N10 and N11): a network has made "80 % of its
# progress" at the first epoch whose validation accuracy is at least chance + 0.8 x (its
# best validation accuracy - chance), chance being the validation split's majority share.
# Comparing gates there, not at the same epoch, takes out how fast each task is learned.
PROGRESS = 0.8


def _freeze_epoch(config: dict[str, Any]) -> int:
    """The epoch after which a run's gates were frozen (0: never): its ``freeze_at_<T>``
    arm, or its config's ``freeze_at``."""
    arm = str(config.get("arm") or "")
    tail = arm[len(FREEZE_PREFIX) :]
    return (
        int(tail)
        if arm.startswith(FREEZE_PREFIX) and tail.isdigit()
        else int(config.get("freeze_at") or 0)
    )


def gate_table(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per run, epoch and gated layer: ``p_dyt``, ``p_ln``, ``entropy`` (and
    ``grad_var``, ``snr`` where recorded), with the run's config; ``position`` (the layer's
    order in the network, 0 = first), ``layers`` (how many are gated), ``step`` (the
    optimiser steps by the end of that epoch) and ``frozen`` (the gate was frozen by then)."""
    rows = []
    for record in records:
        config = record["config"]
        freeze_at = _freeze_epoch(config)
        gates = record.get("gates") or []
        layers = list(dict.fromkeys(g["layer"] for g in gates))
        steps = {h["epoch"]: h["step"] for h in record.get("history", [])}
        for gate in gates:
            rows.append(
                {
                    "run_id": record["run_id"],
                    **config,
                    **gate,
                    "position": layers.index(gate["layer"]),
                    "layers": len(layers),
                    "step": steps.get(gate["epoch"], math.nan),
                    "frozen": bool(freeze_at) and gate["epoch"] >= freeze_at,
                }
            )
    return pd.DataFrame(rows)


def gate_summary(gates: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a :func:`gate_table`: what chapter 13 asks of its gates.

    - ``entropy_mean``: the gate entropy averaged over layers and over every epoch (the area
      under the entropy curve per epoch: how long the gates stay undecided);
    - ``entropy_final``, ``p_ln_final``: mean over layers at the last epoch;
    - ``depth_slope``: least-squares slope of the last epoch's ``p_dyt`` against the layer's
      relative depth (position / (layers - 1), 0 = first, 1 = last): positive when deeper
      layers give DyT more weight.
    """
    rows = []
    keys = [
        c for c in ("data", "source", "normaliser", "lr", "seed") if c in gates.columns
    ]
    for run_id, part in gates.groupby("run_id", sort=True):
        last = part[part["epoch"] == part["epoch"].max()]
        depth = last["position"] / max(int(last["layers"].iloc[0]) - 1, 1)
        slope = (
            float(np.polyfit(depth, last["p_dyt"], 1)[0]) if len(last) > 1 else math.nan
        )
        rows.append(
            {
                "run_id": run_id,
                **part.iloc[0][keys].to_dict(),
                "entropy_mean": float(part.groupby("epoch")["entropy"].mean().mean()),
                "entropy_final": float(last["entropy"].mean()),
                "p_ln_final": float(last["p_ln"].mean()),
                "depth_slope": slope,
            }
        )
    return pd.DataFrame(rows)


def progress_epoch(
    val_accuracy: Sequence[float], chance: float, fraction: float = PROGRESS
) -> int:
    """The first epoch (counted from 1) whose validation accuracy reaches
    ``chance + fraction * (max(val_accuracy) - chance)`` (the best epoch, for a run that
    never beat chance)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction!r}")
    values = np.asarray(val_accuracy, dtype=float)
    if values.size == 0:
        raise ValueError("val_accuracy is empty: the run recorded no epochs")
    best = values.max()
    # a run that never beat chance has made no progress: its best epoch stands in
    target = min(chance + fraction * (best - chance), best)
    return int(np.flatnonzero(values >= target - 1e-12)[0]) + 1


def gate_progress(
    record: dict[str, Any], chance: float, fraction: float = PROGRESS
) -> dict[str, float]:
    """A learned-AutoNorm run's gates at matched progress: ``progress_epoch``
    (:func:`progress_epoch` of its validation accuracy), and at that epoch the gate entropy
    and the weight on LayerNorm, each the mean over the gated layers
    (``entropy_at_progress``, ``p_ln_at_progress``)."""
    metric = record.get("metric", "accuracy")
    val = [h[f"val_{metric}"] for h in record["history"]]
    epoch = progress_epoch(val, chance, fraction)
    gates = gate_table([{"run_id": "run", **record}])
    at = gates[gates["epoch"] == epoch]
    if at.empty:
        raise ValueError(f"the run recorded no gates at epoch {epoch}")
    return {
        "progress_epoch": float(epoch),
        "entropy_at_progress": float(at["entropy"].mean()),
        "p_ln_at_progress": float(at["p_ln"].mean()),
    }


# ------------------------------------------------------ AutoNorm-S composed from runs

# What makes one configuration of a gate study besides its task (those a table has).
