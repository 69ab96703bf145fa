"""Chapter 10 (the gate): every number and table its prose quotes.

- :func:`temperature`: the Gumbel-Softmax gradient's bias and variance at the paper's
  temperature, from the chapter's Monte Carlo tables;
- :func:`widget_runs`: the runs the gate-collapse widget shows (the reader's saved set,
  else the one shipped, else the tiny quick grid trained on the spot);
- :func:`gate_collapse` (one seed's walk through the widget) and :func:`widget_grid`
  (the whole grid, every seed), with :func:`grid_table`, the grid's mean final entropy
  per selector rate, temperature and gate;
- :func:`finding`: the chapter's opening sentence, from the grid;
- :func:`numbers`: every value the chapter glues, under the name it glues it by (after
  the prefix ``ch10_``).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .. import results
from ..experiments import gate_study
from ..names import display_name
from ..paper import EPS_H
from ..widgets import GateRuns, collapse_setting
from .part2 import markdown

__all__ = [
    "UNDECIDED",
    "COLLAPSED",
    "temperature",
    "widget_runs",
    "gate_collapse",
    "widget_grid",
    "grid_table",
    "decision_table",
    "finding",
    "numbers",
]

#: Mean final entropies (nats) above which a grid setting's gates count as undecided, and
#: below which as collapsed (the paper's eps_H).
UNDECIDED = 0.3
COLLAPSED = EPS_H


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


def widget_runs(device: Any = "cpu") -> tuple[GateRuns, pd.DataFrame, str]:
    """The widget's runs, the whole grid's results table (every seed) and where they came
    from: the largest saved set of ``gate_widget`` (the reader's own, else the one
    shipped), else the quick grid, trained now into a temporary folder on ``device``."""
    from .. import experiments

    saved = results.largest("gate_widget")
    if saved is not None:
        try:
            runs = GateRuns.load(saved.folder.parents[1], saved.profile)
            return runs, saved.results, f"the saved {saved.profile} set"
        except ValueError:  # an incomplete set: train the quick grid instead
            pass
    scratch = Path(tempfile.mkdtemp(prefix="normlab-ch10-"))
    experiments.run(
        "gate_widget", profile="quick", out=scratch, device=device, progress=False
    )
    runs = GateRuns.load(scratch, "quick")
    table = pd.DataFrame({**r["config"], **r["metrics"]} for r in runs.records.values())
    return runs, table, "the quick grid, trained just now"


def _final_entropy(shown: Any) -> float:
    """The mean over layers of the gates' entropy at the last epoch of a shown run."""
    gates = shown.record["gates"]
    last = [g["entropy"] for g in gates if g["epoch"] == gates[-1]["epoch"]]
    return float(sum(last) / len({g["layer"] for g in gates}))


def gate_collapse(runs: GateRuns) -> dict[str, float]:
    """One seed's walk through the widget's runs: the mean final gate entropy and
    validation accuracy at the backbone's selector rate (``h_slow``, ``acc_slow``) and at
    the collapse rate (``h_fast``, ``acc_fast``, ``fast_rate``), the entropy at the grid's
    slowest rate (``h_slowest``, ``slowest_rate``); and AutoNorm-S's decision entropy at
    the first and last freeze epochs (``t_first``, ``h_first``, ``t_last``, ``h_last``)."""
    collapse = collapse_setting(runs)
    slow = runs.select(dataclasses.replace(collapse, selector_lr=1.0))
    fast = runs.select(collapse)
    slowest_rate = runs.values("selector_lr")[0]
    slowest = runs.select(dataclasses.replace(collapse, selector_lr=slowest_rate))
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
        "h_slowest": _final_entropy(slowest),
        "slowest_rate": float(slowest_rate),
        "fast_rate": float(collapse.selector_lr),
        "acc_slow": float(slow.record["metrics"]["val_metric"]),
        "acc_fast": float(fast.record["metrics"]["val_metric"]),
        "t_first": first,
        "t_last": last,
        "h_first": float(decisions[first]),
        "h_last": float(decisions[last]),
    }


def _unfrozen(runs: pd.DataFrame) -> pd.DataFrame:
    """The grid's runs never frozen (``freeze_at`` 0), ``hard`` as a bool."""
    unfrozen = runs[runs["freeze_at"] == 0]
    return unfrozen.assign(hard=unfrozen["hard"].astype(bool))


def widget_grid(runs: pd.DataFrame) -> dict[str, Any]:
    """The widget's grid as a whole: over its unfrozen runs (every task, tau, gate and
    seed) the selector rate whose mean final entropy is highest (``rate_undecided``,
    ``h_undecided``) and lowest (``rate_collapsed``, ``h_collapsed``), and ``seeds`` and
    ``unfrozen``, the seeds and runs averaged. ``runs`` is a results table with
    ``freeze_at``, ``selector_lr``, ``tau``, ``hard``, ``seed`` and ``final_entropy``."""
    unfrozen = _unfrozen(runs)
    by_rate = unfrozen.groupby("selector_lr")["final_entropy"].mean()
    return {
        "rate_undecided": float(by_rate.idxmax()),
        "h_undecided": float(by_rate.max()),
        "rate_collapsed": float(by_rate.idxmin()),
        "h_collapsed": float(by_rate.min()),
        "seeds": int(unfrozen["seed"].nunique()),
        "unfrozen": len(unfrozen),
    }


def grid_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The grid's unfrozen runs averaged by one setting at a time: a row per value of
    the selector's rate, the temperature and the gate (soft or hard), with the mean final
    gate entropy (nats), the runs averaged and what the gates end as (undecided above
    :data:`UNDECIDED`, collapsed below :data:`COLLAPSED`, else between)."""
    unfrozen = _unfrozen(runs)
    named = {
        "selector_lr": lambda v: f"selector rate ×{v:g}",
        "tau": lambda v: f"τ = {v:g}",
        "hard": lambda v: "hard gate" if v else "soft gate",
    }
    rows = []
    for axis, name in named.items():
        for value, part in unfrozen.groupby(axis):
            entropy = float(part["final_entropy"].mean())
            state = (
                "undecided"
                if entropy > UNDECIDED
                else "collapsed"
                if entropy < COLLAPSED
                else "between"
            )
            rows.append(
                {
                    "setting": name(value),
                    "final entropy": entropy,
                    "runs": len(part),
                    "gates end": state,
                }
            )
    return pd.DataFrame(rows)


def decision_table(runs: GateRuns, eps_h: float = EPS_H) -> pd.DataFrame:
    """AutoNorm-S's decision at each freeze epoch of the widget's grid, on the run it
    opens at (the collapse setting's task, temperature and gate, the selector at the
    backbone's rate): the mean gate entropy at the end of that epoch and whether the
    paper's rule (freeze if H >= ``eps_h``) fires there."""
    collapse = collapse_setting(runs)
    rows = []
    for t in runs.values("freeze_at"):
        if not t:
            continue
        setting = dataclasses.replace(
            collapse, selector_lr=1.0, freezing=True, t_freeze=t, eps_h=eps_h
        )
        entropy = float(runs.select(setting).decision_entropy)
        rows.append(
            {
                "T_freeze": int(t),
                "mean entropy then": entropy,
                "rule fires": entropy >= eps_h,
            }
        )
    return pd.DataFrame(rows)


def finding(runs: pd.DataFrame) -> Any:
    """The chapter's opening sentence (Markdown), from the grid's unfrozen runs: which
    selector rates leave the gates undecided and which let them collapse below the
    paper's eps_H, and so where the paper's rule (freeze while H >= eps_H) can fire."""
    grid = widget_grid(runs)
    collapsed = grid["h_collapsed"] < COLLAPSED
    undecided = grid["h_undecided"] > UNDECIDED
    if collapsed and undecided:
        text = (
            "How fast the selector learns, a setting the paper does not report, "
            "decides whether AutoNorm's gates choose at all: on the 8×8 digits they end "
            f"undecided at ×{grid['rate_undecided']:g} the backbone's rate and "
            f"collapse below the paper's ε_H at ×{grid['rate_collapsed']:g}, where its "
            "freezing rule, which freezes only gates still undecided, has nothing left "
            "to freeze once they have."
        )
    else:
        text = (
            "Over the widget's grid on the 8×8 digits the selector's rate moves the "
            f"gates' final entropy from {grid['h_undecided']:.2f} to "
            f"{grid['h_collapsed']:.2f} nats, but no rate both leaves them undecided "
            "and lets them collapse below the paper's ε_H."
        )
    return markdown(text)


def _words(runs: GateRuns) -> dict[str, Any]:
    """The widget's controls in words (Markdown): its tasks, temperatures, gates,
    selector rates and freeze epochs, and the optimiser steps of its runs."""
    steps = sorted({r["metrics"]["steps"] for r in runs.records.values()})
    listed = {
        "tasks": [
            f"{display_name(d, 'data')} ({gate_study.TASKS.get(d, '')})"
            for d in runs.values("data")
        ],
        "taus": [f"{t:g}" for t in runs.values("tau")],
        "gates": ["hard" if h else "soft" for h in runs.values("hard")],
        "rates": [f"{r:g}" for r in runs.values("selector_lr")],
        "freezes": [str(t) for t in runs.values("freeze_at") if t],
    }
    found = {
        key: markdown((" or " if key == "gates" else ", ").join(items))
        for key, items in listed.items()
    }
    found["steps"] = markdown("/".join(f"{s:,}" for s in steps))
    return found


def numbers(
    moments: pd.DataFrame,
    soft_means: pd.DataFrame,
    exact: float,
    runs: GateRuns,
    grid: pd.DataFrame,
) -> Mapping[str, Any]:
    """Every value chapter 10 glues: :func:`temperature` of its Monte Carlo tables,
    :func:`gate_collapse` of the widget's ``runs``, :func:`widget_grid` of the whole
    ``grid`` (prefixed ``grid_``), :func:`finding`, the runs shown and held (``runs``,
    ``set_runs``) and the widget's controls in words."""
    found: dict[str, Any] = {
        **temperature(moments, soft_means, exact),
        **gate_collapse(runs),
        **{f"grid_{k}": v for k, v in widget_grid(grid).items()},
        "finding": finding(grid),
        "runs": len(runs.records),
        "set_runs": len(grid),
        **_words(runs),
    }
    return found
