"""Chapter 12's numbers: when AutoNorm-S's rule fires, and the regime its verdicts read.

Every function reads a saved set's table or records given to it and returns plain
values or tables; the chapter glues them.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .. import claims
from ..analysis import gates as ag
from ..claims.tables import paired_table
from ..data.sources import served_by, title
from ..experiments import gate_study as gs
from ..experiments.gate_grids import T_FREEZE
from ..experiments.gate_regime import REGIME_EPOCHS, REGIME_SEEDS
from ..facts import gate_seeds_held
from ..figures import task_title
from ..gates import FREEZE_PREFIX, READY_LEAD
from ..gates import READY_ARM as READY
from ..names import display_name
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
    "ready_regime",
    "ready_view",
    "ready_sentence",
    "regime_effects",
    "regime_finding",
    "regime_meaning",
    "set_numbers",
    "ablation_numbers",
    "regime_numbers",
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


def ready_regime(results: pd.DataFrame, records: list[dict[str, Any]]) -> pd.DataFrame:
    """The regime of ``gate_regime``'s runs, a row per task and arm, each arm at its rate
    chosen on validation: ``lr``, ``n`` seeds, ``epochs``, the final training loss and its
    ratio to FrozenLN's, the validation accuracy gained over the last quarter
    (``late_gain``), whether the arm is past its plateau
    (:func:`normlab.analysis.gates.regime`); for AutoNorm-S deciding after warm-up
    (``autonorm_s_ready``) the first and last epoch of its decision over seeds
    (``decided_first``, ``decided_last``), the mean validation accuracy then
    (``accuracy_at``) and the share of seeds on which the paper's rule fired (the gates'
    mean entropy at the decision at least eps_H, ``fired``)."""
    runs = ag.at_defaults(results)
    best = ag.chosen(runs)
    rows = []
    for task, part in best.groupby("data", sort=False):
        lrs = part.groupby("arm")["lr"].first().to_dict()
        chosen = [
            r
            for r in records
            if r["config"]["data"] == task
            and lrs.get(r["config"]["arm"]) == r["config"]["lr"]
        ]
        table = ag.regime(chosen).drop(columns="val_at_decision")
        table.insert(2, "lr", table["arm"].map(lrs))
        ready = part[part["arm"] == READY]
        table["decided_first"] = table["arm"].map({READY: ready["decided_at"].min()})
        table["decided_last"] = table["arm"].map({READY: ready["decided_at"].max()})
        table["accuracy_at"] = table["arm"].map({READY: ready["accuracy_at"].mean()})
        fired = float((ready["decision_entropy"] >= EPS_H).mean())
        table["fired"] = table["arm"].map({READY: fired})
        rows.append(table)
    return pd.concat(rows, ignore_index=True)


def ready_view(regime: pd.DataFrame, task: str) -> pd.DataFrame:
    """:func:`ready_regime` on one ``task`` as the chapter shows it, narrow enough for the
    text column: a row per arm with its rate, seeds, final training loss (and its ratio to
    FrozenLN's), the validation accuracy gained over the last quarter and whether it is past
    its plateau; for AutoNorm-S, the epochs its decision came at over seeds and the share
    of seeds on which the rule fired.

    Raises:
        ValueError: ``regime`` has no row of ``task``.
    """
    regime = regime[regime["data"] == task]
    if regime.empty:
        raise ValueError(f"task={task!r}: the regime table has no row of it")
    decided = regime["decided_first"].astype("Int64").astype(str)
    last = regime["decided_last"].astype("Int64").astype(str)
    when = decided.where(decided == last, decided + "–" + last)
    return pd.DataFrame(
        {
            "arm": regime["arm"],
            "lr": regime["lr"],
            "seeds": regime["n"],
            "final loss": regime["train_loss"],
            "× FrozenLN": regime["loss_ratio"],
            "late gain": regime["late_gain"],
            "plateau": regime["plateau"].map({True: "past", False: "short"}),
            "decided at": when.where(regime["decided_first"].notna(), ""),
            "fired": regime["fired"],
        }
    ).reset_index(drop=True)


_WITHOUT_GATE = ("frozen_ln", "dyt", "autonorm_fixed")


def ready_sentence(regime: pd.DataFrame, task: str, name: str) -> str:
    """The regime of one task of ``gate_regime`` in one sentence (``regime``:
    :func:`ready_regime`; ``name``: the task's dataset)."""
    rows = regime[regime["data"] == task].set_index("arm")
    ready = rows.loc[READY]
    # the arms with a gate: not LayerNorm, DyT alone or their fixed mix (chapter 11's)
    gated = rows.drop(index=[a for a in _WITHOUT_GATE if a in rows.index])
    short = [a for a, past in gated["plateau"].items() if not past]
    when = f"{int(ready['decided_first'])}" + (
        f" to {int(ready['decided_last'])}"
        if ready["decided_last"] != ready["decided_first"]
        else ""
    )
    state = (
        "every gated arm is past its plateau"
        if not short
        else f"{len(short)} of {len(gated)} gated arms are short of their plateau"
    )
    return (
        f"On {name}, trained for {int(ready['epochs'])} epochs, AutoNorm-S decides at "
        f"epoch {when}, at validation accuracy {ready['accuracy_at']:.2f}, and the paper's "
        f"rule fires on {100 * ready['fired']:.0f} % of seeds; {state} (the gated arms' "
        f"final training loss is {gated['loss_ratio'].min():.1f}× to "
        f"{gated['loss_ratio'].max():.1f}× FrozenLN's)."
    )


def _source(table: pd.DataFrame, task: str) -> str | None:
    """The dataset that served ``task`` in ``table`` (None where it has no run of it)."""
    rows = table.loc[table["data"] == task, "source"]
    return str(rows.iloc[0]) if len(rows) else None


def _effect_words(key: str, table: pd.DataFrame) -> tuple[str, str]:
    """``("AutoNorm-S − FrozenLN", "restyled 8×8 digits")`` for the effect
    ``autonorm_s - frozen_ln on mnist_restyled``."""
    arms, _, task = key.partition(" on ")
    a, _, b = arms.partition(" - ")
    rows = table.loc[table["data"] == task, ["source", "data_profile"]]
    source, profile = rows.iloc[0] if len(rows) else (None, "cpu")
    return f"{display_name(a)} − {display_name(b)}", title(
        served_by(task, str(profile), source)
    )


def regime_effects(
    claim_ids: list[str], tables: dict[str, pd.DataFrame]
) -> pd.DataFrame:
    """Each claim's effects judged in each regime (``tables``: a regime's name and its
    set's results, the primary first), a row per effect and regime: ``claim``,
    ``contrast`` and ``task`` (in words), ``effect`` (the three as a reader's name),
    ``regime``, ``mean``, ``half`` (the interval the
    verdict read), ``n`` seeds, ``verdict`` and ``margin``; an effect measured in one
    regime only is kept."""
    rows = []
    for claim_id in claim_ids:
        claim = claims.get(claim_id)
        for regime, table in tables.items():
            keys = {e.label: e.key for e in claim.test.quantity(table)}
            for j in claims.judge(claim, table).judged:
                contrast, task = _effect_words(keys[j.label], table)
                rows.append(
                    {
                        "claim": claim_id,
                        "contrast": contrast,
                        "task": task,
                        "effect": f"{claim_id}: {contrast}, {task}",
                        "regime": regime,
                        "mean": j.interval.mean,
                        "half": j.interval.half,
                        "n": j.n,
                        "verdict": j.verdict,
                        "margin": j.margin,
                    }
                )
    return pd.DataFrame(rows)


def regime_finding(effects: pd.DataFrame, claim_id: str = "N3") -> Any:
    """The chapter's finding in one sentence: ``claim_id``'s first effect in the first
    regime of ``effects`` (:func:`regime_effects`), and in the others."""
    rows = effects[effects["claim"] == claim_id]
    first = rows[rows["effect"] == rows["effect"].iloc[0]]
    main, *others = first.itertuples(index=False)
    text = (
        f"Trained past the plateau and frozen after warm-up, {main.contrast} on the "
        f"{main.task} is "
        f"{main.mean:+.3f} ± {main.half:.3f} over {main.n} seeds: {main.verdict}"
    )
    for other in others:
        text += f"; in the {other.regime} it is {other.verdict}"
    return markdown(text + ".")


def regime_meaning(effects: pd.DataFrame) -> Any:
    """What the regimes of ``effects`` (:func:`regime_effects`) say together, one sentence
    per effect measured in the first regime and another: how far the regime moves it (the
    first regime's estimate minus the other's, the two sets' intervals combined as
    independent, ``hypot`` of their half-widths), and whether that interval holds zero."""
    regimes = list(dict.fromkeys(effects["regime"]))
    sentences = []
    for other in regimes[1:]:
        shifts = []
        for _, rows in effects.groupby("effect", sort=False):
            by = rows.set_index("regime")
            if regimes[0] not in by.index or other not in by.index:
                continue
            first = by.loc[regimes[0]]
            shift = float(first["mean"] - by.loc[other, "mean"])
            half = math.hypot(first["half"], by.loc[other, "half"])
            moves = "moves" if abs(shift) > half else "does not clearly move"
            shifts.append(
                f"It {moves} {first['claim']}'s {first['contrast']} on the "
                f"{first['task']} ({shift:+.3f} ± {half:.3f})."
            )
        if shifts:
            sentences += [
                f"Each shift here is the {regimes[0]}'s estimate minus the {other}'s.",
                *shifts,
            ]
    return markdown(" ".join(sentences))


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


def set_numbers(runs: pd.DataFrame, profile: str = "cpu") -> dict[str, Any]:
    """What the chapter says of ``gate_bottleneck``'s runs (at the defaults), keyed by glue
    name: the mean decision entropy per task (``ch12_h_<task>``), the seeds held, the
    rates and freeze epochs in words, and the epochs."""
    decisions, _ = freeze_decisions(runs)
    found: dict[str, Any] = {
        f"ch12_h_{task}": float(row["mean"]) for (task, _t), row in decisions.iterrows()
    }
    rates = runs["lr"].nunique()
    found["ch12_seeds_held"] = gate_seeds_held(runs, profile)
    found["ch12_rates"] = markdown(
        "one learning rate" if rates == 1 else f"{rates} learning rates"
    )
    freezes = ag.freeze_epochs(runs["arm"].unique())
    found["ch12_freezes"] = markdown(", ".join(str(t) for t in freezes))
    found["ch12_epochs"] = int(runs["epochs"].max())
    return found


def ablation_numbers(noise: pd.DataFrame, learning: pd.DataFrame) -> dict[str, float]:
    """The freeze's two parts per task, keyed by glue name: removing the forward noise
    (``noise``, AutoNorm-S minus the freeze that keeps sampling) and stopping the learning
    (``learning``, that freeze minus the plain gate), each mean and 95 % half-width
    (:func:`normlab.claims.tables.paired_table`'s rows)."""
    found = {}
    for name, pairs in (("noise", noise), ("learning", learning)):
        for row in pairs.itertuples():
            found[f"ch12_{name}_{row.data}"] = float(row.mean)
            found[f"ch12_{name}_half_{row.data}"] = float(row.ci95)
    return found


def regime_numbers(
    ready: pd.DataFrame,
    regime_runs: pd.DataFrame,
    short: pd.DataFrame,
    short_runs: pd.DataFrame,
) -> dict[str, Any]:
    """The two regimes in words, keyed by glue name: per task the regime past the plateau
    (``ready``: :func:`ready_regime` of ``regime_runs``; ``ch12_ready_<task>``) and the
    short budget (``short``: :func:`regime_table` of ``short_runs``;
    ``ch12_short_<task>``); and the regime's declared epochs per task, its seeds and the
    lead the decision waits for (``ch12_regime_declared``)."""
    epochs = " and ".join(
        f"{n} epochs on {title(served_by(task, 'cpu', _source(regime_runs, task)))}"
        for task, n in REGIME_EPOCHS.items()
    )
    found: dict[str, Any] = {
        "ch12_regime_declared": markdown(
            f"Training runs {epochs}. AutoNorm-S applies the paper's rule at the "
            "end of the first epoch whose validation accuracy has left chance by "
            f"{READY_LEAD:g}, and every arm runs {REGIME_SEEDS} seeds at its chosen rate "
            "on both tasks."
        )
    }
    for task in REGIME_EPOCHS:
        name = task_title(task, regime_runs)
        found[f"ch12_ready_{task}"] = markdown(ready_sentence(ready, task, name))
    for task, row in short.set_index("data").iterrows():
        name = task_title(str(task), short_runs)
        found[f"ch12_short_{task}"] = markdown(regime_sentence(row, name))
    return found
