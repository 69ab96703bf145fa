"""Run an experiment grid resumably, then summarise it across seeds.

Folder layout under ``out`` (``runs/`` by default)::

    <out>/<experiment>/<profile>/runs/<run_id>.json     one record per finished run
    <out>/<experiment>/<profile>/checkpoints/<run_id>/  while a run is unfinished
    <out>/<experiment>/<profile>/results.csv            the tidy table, one row per run
    <out>/<experiment>/<profile>/summary.csv            written by report()
    <out>/<experiment>/<profile>/figures/*.png          written by report()
    <out>/<experiment>/<profile>/runs.jsonl             a packed saved set (normlab.results)

A run whose record exists (as a file in ``runs/`` or a line of ``runs.jsonl``) is skipped; a
damaged record (truncated, empty, not a record) is named in a warning and its run redone;
an interrupted run resumes from its checkpoint. ``results.csv`` is rebuilt whenever it
disagrees with the records. Every file is written to a temporary name and renamed. Each run
is done under a lock (``checkpoints/<run_id>.lock``), so that processes sharing ``out``
share the work: one skips the runs another holds and, at the end, waits for them, saying so.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from .. import training
from .._io import write_atomic, write_text_atomic
from .._lock import FileLock
from .._records import RecordError, dumps, parse
from .._runtime import check_profile
from .._runtime import device as default_device
from ..data.types import DataSplit
from ..run_tables import records_table, select_best, summarise
from .grid import Run
from .grid import shard as select_shard
from .populations import run_record
from .registry import Experiment, RunContext, get

__all__ = [
    "DEFAULT_OUT",
    "finished_records",
    "holds_saved_set",
    "load_records",
    "load_results",
    "MANIFEST",
    "PACKED",
    "packed_records",
    "Report",
    "report",
    "results_folder",
    "run",
    "RunReport",
    "RunSettings",
    "summary_table",
    "tested_record",
    "train_and_test",
    "train_and_test_population",
]

# Local runs go to an ignored folder; the shipped sets live in the package (normlab.results).
DEFAULT_OUT = Path("runs")
# A packed set (normlab.results): every record of the folder, one strict-JSON line each,
# and the manifest that makes the folder a saved set.
PACKED = "runs.jsonl"
MANIFEST = "manifest.json"


# ------------------------------------------------------------------ one run's record


def train_and_test(
    model: nn.Module,
    splits: Mapping[str, DataSplit],
    ctx: RunContext,
    **fit_kwargs: Any,
) -> dict[str, Any]:
    """Fit on ``splits["train"]``/``["val"]`` (resuming from ``ctx.checkpoint_dir``), then
    test once on ``splits["test"]``.

    Returns the part of a run record that the runner stores: the metric's name and
    direction, final ``train_loss``, ``val_loss``, ``val_metric``, ``test_loss``,
    ``test_metric``, whether the run diverged, the history, and ``stand_in``: whether the
    training data is an offline stand-in (so no table mistakes it for the real dataset).
    A classification or tagging run's metrics also hold ``test_hits``, the test items (for
    tagging, the scored tokens) it got right (:func:`normlab.training.item_hits`), and a
    tagging run's ``test_hit_starts``, where each sentence's tokens begin
    (:func:`normlab.training.item_starts`).
    A grid's learning-rate sweep expects some runs to diverge: such a run stops after the
    epoch in which it diverged (``on_divergence="stop"``; the rule is
    :func:`normlab.training.is_diverged`: a loss that is not finite, or above
    :func:`~normlab.training.divergence_bound`) and is recorded with ``diverged`` True, its
    losses and metrics as they were (NaN where not finite).
    """
    history = training.fit(
        model,
        splits["train"],
        splits["val"],
        device=ctx.device,
        checkpoint_dir=ctx.checkpoint_dir,
        progress=ctx.progress,
        **{"on_divergence": "stop", **fit_kwargs},
    )
    return tested_record(model, splits, history, ctx.device)


def tested_record(
    model: nn.Module,
    splits: Mapping[str, DataSplit],
    history: training.History,
    device: torch.device,
) -> dict[str, Any]:
    """The record of a trained ``model`` and its ``history``: tested once on
    ``splits["test"]`` (:func:`train_and_test` says what it holds); one function for a
    single run and for each member of a population (:func:`train_and_test_population`)."""
    test_scores = training.evaluate(model, splits["test"], device=device)
    hits = {}
    if splits["test"].task in ("classification", "tagging") and math.isfinite(
        test_scores["loss"]
    ):
        # which test items (tagging: scored tokens) it got right: the paired comparisons'
        # test-set noise; for tagging also where each sentence's tokens start
        hits["test_hits"] = training.encode_hits(
            training.item_hits(model, splits["test"])
        )
        starts = training.item_starts(splits["test"])
        if starts is not None:
            hits["test_hit_starts"] = training.encode_hits(starts)
    last = history[-1]
    return {
        "metric": history.metric,
        "higher_is_better": history.higher_is_better,
        "metrics": {
            "train_loss": last["train_loss"],
            "val_loss": last["val_loss"],
            "val_metric": last[f"val_{history.metric}"],
            "test_loss": test_scores["loss"],
            "test_metric": test_scores[history.metric],
            "diverged": training.is_diverged(
                (last["train_loss"], last["val_loss"]),
                training.divergence_bound(splits["train"]),
            ),
            "epochs_run": last["epoch"],
            "steps": last["step"],
            **hits,
        },
        "history": [dict(r) for r in history],
        "stand_in": bool(splits["train"].meta.get("stand_in", False)),
    }


def train_and_test_population(
    models: Sequence[nn.Module],
    splits: Mapping[str, DataSplit],
    ctx: RunContext,
    *,
    seeds: Sequence[int],
    lrs: Sequence[float] | None = None,
    noise: Any = None,
    member_callbacks: Sequence[Sequence[Any]] | None = None,
    measure: Callable[[nn.Module, dict[str, Any]], None] | None = None,
    **fit_kwargs: Any,
) -> list[dict[str, Any]]:
    """:func:`train_and_test` for a population: ``models`` (one per seed, each built as its
    single run builds it) trained as one (:func:`normlab.population.fit_population`, its
    checkpoint in ``ctx.checkpoint_dir``), then each member tested as a single run is;
    one record part per member, in the schema :func:`train_and_test` returns.
    ``measure(model, record)`` (optional) adds what an experiment measures on each
    trained member."""
    from ..population import fit_population, member_model

    population, histories = fit_population(
        models,
        splits["train"],
        splits["val"],
        device=ctx.device,
        checkpoint_dir=ctx.checkpoint_dir,
        seeds=seeds,
        lrs=lrs,
        noise=noise,
        member_callbacks=member_callbacks,
        engine=ctx.population_engine,
        **{"on_divergence": "stop", **fit_kwargs},
    )
    records = []
    for k, history in enumerate(histories):
        member = member_model(population, k, models[k], in_place=True)
        records.append(tested_record(member, splits, history, ctx.device))
        if measure is not None:  # what the experiment measures on a trained model
            measure(member, records[-1])
    return records


# --------------------------------------------------------------------------- files


def results_folder(
    name: str, out: str | Path = DEFAULT_OUT, profile: str | None = None
) -> Path:
    """``<out>/<name>/<profile>``."""
    return Path(out) / name / check_profile(profile)


def _scratch_record(path: Path) -> dict[str, Any]:
    """One scratch record, schema-checked (a RecordError names the file)."""
    try:
        text = path.read_text()
    except OSError as err:
        raise RecordError(f"{path}: cannot be read ({err.strerror})") from None
    return parse(text, str(path), strict=False)


def packed_records(folder: Path) -> list[dict[str, Any]]:
    """The records of a packed set's ``runs.jsonl`` in ``folder`` (empty when it has none),
    strict JSON, schema-checked; a RecordError names the file and line."""
    path = folder / PACKED
    if not path.is_file():
        return []
    return [
        parse(line, f"{path} line {n}")
        for n, line in enumerate(path.read_text().splitlines(), start=1)
    ]


def finished_records(
    folder: Path, *, damaged: list[Path] | None = None
) -> dict[str, dict]:
    """Every finished record in ``folder`` by run id: the packed set's, then the scratch
    records (which win: they are newer). A damaged scratch record raises, or, when
    ``damaged`` is a list, is appended to it and left out (the runner then redoes it)."""
    records = {r["run_id"]: r for r in packed_records(folder)}
    for path in sorted((folder / "runs").glob("*.json")):
        try:
            record = _scratch_record(path)
        except RecordError:
            if damaged is None:
                raise
            damaged.append(path)
            continue
        if record["run_id"] != path.stem:
            raise RecordError(f"{path}: holds run_id={record['run_id']!r}")
        records[record["run_id"]] = record
    return dict(sorted(records.items()))


def holds_saved_set(folder: Path) -> bool:
    """Whether ``folder`` is a saved set (it has a manifest, even one that is only a link)."""
    return os.path.lexists(folder / MANIFEST)


def load_records(
    name: str, out: str | Path = DEFAULT_OUT, profile: str | None = None
) -> list[dict[str, Any]]:
    """Every finished run record of one experiment and profile (every shard, and a packed
    set's ``runs.jsonl``), in run-id order: the full record, with its history and any
    gates or corruption rows. A truncated, empty or malformed record raises a ValueError
    that names its file, and so does a saved set, which only
    :func:`normlab.results.load` reads (it checks the set first)."""
    folder = results_folder(name, out, profile)
    if holds_saved_set(folder):
        raise ValueError(
            f"{folder} holds a saved set: read its records with "
            f"normlab.results.load({str(folder)!r}).records(), which checks them first"
        )
    return list(finished_records(folder).values())


def load_results(
    name: str, out: str | Path = DEFAULT_OUT, profile: str | None = None
) -> pd.DataFrame:
    """All run records of one experiment and profile (every shard) as a tidy table."""
    return records_table(load_records(name, out, profile))


def _write_table(table: pd.DataFrame, path: Path) -> None:
    write_text_atomic(path, table.to_csv(index=False))


# ----------------------------------------------------------------------------- run


@dataclass
class RunReport:
    """What :func:`run` did: runs executed and skipped, and where the results are."""

    folder: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def results_csv(self) -> Path:
        return self.folder / "results.csv"


@dataclass(frozen=True)
class RunSettings:
    """Which runs of an experiment :func:`run` does, and how: the one set of settings that
    the command line's ``run`` and ``save``, :func:`normlab.results.save` and the cluster's
    array tasks (``normlab.experiments.cluster``) pass on. The fields are :func:`run`'s
    keywords of the same names."""

    profile: str | None = None
    seeds: int | None = None
    device: str | None = None
    shard: str | tuple[int, int] | None = None
    progress: bool | None = None
    population: int | None = None
    rates: bool = False

    def run(self, name: str, out: str | Path = DEFAULT_OUT) -> RunReport:
        """:func:`run` of experiment ``name`` into ``out`` with these settings."""
        return run(name, out=out, **asdict(self))


def run(
    name: str,
    *,
    profile: str | None = None,
    out: str | Path = DEFAULT_OUT,
    seeds: int | None = None,
    device: str | torch.device | None = None,
    shard: str | tuple[int, int] | None = None,
    progress: bool | None = None,
    keep_checkpoints: bool = False,
    population: int | None = None,
    rates: bool = False,
) -> RunReport:
    """Run (or resume) every unfinished run of experiment ``name`` in this shard.

    ``seeds`` overrides the grid's number of seeds; ``shard="K/N"`` runs only shard K of N
    (see :func:`normlab.experiments.grid.shard`). Finished runs are skipped without
    touching their files; a damaged record is named in a warning and its run redone.
    ``results.csv`` is rewritten whenever it does not hold exactly the folder's records
    (a run finished here, or the table is missing, truncated or stale). A finished run's
    checkpoint folder is deleted unless ``keep_checkpoints``. ``population=K`` trains the
    runs that differ only in seed (with ``rates``, in learning rate too) as populations of
    at most K (:mod:`normlab.experiments.populations`), one record per run as ever.
    """
    experiment = get(name)
    profile = check_profile(profile)
    folder = results_folder(name, out, profile)
    runs: list[Run] = select_shard(experiment.runs(profile, seeds), shard)
    device = torch.device(device) if device is not None else default_device()
    show = training.progress_default(device) if progress is None else progress
    report = RunReport(folder=folder)
    damaged: list[Path] = []
    finished = finished_records(folder, damaged=damaged)
    for path in damaged:
        warnings.warn(
            f"{path} is not a complete run record (truncated or damaged); redoing that run",
            stacklevel=2,
        )
    settings = (experiment, profile, folder, device, keep_checkpoints, report, finished)
    if population is not None:
        runs = _populations(runs, population, rates, *settings)
    bar = None
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), desc=f"{name} ({profile})", unit="run")
    # Runs another process holds (the same ``out``) wait until the free ones are done.
    waiting: list[Run] = []
    try:
        for item in runs:
            if _execute_locked(item, *settings, wait=False):
                if bar is not None:
                    bar.update()
            else:
                waiting.append(item)
        for item in waiting:
            _execute_locked(item, *settings, wait=True)
            if bar is not None:
                bar.update()
    except KeyboardInterrupt:  # finished runs are on disk; their table is written too
        if report.ran:
            _write_table(
                records_table(dict(sorted(finished.items())).values()),
                report.results_csv,
            )
        raise
    finally:
        if bar is not None:
            bar.close()
    if not keep_checkpoints and (folder / "checkpoints").is_dir():
        try:
            (folder / "checkpoints").rmdir()
        except OSError:  # not empty, or another process is using it
            pass
    table = records_table(dict(sorted(finished.items())).values())
    if not _table_matches(report.results_csv, table):
        _write_table(table, report.results_csv)
    return report


def _populations(
    runs: list[Run],
    size: int,
    rates: bool,
    experiment: Experiment,
    profile: str,
    folder: Path,
    device: torch.device,
    keep_checkpoints: bool,
    report: RunReport,
    finished: dict[str, dict[str, Any]],
) -> list[Run]:
    """Train ``runs`` as populations of at most ``size``
    (:func:`normlab.experiments.populations.run_populations`); return the runs left for
    the single-run path (finished ones, and those another process holds)."""
    from .populations import run_populations

    ran = run_populations(
        experiment,
        runs,
        size,
        rates=rates,
        profile=profile,
        folder=folder,
        device=device,
        keep_checkpoints=keep_checkpoints,
        finished=finished,
    )
    report.ran += ran
    done = set(ran)
    return [r for r in runs if r.run_id not in done]


def _execute_locked(
    item: Run,
    experiment: Experiment,
    profile: str,
    folder: Path,
    device: torch.device,
    keep_checkpoints: bool,
    report: RunReport,
    finished: dict[str, dict[str, Any]],
    *,
    wait: bool,
) -> bool:
    """Run ``item`` under its lock unless it is finished (in ``finished``, or its record
    written since by another process); False when another process holds its lock and
    ``wait`` is False (with ``wait``, say so and wait for it)."""
    record_path = folder / "runs" / f"{item.run_id}.json"

    def done() -> bool:
        if item.run_id not in finished:
            try:
                finished[item.run_id] = _scratch_record(record_path)
            except RecordError:
                return False
        return True

    if done():
        report.skipped.append(item.run_id)
        return True
    lock = FileLock(folder / "checkpoints" / f"{item.run_id}.lock")
    if not lock.acquire(blocking=False):
        if not wait:
            return False
        print(
            f"{item.run_id}: waiting for process {lock.holder()}, which is running it "
            f"in {folder}",
            file=sys.stderr,
        )
        lock.acquire()
    try:
        if done():  # by the process we waited for
            report.skipped.append(item.run_id)
        else:
            finished[item.run_id] = _execute(
                experiment, item, profile, folder, device, record_path, keep_checkpoints
            )
            report.ran.append(item.run_id)
    finally:
        lock.release(remove=done())
    return True


def _table_matches(path: Path, table: pd.DataFrame) -> bool:
    """Whether the table at ``path`` holds exactly ``table``'s runs with its values (an
    interrupted or stale table does not)."""
    try:
        old = pd.read_csv(path)
    except (OSError, ValueError):
        return False
    new = pd.read_csv(io.StringIO(table.to_csv(index=False)))
    return old.shape == new.shape and bool(
        (old.columns == new.columns).all() and old.equals(new)
    )


def _execute(
    experiment: Experiment,
    item: Run,
    profile: str,
    folder: Path,
    device: torch.device,
    record_path: Path,
    keep_checkpoints: bool,
) -> dict[str, Any]:
    checkpoint_dir = folder / "checkpoints" / item.run_id
    started = time.perf_counter()
    outcome = experiment.run_one(
        dict(item.config), RunContext(device=device, checkpoint_dir=checkpoint_dir)
    )
    seconds = time.perf_counter() - started
    record = run_record(experiment, item, profile, outcome, seconds, device)
    write_text_atomic(record_path, dumps(record, indent=1))
    if not keep_checkpoints:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return parse(dumps(record), str(record_path))


# -------------------------------------------------------------------------- report


@dataclass
class Report:
    """What :func:`report` produced: the tables, the figures and their files."""

    folder: Path
    results: pd.DataFrame
    summary: pd.DataFrame
    figures: dict[str, Any]
    paths: dict[str, Path]


def summary_table(
    experiment: Experiment,
    results: pd.DataFrame,
    profile: str | None = None,
    *,
    settings: bool = False,
) -> pd.DataFrame:
    """The experiment's summary: best-of over ``select`` when it has one, else mean/CI per
    configuration. ``settings`` keeps the grid's fixed settings as columns too (a profile
    may fix what another sweeps, e.g. the depth, and the figures read both alike)."""
    fixed = list(experiment.grid(profile).fixed) if settings else []
    by = [a for a in [*experiment.group_by(profile), *fixed] if a in results.columns]
    if experiment.select is None:
        return summarise(results, by)
    higher = bool(results["higher_is_better"].iloc[0])
    return select_best(results, by, experiment.select, higher_is_better=higher)


def report(
    name: str,
    *,
    out: str | Path = DEFAULT_OUT,
    profile: str | None = None,
    figures: Callable[[pd.DataFrame, pd.DataFrame], dict[str, Any]] | None = None,
) -> Report:
    """Merge every shard's records, write ``results.csv``, ``summary.csv`` and the figures.

    ``figures(results, summary)`` returns ``{file stem: matplotlib Figure}``, each written to
    ``figures/<stem>.png`` (``python -m normlab report`` passes
    ``normlab.figures.reports.report_figures`` of the experiment); None writes none.
    """
    experiment = get(name)
    profile = check_profile(profile)
    folder = results_folder(name, out, profile)
    results = load_results(name, out, profile)
    if results.empty:
        raise ValueError(
            f"no run records in {folder}; run `python -m normlab run {name} "
            f"--profile {profile} --out {out}` first"
        )
    summary = summary_table(experiment, results, profile, settings=True)
    _write_table(results, folder / "results.csv")
    _write_table(summary, folder / "summary.csv")
    paths = {"results": folder / "results.csv", "summary": folder / "summary.csv"}
    made: dict[str, Any] = {}
    if figures is not None:
        (folder / "figures").mkdir(parents=True, exist_ok=True)
        made = figures(results, summary)
        for stem, figure in made.items():
            path = folder / "figures" / f"{stem}.png"
            write_atomic(
                path,
                lambda f, figure=figure: figure.savefig(
                    f, format="png", dpi=150, bbox_inches="tight"
                ),
            )
            paths[stem] = path
    return Report(
        folder=folder, results=results, summary=summary, figures=made, paths=paths
    )
