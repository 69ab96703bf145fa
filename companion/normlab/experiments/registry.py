"""Declared experiments, by name. Add one with :func:`register_experiment`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .._runtime import REQUIRED_PROFILES, check_profile
from .grid import Grid, Run, run_id

__all__ = [
    "Experiment",
    "get",
    "names",
    "register_experiment",
    "RunContext",
    "RunFn",
    "PopulationFn",
]


@dataclass(frozen=True)
class RunContext:
    """Where and how one run executes: device, its checkpoint folder, progress bars, and
    how a population's forward pass runs (:data:`normlab.population.ENGINES`)."""

    device: torch.device
    checkpoint_dir: Path
    progress: bool = False
    population_engine: str = "stacked"


RunFn = Callable[[dict[str, Any], RunContext], dict[str, Any]]
#: Trains configurations that differ only in seed (and learning rate) as one population
#: (:mod:`normlab.population`): one record part per configuration, in their order.
PopulationFn = Callable[[list[dict[str, Any]], RunContext], list[dict[str, Any]]]


@dataclass(frozen=True)
class Experiment:
    """An experiment: a grid per profile and the function that performs one run.

    ``run_one(config, ctx)`` trains and tests one configuration and returns the run's
    record (see :func:`normlab.experiments.runner.train_and_test`). ``select`` names the
    hyperparameter chosen on validation data per configuration (e.g. ``"lr"``);
    ``seconds_per_run`` gives the expected time of one run per profile (quick: measured on
    a 2-core CPU, one torch thread; standard/paper: estimates for one current GPU). Its
    report's figures are drawn in :mod:`normlab.figures.reports`, by name.
    ``run_population(configs, ctx)`` (optional) trains configurations that differ only in
    seed (and learning rate) as one population, one record part each
    (:mod:`normlab.experiments.populations`).
    """

    name: str
    title: str
    chapter: str
    profiles: Mapping[str, Grid]
    run_one: RunFn
    seconds_per_run: Mapping[str, float]
    select: str | None = "lr"
    notes: str = ""
    run_population: PopulationFn | None = None

    def __post_init__(self) -> None:
        missing = [
            p
            for p in (*REQUIRED_PROFILES, *self.profiles)
            if p not in self.profiles or p not in self.seconds_per_run
        ]
        if missing:
            raise ValueError(
                f"experiment {self.name!r} declares no grid or time for profile(s) {', '.join(missing)}"
            )
        for profile, grid in self.profiles.items():
            if self.select is not None and self.select not in grid.axes:
                raise ValueError(
                    f"experiment {self.name!r}: select={self.select!r} is not an axis of its {profile} grid"
                )

    def grid(self, profile: str | None = None) -> Grid:
        """The grid of ``profile`` (default: the active profile)."""
        profile = check_profile(profile)
        if profile not in self.profiles:
            raise ValueError(
                f"experiment {self.name!r} declares no {profile!r} grid; it has {', '.join(self.profiles)}"
            )
        return self.profiles[profile]

    def runs(self, profile: str | None = None, seeds: int | None = None) -> list[Run]:
        """Every run of the profile's grid, sorted by run id."""
        configs = self.grid(profile).configs(seeds)
        return sorted(
            (Run(run_id(self.name, c), c) for c in configs), key=lambda r: r.run_id
        )

    def group_by(self, profile: str | None = None) -> list[str]:
        """The axes that define a configuration: all swept axes except ``select``."""
        return [a for a in self.grid(profile).axes if a != self.select]

    def expected_seconds(
        self, profile: str | None = None, seeds: int | None = None
    ) -> float:
        """Expected run time of the whole grid on one machine."""
        profile = check_profile(profile)
        return self.grid(profile).size(seeds) * self.seconds_per_run[profile]


_EXPERIMENTS: dict[str, Experiment] = {}


def register_experiment(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry (its name must be new); returns it."""
    if experiment.name in _EXPERIMENTS:
        raise ValueError(
            f"an experiment named {experiment.name!r} is already registered"
        )
    _EXPERIMENTS[experiment.name] = experiment
    return experiment


def names() -> list[str]:
    """The registered experiment names, sorted."""
    return sorted(_EXPERIMENTS)


def get(name: str) -> Experiment:
    """The experiment called ``name``; a ValueError lists the valid names otherwise."""
    if name not in _EXPERIMENTS:
        raise ValueError(
            f"experiment {name!r} is not known; expected one of {', '.join(names()) or '(none)'}"
        )
    return _EXPERIMENTS[name]
