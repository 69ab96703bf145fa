"""Checking a saved set (:mod:`normlab.results`): its files, its grid and re-runs.

:func:`check_format` needs no training: the digests in the manifest (a number edited by
hand is caught), the schema of every record, that the set holds exactly its grid's runs,
that the records' device agrees with the manifest, and that the table matches the records.
:func:`verify` adds re-runs of a :func:`sample` of records spread across the set's arms:
exactly where this machine's numerics :func:`~normlab.results.fingerprint` equals the one
that made the set, else within a tolerance from the set's own seed-to-seed spread.
"""

from __future__ import annotations

import io
import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from ._records import RecordError, dumps, parse
from .experiments.runner import PACKED, records_table
from .results import TABLE, SavedSet, _sha, fingerprint

__all__ = [
    "Mismatch",
    "Verification",
    "TOLERANCE_Z",
    "check_format",
    "sample",
    "verify",
]

# Tolerance on a machine whose numerics differ (another CPU capability, torch, numpy or
# Python, another thread count). A different kernel rounds differently (relative changes
# near 1e-7 per product); training amplifies that, and on a chaotic stretch of training the
# re-run can end anywhere a different seed would. So the re-run and the saved run are
# compared as two draws of the same configuration: their difference has standard deviation
# sqrt(2) * sd, with sd the spread of that metric across the configuration's other seeds in the
# set itself, and a difference beyond TOLERANCE_Z = 4 such deviations (a chance of about
# 6e-5 for normal noise) is a mismatch. A change that moves a metric by less than that is
# not caught by a re-run on another machine; on the machine class that made the set (see
# the manifest's ``exact_on``) the comparison is exact and catches any change.
TOLERANCE_Z = 4.0
_FLOOR = (
    1e-6  # relative floor: the rounding of a CSV or a float32 sum, never a real change
)


# ---------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class Mismatch:
    """One problem :func:`verify` found: where, and what differs."""

    where: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


@dataclass
class Verification:
    """What :func:`verify` did to a set: how re-runs were compared (``mode``: ``exact``,
    ``tolerance``, or ``format only`` for a set made on a GPU or one whose format failed),
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
            "tolerance": f"compared within {TOLERANCE_Z:g} x sqrt(2) x the seed spread "
            "(another numerics fingerprint)",
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


def _grid_ids(saved: SavedSet) -> set[str] | Mismatch:
    from . import experiments

    try:
        experiment = experiments.get(saved.experiment)
        runs = experiment.runs(saved.profile, saved.manifest["seeds"])
    except ValueError as err:
        return Mismatch("manifest.json", str(err))
    return {r.run_id for r in runs}


def _table_problems(saved: SavedSet, records: list[dict[str, Any]]) -> list[Mismatch]:
    """Differences between ``results.csv`` and the table the records make."""
    try:
        table = saved.results
    except (OSError, ValueError) as err:
        return [Mismatch(TABLE, f"cannot be read ({err})")]
    expected = pd.read_csv(io.StringIO(records_table(records).to_csv(index=False)))
    if "run_id" not in table or list(table["run_id"]) != list(expected["run_id"]):
        return [Mismatch(TABLE, "does not list the records' runs in run-id order")]
    problems = []
    for column in expected.columns:
        if column not in table:
            problems.append(Mismatch(TABLE, f"lacks the column {column}"))
            continue
        for run_id, a, b in zip(expected["run_id"], expected[column], table[column]):
            if not (a == b or (pd.isna(a) and pd.isna(b))):
                problems.append(
                    Mismatch(f"{TABLE} {run_id}", f"{column} differs from its record")
                )
    return problems


def check_format(saved: SavedSet) -> list[Mismatch]:
    """Everything but a re-run: the files match the manifest's digests; every record is
    strict JSON that meets the schema, is listed with its digest and belongs to the set; the
    set holds exactly its grid's runs; the records' device agrees with the manifest's; and
    ``results.csv`` holds exactly the records' values."""
    problems: list[Mismatch] = []
    m = saved.manifest
    for name, digest in m["files"].items():
        path = saved.folder / name
        if not path.is_file():
            problems.append(Mismatch(name, "listed in the manifest but missing"))
        elif _sha(path.read_bytes()) != digest:
            problems.append(
                Mismatch(name, "edited since the set was made (digest differs)")
            )
    try:
        text = (saved.folder / PACKED).read_text()
    except OSError:
        return problems
    records: list[dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        try:
            record = parse(line, f"{PACKED} line {n}")
        except RecordError as err:
            problems.append(Mismatch(f"{PACKED} line {n}", str(err).split(": ", 1)[1]))
            continue
        run_id = record["run_id"]
        digest = m["records"].get(run_id)
        if digest is None:
            problems.append(Mismatch(run_id, "not listed in the manifest"))
        elif _sha(line) != digest:
            problems.append(
                Mismatch(run_id, "edited since the set was made (digest differs)")
            )
        if (record["experiment"], record["profile"]) != (m["experiment"], m["profile"]):
            problems.append(
                Mismatch(run_id, "belongs to another experiment or profile")
            )
        made_on = str(record.get("device", "cpu")).split(":")[0]
        if made_on != str(m["hardware"]["device"]).split(":")[0]:
            problems.append(
                Mismatch(
                    run_id,
                    f"made on {made_on}, but the manifest says {m['hardware']['device']}",
                )
            )
        records.append(record)
    ids = [r["run_id"] for r in records]
    if ids != sorted(set(ids)):
        problems.append(Mismatch(PACKED, "records are not unique and sorted by run id"))
    for run_id in sorted(set(m["records"]) - set(ids)):
        problems.append(Mismatch(run_id, "listed in the manifest but missing"))
    grid = _grid_ids(saved)
    if isinstance(grid, Mismatch):
        problems.append(grid)
    else:
        missing, extra = sorted(grid - set(ids)), sorted(set(ids) - grid)
        if missing or extra:
            problems.append(
                Mismatch(
                    PACKED,
                    f"holds {len(ids)} runs, its grid {len(grid)}: "
                    f"{len(missing)} missing (e.g. {missing[:1]}), "
                    f"{len(extra)} not in the grid (e.g. {extra[:1]})",
                )
            )
    return problems + _table_problems(saved, records)


def sample(saved: SavedSet, k: int = 3) -> list[str]:
    """``k`` run ids of the set, the same on every machine, spread across its arms.

    Records are taken in the order of a hash of their run id; each pick is the first one
    that adds the most values not yet covered on the experiment's configuration axes (the
    normaliser or arm first, then the other axes), so three picks meet three arms.
    """
    from . import experiments

    if not isinstance(k, int) or k < 1:
        raise ValueError(f"sample must be a positive int, got {k!r}")
    axes = experiments.get(saved.experiment).group_by(saved.profile)
    pool = sorted(saved.records(), key=lambda r: _sha(r["run_id"]))
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


def _spread(saved: SavedSet, record: dict[str, Any]) -> dict[str, float]:
    """Per metric, the standard deviation across the other seeds of ``record``'s
    configuration in the set (NaN when fewer than two have a finite value). The record
    itself is left out, so a changed record cannot widen its own tolerance."""
    key = {k: v for k, v in record["config"].items() if k != "seed"}
    values: dict[str, list[float]] = {}
    for other in saved.records():
        if other["run_id"] == record["run_id"]:
            continue
        if {k: v for k, v in other["config"].items() if k != "seed"} == key:
            for name, value in _numeric(other["metrics"]).items():
                if math.isfinite(value):
                    values.setdefault(name, []).append(value)
    return {
        name: float(np.std(v, ddof=1)) if len(v) >= 2 else math.nan
        for name, v in values.items()
    }


def _compare(
    new: dict[str, Any],
    old: dict[str, Any],
    exact: bool,
    spread: dict[str, float],
    where: str,
) -> list[Mismatch]:
    if bool(new["diverged"]) != bool(old["diverged"]):
        return [
            Mismatch(
                where,
                f"diverged = {new['diverged']}, saved {old['diverged']}",
            )
        ]
    problems = []
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
        if exact or name in ("steps", "epochs_run"):
            if value != was:
                problems.append(
                    Mismatch(where, f"{name} = {value!r}, saved {was!r} (exactly)")
                )
            continue
        sd = spread.get(name, math.nan)
        tol = TOLERANCE_Z * math.sqrt(2) * (0.0 if math.isnan(sd) else sd)
        tol += _FLOOR * max(1.0, abs(was))
        if abs(value - was) > tol:
            problems.append(
                Mismatch(
                    where,
                    f"{name} = {value:.6g}, saved {was:.6g}: differs by "
                    f"{abs(value - was):.3g} > tolerance {tol:.3g} "
                    f"(seed sd {sd:.3g})",
                )
            )
    return problems


def verify(saved: SavedSet, *, k: int = 3, mode: str = "auto") -> Verification:
    """Check a saved set: :func:`check_format`, then re-run a :func:`sample` of ``k``
    records on the CPU with the set's thread count and compare every metric.

    ``mode`` ``auto`` compares exactly when this machine's :func:`fingerprint` equals the
    manifest's ``exact_on`` (the engine is deterministic on the CPU), else within
    :data:`TOLERANCE_Z` standard deviations of a difference of two seeds; ``exact`` and
    ``tolerance`` force one. Sets made on a GPU, and sets whose format fails, are not
    re-run.
    """
    from .experiments import RunContext, get

    if mode not in ("auto", "exact", "tolerance"):
        raise ValueError(f"mode must be 'auto', 'exact' or 'tolerance', got {mode!r}")
    problems = check_format(saved)
    if saved.on_gpu or problems:
        reason = "format only (made on a GPU)" if saved.on_gpu else "format only"
        return Verification(saved, reason, [], problems)
    threads = int(saved.manifest["hardware"].get("torch_threads") or 1)
    if mode == "auto":
        here = fingerprint("cpu", threads)
        mode = "exact" if saved.manifest["exact_on"] == here else "tolerance"
    chosen = sample(saved, k)
    by_id = {r["run_id"]: r for r in saved.records()}
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for run_id in chosen:
            record = by_id[run_id]
            with tempfile.TemporaryDirectory() as tmp:
                outcome = get(saved.experiment).run_one(
                    dict(record["config"]),
                    RunContext(
                        device=torch.device("cpu"), checkpoint_dir=Path(tmp) / "ckpt"
                    ),
                )
            new = json.loads(dumps({**record, **outcome}))["metrics"]
            old = json.loads(dumps(record))["metrics"]
            problems += _compare(
                {k: math.nan if v is None else v for k, v in new.items()},
                {k: math.nan if v is None else v for k, v in old.items()},
                mode == "exact",
                _spread(saved, record),
                f"re-run of {run_id}",
            )
    finally:
        torch.set_num_threads(previous)
    return Verification(saved, mode, chosen, problems)
