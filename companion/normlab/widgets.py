"""Chapter 10's gate-collapse widget: sliders over a grid of precomputed runs.

Training even a tiny AutoNorm ViT takes seconds, too slow to follow a slider. So the
``gate_widget`` experiment trains one run per point of a small grid (task x tau x the
selector's learning-rate multiple x hard/soft x the epoch of a freeze), and the widget only
looks runs up and draws them. Freezing needs no extra grid axis for eps_H or the rule: a
run with AutoNorm-S is the unfrozen run up to its decision at T_freeze, and after it either
the ``freeze_at = T_freeze`` run (the rule fired) or the unfrozen one (it did not); see
``normlab.experiments.gate_study``.

- :class:`GateRuns`: the runs, indexed by their settings; :meth:`GateRuns.select` applies
  a freezing rule.
- :func:`draw_gates`: one setting as a figure (entropy per layer over training, the freeze
  marked; the final gate weight per layer; validation accuracy over training), and
  :func:`collapse_setting`, where the grid's gates collapse.
- :class:`GateWidget`: ipywidgets controls wired to :func:`draw_gates`.
- :func:`static_twin`: the same controls and views as a Vega-Lite chart that needs no
  kernel, for readers of the HTML book (:func:`twin_tables`: the runs it inlines).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from . import normalisers, results
from .experiments.gate_study import TASKS, load_records
from .experiments.runner import holds_saved_set
from .figures import column
from .interactive import Interactive, choice
from .paper import EPS_H, TAU

__all__ = [
    "WIDGET_EXPERIMENT",
    "GateSetting",
    "Shown",
    "GateRuns",
    "draw_gates",
    "collapse_setting",
    "opening_setting",
    "GateWidget",
    "twin_tables",
    "static_twin",
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
        from .experiments import get

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


def _short(layer: str) -> str:
    """``encoder.blocks.2.norm1`` -> ``b2.norm1``; ``encoder.norm`` -> ``final``."""
    parts = layer.split(".")
    return f"b{parts[-2]}.{parts[-1]}" if "blocks" in parts else "final"


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


# ------------------------------------------------------------------ the static twin

_DIGITS = 3  # the twin's numbers are rounded to this many decimals


def twin_tables(runs: GateRuns) -> dict[str, pd.DataFrame]:
    """The runs reduced to what :func:`static_twin` draws, numbers rounded to 3 decimals.

    ``runs``: one row per run, ``k`` its index, its settings (``d`` task, ``t`` tau, ``s``
    selector lr, ``g`` soft or hard, ``f`` freeze_at) and ``h<T>``, the mean entropy at the
    decision of its setting's run frozen at ``T`` (the number :meth:`GateRuns.select`
    compares with eps_H), for each T of the grid. ``gates``: run, epoch ``e``, layer ``l``,
    entropy ``H`` and weight on LayerNorm ``w``. ``accuracy``: run, epoch, val accuracy ``a``.
    """
    t_values = [t for t in runs.values("freeze_at") if t]
    rows, gates, accuracy = [], [], []
    for k, ((data, tau, lr, hard, freeze_at), record) in enumerate(
        sorted(runs.records.items())
    ):
        row = {"k": k, "d": data, "t": tau, "s": lr, "g": "hard" if hard else "soft"}
        row["f"] = freeze_at
        for t in t_values:
            frozen = runs.records.get((data, tau, lr, hard, t))
            row[f"h{t}"] = (
                round(frozen["entropy_records"][-1]["mean"], _DIGITS)
                if frozen is not None
                else None
            )
        rows.append(row)
        gates += [
            {
                "k": k,
                "e": g["epoch"],
                "l": _short(g["layer"]),
                "H": round(g["entropy"], _DIGITS),
                "w": round(g["p_ln"], _DIGITS),
            }
            for g in record["gates"]
        ]
        accuracy += [
            {"k": k, "e": h["epoch"], "a": round(h["val_accuracy"], _DIGITS)}
            for h in record["history"]
        ]
    return {
        "runs": pd.DataFrame(rows),
        "gates": pd.DataFrame(gates),
        "accuracy": pd.DataFrame(accuracy, columns=["k", "e", "a"]),
    }


#: Every panel's width in pixels: the three panels stack, and with the axis titles and
#: the legend below them the chart stays within a 390-pixel phone column.
_TWIN_WIDTH = 300
#: The rule's verdict at T_freeze, a Vega expression over a run's row and the controls.
_FIRED = "(rule == 'high' ? datum['h' + T] >= eps : datum['h' + T] < eps)"
#: The twin's Vega expressions, one calculate each, in order: the rule's verdict, then
#: whether a row belongs to the run the controls show.
_PICK = {
    "verdict": f"freezing && {_FIRED} ? 'froze every gate' : 'did not fire'",
    "shown": "datum.d == task && datum.t == tau && datum.s == lr && datum.g == gate "
    "&& datum.f == (datum.verdict == 'froze every gate' ? T : 0)",
}


def _twin_controls(runs: GateRuns, start: GateSetting) -> list[Any]:
    """The twin's controls as Vega-Lite parameters, each at ``start``: task, tau, selector
    lr, soft or hard, AutoNorm-S freezing, T_freeze, eps_H and the rule (a control over one
    value of the grid is a fixed parameter)."""
    import altair as alt

    return [
        choice(
            "task",
            start.data,
            runs.values("data"),
            "task ",
            [TASKS.get(d, d) for d in runs.values("data")],
        ),
        choice("tau", start.tau, runs.values("tau"), "τ "),
        choice("lr", start.selector_lr, runs.values("selector_lr"), "selector lr × "),
        choice(
            "gate",
            "hard" if start.hard else "soft",
            [("hard" if h else "soft") for h in runs.values("hard")],
            "gate ",
        ),
        alt.param(
            name="freezing",
            value=start.freezing,
            bind=alt.binding_checkbox(name="AutoNorm-S freezing "),
        ),
        choice(
            "T", start.t_freeze, [t for t in runs.values("freeze_at") if t], "T_freeze "
        ),
        alt.param(
            name="eps",
            value=start.eps_h,
            bind=alt.binding_range(
                min=0, max=round(math.log(2), 2), step=0.01, name="ε_H "
            ),
        ),
        alt.param(
            name="rule",
            value=start.rule,
            bind=alt.binding_radio(
                options=["high", "low"],
                labels=["H ≥ ε_H (paper)", "H < ε_H"],
                name="freeze if ",
            ),
        ),
    ]


@dataclass(frozen=True)
class _TwinPanels:
    """What the twin's panels share: :func:`twin_tables`, the run fields each row looks up
    (``h_fields``: the entropies at each T_freeze), the epoch axis and the layer colours."""

    tables: dict[str, pd.DataFrame]
    h_fields: list[str]
    epoch: Any
    colour: Any

    def shown(self, table: str, height: int, width: int) -> Any:
        """A chart of one table's rows of the run the controls show."""
        import altair as alt

        chart = alt.Chart(self.tables[table], height=height, width=width)
        if table != "runs":
            chart = chart.transform_lookup(
                lookup="k",
                from_=alt.LookupData(
                    self.tables["runs"],
                    key="k",
                    fields=["d", "t", "s", "g", "f", *self.h_fields],
                ),
            )
        return chart.transform_calculate(**_PICK).transform_filter("datum.shown")

    def per_layer(
        self, field: str, title: str, top: float, height: int, width: int
    ) -> Any:
        """One line per layer of a gate ``field`` (``H`` or ``w``) over the epochs."""
        import altair as alt

        return (
            self.shown("gates", height, width)
            .mark_line(point=True)
            .encode(
                x=self.epoch,
                y=alt.Y(f"{field}:Q", title=title, scale=alt.Scale(domain=[0, top])),
                color=self.colour,
                tooltip=["l:N", "e:Q", "H:Q", "w:Q"],
            )
        )


def _twin_panels(tables: dict[str, pd.DataFrame]) -> _TwinPanels:
    """The panels' shared parts: epochs 1 to the last, one colour per layer."""
    import altair as alt

    layers = list(dict.fromkeys(tables["gates"]["l"]))
    epochs = int(tables["gates"]["e"].max())
    h_fields = [c for c in tables["runs"].columns if c.startswith("h")]
    epoch = alt.X(
        "e:Q",
        title="epoch",
        scale=alt.Scale(domain=[1, epochs]),
        axis=alt.Axis(tickMinStep=1),
    )
    colour = alt.Color(
        "l:N",
        title="layer",
        sort=layers,
        scale=alt.Scale(scheme="tableau10", domain=layers),
    )
    return _TwinPanels(tables, h_fields, epoch, colour)


def _twin_entropy(panels: _TwinPanels) -> Any:
    """The entropy panel: a line per layer, ln 2 dotted, eps_H dashed when freezing, the
    freeze at T_freeze (red when the rule fired) and the rule's verdict as a caption."""
    import altair as alt

    entropy_lines = panels.per_layer("H", "gate entropy (nats)", 0.72, 220, _TWIN_WIDTH)
    ln2 = (
        alt.Chart(pd.DataFrame({"y": [round(math.log(2), _DIGITS)]}))
        .mark_rule(color="grey", strokeDash=[2, 3])
        .encode(y="y:Q")
    )
    eps_line = (
        alt.Chart(pd.DataFrame({"y": [0.0]}))
        .transform_calculate(y="eps")
        .mark_rule(
            color="black", strokeDash=[6, 3], opacity=alt.expr("freezing ? 1 : 0")
        )
        .encode(y="y:Q")
    )
    decision = panels.shown("runs", 220, _TWIN_WIDTH)
    freeze_mark = (
        decision.transform_calculate(x="T")
        .mark_rule(opacity=alt.expr("freezing ? 0.6 : 0"))
        .encode(
            x="x:Q",
            stroke=alt.Stroke(
                "verdict:N",
                scale=alt.Scale(
                    domain=["froze every gate", "did not fire"],
                    range=["#d62728", "grey"],
                ),
                legend=None,
            ),
            size=alt.condition(
                "datum.verdict == 'froze every gate'", alt.value(6), alt.value(1.5)
            ),
            # a red band when the rule fired, a dashed line when it did not
            strokeDash=alt.condition(
                "datum.verdict == 'froze every gate'",
                alt.value([1, 0]),
                alt.value([5, 4]),
            ),
        )
    )
    caption = (
        decision.transform_calculate(
            text="freezing ? 'H = ' + format(datum['h' + T], '.3f') + ' at T_freeze = ' "
            "+ T + ': ' + datum.verdict : 'no freezing (AutoNorm)'"
        )
        .mark_text(align="right", baseline="top", fontSize=10)
        .encode(x=alt.value(_TWIN_WIDTH - 6), y=alt.value(4), text="text:N")
    )
    return alt.layer(entropy_lines, ln2, eps_line, freeze_mark, caption).properties(
        title="gate entropy per layer (dotted: ln 2; dashed: ε_H)"
    )


def _twin_accuracy(panels: _TwinPanels) -> Any:
    """The validation accuracy of the shown run over the epochs."""
    import altair as alt

    return (
        panels.shown("accuracy", 120, _TWIN_WIDTH)
        .mark_line(
            color=normalisers.colour("autonorm"),
            point={"color": normalisers.colour("autonorm")},
        )
        .encode(
            x=panels.epoch,
            y=alt.Y("a:Q", title="validation accuracy", scale=alt.Scale(domain=[0, 1])),
            tooltip=["e:Q", "a:Q"],
        )
        .properties(title="validation accuracy")
    )


def static_twin(runs: GateRuns, setting: GateSetting | None = None) -> Interactive:
    """The widget without a kernel: a Vega-Lite chart whose controls (task, tau, selector lr,
    soft or hard, AutoNorm-S freezing, T_freeze when the grid has several, eps_H and the
    rule) pick a run of the grid, as :meth:`GateRuns.select` does; it draws the entropy per
    layer over training (the freeze marked), the weight on LayerNorm per layer and the
    validation accuracy, stacked to fit a phone's column. A setting with one value in the
    grid gets no control. It opens at ``setting``, by default where the widget opens
    (:func:`opening_setting`), so its static image (what a front end without JavaScript
    shows) is the one the text describes first."""
    import altair as alt

    tables = twin_tables(runs)
    start = setting or opening_setting(runs)
    params = _twin_controls(runs, start)
    panels = _twin_panels(tables)
    entropy = _twin_entropy(panels)
    weight = panels.per_layer(
        "w", "weight on LayerNorm", 1.0, 120, _TWIN_WIDTH
    ).properties(title="mean gate weight on LayerNorm")
    accuracy = _twin_accuracy(panels)
    chart = (
        alt.vconcat(entropy, weight, accuracy)
        .add_params(*params)
        .resolve_scale(color="shared")
        .configure_view(stroke=None)
        .configure_legend(orient="bottom", columns=3)
        .configure_title(fontSize=11)
    )
    return Interactive(
        chart,
        f"gate collapse over {len(runs.records)} precomputed runs of {WIDGET_EXPERIMENT}: "
        "entropy per layer, weight on LayerNorm, validation accuracy",
    )
