"""Chapter 13 (language): every number and table its prose quotes.

- :func:`stand_ins`: the two generated stand-ins' label noise and ceiling;
- :func:`paper_perplexity`: what the paper's tagger accuracies allow its perplexity to be,
  and :func:`perplexity_facts`, the numbers the text and exercises read from it;
- :func:`freezing_on_off`: AutoNorm-S against the never-frozen AutoNorm on the saved sets;
- :func:`gate_means` and :func:`progress`: the learned gates' summaries, over training and
  at matched progress;
- :func:`accuracy_table`: each claim's arms on its stand-in, with the verdict;
- :func:`finding`: the chapter's opening sentence, from the verdicts;
- :func:`numbers`: every value the chapter glues (after the prefix ``ch13_``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
from scipy.optimize import brentq

from .. import analysis, claims, gate_tables
from ..analysis import tasks as task_analysis
from ..experiments import part2_tasks as tasks
from ..perplexity import binary_entropy, perplexity_bounds, smoothed_floor
from .part2 import markdown, resolve, schedule

__all__ = [
    "PAPER_TAGGERS",
    "PTB_TAGS",
    "LABEL_SMOOTHING",
    "CLAIMS",
    "TASKS",
    "stand_ins",
    "paper_perplexity",
    "fano_error",
    "perplexity_facts",
    "freezing_on_off",
    "gate_means",
    "progress",
    "accuracy_table",
    "finding",
    "numbers",
]

#: The paper's two taggers: (method, token accuracy, reported perplexity).
PAPER_TAGGERS = (("AutoNorm-S", 0.9742, 38.6), ("FrozenLN", 0.9680, 41.9))
#: The Penn Treebank's tag set, and the paper's label smoothing.
PTB_TAGS, LABEL_SMOOTHING = 45, 0.1
#: The claims this chapter tests.
CLAIMS = ("N8", "N9", "N10", "N11")
#: The two language tasks (stand-ins for PTB POS tagging and SST-2).
TASKS = ("ptb_pos", "sst2")


def stand_ins(splits: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Per stand-in (``splits``: task -> its splits, as :func:`normlab.data.for_profile`
    returns them): the classes, the share of labels redrawn at random (from the ceiling
    ``1 - noise (K - 1) / K``) and that ceiling, the best expected accuracy."""
    rows = []
    for task, found in splits.items():
        train = found["train"]
        ceiling, classes = float(train.meta["ceiling"]), int(train.num_classes)
        rows.append(
            {
                "data": task,
                "classes": classes,
                "labels redrawn": (1 - ceiling) * classes / (classes - 1),
                "ceiling": ceiling,
            }
        )
    return pd.DataFrame(rows)


def paper_perplexity() -> pd.DataFrame:
    """What the paper's two tagger accuracies allow (:data:`PAPER_TAGGERS`,
    :data:`PTB_TAGS` tags): the lower bound ``2^e``, the best possible perplexity of the
    true tags (Fano), a uniform guess, and the largest probability a right tag can get at
    the reported perplexity if wrong tokens give theirs at least ``1/K``."""
    rows = []
    for method, accuracy, reported in PAPER_TAGGERS:
        bounds = perplexity_bounds(accuracy, PTB_TAGS)
        rows.append(
            {
                "paper": method,
                "accuracy": accuracy,
                "reported": reported,
                "floor 2^e": bounds.lower,
                "Fano best ≤": bounds.fano_best,
                "uniform": bounds.uniform,
                "p(right tag)": bounds.right_token_probability(reported),
            }
        )
    return pd.DataFrame(rows)


def fano_error(reported: float, num_tags: int = PTB_TAGS) -> float:
    """The error ``e`` at which Fano's best perplexity ``exp(h(e) + e log(K - 1))``
    reaches ``reported`` (on the rising branch, ``e < 1 - 1/K``)."""
    top = 1 - 1 / num_tags

    def gap(e: float) -> float:
        return binary_entropy(e) + e * math.log(num_tags - 1) - math.log(reported)

    return float(brentq(gap, 1e-12, top))


def perplexity_facts() -> dict[str, float]:
    """The numbers the text and exercises read about the paper's perplexity: ``fano``
    (the larger best-possible value), ``gap_nats`` (the reported pair's difference in
    nats a token), ``smoothed_optimum`` (the label-smoothed target's perplexity),
    ``smoothed_floor`` and ``smoothed_raise`` (the floor ``p_max^-a 2^e`` for AutoNorm-S's
    tagger under label smoothing, and its ratio to ``2^e``), and ``fano_error_<method>``,
    the error at which Fano's best reaches each reported value."""
    table = paper_perplexity()
    (_, accuracy, reported_s), (_, _, reported_f) = PAPER_TAGGERS
    top = 1 - LABEL_SMOOTHING + LABEL_SMOOTHING / PTB_TAGS
    error = 1 - accuracy
    floor = top ** (-accuracy) * 2**error
    found = {
        "fano": float(table["Fano best ≤"].max()),
        "gap_nats": math.log(reported_f / reported_s),
        "smoothed_optimum": smoothed_floor(PTB_TAGS, LABEL_SMOOTHING),
        "p_max": top,
        "smoothed_floor": floor,
        "smoothed_raise": floor / 2**error - 1,
    }
    for method, _, reported in PAPER_TAGGERS:
        found[f"fano_error_{method.replace('-', '').lower()}"] = fano_error(reported)
    return found


def freezing_on_off(language: Any, gates: Any) -> pd.DataFrame:
    """AutoNorm-S (the saved ``language`` set) minus the never-frozen AutoNorm (the saved
    ``gates`` set) at the gates' learning rate, paired by seed, per language task: the
    mean entropy at T_freeze, the share of seeds frozen, the difference and its 95 %
    interval."""
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
    rows = []
    for task in TASKS:
        on = runs[
            (runs["data"] == task)
            & (runs["normaliser"] == "autonorm_s")
            & (runs["lr"] == lr)
        ]
        off = gate_runs[gate_runs["data"] == task]
        test = tasks.paired_test(
            task_analysis.by_seed(on, "test_metric"),
            task_analysis.by_seed(off, "test_metric"),
        )
        mine = decided[decided["data"] == task]
        rows.append(
            {
                "data": task,
                "H at T_freeze": float(mine["entropy"].mean()),
                "froze": float(mine["froze"].mean()),
                "on − off": test.mean,
                "low": test.low,
                "high": test.high,
                "seeds": test.n,
            }
        )
    return pd.DataFrame(rows)


def gate_means(gate_runs: pd.DataFrame) -> pd.DataFrame:
    """The learned gates of a saved ``autonorm_gates`` results table, mean over seeds
    per task (indexed by the dataset that served it): the test metric and the gate
    summaries (:data:`normlab.gate_tables.GATE_SUMMARY`)."""
    columns = ["test_metric", *gate_tables.GATE_SUMMARY]
    return task_analysis.with_sources(gate_runs).groupby("data")[columns].mean()


def progress(gate_runs: pd.DataFrame) -> pd.DataFrame:
    """The learned gates at matched progress, mean over seeds per task: the validation
    metric, its chance level, and the epoch, entropy and weight on LayerNorm at the
    first epoch :data:`~normlab.gate_tables.PROGRESS` of the way from chance
    to the run's best."""
    columns = ["val_metric", "chance", *gate_tables.PROGRESS_METRICS]
    return task_analysis.with_sources(gate_runs).groupby("data")[columns].mean()


def accuracy_table(language: pd.DataFrame) -> pd.DataFrame:
    """N8 and N9 on the saved language set: per task, FrozenLN's and AutoNorm-S's mean
    test accuracy at their rates chosen on validation, AutoNorm-S minus FrozenLN with its
    95 % half-width (the claims registry's), and the verdict."""
    summary = analysis.select_best(language, ["data", "normaliser"], "lr")
    chosen = summary.set_index(["data", "normaliser"])["mean"]
    rows = []
    for claim_id, task in zip(("N8", "N9"), TASKS):
        outcome = claims.evaluate(claim_id)
        (_, effect, _), *_ = outcome.effects
        rows.append(
            {
                "id": claim_id,
                "data": task,
                "FrozenLN": float(chosen[task, "frozen_ln"]),
                "AutoNorm-S": float(chosen[task, "autonorm_s"]),
                "difference": float(effect.mean),
                "± 95 %": float(effect.half),
                "verdict": outcome.verdict,
            }
        )
    return pd.DataFrame(rows)


def finding() -> Any:
    """The chapter's opening sentence (Markdown), from the verdicts of N10 (the gates)
    and N8, N9 (accuracy) on the saved sets."""
    outcomes = {c: claims.evaluate(c) for c in CLAIMS}
    verdict = {c: o.verdict for c, o in outcomes.items()}
    readings = [v for _, _, v in outcomes["N10"].effects]
    held = sum(v == "supported" for v in readings)
    gates = (
        f"the language gates stay less decided than the image gates on {held} of the "
        f"{len(readings)} readings of N10 (its verdict: *{verdict['N10']}*)"
    )
    beats = "supported" in (verdict["N8"], verdict["N9"])
    lead = "and AutoNorm-S beats" if beats else "yet AutoNorm-S does not beat"
    return markdown(
        f"On generated stand-ins for PTB and SST-2, {gates}, {lead} FrozenLN: on "
        f"tagging its lead is *{verdict['N8']}*, on sentences *{verdict['N9']}*."
    )


def numbers(
    splits: Mapping[str, Mapping[str, Any]], language: Any, gates: Any
) -> Mapping[str, Any]:
    """Every value chapter 13 glues: the stand-ins' ceilings and noise, the saved sets'
    schedule, :func:`perplexity_facts`, the verdicts of :data:`CLAIMS`, the freezing
    shares and the learned gates' summaries, and :func:`finding`."""
    found: dict[str, Any] = {"finding": finding()}
    for row in stand_ins(splits).itertuples():
        found[f"ceiling_{row.data}"] = row.ceiling
    found |= schedule(language.results)
    found["gate_seeds"] = int(gates.results["seed"].nunique())
    found |= perplexity_facts()
    for claim_id in CLAIMS:
        found[claim_id] = markdown(f"*{claims.evaluate(claim_id).verdict}*")
    for row in freezing_on_off(language, gates).itertuples():
        found[f"froze_{row.data}"] = row.froze
    means = gate_means(gates.results)
    for task, row in means.iterrows():
        found[f"entropy_{task}"] = float(row["entropy_mean"])
    found["p_ln_images"] = float(means["p_ln_final"].drop(list(TASKS)).iloc[0])
    found["progress_fraction"] = gate_tables.PROGRESS
    found["resolve"] = resolve(list(CLAIMS))[1]
    return found
