"""The gate widget's runs: a grid of precomputed runs, looked up by the setting of the
widget's controls.

Training even a tiny AutoNorm ViT takes seconds, too slow to follow a slider. So the
``gate_widget`` experiment trains one run per point of a small grid (task x tau x the
selector's learning-rate multiple x hard/soft x the epoch of a freeze), and the widget only
looks runs up. Freezing needs no extra grid axis for eps_H or the rule: a run with
AutoNorm-S is the unfrozen run up to its decision at T_freeze, and after it either the
``freeze_at = T_freeze`` run (the rule fired) or the unfrozen one (it did not); see
``normlab.experiments.gate_study``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import results
from ..experiments.gate_study import TASKS, load_records
from ..experiments.runner import holds_saved_set
from ..paper import EPS_H, TAU

__all__ = [
    "WIDGET_EXPERIMENT",
    "GateSetting",
    "Shown",
    "GateRuns",
    "collapse_setting",
    "opening_setting",
]

WIDGET_EXPERIMENT = "gate_widget"


@dataclass(frozen=True)
class GateSetting:
    """One position of the widget's controls."""

    data: str = "mnist"
    tau: float = TAU
    selector_lr: float = 1.0
    hard: bool = False
    freezing: bool = False
    t_freeze: int = 3
    eps_h: float = EPS_H
    rule: str = "high"

    def describe(self) -> str:
        gate = f"tau {self.tau:g}, {'hard' if self.hard else 'soft'}, selector lr x{self.selector_lr:g}"
        freeze = (
            f"AutoNorm-S: T={self.t_freeze}, eps_H={self.eps_h:.2f}, rule {self.rule}"
            if self.freezing
            else "no freezing"
        )
        return f"{TASKS.get(self.data, self.data)} ({self.data}); {gate}; {freeze}"


@dataclass(frozen=True)
class Shown:
    """What :meth:`GateRuns.select` picked: the run, and whether a freeze fired at which entropy."""

    record: dict[str, Any]
    fired: bool
    decision_entropy: float | None


class GateRuns:
    """The widget's runs, looked up by (data, tau, selector_lr, hard, freeze_at): the
    first seed's run of each point (the saved cpu set has three seeds a point)."""

    def __init__(self, records: Iterable[dict[str, Any]]) -> None:
        self.records: dict[tuple[Any, ...], dict[str, Any]] = {}
        for record in records:
            c = record["config"]
            if c.get("seed", 0) != 0:
                continue
            self.records[
                (
                    c["data"],
                    float(c["tau"]),
                    float(c["selector_lr"]),
                    bool(c["hard"]),
                    int(c["freeze_at"]),
                )
            ] = record
        if not self.records:
            raise ValueError(
                "no gate-widget runs to show; run `python -m normlab run gate_widget` first"
            )

    @classmethod
    def load(cls, out: str | Path = "results", profile: str = "cpu") -> GateRuns:
        """The runs under ``<out>/gate_widget/<profile>``: a saved set (read through
        :func:`normlab.results.load`, which checks it) or a runner's results; a ValueError
        unless every point of that profile's grid is there."""
        from ..experiments import get

        folder = Path(out) / WIDGET_EXPERIMENT / profile
        if holds_saved_set(folder):
            records = results.load(folder).records()
        else:
            records = load_records(WIDGET_EXPERIMENT, out, profile)
        expected = get(WIDGET_EXPERIMENT).grid(profile).size()
        if len(records) < expected:
            raise ValueError(
                f"{Path(out) / WIDGET_EXPERIMENT / profile} holds {len(records)} of the grid's {expected} "
                f"runs; run `python -m normlab run {WIDGET_EXPERIMENT} --profile {profile}`"
            )
        return cls(records)

    def values(self, axis: str) -> list[Any]:
        """The values of one grid axis, sorted."""
        index = ("data", "tau", "selector_lr", "hard", "freeze_at").index(axis)
        return sorted({key[index] for key in self.records})

    def _get(self, setting: GateSetting, freeze_at: int) -> dict[str, Any]:
        key = (
            setting.data,
            float(setting.tau),
            float(setting.selector_lr),
            bool(setting.hard),
            int(freeze_at),
        )
        if key not in self.records:
            raise KeyError(
                f"no precomputed run for {setting.describe()} (freeze_at={freeze_at})"
            )
        return self.records[key]

    def select(self, setting: GateSetting) -> Shown:
        """The run the setting shows: with freezing on, apply the rule at ``t_freeze``."""
        unfrozen = self._get(setting, 0)
        if not setting.freezing:
            return Shown(unfrozen, False, None)
        frozen = self._get(setting, setting.t_freeze)
        entropy = frozen["entropy_records"][-1]["mean"]
        fired = (
            entropy >= setting.eps_h
            if setting.rule == "high"
            else entropy < setting.eps_h
        )
        return Shown(frozen if fired else unfrozen, bool(fired), entropy)


def _short(layer: str) -> str:
    """``encoder.blocks.2.norm1`` -> ``b2.norm1``; ``encoder.norm`` -> ``final``."""
    parts = layer.split(".")
    return f"b{parts[-2]}.{parts[-1]}" if "blocks" in parts else "final"


def collapse_setting(runs: GateRuns) -> GateSetting:
    """Where the grid's gates collapse: its first task at the largest selector rate, the
    first temperature and soft gate, no freezing (T_freeze: the grid's first)."""
    return GateSetting(
        data=runs.values("data")[0],
        tau=runs.values("tau")[0],
        selector_lr=runs.values("selector_lr")[-1],
        hard=runs.values("hard")[0],
        t_freeze=min(t for t in runs.values("freeze_at") if t),
    )


def opening_setting(runs: GateRuns) -> GateSetting:
    """Where the widget and its static twin open (chapter 10's text): the paper's gate at the
    backbone's selector rate (the grid's smallest rate where it has no x1), no freezing."""
    rates = runs.values("selector_lr")
    return dataclasses.replace(
        collapse_setting(runs), selector_lr=1.0 if 1.0 in rates else rates[0]
    )
