"""The numbers Part II's prose cites, gathered from the runs a chapter made or loaded.

A chapter shows the code that teaches; what its sentences quote (a bias, a share of seeds, a
verdict) is gathered here and glued (:func:`normlab.display.glue`) in a cell whose input the
HTML leaves out. Each function returns a dict of plain numbers (or, for a verdict or a list
of findings, IPython ``Markdown`` for ``{glue:md}``), keyed by the name the chapter glues it
under after its own prefix (``ch11_`` + ``gap_default``), and a table where the chapter
shows the one the numbers come from.

- chapters 11 and 12: :func:`power_table`, :func:`gate_seeds_held`;
- chapter 12: :func:`freeze_decisions`, :func:`freeze_effect`, :func:`freeze_plainly`,
  :func:`lead_over_frozen_ln`, :func:`verdict`;
- every chapter with a plan: :func:`plan_cost`, :func:`plan_plainly`, and
  :func:`resolve_cost` (which :mod:`normlab.chapters.part2` reads for chapters 13-15).

Chapters 9, 10 and 13-15, and chapter 11's own numbers (its diagnostics, its mechanism
sweep and its answer), come from the chapters' modules in :mod:`normlab.chapters`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from . import claims
from .analysis import gates as ag
from .data.sources import served_by, title
from .experiments import gate_study as gs
from .names import display_name

__all__ = [
    "gate_seeds_held",
    "power_table",
    "plan_cost",
    "plan_plainly",
    "resolve_cost",
    "verdict",
]


def _markdown(text: str) -> Any:
    """``text`` as IPython Markdown (for ``{glue:md}``), or the text without IPython."""
    try:
        from IPython.display import Markdown
    except ImportError:  # pragma: no cover - IPython comes with every notebook
        return text
    return Markdown(text)


# -------------------------------------------------------------- chapters 11 and 12


def power_table(claim_ids: Iterable[str], *, brief: bool = False) -> pd.DataFrame:
    """What the saved sets can resolve, one row per effect of each claim (judged as the
    scorecard judges it): ``id``, ``effect``, ``verdict``, ``estimate`` with its interval
    (``low``, ``high``: seeds and test items), ``margin``, ``mde`` (the smallest effect
    these seeds detect at 80 % power), ``seeds`` (held), ``planned`` (the claim's plan,
    from the pilot spread) and ``to resolve`` (the seeds that would resolve an inconclusive
    effect at the observed spread; blank when resolved). ``brief``: each effect named
    without its regime's words (where a table beside it states the regime) and without
    ``low`` and ``high``, so that it fits a chapter's column."""
    from .claims.judging import evaluate
    from .claims.records import scorecard_records

    records = scorecard_records(outcomes=[evaluate(i) for i in claim_ids])
    rows = [
        {
            "id": r["id"],
            "effect": e["label"],
            "verdict": e["verdict"],
            "estimate": e["estimate"],
            "low": e["low"],
            "high": e["high"],
            "margin": e["margin"],
            "mde": e["mde"],
            "seeds": e["n"],
            "planned": r.get("planned_seeds"),
            "to resolve": e["n_needed"],
        }
        for r in records
        for e in r["effects"]
    ]
    table = pd.DataFrame(rows)
    for counted in ("planned", "to resolve"):  # seeds: whole numbers, blank where none
        table[counted] = table[counted].astype("Int64")
    if brief:
        named = table["effect"].str.replace(r" \(.*\)$", "", regex=True)
        table = table.assign(effect=named).drop(columns=["low", "high"])
    return table


def gate_seeds_held(runs: pd.DataFrame, profile: str = "cpu") -> Any:
    """The seeds a gate set's ``runs`` hold, in words (Markdown): those of every arm at
    every rate and, per task, the arms run further for a claim's plan (a pilot at every
    rate, then the rate it chose alone)."""
    per_rate = runs.groupby(["data", "arm", "lr"])["seed"].nunique()
    swept = per_rate.groupby(level=["data", "arm"]).min()
    total = runs.groupby(["data", "arm"])["seed"].nunique()
    base = int(per_rate.min())
    words = [f"{base} seeds of every arm at every rate"]
    further = pd.DataFrame({"total": total, "swept": swept})
    further = further[further["total"] > base].reset_index()
    rank = {arm: i for i, arm in enumerate(gs.ARMS)}  # the freezes after the arms
    for (task, n, pilot), group in further.groupby(["data", "total", "swept"]):
        source = gs.CPU_TASKS.get(task, {}).get("source") if profile == "cpu" else None
        order = sorted(group["arm"], key=lambda a: (rank.get(a, len(rank)), a))
        names = [display_name(a) for a in order]
        names = [n if n[0].isupper() else f"the {n}" for n in names]
        arms = (
            ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        )
        how = (
            "at every rate"
            if n == pilot
            else f"{pilot} at every rate, the other {n - pilot} at the rate those "
            f"{pilot} chose"
        )
        words.append(
            f"on the {title(served_by(str(task), profile, source))}, {arms} have {n} ({how})"
        )
    return _markdown("; ".join(words))


# ------------------------------------------------------- verdicts and what resolves them


def verdict(claim_id: str, no_note: str = "") -> dict[str, Any]:
    """A claim's verdict on the largest saved set (:func:`normlab.claims.evaluate`):
    ``verdict`` (italic Markdown), ``seeds`` (the most its effects read, 0 for an exact
    claim); for a claim judged on one effect, its mean ``diff``, its 95 % half-width
    ``half`` and the note on it, ``note`` (``no_note`` when the claim has none)."""
    outcome = claims.evaluate(claim_id)
    found: dict[str, Any] = {
        "verdict": _markdown(f"*{outcome.verdict}*"),
        "seeds": int(max((j.n for j in outcome.judged if j.n), default=0)),
    }
    if len(outcome.effects) == 1:
        ((label, effect, _),) = outcome.effects
        found["diff"] = float(effect.mean)
        found["half"] = float(effect.half)
        found["note"] = _markdown(outcome.notes.get(label, no_note))
    return found


def _claim_runs(claim_id: str, outcome: Any, table: pd.DataFrame) -> pd.DataFrame:
    """The runs of a claim's saved set that a seed of it adds to: those on the tasks its
    effects read, of the arms they compare where each names its arms (AutoNorm-S's by the
    runs it is composed from, :func:`normlab.analysis.gates.runs_behind`), under its
    plan's primary specification (each axis of the plan's ``primary`` that the set
    sweeps), so that cells only another claim or a sensitivity runs are not counted."""
    from .claims import plans

    read = table
    if outcome.data and "data" in read and set(outcome.data) & set(read["data"]):
        read = read[read["data"].isin(outcome.data)]
    if outcome.arms and "arm" in read:
        behind = ag.runs_behind(outcome.arms, read["arm"].unique())
        if behind:
            read = read[read["arm"].isin(behind)]
    found = plans.plan(claim_id)
    for key, value in (found.primary if found else {}).items():
        if key in read and read[key].nunique() > 1 and (read[key] == value).any():
            read = read[read[key] == value]
    return read


def _pace(claim_id: str, outcome: Any) -> tuple[int, int, int, float]:
    """A claim's saved set: the seeds its verdict read, the runs (:func:`_claim_runs`) a
    further seed of the pilot adds (every rate of every cell), the runs a confirmation
    seed adds (each cell at its rate chosen on the pilot, the grid's ``select`` axis
    dropped) and the set's own seconds per run (the mean of the runs it reads, or the
    manifest's)."""
    from . import results as saved_results
    from .claims.registry import get
    from .experiments.registry import get as experiment

    name = get(claim_id).test.experiment
    saved = saved_results.largest(name)
    read = _claim_runs(claim_id, outcome, saved.results)
    # the seeds its verdict read (a set may run some cells for more seeds than others)
    held = int(
        max((j.n for j in outcome.judged if j.n), default=read["seed"].nunique())
    )
    select = experiment(name).select
    cells = [c for c in experiment(name).grid("cpu").axes if c in read and c != select]
    per_pilot = len(read[read["seed"] == read["seed"].min()])
    per_confirm = len(read[cells].drop_duplicates()) if cells else 1
    # the seconds of the runs it reads where the records keep them (a set's cells differ
    # in cost: its tasks, arms and rates), else the set's mean from its manifest
    if "seconds" in read and read["seconds"].notna().all() and len(read):
        per_run = float(read["seconds"].mean())
    else:
        per_run = float(saved.manifest["wall_seconds"]) / saved.runs
    return held, per_pilot, per_confirm, per_run


def _seed_cost(
    pace: tuple[int, int, int, float], seeds: int | None
) -> tuple[int | None, float | None]:
    """The runs and CPU-hours of ``seeds`` further seeds at ``pace`` (:func:`_pace`): those
    that complete the pilot (:data:`normlab.claims.plans.PILOT_SEEDS`) run every rate, the
    rest confirm the pilot's choice of rate."""
    from .claims.plans import PILOT_SEEDS

    held, per_pilot, per_confirm, per_run = pace
    if seeds is None:
        return None, None
    pilot = min(seeds, max(PILOT_SEEDS - held, 0))
    runs = pilot * per_pilot + (seeds - pilot) * per_confirm
    return runs, runs * per_run / 3600


# The columns of resolve_cost's and plan_cost's tables, kept when a table has no rows.
_RESOLVE_COLUMNS = ["id", "seeds", "seeds needed", "test items", "test items needed"]
_RESOLVE_COLUMNS += ["runs needed", "CPU-hours", "budgets"]
_PLAN_COLUMNS = ["id", "verdict", "seeds", "planned seeds", "test items"]
_PLAN_COLUMNS += ["planned test items", "runs to plan", "CPU-hours", "budgets"]


def resolve_cost(claim_ids: Iterable[str]) -> pd.DataFrame:
    """What would resolve each inconclusive claim of ``claim_ids`` on its saved cpu set,
    and what that would cost on the CPU: one row per inconclusive claim, with ``id``,
    ``seeds`` (held), ``seeds needed`` and ``test items`` / ``test items needed`` (the
    scorecard's, from the observed spread and the test set's measured noise), ``runs
    needed`` (a set of that many seeds under the claim's primary specification, of the
    arms it compares on the tasks it reads, :func:`_claim_runs`: the pilot's seeds at
    every rate, the rest at the rates the pilot chose, :func:`_seed_cost`), ``CPU-hours``
    (at the seconds the runs it reads took, :func:`_pace`; the larger test set's
    evaluation not counted)
    and ``budgets``: that time over a chapter's CPU budget
    (:data:`normlab.experiments.costs.CPU_BUDGET_MIN`). Empty when none is inconclusive."""
    from .claims.judging import evaluate
    from .claims.rules import INCONCLUSIVE
    from .experiments.costs import CPU_BUDGET_MIN

    rows = []
    for claim_id in claim_ids:
        outcome = evaluate(claim_id)
        if outcome.verdict != INCONCLUSIVE:
            continue
        seeds = outcome.n_needed
        pace = _pace(claim_id, outcome)
        held = pace[0]
        runs, hours = _seed_cost((0, *pace[1:]), seeds)  # a set of that many, afresh
        tested = [j.n_test for j in outcome.judged if j.n_test]
        rows.append(
            {
                "id": claim_id,
                "seeds": held,
                "seeds needed": seeds,
                "test items": max(tested) if tested else None,
                "test items needed": outcome.n_test_needed,
                "runs needed": runs,
                "CPU-hours": hours,
                "budgets": None if hours is None else hours * 60 / CPU_BUDGET_MIN,
            }
        )
    return pd.DataFrame(rows, columns=_RESOLVE_COLUMNS)


def plan_cost(claim_ids: Iterable[str]) -> pd.DataFrame:
    """Each claim of ``claim_ids`` whose plan (from the pilot,
    :func:`normlab.claims.judging.planned_from`) asks for more than its saved cpu set
    holds: ``id``, ``verdict``, ``seeds`` (held), ``planned seeds``, ``test items`` and
    ``planned test items`` (where the plan needs a larger test set), ``runs to plan``
    (the runs the missing seeds add under the primary specification, of the arms the
    claim compares, :func:`_claim_runs`: each at the rate the pilot chose,
    :func:`_seed_cost`), ``CPU-hours`` and
    ``budgets`` (that time over :data:`normlab.experiments.costs.CPU_BUDGET_MIN`). Empty
    when every plan is met."""
    from .claims.judging import evaluate
    from .experiments.costs import CPU_BUDGET_MIN

    rows = []
    for claim_id in claim_ids:
        outcome = evaluate(claim_id)
        seeds, items = outcome.planned or (None, None)
        tested = max((j.n_test or 0 for j in outcome.judged), default=0)
        pace = _pace(claim_id, outcome)
        held = pace[0]
        if (seeds is None or seeds <= held) and not items:
            continue
        more = None if seeds is None else max(seeds - held, 0)
        runs, hours = _seed_cost(pace, more)
        rows.append(
            {
                "id": claim_id,
                "verdict": outcome.verdict,
                "seeds": held,
                "planned seeds": seeds,
                "test items": tested or None,
                "planned test items": items,
                "runs to plan": runs,
                "CPU-hours": hours,
                "budgets": None if hours is None else hours * 60 / CPU_BUDGET_MIN,
            }
        )
    return pd.DataFrame(rows, columns=_PLAN_COLUMNS)


def plan_plainly(cost: pd.DataFrame, whole: int | None = None) -> Any:
    """:func:`plan_cost`'s table in sentences (Markdown for ``{glue:md}``): per claim, what
    its plan asks for beyond the set, what the missing seeds would cost against a
    chapter's CPU budget, and where a planned test set exceeds ``whole`` (the items the
    task's whole sample holds) that no number of seeds can meet it."""
    from .claims import plans
    from .claims.rules import INCONCLUSIVE
    from .experiments.costs import CPU_BUDGET_MIN

    pilot = f"from the pilot (a set's first {plans.PILOT_SEEDS} seeds, or all of a smaller set)"
    if cost.empty:
        return _markdown(f"Every plan of this chapter, computed {pilot}, is met.")
    sentences = []
    for v in cost.to_dict("records"):
        words = f"**{v['id']}**'s plan asks for "
        seeds, held = v["planned seeds"], v["seeds"]
        words += (
            f"{int(seeds):,} seeds (the set has {held})"
            if pd.notna(seeds) and seeds > held
            else f"no more seeds than the set's {held}"
        )
        if pd.notna(v["planned test items"]):
            items = int(v["planned test items"])
            words += f" and about {items:,} test items (the set has {int(v['test items']):,})"
            if whole is not None and items > whole:
                words += f", more than the {whole:,} items of the whole sample"
        if pd.notna(v["CPU-hours"]) and v["runs to plan"]:
            share = v["budgets"]
            words += (
                f"; the missing seeds are {int(v['runs to plan']):,} runs (beyond "
                "the pilot, each arm the claim compares at the rate the pilot chose), "
                "about "
                f"{v['CPU-hours']:.1f} CPU-hours, "
                + (
                    "within a chapter's CPU budget"
                    if share <= 1
                    else f"{share:.1f} times a chapter's budget of "
                    f"{CPU_BUDGET_MIN:.0f} CPU-minutes"
                )
            )
        words += (
            "; the verdict stays open"
            if v["verdict"] == INCONCLUSIVE
            else f"; its verdict ({v['verdict']}) is decided on the seeds in hand, "
            "its intervals already lie on one side of the margin"
        )
        sentences.append(words + ".")
    return _markdown(f"The plans, computed {pilot}: " + " ".join(sentences))
