"""Experiment grids: the cross product of swept axes, fixed settings and seeds.

A run is one point of the grid. Its id is a stable hash of its configuration, so the same
point gets the same id on every machine, and a grid splits across machines without a
scheduler: :func:`shard` keeps run ``i`` (in id order) when ``i % N == K``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Grid",
    "MAX_SEEDS",
    "parse_shard",
    "Run",
    "run_id",
    "shard",
]


@dataclass(frozen=True)
class Run:
    """One point of a grid: its id and its configuration (``seed`` included)."""

    run_id: str
    config: dict[str, Any]


def run_id(experiment: str, config: Mapping[str, Any]) -> str:
    """``<experiment>-<12 hex digits>``: a SHA-256 of the configuration as sorted JSON."""
    canonical = json.dumps(
        dict(config), sort_keys=True, separators=(",", ":"), default=str
    )
    return f"{experiment}-{hashlib.sha256(canonical.encode()).hexdigest()[:12]}"


#: The most seeds a grid may have: far above any profile's (at most 5), and low enough that a
#: mistyped count is refused at once instead of building millions of configurations.
MAX_SEEDS = 1000


def _check_seeds(seeds: object, given: object) -> None:
    """A ValueError unless ``seeds`` is an int from 1 to :data:`MAX_SEEDS`."""
    if (
        not isinstance(seeds, int)
        or isinstance(seeds, bool)
        or not 1 <= seeds <= MAX_SEEDS
    ):
        raise ValueError(f"seeds must be an int from 1 to {MAX_SEEDS}, got {given!r}")


@dataclass(frozen=True)
class Grid:
    """Swept ``axes`` (name -> values), ``fixed`` settings and a number of ``seeds``.

    Every run's configuration holds the fixed settings, one value of each axis and a
    ``seed`` in ``range(seeds)``. ``where`` (optional) keeps only the points of the cross
    product for which it returns True, e.g. each optimiser's own learning rates, so a grid
    need not be a full product. ``seeds_of`` (optional) gives a point fewer seeds than
    ``seeds`` (from 1 to ``seeds``): the cells a claim's plan needs more seeds of can have
    them without running every sensitivity as often.
    """

    axes: Mapping[str, Sequence[Any]]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    seeds: int = 3
    where: Callable[[Mapping[str, Any]], bool] | None = None
    seeds_of: Callable[[Mapping[str, Any]], int] | None = None

    def __post_init__(self) -> None:
        _check_seeds(self.seeds, self.seeds)
        if "seed" in self.axes or "seed" in self.fixed:
            raise ValueError(
                "'seed' comes from the grid's seeds count; do not declare it as a setting"
            )
        clash = sorted(set(self.axes) & set(self.fixed))
        if clash:
            raise ValueError(f"settings both swept and fixed: {', '.join(clash)}")
        empty = [name for name, values in self.axes.items() if len(values) == 0]
        if empty:
            raise ValueError(f"axes without values: {', '.join(empty)}")

    def _seeds_at(self, point: Mapping[str, Any], most: int) -> int:
        """The seeds of ``point``: ``most``, or fewer where :attr:`seeds_of` says so."""
        if self.seeds_of is None:
            return most
        own = self.seeds_of(point)
        if (
            isinstance(own, bool)
            or not isinstance(own, int)
            or not 1 <= own <= self.seeds
        ):
            raise ValueError(
                f"seeds_of must give an int from 1 to the grid's seeds ({self.seeds}), "
                f"got {own!r} for {dict(point)}"
            )
        return min(own, most)

    def configs(self, seeds: int | None = None) -> list[dict[str, Any]]:
        """Every configuration, seeds innermost; ``seeds`` overrides the grid's count (with
        :attr:`seeds_of`, it caps each point's own count)."""
        n_seeds = self.seeds if seeds is None else seeds
        _check_seeds(n_seeds, seeds)
        names = list(self.axes)
        out = []
        for values in itertools.product(*(self.axes[n] for n in names)):
            point = {**self.fixed, **dict(zip(names, values))}
            if self.where is not None and not self.where(point):
                continue
            for seed in range(self._seeds_at(point, n_seeds)):
                out.append({**point, "seed": seed})
        return out

    def size(self, seeds: int | None = None) -> int:
        """The number of runs."""
        if self.where is not None or self.seeds_of is not None:
            return len(self.configs(seeds))
        n = self.seeds if seeds is None else seeds
        _check_seeds(n, seeds)
        for values in self.axes.values():
            n *= len(values)
        return n


def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """``"K/N"`` (or ``(K, N)``) with ``0 <= K < N`` -> ``(K, N)``; None stays None."""
    if shard is None:
        return None
    if isinstance(shard, str):
        parts = shard.split("/")
        try:
            k, n = (int(p) for p in parts)
        except ValueError:
            raise ValueError(
                f"shard={shard!r} is not of the form K/N, e.g. 0/4"
            ) from None
    else:
        k, n = shard
    if n < 1 or not 0 <= k < n:
        raise ValueError(
            f"shard={shard!r} needs N >= 1 and 0 <= K < N (shards are numbered from 0)"
        )
    return k, n


def shard(runs: Sequence[Run], which: str | tuple[int, int] | None) -> list[Run]:
    """The runs of shard ``K/N``: sort by run id, keep run ``i`` when ``i % N == K``."""
    ordered = sorted(runs, key=lambda r: r.run_id)
    parsed = parse_shard(which)
    if parsed is None:
        return ordered
    k, n = parsed
    return [r for i, r in enumerate(ordered) if i % n == k]
