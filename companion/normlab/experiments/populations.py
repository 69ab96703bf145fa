"""Grid runs as populations: runs that differ only in seed (and, when asked, learning rate)
trained as one batched model (:mod:`normlab.population`), one record per run.

:func:`groups` cuts a grid's runs into populations of at most ``size``: the runs of one
configuration, in seed order (with ``rates``, the configuration's learning rates too). Each
member's record is the record its single run would write, in the same schema and under the
same run id, with one more key, ``population``: the population's size, the member's index,
every member's ``[seed, lr]`` and the engine its forward pass ran with
(:data:`normlab.population.ENGINES`; none in records made before the gate ViT had a
stacked form, whose ViT ran under ``vmap``), so that :func:`normlab.verification.verify` can
train the same population again the same way and compare the member exactly.

A population runs under the locks of all its unfinished runs (``checkpoints/<run_id>.lock``);
when another process holds any of them, none is taken and those runs are left to the
runner's single-run path, which waits for them. Its checkpoint folder is
``checkpoints/population-<12 hex digits>`` (a hash of its run ids), so a killed population
resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from .._io import write_text_atomic
from .._lock import FileLock
from .._provenance import made_by
from .._records import RecordError, dumps, parse
from .._runtime import VERSION
from .grid import Run
from .registry import Experiment, RunContext

__all__ = [
    "PopulationUnsupported",
    "groups",
    "member_configs",
    "rerun_member",
    "run_record",
    "run_populations",
]


class PopulationUnsupported(ValueError):
    """An experiment's ``run_population`` cannot train these configurations as one
    population (e.g. a schedule that changes each member's model): the runner then runs
    them one by one."""


def _key(config: Mapping[str, Any], rates: bool) -> str:
    """What members of one population share: the config without its seed (and lr)."""
    drop = {"seed", "lr"} if rates else {"seed"}
    return repr(sorted((k, repr(v)) for k, v in config.items() if k not in drop))


def groups(runs: Sequence[Run], size: int, *, rates: bool = False) -> list[list[Run]]:
    """``runs`` cut into populations of at most ``size`` runs that differ only in
    ``seed`` (and ``lr`` with ``rates``), each ordered by (lr, seed), in the order each
    configuration first appears in ``runs``."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"population size must be a positive int, got {size!r}")
    by_key: dict[str, list[Run]] = {}
    for item in runs:
        by_key.setdefault(_key(item.config, rates), []).append(item)
    out: list[list[Run]] = []
    for members in by_key.values():
        members = sorted(
            members, key=lambda r: (r.config.get("lr", 0), r.config["seed"])
        )
        out += [members[i : i + size] for i in range(0, len(members), size)]
    return out


def run_record(
    experiment: Experiment,
    item: Run,
    profile: str,
    outcome: Mapping[str, Any],
    seconds: float,
    device: torch.device,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record the runner writes for ``item`` (one run, or one member of a population).

    ``provenance`` is :func:`normlab._provenance.made_by`'s answer where the caller already
    has it: a population's members are recorded at one moment, so one reading of the
    checkout (two ``git`` calls, 10 ms) serves them all."""
    return {
        "run_id": item.run_id,
        "experiment": experiment.name,
        "profile": profile,
        "config": item.config,
        **outcome,
        "seconds": seconds,
        "device": str(device),
        "normlab_version": VERSION,
        "made_by": dict(provenance) if provenance is not None else made_by(device),
    }


def member_configs(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The configurations of the population that made ``record`` (its ``population`` key)."""
    config = dict(record["config"])
    return [
        {**config, "seed": int(seed), "lr": lr}
        for seed, lr in record["population"]["members"]
    ]


def rerun_member(
    experiment: Experiment, record: Mapping[str, Any], ctx: RunContext
) -> dict[str, Any]:
    """Train the population that made ``record`` again, with the engine that made it (a
    record without one was made with its ViT under ``vmap``); return its member's record
    part."""
    if experiment.run_population is None:
        raise ValueError(f"{experiment.name} cannot train populations")
    configs = member_configs(record)
    made = record["population"]
    ctx = dataclasses.replace(ctx, population_engine=made.get("engine", "vmap"))
    return experiment.run_population(configs, ctx)[int(made["member"])]


def _population_id(items: Sequence[Run]) -> str:
    digest = hashlib.sha256(" ".join(r.run_id for r in items).encode()).hexdigest()
    return f"population-{digest[:12]}"


def _train(
    experiment: Experiment,
    items: Sequence[Run],
    profile: str,
    folder: Path,
    device: torch.device,
    keep_checkpoints: bool,
) -> dict[str, dict[str, Any]]:
    """Train ``items`` as one population and write each member's record; return them."""
    assert experiment.run_population is not None
    checkpoint_dir = folder / "checkpoints" / _population_id(items)
    started = time.perf_counter()
    ctx = RunContext(device=device, checkpoint_dir=checkpoint_dir)
    outcomes = experiment.run_population([dict(r.config) for r in items], ctx)
    seconds = (time.perf_counter() - started) / len(items)  # each member's share
    members = [[r.config["seed"], r.config.get("lr")] for r in items]
    provenance = made_by(device)
    written: dict[str, dict[str, Any]] = {}
    for k, (item, outcome) in enumerate(zip(items, outcomes)):
        record = run_record(
            experiment, item, profile, outcome, seconds, device, provenance
        )
        record["population"] = {
            "size": len(items),
            "member": k,
            "members": members,
            "engine": ctx.population_engine,
        }
        path = folder / "runs" / f"{item.run_id}.json"
        write_text_atomic(path, dumps(record, indent=1))
        written[item.run_id] = parse(dumps(record), str(path))
    if not keep_checkpoints:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return written


def _unfinished(
    items: Sequence[Run], folder: Path, finished: Mapping[str, Any]
) -> list[Run]:
    """The runs of ``items`` with no record in ``finished`` or on disk."""
    todo = []
    for item in items:
        if item.run_id in finished:
            continue
        try:
            parse((folder / "runs" / f"{item.run_id}.json").read_text(), item.run_id)
        except (OSError, RecordError):
            todo.append(item)
    return todo


def run_populations(
    experiment: Experiment,
    runs: Sequence[Run],
    size: int,
    *,
    rates: bool,
    profile: str,
    folder: Path,
    device: torch.device,
    keep_checkpoints: bool,
    finished: dict[str, dict[str, Any]],
) -> list[str]:
    """Train the unfinished runs of ``runs`` as populations of at most ``size``, adding
    their records to ``finished``; return the run ids trained. Runs another process holds
    are left for the runner's single-run path."""
    if experiment.run_population is None:
        raise ValueError(
            f"experiment {experiment.name!r} cannot train populations (no run_population)"
        )
    ran: list[str] = []
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    for members in groups(runs, size, rates=rates):
        todo = _unfinished(members, folder, finished)
        if not todo:
            continue
        locks = [FileLock(folder / "checkpoints" / f"{r.run_id}.lock") for r in todo]
        held = []
        for lock in locks:
            if not lock.acquire(blocking=False):
                break
            held.append(lock)
        try:
            if len(held) == len(locks):
                written = _train(
                    experiment, todo, profile, folder, device, keep_checkpoints
                )
                finished.update(written)
                ran += list(written)
        except PopulationUnsupported:
            pass  # left to the single-run path
        finally:
            for lock in held:
                lock.release(remove=True)
    return ran
