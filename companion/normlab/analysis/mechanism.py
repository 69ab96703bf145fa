"""The bottleneck's mechanism (chapter 11): where the learned gate trails the random one,
and how soon its gates commit there.

A *cell* is one setting of the sweep (:data:`CELL`: task, budget in epochs,
initialisation, the backbone's rate and the selector's multiple of it). Within a cell,
:func:`gap_table` pairs the learned gate with the Random Selector by seed (the random arm
has no selector, so its run at the same task, budget, init, rate and seed partners every
selector rate) and gives the mean difference with the t-interval over seeds that the
chapters' paired tables use (:func:`normlab.stats.interval`).

*Time to specialise* is read off the gates recorded per epoch
(:func:`normlab.gate_tables.gate_table`): :func:`commitments` gives, per run and gated
layer, the first epoch whose entropy falls below a threshold (:data:`SPECIALISED_AT`,
half of ln 2 by default) and the normaliser the gate then favours;
:func:`specialisation_table` the first epoch whose entropy *averaged over layers* falls
below it, per run; :func:`mechanism_table` joins both to the gap, per cell, and
:func:`selector_table` puts the selector's rates side by side where the sweep has several.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from ..run_tables import at_chosen_lr
from ..stats import interval

__all__ = [
    "CELL",
    "EARLY_EPOCHS",
    "SLOTS",
    "SPECIALISED_AT",
    "chosen_gap_table",
    "commitments",
    "gap_table",
    "mechanism_table",
    "selector_table",
    "slot",
    "specialisation_table",
]

#: What makes one cell of the mechanism sweep (the columns a table has of these).
CELL: tuple[str, ...] = ("data", "epochs", "init", "lr", "selector_lr")
#: The entropy (nats) below which a gate counts as specialised: half of ln 2, the
#: entropy of an undecided two-way gate.
SPECIALISED_AT = math.log(2) / 2
#: A commitment by the end of this epoch counts as early (the independent runs of issue 36
#: saw the gates commit within two epochs where the learned gate trailed).
EARLY_EPOCHS = 2
#: A ViT block's norms by their place: before attention, before the MLP, the final one.
SLOTS = {"norm1": "pre-attention", "norm2": "pre-MLP", "norm": "final"}


def slot(layer: str) -> str:
    """The place of a gated norm (``encoder.blocks.0.norm2`` -> ``pre-MLP``) by
    :data:`SLOTS`; the layer's own name where its last part is not there."""
    return SLOTS.get(layer.rsplit(".", 1)[-1], layer)


def _cell(frame: pd.DataFrame) -> list[str]:
    return [c for c in CELL if c in frame.columns]


def gap_table(
    runs: pd.DataFrame,
    a: str = "autonorm",
    b: str = "autonorm_random",
    *,
    value: str = "test_metric",
    chance: float | None = None,
) -> pd.DataFrame:
    """``a`` minus ``b`` in ``value`` per cell of ``runs`` (a run table with ``arm`` and
    ``seed``), paired by seed.

    ``b``'s runs are matched on the cell without ``selector_lr`` (the Random Selector has
    none), so each cell of ``a`` has one row: the cell, ``a_mean`` and ``b_mean`` (over
    the paired seeds), ``mean``, ``ci95``, ``low``, ``high`` (the paired differences' 95 %
    t-interval) and ``n`` (paired seeds; 0 and NaN where ``b`` has no partner). With
    ``chance`` (the task's chance accuracy), ``trained``: both means lie between
    ``chance + 0.1`` and 0.97, the band within which the book compares arms.
    """
    cell = _cell(runs)
    partner = [c for c in cell if c != "selector_lr"]
    left = runs[runs["arm"] == a]
    right = runs[runs["arm"] == b][[*partner, "seed", value]]
    pairs = left[[*cell, "seed", value]].merge(
        right, on=[*partner, "seed"], how="left", suffixes=("_a", "_b")
    )
    rows = []
    for key, part in pairs.groupby(cell, sort=True):
        both = part.dropna(subset=[f"{value}_a", f"{value}_b"])
        ci = interval(both[f"{value}_a"] - both[f"{value}_b"])
        rows.append(
            {
                **dict(zip(cell, key if isinstance(key, tuple) else (key,))),
                "a": a,
                "b": b,
                "a_mean": float(both[f"{value}_a"].mean()) if len(both) else math.nan,
                "b_mean": float(both[f"{value}_b"].mean()) if len(both) else math.nan,
                "mean": ci.mean,
                "ci95": ci.half,
                "low": ci.low,
                "high": ci.high,
                "n": ci.n,
            }
        )
    table = pd.DataFrame(rows)
    if chance is not None and len(table):
        band = lambda m: (m >= chance + 0.1) & (m <= 0.97)  # noqa: E731
        table["trained"] = band(table["a_mean"]) & band(table["b_mean"])
    return table


def chosen_gap_table(
    runs: pd.DataFrame,
    a: str = "autonorm",
    b: str = "autonorm_random",
    *,
    chance: float | None = None,
) -> pd.DataFrame:
    """:func:`gap_table` with each arm at its own learning rate, chosen on validation data
    per cell without the rate (:func:`normlab.run_tables.at_chosen_lr`): one row per
    cell, with ``lr_a`` and ``lr_b`` (the chosen rates) and ``edge_a``, ``edge_b`` (the
    choice is the grid's smallest or largest rate)."""
    cell = [c for c in _cell(runs) if c != "lr"]
    best = at_chosen_lr(runs, [*cell, "arm"], higher_is_better=True)
    table = gap_table(best.drop(columns="lr"), a, b, chance=chance)
    if table.empty:
        return table
    for arm, tag in ((a, "a"), (b, "b")):
        keys = cell if arm == a else [c for c in cell if c != "selector_lr"]
        chosen = (
            best[best["arm"] == arm]
            .groupby(keys, sort=True)[["lr", "at_edge"]]
            .first()
            .rename(columns={"lr": f"lr_{tag}", "at_edge": f"edge_{tag}"})
        )
        table = table.merge(chosen.reset_index(), on=keys, how="left")
    return table


def commitments(gates: pd.DataFrame, threshold: float = SPECIALISED_AT) -> pd.DataFrame:
    """One row per run and gated layer of a gate table: the cell, ``arm``, ``seed``,
    ``layer``, ``position``, ``slot`` (:func:`slot`), ``epoch_committed`` (the first epoch
    whose entropy is below ``threshold``; NaN when none is), ``to`` (the normaliser the
    gate favours at that epoch, ``"dyt"`` or ``"ln"``; missing when it never commits) and
    ``p_dyt_final`` (its weight on DyT at the last epoch)."""
    if not 0 < threshold <= math.log(2):
        raise ValueError(f"threshold must lie in (0, ln 2], got {threshold!r}")
    keys = [*_cell(gates), "arm", "seed"]
    rows = []
    for (run_id, layer), part in gates.groupby(["run_id", "layer"], sort=True):
        part = part.sort_values("epoch")
        below = part[part["entropy"] < threshold]
        first = below.iloc[0] if len(below) else None
        rows.append(
            {
                "run_id": run_id,
                **part.iloc[0][keys].to_dict(),
                "layer": layer,
                "position": int(part["position"].iloc[0]),
                "slot": slot(layer),
                "epoch_committed": math.nan if first is None else float(first["epoch"]),
                "to": None
                if first is None
                else ("dyt" if first["p_dyt"] > first["p_ln"] else "ln"),
                "p_dyt_final": float(part["p_dyt"].iloc[-1]),
            }
        )
    return pd.DataFrame(rows)


def specialisation_table(
    gates: pd.DataFrame, threshold: float = SPECIALISED_AT
) -> pd.DataFrame:
    """One row per run of a gate table: the cell, ``arm``, ``seed``, ``epoch_specialised``
    (the first epoch whose gate entropy averaged over the layers is below ``threshold``;
    NaN when none is), ``entropy_first`` and ``entropy_final`` (that mean at the first
    and the last epoch)."""
    if not 0 < threshold <= math.log(2):
        raise ValueError(f"threshold must lie in (0, ln 2], got {threshold!r}")
    keys = [*_cell(gates), "arm", "seed"]
    rows = []
    for run_id, part in gates.groupby("run_id", sort=True):
        curve = part.groupby("epoch")["entropy"].mean().sort_index()
        below = curve.index[curve.to_numpy() < threshold]
        rows.append(
            {
                "run_id": run_id,
                **part.iloc[0][keys].to_dict(),
                "epoch_specialised": float(below[0]) if len(below) else math.nan,
                "entropy_first": float(curve.iloc[0]),
                "entropy_final": float(curve.iloc[-1]),
            }
        )
    return pd.DataFrame(rows)


def mechanism_table(
    runs: pd.DataFrame,
    gates: pd.DataFrame,
    *,
    arm: str = "autonorm",
    reference: str = "autonorm_random",
    threshold: float = SPECIALISED_AT,
    early: int = EARLY_EPOCHS,
    chance: float | None = None,
    slots: Sequence[str] = ("pre-MLP",),
) -> pd.DataFrame:
    """Per cell, :func:`gap_table`'s ``arm`` minus ``reference`` beside how soon ``arm``'s
    gates specialised: ``specialised`` (the share of seeds whose mean entropy fell below
    ``threshold``), ``epoch_specialised`` (mean over those seeds), ``early`` (the share
    of seeds specialised by the end of epoch ``early``), ``entropy_final`` (the mean gate
    entropy at the last epoch, averaged over seeds) and, for each of ``slots``,
    ``to_dyt <slot>`` (the share of that slot's gates, over layers and seeds, committed
    to DyT; of all its gates, uncommitted ones counting as not) and ``committed <slot>``
    (the share committed at all)."""
    gap = gap_table(runs, arm, reference, chance=chance)
    mine = gates[gates["arm"] == arm]
    cell = [c for c in _cell(mine) if c in gap.columns]
    spec = specialisation_table(mine, threshold)
    done = spec["epoch_specialised"]
    spec = spec.assign(
        specialised=done.notna().astype(float),
        early=(done <= early).astype(float),
    )
    summary = spec.groupby(cell, sort=True).agg(
        specialised=("specialised", "mean"),
        epoch_specialised=("epoch_specialised", "mean"),
        early=("early", "mean"),
        entropy_final=("entropy_final", "mean"),
    )
    held = commitments(mine, threshold)
    for name in slots:
        part = held[held["slot"] == name].assign(
            dyt=lambda t: (t["to"] == "dyt").astype(float),
            committed=lambda t: t["to"].notna().astype(float),
        )
        grouped = part.groupby(cell, sort=True)
        summary[f"to_dyt {name}"] = grouped["dyt"].mean()
        summary[f"committed {name}"] = grouped["committed"].mean()
    return gap.merge(summary.reset_index(), on=cell, how="left")


def selector_table(table: pd.DataFrame) -> pd.DataFrame:
    """The selector's rates side by side, from a :func:`mechanism_table`: its rows at
    the backbone rates where the sweep has more than one selector rate (the GPU and cpu
    grids: the highest), one row per budget, initialisation and selector rate, the
    default rate (1) first. Columns: the cell, ``specialised``, ``epoch_specialised``,
    ``early``, ``entropy_final``, the gap (``a_mean``, ``b_mean``, ``mean``, ``ci95``,
    ``low``, ``high``, ``n``) and ``vs_default`` (the row's ``entropy_final`` minus the
    default selector's in the same budget, initialisation and rate). Empty where every
    cell has one selector rate."""
    rates = table.groupby(["epochs", "init", "lr"])["selector_lr"].transform("nunique")
    part = table[rates > 1].copy()
    if part.empty:
        return part.assign(vs_default=pd.Series(dtype=float))
    part["_order"] = (part["selector_lr"] != 1.0).astype(int)
    part = part.sort_values(["epochs", "init", "lr", "_order", "selector_lr"])
    default = (
        part[part["selector_lr"] == 1.0]
        .set_index(["epochs", "init", "lr"])["entropy_final"]
        .rename("_default")
    )
    part = part.join(default, on=["epochs", "init", "lr"])
    part["vs_default"] = part["entropy_final"] - part["_default"]
    return part.drop(columns=["_order", "_default"]).reset_index(drop=True)
