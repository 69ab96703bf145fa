"""The chapters' tables of paired comparisons, each row a :func:`~normlab.claims.paired` effect.

- :func:`paired_table`: two arms per task (chapters 11 and 12);
- :func:`sweep_table`: AutoNorm-S's lead over FrozenLN at every T_freeze, eps_H and rule
  (chapter 12);
- :func:`equivalence_table`: a method against every other within a margin (chapter 14,
  claim N12).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..stats import difference_test, interval
from .pairing import at_chosen_lr, paired

__all__ = ["EPS_GRID", "equivalence_table", "paired_table", "sweep_table"]


def paired_table(
    best: pd.DataFrame,
    a: str,
    b: str,
    *,
    per: str = "data",
    by: str = "normaliser",
    value: str = "test_metric",
    higher_is_better: bool | None = None,
) -> pd.DataFrame:
    """:func:`paired` of ``a`` minus ``b`` within each value of ``per`` (each task), as a table.

    One row per value of ``per`` that has runs of ``a`` or ``b``, in the order of ``best``:
    ``per``, ``a``, ``b``, ``mean``, ``ci95`` (the t-interval's half-width), ``low``,
    ``high`` and ``n`` (seeds); NaN with ``n`` 0 where one of the two has no runs.
    """
    rows = []
    arms = best[best[by].isin([a, b])]
    for key, part in arms.groupby(per, sort=False):
        if {a, b} <= set(part[by]):
            effect = paired(
                best,
                a,
                b,
                by=by,
                value=value,
                within={per: key},
                higher_is_better=higher_is_better,
            )
            ci = interval(effect.samples)
        else:
            ci = interval([])
        rows.append(
            {
                per: key,
                "a": a,
                "b": b,
                "mean": ci.mean,
                "ci95": ci.half,
                "low": ci.low,
                "high": ci.high,
                "n": ci.n,
            }
        )
    return pd.DataFrame(rows)


#: The eps_H values :func:`sweep_table` composes AutoNorm-S at (nats).
EPS_GRID: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)


def sweep_table(
    runs: pd.DataFrame, eps_grid: Sequence[float] = EPS_GRID
) -> pd.DataFrame:
    """AutoNorm-S at every ``freeze_at_<T>`` of ``runs``, every eps_H and both rules.

    Per task and cell: ``fired``, the share of seeds where the rule fired, and ``lead``, the
    mean over seeds of AutoNorm-S's test accuracy minus FrozenLN's, each at its own learning
    rate chosen on validation data (:func:`normlab.claims.tables.paired_table`). ``runs``
    needs ``frozen_ln``, ``autonorm`` and the freeze runs.
    """
    from ..analysis import gates as ag

    reference = runs[runs["arm"] == "frozen_ln"]
    cells = []
    for t in ag.freeze_epochs(runs["arm"].unique()):
        for eps in eps_grid:
            for rule in ("high", "low"):
                arm = ag.compose_schedule(runs, t, eps, rule)
                name = arm["arm"].iloc[0]
                both = ag.chosen(pd.concat([arm, reference], ignore_index=True))
                lead = paired_table(both, name, "frozen_ln", by="arm")
                lead = lead.set_index("data")["mean"]
                fired = ag.chosen(arm).groupby("data")["fired"].mean()
                cells.extend(
                    {
                        "data": task,
                        "rule": rule,
                        "t_freeze": t,
                        "eps_h": eps,
                        "fired": fired[task],
                        "lead": lead[task],
                    }
                    for task in lead.index
                )
    return pd.DataFrame(cells)


def equivalence_table(
    results: pd.DataFrame,
    margin_fraction: float = 0.02,
    *,
    reference: str = "autonorm_s",
    baseline: str = "frozen_ln",
) -> pd.DataFrame:
    """Is ``reference`` equivalent to every other method within a stated margin (claim N12)?

    Per task, at each method's lr chosen on val: the paired difference by seed of the test
    metric, ``reference`` minus the other as measured (an RMSE difference keeps its sign),
    with its 95 % interval (the two one-sided tests at alpha = 0.025: N12's rule,
    :class:`normlab.claims.Equivalent`). ``margin`` is ``margin_fraction`` of ``baseline``'s
    mean; a pair is ``equivalent`` when the interval lies inside (-margin, margin).
    ``smallest margin`` is the narrowest margin that the data would call equivalent.
    """
    if not 0 < margin_fraction < 1:
        raise ValueError(f"margin_fraction must lie in (0, 1), got {margin_fraction!r}")
    chosen = at_chosen_lr(results)
    rows = []
    for task, part in chosen.groupby("data"):
        present = set(part["normaliser"])
        for name, what in ((reference, "reference"), (baseline, "baseline")):
            if name not in present:
                raise ValueError(f"{what}={name!r} has no runs on {task}")
        baseline_mean = part[part["normaliser"] == baseline]["test_metric"].mean()
        margin = margin_fraction * baseline_mean
        for other in sorted(present - {reference}):
            effect = paired(
                chosen, reference, other, within={"data": task}, higher_is_better=True
            )
            test = difference_test(effect.samples)
            rows.append(
                {
                    "data": task,
                    "minus": other,
                    "difference": test.mean,
                    "95% low": test.low,
                    "95% high": test.high,
                    "margin": margin,
                    "equivalent": -margin < test.low and test.high < margin,
                    "smallest margin": max(abs(test.low), abs(test.high)),
                    "p (difference)": test.p,
                    "n": test.n,
                }
            )
    return pd.DataFrame(rows)
