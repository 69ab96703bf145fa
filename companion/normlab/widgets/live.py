"""The gate widget in a kernel: one setting of its controls drawn as a figure, and the
ipywidgets controls that redraw it.

- :func:`draw_gates`: one setting as a figure (entropy per layer over training, the freeze
  marked; the final gate weight per layer; validation accuracy over training).
- :class:`GateWidget`: ipywidgets controls wired to :func:`draw_gates`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from .. import normalisers
from ..experiments.gate_study import TASKS
from ..figures import column
from .runs import GateRuns, GateSetting, Shown, _short, opening_setting

__all__ = ["draw_gates", "GateWidget"]


def _gates(
    record: dict[str, Any],
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Layers, epochs, entropy ``(layers, epochs)`` and final ``p_ln`` per layer of one run."""
    layers = list(dict.fromkeys(g["layer"] for g in record["gates"]))
    epochs = np.array(sorted({g["epoch"] for g in record["gates"]}))
    entropy = np.full((len(layers), len(epochs)), np.nan)
    for g in record["gates"]:
        entropy[layers.index(g["layer"]), np.searchsorted(epochs, g["epoch"])] = g[
            "entropy"
        ]
    last = {g["layer"]: g["p_ln"] for g in record["gates"] if g["epoch"] == epochs[-1]}
    return layers, epochs, entropy, np.array([last[name] for name in layers])


def _entropy_panel(
    ax: Any, shown: Shown, setting: GateSetting, legend: bool = True
) -> None:
    layers, epochs, entropy, _ = _gates(shown.record)
    colours = colormaps["viridis"](np.linspace(0, 0.9, len(layers)))
    for i, name in enumerate(layers):
        ax.plot(
            epochs,
            entropy[i],
            color=colours[i],
            marker="o",
            markersize=2.5,
            lw=1.4,
            label=_short(name),
        )
    ax.axhline(math.log(2), color="grey", ls=":", lw=1)
    if setting.freezing:
        ax.axhline(setting.eps_h, color="black", ls="--", lw=1)
        style = (
            {"color": "#d62728", "lw": 5, "alpha": 0.35}
            if shown.fired
            else {"color": "grey", "ls": "--", "lw": 1}
        )
        ax.axvline(setting.t_freeze, **style)
        verdict = "froze every gate" if shown.fired else "did not fire"
        ax.set_title(
            f"H={shown.decision_entropy:.2f} at T={setting.t_freeze}: {verdict}",
            fontsize=9,
        )
    ax.set_ylim(-0.02, math.log(2) + 0.05)
    ax.set_xlabel("epoch")
    ax.set_ylabel("gate entropy (nats)")
    if legend:
        ax.legend(
            fontsize=column.MIN_FONT_PT,
            ncol=2,
            loc="upper right",
            title="layer",
            title_fontsize=column.MIN_FONT_PT,
        )


def _weight_panel(ax: Any, shown: Shown) -> None:
    layers, _, _, p_ln = _gates(shown.record)
    y = np.arange(len(layers))
    ax.barh(y, p_ln, color=normalisers.colour("frozen_ln"), label="LayerNorm")
    ax.barh(y, 1 - p_ln, left=p_ln, color=normalisers.colour("dyt"), label="DyT")
    ax.axvline(0.5, color="grey", ls=":", lw=1)
    ax.set_yticks(y, [_short(name) for name in layers])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("mean gate weight, last epoch")
    ax.legend(fontsize=column.MIN_FONT_PT, loc="lower right")


def _accuracy_panel(ax: Any, shown: Shown) -> None:
    history = shown.record["history"]
    colour = normalisers.colour("autonorm")
    epochs = [h["epoch"] for h in history]
    ax.plot(epochs, [h["val_accuracy"] for h in history], "o-", ms=2.5, color=colour)
    ax.set(ylim=(0, 1), xlabel="epoch", ylabel="validation accuracy")
    ax.set_title(
        f"val accuracy {shown.record['metrics']['val_metric']:.3f}", fontsize=9
    )


def draw_gates(runs: GateRuns, setting: GateSetting) -> Figure:
    """One setting: entropy per layer over training (freeze marked), the final gate
    weight per layer and validation accuracy over training, stacked at the column's width."""
    shown = runs.select(setting)
    with column.style():
        figure, axes = column.new_figure(nrows=3, size=(column.COLUMN_INCHES, 4.5))
        left, middle, right = axes[:, 0]
        _entropy_panel(left, shown, setting)
        _weight_panel(middle, shown)
        _accuracy_panel(right, shown)
        figure.suptitle(setting.describe(), fontsize=10)
    return figure


class GateWidget:
    """Sliders and toggles over :class:`GateRuns`; every change redraws :func:`draw_gates`.

    It opens at ``setting`` (default: :func:`opening_setting`, the backbone's selector
    rate) and offers a control only for a setting the grid has several values of.

    ``controls`` maps each setting's name to its ipywidgets control; :meth:`redraw` is the
    callback they call (``seconds`` holds how long the last one took), ``figure`` the last
    figure drawn. Display the widget with :meth:`ui`.
    """

    def __init__(self, runs: GateRuns, setting: GateSetting | None = None) -> None:
        import ipywidgets as widgets

        self.runs = runs
        self.start = start = setting or opening_setting(runs)
        selection = {"description_width": "initial"}
        controls: dict[str, Any] = {
            "data": widgets.ToggleButtons(
                options=[(TASKS.get(d, d), d) for d in runs.values("data")],
                value=start.data,
                description="task",
            ),
            "tau": widgets.SelectionSlider(
                options=runs.values("tau"), value=start.tau, description="tau"
            ),
            "selector_lr": widgets.SelectionSlider(
                options=runs.values("selector_lr"),
                value=start.selector_lr,
                description="selector lr x",
                style=selection,
            ),
            "hard": widgets.ToggleButtons(
                options=[("soft", False), ("hard", True)],
                value=start.hard,
                description="gate",
            ),
            "freezing": widgets.Checkbox(
                value=start.freezing, description="AutoNorm-S freezing"
            ),
            "t_freeze": widgets.SelectionSlider(
                options=[t for t in runs.values("freeze_at") if t],
                value=start.t_freeze,
                description="T_freeze",
            ),
            "eps_h": widgets.FloatSlider(
                value=start.eps_h,
                min=0.0,
                max=round(math.log(2), 2),
                step=0.01,
                description="eps_H",
            ),
            "rule": widgets.ToggleButtons(
                options=[("H >= eps_H (paper)", "high"), ("H < eps_H", "low")],
                value=start.rule,
                description="freeze if",
            ),
        }
        # a setting with one value in the grid gets no control (it stays at ``start``)
        freezes = [t for t in runs.values("freeze_at") if t]
        values = {
            **{axis: runs.values(axis) for axis in ("data", "tau", "selector_lr")},
            "hard": runs.values("hard"),
            "t_freeze": freezes,
        }
        if not freezes:  # no freeze runs: nothing to freeze
            values.update(freezing=[], eps_h=[], rule=[])
        self.controls = {
            name: control
            for name, control in controls.items()
            if len(values.get(name, ("several", "values"))) > 1
        }
        self.output = widgets.Output()
        self.figure: Figure | None = None
        self.seconds = math.nan
        for control in self.controls.values():
            control.observe(self.redraw, names="value")
        self.redraw()

    @property
    def setting(self) -> GateSetting:
        """The setting the controls show now."""
        return dataclasses.replace(
            self.start,
            **{name: control.value for name, control in self.controls.items()},
        )

    def redraw(self, change: Any = None) -> Figure:
        """Draw the current setting (the controls' callback); returns the figure."""
        from IPython.display import display

        started = time.perf_counter()
        self.figure = draw_gates(self.runs, self.setting)
        with self.output:
            self.output.clear_output(wait=True)
            display(self.figure)
        self.seconds = time.perf_counter() - started
        return self.figure

    def set(self, **values: Any) -> Figure:
        """Move controls programmatically (as a reader would), e.g. ``set(tau=2.0)``."""
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise ValueError(
                f"unknown control(s) {', '.join(unknown)}; expected {', '.join(self.controls)}"
            )
        for name, value in values.items():
            self.controls[name].value = value
        return self.figure

    def ui(self) -> Any:
        """The controls above the figure, ready for ``display``."""
        import ipywidgets as widgets

        rows = [
            [self.controls[name] for name in row if name in self.controls]
            for row in (
                ("data", "hard"),
                ("tau", "selector_lr"),
                ("freezing", "t_freeze", "eps_h"),
                ("rule",),
            )
        ]
        return widgets.VBox([*(widgets.HBox(row) for row in rows if row), self.output])
