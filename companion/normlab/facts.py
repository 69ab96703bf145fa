"""The numbers Part II's prose cites, gathered from the runs a chapter made or loaded.

A chapter shows the code that teaches; what its sentences quote (a bias, a share of seeds, a
verdict) is gathered here and glued (:func:`normlab.display.glue`) in a cell whose input the
HTML leaves out. Each function returns a dict of plain numbers (or, for a verdict or a list
of findings, IPython ``Markdown`` for ``{glue:md}``), keyed by the name the chapter glues it
under after its own prefix (``ch11_`` + ``gap_default``), and a table where the chapter
shows the one the numbers come from.

- chapter 10: :func:`temperature`, :func:`gate_collapse`;
- chapter 11: :func:`hinges`, :func:`hinge_facts`, :func:`plainly`;
- chapter 12: :func:`freeze_decisions`, :func:`freeze_effect`, :func:`lead_over_frozen_ln`;
- chapters 13-15: :func:`schedule`, :func:`verdict`, :func:`means`;
- chapter 13: :func:`freezing_on_off`; chapter 15: :func:`rate_sensitivity`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from . import claims
from .experiments import gate_study as gs
from .experiments import part2_tasks as tasks
from .experiments.gate_grids import DEFAULT_INIT, DEFAULT_READOUT
from .names import display_name
from .paper import EPS_H
from .stats import interval

__all__ = [
    "HINGE_ARMS",
    "freeze_decisions",
    "freeze_effect",
    "freezing_on_off",
    "gate_collapse",
    "hinge_facts",
    "hinges",
    "lead_over_frozen_ln",
    "means",
    "plainly",
    "rate_sensitivity",
    "schedule",
    "temperature",
    "verdict",
]


def _markdown(text: str) -> Any:
    """``text`` as IPython Markdown (for ``{glue:md}``), or the text without IPython."""
    try:
        from IPython.display import Markdown
    except ImportError:  # pragma: no cover - IPython comes with every notebook
        return text
    return Markdown(text)


# ------------------------------------------------------------------------ chapter 10


def temperature(
    table: pd.DataFrame,
    soft_means: pd.DataFrame,
    exact: float,
    tau: float = 0.5,
    small: float = 0.1,
) -> dict[str, float]:
    """At temperature ``tau``: the gradient estimate's mean relative to the ``exact``
    gradient, minus 1 (``grad_bias``); how many times its variance at ``small`` is
    (``var_ratio``); and the soft sample's relative bias (``soft_bias``).

    ``table`` has columns ``tau``, ``mean grad`` and ``variance (trace)``; ``soft_means``
    columns ``tau`` and ``relative bias vs p1``.
    """
    by_tau = table.set_index("tau")
    return {
        "grad_bias": float(by_tau.loc[tau, "mean grad"] / exact - 1),
        "var_ratio": float(
            by_tau.loc[small, "variance (trace)"] / by_tau.loc[tau, "variance (trace)"]
        ),
        "soft_bias": float(soft_means.set_index("tau").loc[tau, "relative bias vs p1"]),
    }


def _final_entropy(shown: Any) -> float:
    """The mean over layers of the gates' entropy at the last epoch of a shown run."""
    gates = shown.record["gates"]
    last = [g["entropy"] for g in gates if g["epoch"] == gates[-1]["epoch"]]
    return float(sum(last) / len({g["layer"] for g in gates}))


def gate_collapse(runs: Any) -> dict[str, float]:
    """Chapter 10's walk through the widget's runs (a :class:`normlab.widgets.GateRuns`):
    the mean final gate entropy and validation accuracy at the backbone's selector rate
    (``h_slow``, ``acc_slow``) and at the collapse rate (``h_fast``, ``acc_fast``,
    ``fast_rate``); and AutoNorm-S's decision entropy at each freeze epoch
    (``decision_<T>``), the first and last (``t_first``, ``h_first``, ``t_last``,
    ``h_last``)."""
    from .widgets import collapse_setting

    collapse = collapse_setting(runs)
    slow = runs.select(dataclasses.replace(collapse, selector_lr=1.0))
    fast = runs.select(collapse)
    decisions = {
        t: runs.select(
            dataclasses.replace(collapse, selector_lr=1.0, freezing=True, t_freeze=t)
        ).decision_entropy
        for t in runs.values("freeze_at")
        if t
    }
    first, last = min(decisions), max(decisions)
    return {
        "h_slow": _final_entropy(slow),
        "h_fast": _final_entropy(fast),
        "fast_rate": float(collapse.selector_lr),
        "acc_slow": float(slow.record["metrics"]["val_metric"]),
        "acc_fast": float(fast.record["metrics"]["val_metric"]),
        **{f"decision_{t}": float(h) for t, h in decisions.items()},
        "t_first": first,
        "t_last": last,
        "h_first": float(decisions[first]),
        "h_last": float(decisions[last]),
    }


# ------------------------------------------------------------------------ chapter 11

#: The arms a configuration of :func:`hinges` compares, at the backbone's selector rate.
HINGE_ARMS = ("frozen_ln", "autonorm_random", "autonorm")


def hinges(results: pd.DataFrame, task: str = "mnist_restyled") -> pd.DataFrame:
    """What the bottleneck hinges on: one row per (init, readout) configuration of the
    gate study's ``results`` on ``task`` that has the three arms of :data:`HINGE_ARMS` at
    the backbone's selector rate: their mean test accuracy, the learned gate at ten times
    the rate (``AutoNorm, selector x10``), the N1 quantity (``learned - random``, paired by
    seed, with its 95 % half-width ``±``) and the learned gate's mean final entropy at both
    rates. Indexed by ``init`` and ``readout``."""
    rows = []
    for (init, readout), part in results[results["data"] == task].groupby(
        ["init", "readout"]
    ):
        x1 = part[part["selector_lr"] == 1.0]
        if x1["arm"].nunique() < len(HINGE_ARMS):
            continue
        gap = interval(
            claims.paired(x1, "autonorm", "autonorm_random", by="arm").samples
        )
        fast = part[(part["arm"] == "autonorm") & (part["selector_lr"] == 10.0)]
        learned = x1[x1["arm"] == "autonorm"]
        rows.append(
            {
                "init": init,
                "readout": readout,
                **{
                    arm: x1.loc[x1["arm"] == arm, "test_metric"].mean()
                    for arm in HINGE_ARMS
                },
                "AutoNorm, selector x10": fast["test_metric"].mean(),
                "learned - random": gap.mean,
                "±": gap.half,
                "final entropy, x1": learned["final_entropy"].mean(),
                "final entropy, x10": fast["final_entropy"].mean(),
            }
        )
    return pd.DataFrame(rows).set_index(["init", "readout"])


def hinge_facts(table: pd.DataFrame) -> dict[str, float]:
    """The numbers chapter 11 quotes from :func:`hinges`: at the defaults (``_default``),
    with ViT's std-0.02 initialisation (``_trunc``) and with the mean readout
    (``gap_mean``); and the final entropies at both selector rates."""
    default = table.loc[(DEFAULT_INIT, DEFAULT_READOUT)]
    trunc = table.loc[("trunc_normal_0.02", DEFAULT_READOUT)]
    pooled = table.loc[(DEFAULT_INIT, "mean")]
    return {
        key: float(value)
        for key, value in {
            "ln_default": default["frozen_ln"],
            "ln_trunc": trunc["frozen_ln"],
            "learned_trunc": trunc["autonorm"],
            "random_trunc": trunc["autonorm_random"],
            "learned_default": default["autonorm"],
            "random_default": default["autonorm_random"],
            "gap_default": default["learned - random"],
            "gap_half_default": default["±"],
            "gap_trunc": trunc["learned - random"],
            "gap_half_trunc": trunc["±"],
            "gap_mean": pooled["learned - random"],
            "fast_default": default["AutoNorm, selector x10"],
            "h_x1": default["final entropy, x1"],
            "h_x10": default["final entropy, x10"],
        }.items()
    }


def plainly(n1: pd.DataFrame, profile: str) -> Any:
    """Chapter 11's answer, one line per task of the N1 table ``n1`` (a paired table of
    learned minus random: ``data``, ``mean``, ``low``, ``high``, ``n``) with at least two
    seeds, as Markdown: on which side of the random gate the learned one lies, with its
    95 % interval; and the scale of the gate study's ``profile``."""
    lines = []
    for row in n1[n1["n"] >= 2].itertuples():
        side = (
            "below"
            if row.high < 0
            else "above"
            if row.low > 0
            else "not clearly on either side of"
        )
        kind = gs.TASKS.get(row.data, "")
        lines.append(
            f"- **{display_name(row.data, 'data', profile)}** ({kind}): the learned gate "
            f"is {side} the random one, {row.mean:+.3f} [{row.low:+.3f}, "
            f"{row.high:+.3f}], n = {row.n}."
        )
    scale = gs.SETUP[profile]
    rates = ", ".join(f"{lr:g}" for lr in gs.LRS[profile])
    lines.append(
        f"\nThe scale: a ViT-Lite of {scale['depth']} blocks and width {scale['dim']}, "
        f"{scale['epochs']} epochs of batches of {scale['batch_size']}, learning rate "
        f"{rates}, {display_name(scale['init'], 'init')} initialisation, stand-in data."
    )
    return _markdown("\n".join(lines))


# ------------------------------------------------------------------------ chapter 12


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
            gs.compose_schedule(runs, t, EPS_H, "high")
            for t in gs.freeze_epochs(runs["arm"].unique())
        ]
    )
    fires = paper.groupby(["data", "t_freeze"])["fired"].mean().unstack()
    return decisions, fires


def freeze_effect(runs: pd.DataFrame, t_freeze: int) -> pd.DataFrame:
    """AutoNorm-S at ``t_freeze`` minus the plain learned gate, per task and reading of
    the rule (at eps_H = 0.1), paired by seed, every arm at the plain gate's learning rate:
    ``data``, ``rule``, ``fired`` (share of seeds), ``mean``, ``low``, ``high``, ``n``.
    Where the rule fired on no seed the two runs are the same and the difference is 0."""
    from .claims.tables import paired_table

    at = gs.at_lr_of(runs, "autonorm")
    plain = at[at["arm"] == "autonorm"]
    rows = []
    for rule in ("high", "low"):
        arm = gs.compose_schedule(at, t_freeze, EPS_H, rule)
        both = pd.concat([plain, arm], ignore_index=True)
        diff = paired_table(gs.chosen(both), arm["arm"].iloc[0], "autonorm", by="arm")
        fired = arm.groupby("data")["fired"].mean()
        rows.append(diff.merge(fired, on="data").assign(rule=rule))
    effect = pd.concat(rows, ignore_index=True)
    return effect[["data", "rule", "fired", "mean", "low", "high", "n"]]


def lead_over_frozen_ln(runs: pd.DataFrame, t_freeze: int) -> dict[str, float]:
    """AutoNorm-S (the paper's rule, eps_H = 0.1, ``t_freeze``) minus FrozenLN per task,
    paired by seed: ``lead_<task>`` and its 95 % half-width ``lead_half_<task>``."""
    from .claims.tables import paired_table

    paper = gs.compose_schedule(runs, t_freeze, EPS_H, "high")
    pair = gs.chosen(pd.concat([runs[runs["arm"] == "frozen_ln"], paper]))
    lead = paired_table(pair, "autonorm_s", "frozen_ln", by="arm")
    found: dict[str, float] = {}
    for row in lead.itertuples():
        found[f"lead_{row.data}"] = float(row.mean)
        found[f"lead_half_{row.data}"] = float(row.ci95)
    return found


# -------------------------------------------------------------------- chapters 13-15


def schedule(runs: pd.DataFrame) -> dict[str, float]:
    """A saved Part II set's training schedule, from its results table: ``depth`` (when
    recorded), ``epochs``, the median optimiser ``steps`` a run, AutoNorm-S's decision
    epoch ``t_freeze`` and its share of the training, ``t_freeze_share``."""
    first = runs.iloc[0]
    found: dict[str, float] = {
        "epochs": int(first["epochs"]),
        "steps": int(runs["steps"].median()),
        "t_freeze": int(first["t_freeze"]),
        "t_freeze_share": float(first["t_freeze"] / first["epochs"]),
    }
    if "depth" in runs:
        found["depth"] = int(first["depth"])
    return found


def verdict(claim_id: str, no_note: str = "") -> dict[str, Any]:
    """A claim's verdict on the largest saved set (:func:`normlab.claims.evaluate`):
    ``verdict`` (italic Markdown); for a claim judged on one effect, its mean ``diff``,
    its 95 % half-width ``half`` and the note on it, ``note`` (``no_note`` when the claim
    has none)."""
    outcome = claims.evaluate(claim_id)
    found: dict[str, Any] = {"verdict": _markdown(f"*{outcome.verdict}*")}
    if len(outcome.effects) == 1:
        ((label, effect, _),) = outcome.effects
        found["diff"] = float(effect.mean)
        found["half"] = float(effect.half)
        found["note"] = _markdown(outcome.notes.get(label, no_note))
    return found


def means(table: pd.DataFrame, keys: Iterable[str], value: str = "mean") -> dict:
    """``value`` per row of a summary ``table``, keyed by its ``keys`` columns joined with
    ``_`` (``ptb_pos_frozen_ln``)."""
    keys = list(keys)
    return {
        "_".join(str(row[k]) for k in keys): float(row[value])
        for _, row in table.iterrows()
    }


def freezing_on_off(
    language: Any, gates: Any, names: Mapping[str, str] | None = None
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Chapter 13's freezing on against off on the saved sets: AutoNorm-S (the language
    set ``language``) minus the never-frozen AutoNorm (the gates set ``gates``) at the
    gates' learning rate, paired by seed, per language task; with the share of seeds
    whose gates AutoNorm-S froze and the mean entropy at T_freeze. Returns the table (a
    row per task) and the facts ``froze_<task>``, ``freeze_<task>`` and
    ``freeze_half_<task>``."""
    runs, gate_runs = language.results, gates.results
    lr = float(gate_runs["lr"].iloc[0])
    decided = pd.DataFrame(
        [
            {
                "data": r["config"]["data"],
                "froze": bool(r["frozen"]),
                "entropy": r["entropy_records"][-1]["mean"],
            }
            for r in language.records()
            if r["config"]["normaliser"] == "autonorm_s" and r["config"]["lr"] == lr
        ]
    )
    rows, found = [], {}
    for task in ("ptb_pos", "sst2"):
        on = runs[
            (runs["data"] == task)
            & (runs["normaliser"] == "autonorm_s")
            & (runs["lr"] == lr)
        ]
        off = gate_runs[gate_runs["data"] == task]
        test = tasks.paired_test(
            tasks.by_seed(on, "test_metric"), tasks.by_seed(off, "test_metric")
        )
        mine = decided[decided["data"] == task]
        share = float(mine["froze"].mean())
        found |= {
            f"froze_{task}": share,
            f"freeze_{task}": test.mean,
            f"freeze_half_{task}": test.ci.half,
        }
        rows.append(
            {
                "data": task,
                "entropy at T_freeze": float(mine["entropy"].mean()),
                "froze": share,
                "on minus off": test.mean,
                "low": test.low,
                "high": test.high,
                "n": test.n,
            }
        )
    return pd.DataFrame(rows), found


def rate_sensitivity(results: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]]:
    """Chapter 15's sensitivity to the learning rate: mean clean validation accuracy and
    drop under corruption per normaliser and rate, and the facts ``drop_spread`` (the
    largest range of the drop over one method's rates) and ``second_val`` (the clean
    validation accuracy every method reaches at two rates or more)."""
    by_rate = results.assign(
        drop=results["test_metric"] - results["mean_corruption_accuracy"]
    ).pivot_table(
        index="normaliser", columns="lr", values=["val_metric", "drop"], aggfunc="mean"
    )
    drop = by_rate["drop"]
    second = by_rate["val_metric"].apply(lambda r: r.nlargest(2).iloc[-1], axis=1)
    return by_rate, {
        "drop_spread": float((drop.max(axis=1) - drop.min(axis=1)).max()),
        "second_val": float(second.min()),
    }
