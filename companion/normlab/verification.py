"""Checking a saved set (:mod:`normlab.results`): its files, its grid and re-runs.

:func:`check_format` needs no training: the checks :func:`normlab.results.load` makes
before it returns a set, every problem listed (the digests in the manifest, so a number
edited by hand is caught; the schema of every record; that the set holds exactly its grid's
runs; that the records' device agrees with the manifest; that the table matches the records).
:func:`verify` adds re-runs of a :func:`sample` of records spread across the set's arms:
exactly where this machine's numerics :func:`~normlab.results.fingerprint` equals the one
that made the set, else as one more draw of the configuration, within the band of the set's
own seeds. The band includes the saved record itself, so in that mode a re-run tests the
code, not the record: a number edited by hand is caught by the digests.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import _saved_io
from ._records import dumps
from ._saved_io import Mismatch
from .results import SavedSet, fingerprint

__all__ = [
    "Mismatch",
    "Verification",
    "TOLERANCE_Z",
    "ACCURACY_FLOOR",
    "RELATIVE_FLOOR",
    "BUDGET_LIMIT",
    "BUDGET_GRACE",
    "OverBudget",
    "check_format",
    "rerun_seconds",
    "rerun_threads",
    "made_on",
    "sample",
    "verify",
]

# Tolerance on a machine whose numerics differ (another CPU capability, torch, numpy or
# Python, another thread count). A different kernel rounds differently (relative changes
# near 1e-7 per product), and training amplifies that: a re-run can escape a plateau that
# the saved run did not (or the reverse), land at another point of an oscillation (BatchNorm
# at lr 1.0 moves its val loss between 0.08 and 0.30 from epoch to epoch), or flip a few
# predictions that sit on the decision boundary. So a re-run there is judged as one more
# draw of its configuration: it must fall within the band of the configuration's seeds in
# the set (their final values and, for a metric with a per-epoch history, their values
# over the last half of training), widened on each side by TOLERANCE_Z standard deviations
# of those values and by a floor for the metric's resolution (ACCURACY_FLOOR, a few
# predictions of a few hundred held-out examples, for a metric in [0, 1]; a relative
# RELATIVE_FLOOR for the others). A change of the code that moves a metric by less than
# that is not caught by a re-run on another machine; on the machine class that made the set
# (the manifest's ``exact_on``) the comparison is exact and catches any change.
# Calibration: under torch's portable DEFAULT kernels (ATEN_CPU_CAPABILITY=default, so no
# re-run is bit-identical), 72 re-runs from five shipped sets (434 metric comparisons) fell
# at most 2.4 standard deviations outside their band, the next 1.3: hence 3.
TOLERANCE_Z = 3.0
ACCURACY_FLOOR = 0.01
RELATIVE_FLOOR = 1e-3
# metrics bounded in [0, 1], whose resolution is one held-out example
_BOUNDED = ("accuracy",)
#: With a ``budget``, :func:`verify` stops the re-runs of a set once they have taken this many
#: times the budget plus :data:`BUDGET_GRACE` seconds (a record's ``seconds`` chose the
#: sample, but a re-run is not trusted to take that long), and names the run it stopped.
BUDGET_LIMIT = 3.0
#: Seconds added to the limit, for the first re-run's start-up (its data, on a slow disk).
BUDGET_GRACE = 10.0


class OverBudget(Exception):
    """A re-run stopped because the re-runs of a set ran past their time limit."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`OverBudget` in the block once ``seconds`` have passed (a POSIX
    interval timer, so only in the main thread; elsewhere, and with None, no limit)."""
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise OverBudget

    previous = signal.signal(signal.SIGALRM, stop)
    started = time.monotonic()
    outer, _ = signal.setitimer(signal.ITIMER_REAL, max(float(seconds), 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:  # an enclosing timer keeps what was left of it
            left = outer - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3))


def rerun_threads(saved: SavedSet) -> int:
    """The thread count a re-run uses: the set's own, at most this machine's CPU count (a
    manifest may not ask for more threads than there are)."""
    asked = saved.manifest["hardware"].get("torch_threads") or 1
    return max(1, min(int(asked), os.cpu_count() or 1))


# ---------------------------------------------------------------------------- verify


@dataclass
class Verification:
    """What :func:`verify` did to a set: how re-runs were compared (``mode``: ``exact``,
    ``tolerance``, ``mixed`` (some of each), or ``format only`` for a set made on a GPU or
    one whose format failed),
    which records it re-ran, and the problems found (none when the set is sound)."""

    saved: SavedSet
    mode: str
    sampled: list[str]
    problems: list[Mismatch]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """One line: the set, what was checked and the outcome."""
        how = {
            "exact": "compared exactly (same numerics fingerprint)",
            "tolerance": "compared with the band of each configuration's seeds "
            "(another numerics fingerprint)",
            "mixed": "each compared exactly where its numerics fingerprint is this "
            "machine's, else with the band of its configuration's seeds",
        }
        rerun = (
            f"re-ran {len(self.sampled)} record(s), {how[self.mode]}"
            if self.mode in how
            else self.mode
        )
        return (
            f"{self.saved.experiment}/{self.saved.profile}: format, {rerun}: "
            f"{'ok' if self.ok else 'FAILED'}"
        )


def check_format(saved: SavedSet) -> list[Mismatch]:
    """Everything but a re-run, read afresh from the set's folder: the checks that
    :func:`normlab.results.load` makes before it returns a set (the files, the manifest
    and its digest, every record, the grid, the table), every problem listed."""
    return _saved_io.problems(saved.folder)


def rerun_seconds(record: dict[str, Any]) -> float:
    """What re-running ``record`` costs, from the seconds it records: a population's
    member records its share of its population's time, and is re-run with the whole
    population (:func:`normlab.experiments.populations.rerun_member`)."""
    members = record.get("population", {}).get("members", [None])
    return float(record["seconds"]) * len(members)


def sample(
    saved: SavedSet, k: int = 3, *, max_seconds: float | None = None
) -> list[str]:
    """``k`` run ids of the set, the same on every machine, spread across its arms.

    Records are taken in the order of a hash of their run id; each pick is the first one
    that adds the most values not yet covered on the experiment's configuration axes (the
    normaliser or arm first, then the other axes), so three picks meet three arms.
    ``max_seconds`` keeps to the records whose re-run takes at most that long
    (:func:`rerun_seconds`; the quickest record when none does), so that a re-run fits a
    time budget.
    """
    from . import experiments

    if not isinstance(k, int) or k < 1:
        raise ValueError(f"sample must be a positive int, got {k!r}")
    axes = experiments.get(saved.experiment).group_by(saved.profile)
    pool = sorted(saved.records(), key=lambda r: _saved_io.sha(r["run_id"]))
    if max_seconds is not None:
        quickest = min(pool, key=rerun_seconds)
        pool = [r for r in pool if rerun_seconds(r) <= max_seconds] or [quickest]
    covered: dict[str, set[str]] = {a: set() for a in axes}
    chosen: list[str] = []
    while pool and len(chosen) < k:

        def gain(record: dict[str, Any]) -> tuple[int, ...]:
            cfg = record["config"]
            return tuple(
                int(json.dumps(cfg.get(a), default=str) not in covered[a]) for a in axes
            )

        best = max(range(len(pool)), key=lambda i: (sum(gain(pool[i])), gain(pool[i])))
        record = pool.pop(best)
        for a in axes:
            covered[a].add(json.dumps(record["config"].get(a), default=str))
        chosen.append(record["run_id"])
    return chosen


def _numeric(metrics: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _history_key(name: str, metric: str) -> str | None:
    """The per-epoch history column that tracks a final metric (test ones by their val
    twin: both are the same model scored on held-out data)."""
    return {
        "train_loss": "train_loss",
        "val_loss": "val_loss",
        "test_loss": "val_loss",
        "val_metric": f"val_{metric}",
        "test_metric": f"val_{metric}",
    }.get(name)


@dataclass(frozen=True)
class _Band:
    """Where a configuration's seeds put one metric: the range and spread of their values."""

    low: float
    high: float
    sd: float

    def margin(self, bounded: bool) -> float:
        scale = max(abs(self.low), abs(self.high), 1e-12)
        floor = ACCURACY_FLOOR if bounded else RELATIVE_FLOOR * scale
        return TOLERANCE_Z * self.sd + floor


def _bands(saved: SavedSet, record: dict[str, Any]) -> tuple[dict[str, _Band], bool]:
    """Per metric, the band of every seed of ``record``'s configuration in the set (final
    values and, where the metric has a per-epoch history, values over the last half of
    training); and whether the seeds disagree on diverging."""
    key = {k: v for k, v in record["config"].items() if k != "seed"}
    values: dict[str, list[float]] = {}
    diverged: set[bool] = set()
    for other in saved.records():
        if {k: v for k, v in other["config"].items() if k != "seed"} != key:
            continue
        diverged.add(bool(other["metrics"]["diverged"]))
        history = other.get("history") or []
        late = history[len(history) // 2 :]
        for name, value in _numeric(other["metrics"]).items():
            pooled = [value]
            column = _history_key(name, str(other["metric"]))
            if column is not None:
                pooled += [float(row.get(column, math.nan)) for row in late]
            values.setdefault(name, []).extend(v for v in pooled if math.isfinite(v))
    bands = {
        name: _Band(min(v), max(v), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0)
        for name, v in values.items()
        if v
    }
    return bands, len(diverged) > 1


#: The per-item hits a record may keep (text, not numbers), compared exactly on a re-run.
HITS = ("test_hits", "test_hit_starts", "corruption_hits")


def _compare(
    new: dict[str, Any],
    old: dict[str, Any],
    exact: bool,
    where: str,
    *,
    bands: dict[str, _Band],
    mixed: bool,
    metric: str,
) -> list[Mismatch]:
    """Exact: every metric equal. Else each metric within its configuration's band."""
    if bool(new["diverged"]) != bool(old["diverged"]):
        if exact or not mixed:
            return [
                Mismatch(
                    where, f"diverged = {new['diverged']}, saved {old['diverged']}"
                )
            ]
        return []  # some seeds of this configuration diverge and some do not
    problems = []
    for key in HITS:
        if exact and key in old and new.get(key) != old[key]:
            # the same numerics must get the same test items right, not only as many
            problems.append(Mismatch(where, f"{key} differ from the saved record's"))
    saved_values = _numeric(old)
    for name, value in _numeric(new).items():
        if name not in saved_values:
            problems.append(Mismatch(where, f"{name} is new (not in the saved record)"))
            continue
        was = saved_values[name]
        if math.isnan(value) or math.isnan(was):
            if math.isnan(value) != math.isnan(was):
                problems.append(Mismatch(where, f"{name} = {value!r}, saved {was!r}"))
            continue
        # a budget fixes a run's length, except a run stopped at a target (which records
        # ``steps_to_target``): it ends where its training takes it, like any metric
        fixed = (
            name in ("steps", "epochs_run") and "steps_to_target" not in saved_values
        )
        if exact or fixed:
            if value != was:
                problems.append(
                    Mismatch(where, f"{name} = {value!r}, saved {was!r} (exactly)")
                )
            continue
        band = bands.get(name, _Band(was, was, 0.0))
        bounded = metric in _BOUNDED and name.endswith("_metric")
        margin = band.margin(bounded)
        if not band.low - margin <= value <= band.high + margin:
            problems.append(
                Mismatch(
                    where,
                    f"{name} = {value:.6g} (saved {was:.6g}) is outside the band of the "
                    f"configuration's seeds [{band.low:.4g}, {band.high:.4g}] "
                    f"widened by {margin:.3g}",
                )
            )
    return problems


def made_on(saved: SavedSet, record: dict[str, Any]) -> dict[str, Any] | None:
    """The numerics fingerprint that made ``record``: its own ``made_by`` (written since
    provenance travels with each run), else the manifest's ``exact_on``."""
    made = record.get("made_by")
    if isinstance(made, dict):
        return made.get("fingerprint")
    return saved.manifest["exact_on"]


def _rerun(saved: SavedSet, record: dict[str, Any], exact: bool) -> list[Mismatch]:
    """Re-run ``record`` on the CPU and compare it with the saved one."""
    from .experiments import RunContext, get
    from .experiments.populations import rerun_member

    with tempfile.TemporaryDirectory() as tmp:
        ctx = RunContext(device=torch.device("cpu"), checkpoint_dir=Path(tmp) / "ckpt")
        experiment = get(saved.experiment)
        # a population's member is re-run the way it was made: its whole population
        outcome = (
            rerun_member(experiment, record, ctx)
            if "population" in record
            else experiment.run_one(dict(record["config"]), ctx)
        )
    new = json.loads(dumps({**record, **outcome}))["metrics"]
    old = json.loads(dumps(record))["metrics"]
    bands, mixed = _bands(saved, record)
    return _compare(
        {k: math.nan if v is None else v for k, v in new.items()},
        {k: math.nan if v is None else v for k, v in old.items()},
        exact,
        f"re-run of {record['run_id']}",
        bands=bands,
        mixed=mixed,
        metric=str(record["metric"]),
    )


def verify(
    saved: SavedSet, *, k: int = 3, mode: str = "auto", budget: float | None = None
) -> Verification:
    """Check a saved set: :func:`check_format`, then re-run a :func:`sample` of ``k``
    records on the CPU with the set's thread count (:func:`rerun_threads`: at most this
    machine's CPUs) and compare every metric.

    ``mode`` ``auto`` compares a re-run exactly when this machine's :func:`fingerprint`
    equals the one that made that record (:func:`made_on`; the engine is deterministic on
    the CPU), else as one more draw of its configuration: within the band of the set's
    seeds widened by :data:`TOLERANCE_Z` standard deviations and a resolution floor;
    ``exact`` and ``tolerance`` force one. ``budget`` (seconds) samples only records that
    took at most that long to make, starts another re-run only while the time spent
    plus that record's own time fits the budget (the first always runs), and stops the
    re-runs at :data:`BUDGET_LIMIT` times the budget (plus :data:`BUDGET_GRACE`), a
    problem naming the run. Sets made on a GPU, and sets whose format fails (a config that
    is not its grid's among them), are not re-run.
    """
    if mode not in ("auto", "exact", "tolerance"):
        raise ValueError(f"mode must be 'auto', 'exact' or 'tolerance', got {mode!r}")
    if budget is not None and not budget > 0:
        raise ValueError(f"budget must be a positive number of seconds, got {budget!r}")
    problems = check_format(saved)
    if saved.on_gpu or problems:
        reason = "format only (made on a GPU)" if saved.on_gpu else "format only"
        return Verification(saved, reason, [], problems)
    threads = rerun_threads(saved)
    here = fingerprint("cpu", threads)
    by_id = {r["run_id"]: r for r in saved.records()}
    chosen = sample(saved, k, max_seconds=budget)
    ran: list[str] = []
    modes: set[str] = set()
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    started = time.perf_counter()
    limit = None if budget is None else BUDGET_LIMIT * budget + BUDGET_GRACE
    try:
        with _time_limit(limit):
            for run_id in chosen:
                record = by_id[run_id]
                spent = time.perf_counter() - started
                if (
                    ran
                    and budget is not None
                    and spent + rerun_seconds(record) > budget
                ):
                    break
                exact = mode == "exact" or (
                    mode == "auto" and made_on(saved, record) == here
                )
                modes.add("exact" if exact else "tolerance")
                problems += _rerun(saved, record, exact)
                ran.append(run_id)
    except OverBudget:
        problems.append(
            Mismatch(
                f"re-run of {run_id}",
                f"stopped after {time.perf_counter() - started:.3g} s: the re-runs may "
                f"take at most {limit:.3g} s ({BUDGET_LIMIT:g} times the budget of "
                f"{budget:g} s, plus {BUDGET_GRACE:g}); the record says its re-run "
                f"takes {rerun_seconds(record):.3g} s",
            )
        )
    finally:
        torch.set_num_threads(previous)
    used = "exact" if modes == {"exact"} else "tolerance" if modes else "format only"
    if len(modes) > 1:
        used = "mixed"
    return Verification(saved, used, ran, problems)
