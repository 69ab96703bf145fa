"""AutoNorm-S composed from saved runs, and the gate studies' tables of arms.

On the CPU the training loop is deterministic, so an AutoNorm-S run is the ``autonorm``
run up to its decision at T_freeze and the ``freeze_at_<T>`` run after it when the rule
fires (:func:`compose_schedule`); any eps_H and either reading of the rule then cost no
extra training. The other helpers read a :func:`~.gate_runs.run_table` at the learning
rate chosen on validation data; two arms are compared with
:func:`normlab.claims.tables.paired_table` (and AutoNorm-S swept over eps_H with
:func:`normlab.claims.tables.sweep_table`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import pandas as pd

from ..analysis.runs import at_chosen_lr, summarise
from ..paper import EPS_H
from .gate_runs import FREEZE_PREFIX, SAMPLE_PREFIX

# What makes one configuration of a gate study besides its task (those a table has).
CONFIG_AXES = ("init", "readout", "selector_lr", "tau")


def _keys(runs: pd.DataFrame, *last: str) -> list[str]:
    return [k for k in ("data", *CONFIG_AXES, *last) if k in runs]


def at_defaults(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs at the book's default initialisation and readout and the selector at the
    backbone's rate (:mod:`.gate_grids`), where the table has those columns."""
    from .gate_grids import DEFAULT_INIT, DEFAULT_READOUT

    keep = pd.Series(True, index=runs.index)
    for column, value in (
        ("init", DEFAULT_INIT),
        ("readout", DEFAULT_READOUT),
        ("selector_lr", 1.0),
    ):
        if column in runs:
            keep &= runs[column] == value
    return runs[keep]


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
    keeps sampling, ``autonorm_s_sample``), the freeze and sample runs left out; unchanged
    when the set has no freeze run."""
    epochs = freeze_epochs(runs["arm"].unique())
    if not epochs:
        return runs
    composed = [
        compose_schedule(runs, epochs[0], eps_h, rule) for rule in ("high", "low")
    ]
    if f"{SAMPLE_PREFIX}{epochs[0]}" in set(runs["arm"]):
        composed.append(
            compose_schedule(runs, epochs[0], eps_h, "high", keep_sampling=True)
        )
    arms = pd.concat([runs, *composed], ignore_index=True)
    return arms[
        ~arms["arm"].str.startswith(FREEZE_PREFIX)
        & ~arms["arm"].str.startswith(SAMPLE_PREFIX)
    ]
