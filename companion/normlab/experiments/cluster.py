"""Run an experiment's grid as a job array, through submitit: on Slurm, or locally.

``python -m normlab run NAME --executor slurm`` (or :func:`submit`) packs the grid into
array tasks: task ``K`` of ``N`` runs shard ``K/N`` through :func:`normlab.experiments.run`,
exactly what ``--shard K/N`` runs by hand. ``N`` is the grid's size divided by
``runs_per_task``, raised as needed to stay under Slurm's array-size cap
(``max_array_size``, Slurm's default ``MaxArraySize`` is 1001); only the shards that still
hold unfinished runs are submitted. Every run writes its own record, so a failed, cancelled
or pre-empted task loses at most the run it was in (which resumes from its checkpoint): run
the same command again and only the unfinished shards go out. A task that reaches its time
limit checkpoints and requeues itself (submitit's ``Checkpointable``). ``report`` merges.

Executors:

- ``slurm``: one job array per submission, at most ``array_parallelism`` tasks at once.
- ``local``: the same tasks as subprocesses of this machine. submitit's local executor
  starts every job at once and shows each job GPU 0 (it sets ``CUDA_VISIBLE_DEVICES`` to
  ``0..gpus-1`` for every job); here jobs go out in waves of ``array_parallelism`` and job
  ``i`` of a wave sees only GPU ``i`` (with ``gpus_per_task`` 1), so keep
  ``array_parallelism`` at most the number of GPUs (on a CPU: the cores you can spare).
- ``debug``: submitit's debug executor, every task in this process one after the other.

submitit is the ``cluster`` extra: ``pip install 'normlab[cluster]'``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._checks import one_of
from .._runtime import check_profile
from .grid import shard
from .registry import get
from .runner import DEFAULT_OUT, RunSettings, results_folder

__all__ = [
    "add_arguments",
    "EXECUTORS",
    "MAX_ARRAY_SIZE",
    "Plan",
    "plan",
    "Resources",
    "run_from_args",
    "ShardTask",
    "Submission",
    "submit",
]

EXECUTORS: tuple[str, ...] = ("slurm", "local", "debug")
MAX_ARRAY_SIZE = 1000  # Slurm's default MaxArraySize is 1001: task ids 0..1000


@dataclass(frozen=True)
class Resources:
    """What each array task asks for, and how the grid is cut into tasks.

    ``time_min`` is each task's time limit; ``runs_per_task`` how many runs a task holds
    (more when the cap forces it); ``array_parallelism`` how many tasks run at once.
    """

    partition: str | None = None
    time_min: int = 240
    gpus_per_task: int = 1
    cpus_per_task: int = 4
    array_parallelism: int = 32
    runs_per_task: int = 1
    max_array_size: int = MAX_ARRAY_SIZE

    def __post_init__(self) -> None:
        for name in (
            "time_min",
            "cpus_per_task",
            "array_parallelism",
            "runs_per_task",
            "max_array_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if (
            isinstance(self.gpus_per_task, bool)
            or not isinstance(self.gpus_per_task, int)
            or self.gpus_per_task < 0
        ):
            raise ValueError(
                f"gpus_per_task must be an int >= 0, got {self.gpus_per_task!r}"
            )


@dataclass(frozen=True)
class Plan:
    """The grid cut into ``n_shards`` shards, and the shards that still have runs to do."""

    n_shards: int
    pending: tuple[int, ...]
    pending_runs: int


def plan(
    name: str,
    profile: str | None = None,
    out: str | Path = DEFAULT_OUT,
    seeds: int | None = None,
    *,
    runs_per_task: int = 1,
    max_array_size: int = MAX_ARRAY_SIZE,
) -> Plan:
    """How :func:`submit` cuts ``name``'s grid: ``ceil(size / runs_per_task)`` shards, at
    most ``max_array_size``, and which of them hold a run without a record."""
    profile = check_profile(profile)
    runs = shard(get(name).runs(profile, seeds), None)  # in run-id order
    n = max(1, min(max_array_size, math.ceil(len(runs) / runs_per_task)))
    done = {
        p.stem for p in (results_folder(name, out, profile) / "runs").glob("*.json")
    }
    pending, count = [], 0
    for k in range(n):
        # shard K/N keeps run i (in run-id order) when i % N == K (grid.shard)
        missing = [r for r in runs[k::n] if r.run_id not in done]
        if missing:
            pending.append(k)
            count += len(missing)
    return Plan(n_shards=n, pending=tuple(pending), pending_runs=count)


def _submitit() -> Any:
    try:
        import submitit
    except ImportError as error:
        raise ImportError(
            "the slurm, local and debug executors need submitit: pip install 'normlab[cluster]'"
        ) from error
    return submitit


class ShardTask:
    """One array task: shard ``k/n`` of the grid through :func:`normlab.experiments.run`.

    Checkpointable: at its time limit submitit calls :meth:`checkpoint`, which requeues the
    same task; finished runs are skipped and the interrupted one resumes from its checkpoint.
    """

    def __init__(
        self, name: str, out: str, settings: RunSettings, threads: int | None
    ) -> None:
        self.name, self.out, self.settings, self.threads = name, out, settings, threads

    def __call__(self, k: int, n: int) -> list[str]:
        if self.threads is not None:
            import torch

            torch.set_num_threads(self.threads)
        mine = replace(self.settings, shard=(k, n), progress=False)
        return mine.run(self.name, self.out).ran

    def checkpoint(self, k: int, n: int) -> Any:
        return _submitit().helpers.DelayedSubmission(self, k, n)


def _executor(kind: str, logs: Path, resources: Resources, **local: Any) -> Any:
    submitit = _submitit()
    if kind == "debug":
        return submitit.DebugExecutor(folder=logs)
    if kind == "local":
        executor = submitit.LocalExecutor(folder=logs)
        executor.update_parameters(
            timeout_min=resources.time_min,
            gpus_per_node=resources.gpus_per_task,
            **local,
        )
        return executor
    try:
        executor = submitit.AutoExecutor(folder=logs, cluster="slurm")
    except RuntimeError as error:  # submitit found no srun
        raise ValueError(
            f"--executor slurm needs Slurm on this machine (a login node with srun and "
            f"sbatch): {error}; --executor local runs the same tasks here"
        ) from error
    executor.update_parameters(
        timeout_min=resources.time_min,
        gpus_per_node=resources.gpus_per_task,
        cpus_per_task=resources.cpus_per_task,
        tasks_per_node=1,
        slurm_array_parallelism=resources.array_parallelism,
        **({"slurm_partition": resources.partition} if resources.partition else {}),
    )
    return executor


@dataclass
class Submission:
    """What :func:`submit` sent: the plan, the jobs (one per pending shard) and the logs."""

    plan: Plan
    jobs: list[Any]
    logs: Path

    def wait(self) -> tuple[list[str], int]:
        """Block until every job has ended: the run ids they ran, and how many jobs failed
        or were cancelled (their finished runs are kept; submit again to resume)."""
        errors = _submitit().core.utils.UncompletedJobError
        ran, failed = [], 0
        for job in self.jobs:
            try:
                ran.extend(job.result())
            except errors:
                failed += 1
        return ran, failed


def submit(
    name: str,
    *,
    executor: str = "slurm",
    profile: str | None = None,
    out: str | Path = DEFAULT_OUT,
    seeds: int | None = None,
    device: str | None = None,
    threads: int | None = None,
    resources: Resources | None = None,
    logs: str | Path | None = None,
    population: int | None = None,
    rates: bool = False,
) -> Submission:
    """Submit the shards of ``name``'s grid that hold unfinished runs, one array task each.

    ``population`` (and ``rates``) go to each task's :func:`normlab.experiments.run`: a task
    trains its shard's runs of one configuration as populations.

    Returns once the last jobs are started (``slurm``: queued; ``local``: the last wave of
    ``array_parallelism`` subprocesses, each given its own GPUs, is running; ``debug``: on
    :meth:`Submission.wait`); :meth:`Submission.wait` blocks until they end. Logs go to
    ``logs`` (default ``<out>/<name>/<profile>/submitit``). Submitting again resumes.
    """
    one_of("executor", executor, EXECUTORS)
    get(name)
    profile = check_profile(profile)
    resources = resources or Resources()
    cut = plan(
        name,
        profile,
        out,
        seeds,
        runs_per_task=resources.runs_per_task,
        max_array_size=resources.max_array_size,
    )
    folder = Path(logs) if logs else results_folder(name, out, profile) / "submitit"
    settings = RunSettings(
        profile=profile,
        seeds=seeds,
        device=device,
        population=population,
        rates=rates,
    )
    task = ShardTask(name, str(out), settings, threads)
    shards = list(cut.pending)
    if executor == "local":
        return Submission(
            cut, _local_waves(task, shards, cut, folder, resources), folder
        )
    ex = _executor(executor, folder, resources)
    jobs = ex.map_array(task, shards, [cut.n_shards] * len(shards)) if shards else []
    return Submission(cut, jobs, folder)


def _local_waves(
    task: ShardTask,
    shards: Sequence[int],
    cut: Plan,
    folder: Path,
    resources: Resources,
) -> list[Any]:
    """Start ``shards`` as local subprocesses, ``array_parallelism`` at a time (each wave
    waits for the one before; the last is left running); job ``i`` of a wave sees GPUs
    ``i*g .. i*g+g-1`` (``g`` = ``gpus_per_task``), not all GPU 0."""
    jobs: list[Any] = []
    g = resources.gpus_per_task
    for start in range(0, len(shards), resources.array_parallelism):
        for job in jobs:
            job.wait()
        for i, k in enumerate(shards[start : start + resources.array_parallelism]):
            visible = tuple(range(i * g, (i + 1) * g))
            ex = _executor("local", folder, resources, visible_gpus=visible)
            jobs.append(ex.submit(task, k, cut.n_shards))
    return jobs


# --------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``run`` command's executor options."""
    group = parser.add_argument_group(
        "executors (pip install 'normlab[cluster]'; see normlab.experiments.cluster)"
    )
    group.add_argument(
        "--executor",
        choices=EXECUTORS,
        default=None,
        help="submit the pending runs as a job array (default: run here, in this process)",
    )
    group.add_argument("--partition", default=None, help="Slurm partition")
    group.add_argument(
        "--time", type=int, default=240, help="minutes per array task (default 240)"
    )
    group.add_argument("--gpus-per-task", type=int, default=1)
    group.add_argument("--cpus-per-task", type=int, default=4)
    group.add_argument(
        "--array-parallelism",
        type=int,
        default=32,
        help="array tasks running at once (local: at most the number of GPUs)",
    )
    group.add_argument(
        "--runs-per-task",
        type=int,
        default=1,
        help="runs packed into one array task (raised to stay under --max-array-size)",
    )
    group.add_argument("--max-array-size", type=int, default=MAX_ARRAY_SIZE)
    group.add_argument(
        "--logs",
        default=None,
        help="submitit's folder (default: <out>/<name>/<profile>/submitit)",
    )


def run_from_args(args: argparse.Namespace, settings: RunSettings) -> str:
    """``run --executor ...``: submit, wait for local and debug jobs; the summary line."""
    if settings.shard is not None:
        raise ValueError(
            "--shard and --executor exclude each other: the executor shards"
        )
    resources = Resources(
        partition=args.partition,
        time_min=args.time,
        gpus_per_task=args.gpus_per_task,
        cpus_per_task=args.cpus_per_task,
        array_parallelism=args.array_parallelism,
        runs_per_task=args.runs_per_task,
        max_array_size=args.max_array_size,
    )
    done = submit(
        args.name,
        executor=args.executor,
        profile=settings.profile,
        out=args.out,
        seeds=settings.seeds,
        device=settings.device,
        threads=args.threads,
        resources=resources,
        logs=args.logs,
        population=settings.population,
        rates=settings.rates,
    )
    cut = done.plan
    head = (
        f"{args.name}: {cut.pending_runs} unfinished runs in {len(cut.pending)} of "
        f"{cut.n_shards} shards; logs in {done.logs}"
    )
    if args.executor == "slurm":
        array = str(done.jobs[0].job_id).split("_")[0] if done.jobs else "(none)"
        return (
            f"{head}\nsubmitted as array job {array}; when it ends, run `python -m normlab "
            f"report {args.name} --profile {check_profile(settings.profile)} --out {args.out}` "
            "(run this command again to resume failed or cancelled tasks)"
        )
    ran, failed = done.wait()
    from .runner import report

    merged = report(args.name, out=args.out, profile=settings.profile)
    lost = (
        f"; {failed} tasks failed or were cancelled: run again to resume"
        if failed
        else ""
    )
    return f"{head}\nran {len(ran)}{lost}; table {merged.paths['results']}"
