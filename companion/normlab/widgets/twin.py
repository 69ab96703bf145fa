"""The gate widget without a kernel: the same controls and views as a Vega-Lite chart, for
readers of the HTML book (:func:`static_twin`), and the runs it inlines
(:func:`twin_tables`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .. import normalisers
from ..experiments.gate_study import TASKS
from ..interactive import Interactive, choice
from .runs import WIDGET_EXPERIMENT, GateRuns, GateSetting, _short, opening_setting

__all__ = ["twin_tables", "static_twin"]

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
