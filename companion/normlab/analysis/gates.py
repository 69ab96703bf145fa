"""Tables of the gate studies' runs: gates per layer and epoch, AutoNorm-S composed.

:func:`run_table` turns run records into one row per run; a run's gates per epoch and layer
are :func:`normlab.gate_tables.gate_table`.

On the CPU the training loop is deterministic, so an AutoNorm-S run is the ``autonorm``
run up to its decision at T_freeze and the ``freeze_at_<T>`` run after it when the rule
fires (:func:`compose_schedule`); any eps_H and either reading of the rule then cost no
extra training. The other helpers read a :func:`run_table` at the learning rate chosen on
validation data; two arms are compared with :func:`normlab.claims.tables.paired_table`
(and AutoNorm-S swept over eps_H with :func:`normlab.claims.tables.sweep_table`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from ..gates import FREEZE_PREFIX, READY_ARM, READY_LEAD, SAMPLE_PREFIX
from ..models.blocks import DEFAULT_INIT, DEFAULT_READOUT
from ..paper import EPS_H
from ..run_tables import at_chosen_lr, common_seeds, summarise

__all__ = [
    "CONFIG_AXES",
    "LOSS_REACH",
    "PLATEAU_GAIN",
    "PLATEAU_SHARE",
    "arm_summary",
    "at_defaults",
    "at_lr_of",
    "chosen",
    "compose_schedule",
    "freeze_epochs",
    "late_gain",
    "ready_epoch",
    "regime",
    "run_table",
    "runs_behind",
    "shared_seeds",
    "with_schedules",
]


def run_table(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per run: its config and metrics, as :func:`normlab.experiments.load_results`
    has them (with the gate studies' ``val_curve_mean``, ``decision_entropy``, ``gate_snr``
    and ``final_entropy``)."""
    return pd.DataFrame(
        [{"run_id": r["run_id"], **r["config"], **r["metrics"]} for r in records]
    )


CONFIG_AXES = ("init", "readout", "selector_lr", "tau")


def _keys(runs: pd.DataFrame, *last: str) -> list[str]:
    return [k for k in ("data", *CONFIG_AXES, *last) if k in runs]


def at_defaults(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs at the book's default initialisation and readout and the selector at the
    backbone's rate (``normlab.models.blocks.DEFAULT_INIT``), where the table has those columns."""
    keep = pd.Series(True, index=runs.index)
    for column, value in (
        ("init", DEFAULT_INIT),
        ("readout", DEFAULT_READOUT),
        ("selector_lr", 1.0),
    ):
        if column in runs:
            keep &= runs[column] == value
    return runs[keep]


def runs_behind(arms: Iterable[str], present: Iterable[str]) -> list[str]:
    """The arms of a set (``present``) whose runs ``arms`` are made of: each arm the set
    holds itself, for AutoNorm-S composed from the plain gate and the set's first
    freeze (:func:`with_schedules`) those two runs (and its ``sample_at`` run for the
    ablation that keeps sampling), and for AutoNorm-S in a set that runs it deciding after
    warm-up (:data:`READY_ARM`) that run; empty when some arm is neither."""
    present = list(present)
    epochs = freeze_epochs(present)
    behind: list[str] = []
    for arm in arms:
        if arm in present:
            parts = [arm]
        elif arm == "autonorm_s" and READY_ARM in present:
            parts = [READY_ARM]  # AutoNorm-S deciding after warm-up, one run
        elif arm.startswith("autonorm_s") and epochs and "autonorm" in present:
            parts = ["autonorm", f"{FREEZE_PREFIX}{epochs[0]}"]
            if arm.endswith("_sample"):
                parts.append(f"{SAMPLE_PREFIX}{epochs[0]}")
        else:
            return []
        behind += [p for p in parts if p not in behind]
    return behind if set(behind) <= set(present) else []


def shared_seeds(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the seeds that every cell (task, configuration, arm and rate) ran: a
    set whose claim runs some cells for more seeds (gate_bottleneck's N3 cells) shown as
    its balanced part."""
    return common_seeds(runs, _keys(runs, "arm", "lr"))


def compose_schedule(
    runs: pd.DataFrame,
    t_freeze: int,
    eps_h: float,
    rule: str = "high",
    *,
    keep_sampling: bool = False,
) -> pd.DataFrame:
    """The AutoNorm-S outcome of every (data, configuration, lr, seed), assembled from two
    runs (module docstring); a configuration is the table's :data:`CONFIG_AXES`.

    ``runs`` is a :func:`run_table` holding ``autonorm`` runs and ``freeze_at_<t_freeze>``
    runs with otherwise equal settings. The rule is applied to the mean entropy over layers
    that the freeze run's AutoNorm-S recorded at epoch ``t_freeze``: ``"high"`` (the paper)
    freezes when it is >= ``eps_h``, ``"low"`` when it is < ``eps_h``. Returns the chosen
    rows with ``fired`` (bool), ``decision_entropy``, and ``arm`` set to ``autonorm_s`` (rule
    high) or ``autonorm_s_low``.

    ``keep_sampling``: chapter 12's ablation, the same decision (taken on the freeze run's
    entropy) but, where it fires, the ``sample_at_<t_freeze>`` run, whose gates stop
    learning and keep sampling; ``arm`` then ends in ``_sample``.
    """
    if rule not in ("high", "low"):
        raise ValueError(
            f"rule={rule!r} is not a freezing rule; expected 'high' or 'low'"
        )
    if not 0.0 <= eps_h <= math.log(2):
        raise ValueError(f"eps_h must lie in [0, ln 2], got {eps_h!r}")
    keys = _keys(runs, "lr", "seed")
    never = runs[runs["arm"] == "autonorm"].set_index(keys)
    frozen = runs[runs["arm"] == f"{FREEZE_PREFIX}{t_freeze}"].set_index(keys)
    if frozen.empty:
        raise ValueError(
            f"no {FREEZE_PREFIX}{t_freeze} runs to compose T_freeze={t_freeze} from"
        )
    missing = frozen.index.difference(never.index)
    if len(missing):
        raise ValueError(
            f"{len(missing)} {FREEZE_PREFIX}{t_freeze} run(s) have no autonorm partner, e.g. {missing[0]}"
        )
    after = frozen
    if keep_sampling:
        after = runs[runs["arm"] == f"{SAMPLE_PREFIX}{t_freeze}"].set_index(keys)
        missing = frozen.index.difference(after.index)
        if len(missing):
            raise ValueError(
                f"{len(missing)} {FREEZE_PREFIX}{t_freeze} run(s) have no "
                f"{SAMPLE_PREFIX}{t_freeze} partner, e.g. {missing[0]}"
            )
    rows = []
    for key, freeze_row in frozen.iterrows():
        entropy = freeze_row["decision_entropy"]
        fired = entropy >= eps_h if rule == "high" else entropy < eps_h
        chosen = (after.loc[key] if fired else never.loc[key]).copy()
        chosen["fired"], chosen["decision_entropy"] = bool(fired), entropy
        chosen["t_freeze"], chosen["eps_h"], chosen["rule"] = t_freeze, eps_h, rule
        chosen["arm"] = ("autonorm_s" if rule == "high" else "autonorm_s_low") + (
            "_sample" if keep_sampling else ""
        )
        rows.append(chosen.rename(None).to_frame().T.assign(**dict(zip(keys, key))))
    return pd.concat(rows, ignore_index=True).infer_objects()


def chosen(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run at the learning rate chosen on validation data per task, configuration
    (:data:`CONFIG_AXES`) and arm.

    With ``at_edge`` (the choice is the grid's smallest or largest rate) and
    ``candidates`` (how many rates were tried); a set with one rate per arm is returned
    whole.
    """
    return at_chosen_lr(runs, _keys(runs, "arm"), higher_is_better=True)


def at_lr_of(runs: pd.DataFrame, arm: str) -> pd.DataFrame:
    """Every run at the learning rate chosen on validation data for ``arm``, per task: the
    arms compared at one rate, as a mechanism (not a method) comparison needs."""
    if arm not in set(runs["arm"]):
        raise ValueError(
            f"arm={arm!r} has no runs; expected one of {sorted(set(runs['arm']))}"
        )
    rates = chosen(runs[runs["arm"] == arm])[["data", "lr"]].drop_duplicates()
    return runs.merge(rates, on=["data", "lr"])


def arm_summary(runs: pd.DataFrame, value: str = "test_metric") -> pd.DataFrame:
    """Mean, 95 % CI and n of ``value`` per task and arm, each arm at its learning rate chosen
    on validation data (``lr``, ``at_edge``); ``fired``: the share of seeds where AutoNorm-S's
    rule fired (composed arms only)."""
    best = chosen(runs)
    summary = summarise(best, ["data", "arm"], value)
    rates = best.groupby(["data", "arm"], sort=False)[["lr", "at_edge"]].first()
    summary = summary.merge(rates.reset_index(), on=["data", "arm"])
    if "fired" in best:
        fired = best.groupby(["data", "arm"], sort=False)["fired"].mean()
        summary = summary.merge(fired.reset_index(), on=["data", "arm"], how="left")
    return summary


def freeze_epochs(arms: Iterable[str]) -> list[int]:
    """The epochs T of the ``freeze_at_<T>`` arms, sorted."""
    return sorted(
        int(m.group(1))
        for a in arms
        if (m := re.fullmatch(rf"{FREEZE_PREFIX}(\d+)", a))
    )


def with_schedules(runs: pd.DataFrame, eps_h: float = EPS_H) -> pd.DataFrame:
    """``runs`` with AutoNorm-S under both rules composed in at the set's first ``freeze_at_<T>``
    (and, where the set has its ``sample_at_<T>`` runs, the paper's rule with a freeze that
    keeps sampling, ``autonorm_s_sample``, for the freeze runs that have one), the freeze
    and sample runs left out; unchanged when the set has no freeze run."""
    epochs = freeze_epochs(runs["arm"].unique())
    if not epochs:
        return runs
    composed = [
        compose_schedule(runs, epochs[0], eps_h, rule) for rule in ("high", "low")
    ]
    sample = f"{SAMPLE_PREFIX}{epochs[0]}"
    if sample in set(runs["arm"]):
        # where a set runs some cells for more seeds than its sample runs (N3's), the
        # ablation is composed on the freeze runs that have their sample partner
        keys = _keys(runs, "lr", "seed")
        freeze = runs["arm"] == f"{FREEZE_PREFIX}{epochs[0]}"
        partnered = pd.MultiIndex.from_frame(runs[freeze][keys]).isin(
            pd.MultiIndex.from_frame(runs[runs["arm"] == sample][keys])
        )
        unpaired = runs[freeze].index[~partnered]
        composed.append(
            compose_schedule(
                runs.drop(index=unpaired), epochs[0], eps_h, "high", keep_sampling=True
            )
        )
    arms = pd.concat([runs, *composed], ignore_index=True)
    return arms[
        ~arms["arm"].str.startswith(FREEZE_PREFIX)
        & ~arms["arm"].str.startswith(SAMPLE_PREFIX)
    ]


# ------------------------------------------------------------------ the regime (issue 51)
# A gate study can test AutoNorm-S only where its runs are past their plateau and its freeze
# is decided once the features have formed. Declared before the data:
#: the last share of a run's epochs over which its validation accuracy's gain is read
PLATEAU_SHARE = 0.25
#: a run is on its plateau when it gained less than this over that last share ...
PLATEAU_GAIN = 0.005
#: ... or when its final training loss is within this factor of FrozenLN's
LOSS_REACH = 1.5


def late_gain(history: Sequence[dict[str, Any]], share: float = PLATEAU_SHARE) -> float:
    """The validation accuracy a run gained over the last ``share`` of its epochs: its
    last epoch's minus that of the epoch ``ceil(share x epochs)`` before it."""
    curve = [float(h["val_accuracy"]) for h in history]
    if not 0 < share < 1 or not curve:
        raise ValueError(f"need 0 < share < 1 and a history, got {share!r}, {curve!r}")
    back = max(1, math.ceil(share * len(curve)))
    return curve[-1] - curve[max(0, len(curve) - 1 - back)]


def ready_epoch(
    history: Sequence[dict[str, Any]],
    chance: float,
    lead: float = READY_LEAD,
    after: int = 1,
) -> int | None:
    """The first epoch ``>= after`` (the warm-up's end) whose validation accuracy is at
    least ``chance + lead``: when a freeze decided on formed features is taken; None when
    no epoch of ``history`` gets there."""
    for h in history:
        if h["epoch"] >= after and h["val_accuracy"] >= chance + lead:
            return int(h["epoch"])
    return None


def regime(
    records: Iterable[dict[str, Any]],
    decision: int | None = None,
    reference: str = "frozen_ln",
) -> pd.DataFrame:
    """The regime of a set's runs, one row per task and arm (over the runs given, e.g.
    those at the chosen rates): ``n``, ``epochs``, ``val_at_decision`` (mean validation
    accuracy at epoch ``decision``; NaN without one), ``train_loss`` (final, mean),
    ``late_gain`` (:func:`late_gain`, mean), ``loss_ratio`` (to ``reference``'s on the same
    task) and ``plateau``: the arm's runs are past their plateau by either test (its mean
    late gain under :data:`PLATEAU_GAIN`, or its loss within :data:`LOSS_REACH` of the
    reference's)."""
    rows = []
    for record in records:
        history = record["history"]
        at = [h for h in history if h["epoch"] == decision]
        rows.append(
            {
                "data": record["config"]["data"],
                "arm": record["config"]["arm"],
                "epochs": len(history),
                "val_at_decision": float(at[0]["val_accuracy"]) if at else math.nan,
                "train_loss": float(history[-1]["train_loss"]),
                "late_gain": late_gain(history),
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        raise ValueError("regime needs at least one run record")
    out = table.groupby(["data", "arm"], sort=False).agg(
        n=("epochs", "size"),
        epochs=("epochs", "max"),
        val_at_decision=("val_at_decision", "mean"),
        train_loss=("train_loss", "mean"),
        late_gain=("late_gain", "mean"),
    )
    out = out.reset_index()
    ref = out[out["arm"] == reference].set_index("data")["train_loss"]
    out["loss_ratio"] = out["train_loss"] / out["data"].map(ref)
    out["plateau"] = (out["late_gain"] < PLATEAU_GAIN) | (
        out["loss_ratio"] <= LOSS_REACH
    )
    return out
