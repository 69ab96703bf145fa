"""Chapter 11's numbers: the mix or the gate, N1 on the seeds N3 ran, and the regime.

Every function reads saved sets (``gate_bottleneck`` and ``gate_mix``, cpu) or a table
given to it, and returns plain values or tables; the chapter glues them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis import gates as ag
from ..analysis.runs import common_seeds, summarise
from ..claims.tables import paired_table
from ..experiments.gate_grids import N3_TASK, T_FREEZE
from ..paper import DYT_ALPHA_INIT

__all__ = [
    "MIX_ORDER",
    "MAIN_ARMS",
    "CONTRASTS",
    "mix_runs",
    "mix_summary",
    "mix_contrasts",
    "mix_sentence",
    "short_regime",
    "n1_regime_sentence",
    "mix_edges",
]

#: The arms of the mix-or-gate study, in the order the figure shows them.
MIX_ORDER: tuple[str, ...] = (
    "frozen_ln",
    "dyt",
    "dyt_alpha_0.1",
    "autonorm_fixed",
    "autonorm_random",
    "autonorm",
)
#: Its contrasts, ``a`` minus ``b``: the mix's cost, and what a gate adds to the mix.
CONTRASTS: tuple[tuple[str, str], ...] = (
    ("autonorm_fixed", "frozen_ln"),
    ("autonorm", "autonorm_fixed"),
    ("autonorm_random", "autonorm_fixed"),
    ("dyt", "frozen_ln"),
)
_GATED = ("frozen_ln", "autonorm", "autonorm_random")


def mix_runs(bottleneck: pd.DataFrame, mix: pd.DataFrame) -> pd.DataFrame:
    """The study's runs: ``gate_bottleneck``'s FrozenLN, learned gate and Random Selector
    on the tasks ``gate_mix`` ran, beside ``gate_mix``'s DyT and fixed mix; DyT at a
    smaller alpha is its own arm (``dyt_alpha_0.1``). Both at the book's defaults."""
    gates = ag.at_defaults(bottleneck)
    gates = gates[gates["arm"].isin(_GATED) & gates["data"].isin(set(mix["data"]))]
    mix = ag.at_defaults(mix).copy()
    alpha = mix["alpha_init"].fillna(DYT_ALPHA_INIT)
    other = alpha != DYT_ALPHA_INIT
    mix.loc[other, "arm"] = (
        mix.loc[other, "arm"] + "_alpha_" + alpha[other].map("{:g}".format)
    )
    return pd.concat([gates, mix.drop(columns="alpha_init")], ignore_index=True)


#: The arms the main contrasts compare, read on the seeds all of them ran.
MAIN_ARMS: tuple[str, ...] = (
    "frozen_ln",
    "autonorm_fixed",
    "autonorm_random",
    "autonorm",
)


def _at_rates(runs: pd.DataFrame) -> pd.DataFrame:
    """Every arm at its rate chosen on validation: :data:`MAIN_ARMS` on the seeds all of
    them ran there, the others (DyT alone) on their own."""
    best = ag.chosen(runs)
    main = best["arm"].isin(MAIN_ARMS)
    shared = [common_seeds(task, ["arm"]) for _, task in best[main].groupby("data")]
    return pd.concat([*shared, best[~main]], ignore_index=True)


def mix_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per task and arm at its chosen rate (:data:`MAIN_ARMS` on the seeds
    all of them ran, DyT alone on its own): ``mean``, ``ci95``, ``n``, ``lr`` and
    ``at_edge`` (the choice at the grid's edge), in :data:`MIX_ORDER`."""
    best = _at_rates(runs)
    summary = summarise(best, ["data", "arm"])
    rates = best.groupby(["data", "arm"])[["lr", "at_edge"]].first().reset_index()
    summary = summary.merge(rates, on=["data", "arm"])
    order = {arm: i for i, arm in enumerate(MIX_ORDER)}
    summary["order"] = summary["arm"].map(order)
    return summary.sort_values(["data", "order"]).drop(columns="order")


def mix_contrasts(runs: pd.DataFrame) -> pd.DataFrame:
    """:data:`CONTRASTS` per task, each arm at its chosen rate, paired by seed: ``a``,
    ``b``, ``mean``, ``ci95``, ``low``, ``high``, ``n``."""
    best = ag.chosen(runs)
    tables = [
        paired_table(best, a, b, by="arm", higher_is_better=True)
        for a, b in CONTRASTS
        if {a, b} <= set(best["arm"])
    ]
    return pd.concat(tables, ignore_index=True)


def mix_sentence(contrasts: pd.DataFrame, task: str = N3_TASK) -> str:
    """One sentence: is the cost the mix's or the gate's, on ``task``?"""
    rows = contrasts[contrasts["data"] == task].set_index(["a", "b"])
    mix = rows.loc[("autonorm_fixed", "frozen_ln")]
    gate = rows.loc[("autonorm", "autonorm_fixed")]

    def span(row: pd.Series) -> str:
        return f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"

    if mix["high"] < 0 and gate["low"] <= 0 <= gate["high"]:
        who = "the mix's, not the gate's"
    elif mix["high"] < 0 and gate["high"] < 0:
        larger = "gate's" if abs(gate["mean"]) > abs(mix["mean"]) else "mix's"
        who = f"both, mostly the {larger}"
    elif mix["low"] <= 0 <= mix["high"]:
        who = "not shown to be the mix's"
    else:
        who = "neither reading alone"
    return (
        f"Mixing DyT into every LayerNorm slot, with no gate at all, costs "
        f"{span(mix)} of test accuracy against LayerNorm alone, and the learned gate "
        f"changes that mix by {span(gate)} (over {int(mix['n'])} paired seeds): the cost "
        f"is {who}."
    )


def short_regime(
    records: list[dict[str, Any]], lrs: dict[str, float], task: str = N3_TASK
) -> pd.DataFrame:
    """The regime of ``gate_bottleneck``'s arms on ``task`` (default: the CIFAR-10
    stand-in), each at its rate in ``lrs``: :func:`normlab.analysis.gates.regime` at the
    freeze decision's epoch (``T_FREEZE["cpu"]``)."""
    chosen = [
        r
        for r in records
        if r["config"]["data"] == task
        and lrs.get(r["config"]["arm"]) == r["config"]["lr"]
        and r["config"].get("init", ag.DEFAULT_INIT) == ag.DEFAULT_INIT
        and r["config"].get("selector_lr", 1.0) == 1.0
    ]
    return ag.regime(chosen, decision=T_FREEZE["cpu"])


def n1_regime_sentence(regime: pd.DataFrame, seeds: int, name: str) -> str:
    """N1's regime in one sentence: the seeds, the schedule and each compared arm's final
    training loss against FrozenLN's (``regime``: :func:`short_regime`; ``name``: the
    task's dataset)."""
    rows = regime.set_index("arm")
    learned, random, ln = (
        rows.loc[a] for a in ("autonorm", "autonorm_random", "frozen_ln")
    )
    short = [a for a in ("autonorm", "autonorm_random") if not rows.loc[a, "plateau"]]
    state = (
        "both gated arms short of their plateau"
        if len(short) == 2
        else "at least one gated arm past its plateau"
    )
    return (
        f"N1 reads {seeds} seeds per arm on {name}, {int(learned['epochs'])} epochs; the "
        f"learned gate ends with training loss {learned['train_loss']:.2f}, the Random "
        f"Selector {random['train_loss']:.2f} and FrozenLN {ln['train_loss']:.2f} ({state})."
    )


def mix_edges(summary: pd.DataFrame, names: dict[str, str]) -> str:
    """Which arms chose a rate at the edge of the grid, per task, in words (``names``:
    each task's dataset); empty when none did."""
    from ..figures import label

    words = []
    for task, part in summary[summary["at_edge"].astype(bool)].groupby("data"):
        arms = [label(a) for a in part["arm"]]
        listed = " and ".join(filter(None, [", ".join(arms[:-1]), arms[-1]]))
        words.append(
            f"on {names.get(task, task)} the rate chosen for {listed} sits at the "
            "edge of the grid"
        )
    return "; ".join(words)
