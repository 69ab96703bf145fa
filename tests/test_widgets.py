"""Chapter 10's gate-collapse widget: lookup, the freezing rule, and a slider's redraw."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from normlab import widgets as w

LAYERS = ["encoder.blocks.0.norm1", "encoder.blocks.0.norm2", "encoder.norm"]
EPOCHS = 6


def fake_record(
    data: str, tau: float, selector_lr: float, hard: bool, freeze_at: int
) -> dict:
    """A run record whose entropies fall at a rate set by its settings (deterministic)."""
    rate = (
        0.1
        + 0.3 * tau
        + 0.05 * selector_lr
        + (0.2 if hard else 0.0)
        + (0.1 if data == "mnist" else 0.0)
    )
    gates = []
    for epoch in range(1, EPOCHS + 1):
        for i, layer in enumerate(LAYERS):
            stop = freeze_at if freeze_at and epoch > freeze_at else epoch
            entropy = math.log(2) * math.exp(-rate * stop * (i + 1) / 3)
            p_ln = 0.5 + 0.45 * (1 - entropy / math.log(2)) * (1 if i % 2 == 0 else -1)
            gates.append(
                {
                    "epoch": epoch,
                    "layer": layer,
                    "p_dyt": 1 - p_ln,
                    "p_ln": p_ln,
                    "entropy": entropy,
                    "grad_var": 1e-6,
                    "snr": 1.0,
                }
            )
    record = {
        "run_id": f"r-{data}-{tau}-{selector_lr}-{hard}-{freeze_at}",
        "config": {
            "data": data,
            "tau": tau,
            "selector_lr": selector_lr,
            "hard": hard,
            "freeze_at": freeze_at,
        },
        "metrics": {"val_metric": 0.5 + rate / 10, "test_metric": 0.5},
        "history": [
            {"epoch": e, "val_accuracy": 0.5 + rate * e / 100}
            for e in range(1, EPOCHS + 1)
        ],
        "gates": gates,
    }
    if freeze_at:
        mean = float(np.mean([g["entropy"] for g in gates if g["epoch"] == freeze_at]))
        record["entropy_records"] = [{"epoch": freeze_at, "mean": mean, "layers": {}}]
    return record


@pytest.fixture(scope="module")
def runs() -> w.GateRuns:
    grid = itertools.product(
        ["mnist", "mnist_restyled"],
        [0.1, 0.5, 2.0],
        [0.1, 1.0, 10.0],
        [False, True],
        [0, 3],
    )
    return w.GateRuns(fake_record(*point) for point in grid)


def lines(figure) -> list[np.ndarray]:
    return [
        np.asarray(line.get_ydata(), dtype=float) for line in figure.axes[0].get_lines()
    ]


def test_moving_a_slider_redraws_the_figure(runs: w.GateRuns) -> None:
    widget = w.GateWidget(runs)
    first = widget.figure
    before = lines(first)
    widget.controls["tau"].value = 2.0  # what a reader's slider move does
    after = lines(widget.figure)
    assert widget.figure is not first  # the control's callback drew a new figure
    assert len(before) == len(after) and any(
        not np.array_equal(a, b) for a, b in zip(before, after)
    )
    assert widget.setting.tau == 2.0


def test_freezing_follows_the_rule(runs: w.GateRuns) -> None:
    setting = w.GateSetting(
        data="mnist", tau=0.5, freezing=True, t_freeze=3, eps_h=0.0, rule="high"
    )
    shown = runs.select(setting)
    assert shown.fired and shown.record["config"]["freeze_at"] == 3
    high = runs.select(
        w.GateSetting(
            data="mnist",
            tau=0.5,
            freezing=True,
            t_freeze=3,
            eps_h=math.log(2),
            rule="high",
        )
    )
    assert not high.fired and high.record["config"]["freeze_at"] == 0
    low = runs.select(
        w.GateSetting(
            data="mnist",
            tau=0.5,
            freezing=True,
            t_freeze=3,
            eps_h=math.log(2),
            rule="low",
        )
    )
    assert low.fired and low.decision_entropy == pytest.approx(shown.decision_entropy)


def test_freeze_toggle_marks_the_freeze(runs: w.GateRuns) -> None:
    widget = w.GateWidget(runs)
    widget.set(freezing=True, eps_h=0.0)
    vertical = [
        line
        for line in widget.figure.axes[0].get_lines()
        if len(set(line.get_xdata())) == 1
    ]
    assert vertical and vertical[0].get_xdata()[0] == 3


def test_final_weights_sum_to_one(runs: w.GateRuns) -> None:
    figure = w.draw_gates(runs, w.GateSetting())
    bars = figure.axes[1].patches
    n = len(LAYERS)
    widths = np.array([bar.get_width() for bar in bars]).reshape(2, n)
    np.testing.assert_allclose(widths.sum(axis=0), 1.0)


def test_twin_tables_hold_every_run_rounded(runs: w.GateRuns) -> None:
    tables = w.twin_tables(runs)
    assert len(tables["runs"]) == len(runs.records)
    assert len(tables["gates"]) == len(runs.records) * EPOCHS * len(LAYERS)
    assert len(tables["accuracy"]) == len(runs.records) * EPOCHS
    for column in ("H", "w"):
        values = tables["gates"][column].to_numpy()
        np.testing.assert_array_equal(values, values.round(3))
    row = tables["runs"].query("d == 'mnist' and t == 0.5 and s == 1.0 and g == 'soft'")
    decision = runs.select(w.GateSetting(freezing=True, t_freeze=3)).decision_entropy
    assert set(row["h3"]) == {round(decision, 3)} and set(row["f"]) == {0, 3}


def test_twin_has_a_control_per_axis_with_several_values(runs: w.GateRuns) -> None:
    spec = w.static_twin(runs, w.GateSetting(t_freeze=3)).spec
    bound = {p["name"] for p in spec["params"] if "bind" in p}
    # freeze_at holds one T_freeze besides 0, so T gets no control
    assert bound == {"task", "tau", "lr", "gate", "freezing", "eps", "rule"}
    assert {p["name"]: p["value"] for p in spec["params"]}["T"] == 3


@pytest.mark.parametrize(
    "eps_h, rule", [(0.0, "high"), (math.log(2), "high"), (math.log(2), "low")]
)
def test_twin_applies_the_freezing_rule_as_select_does(
    runs: w.GateRuns, eps_h: float, rule: str
) -> None:
    """Render the twin at a setting (vl-convert runs its expressions) and read its caption."""
    import vl_convert
    from normlab.interactive import vegalite_version

    setting = w.GateSetting(freezing=True, t_freeze=3, eps_h=eps_h, rule=rule)
    spec = w.static_twin(runs, setting).spec
    svg = vl_convert.vegalite_to_svg(spec, vl_version=vegalite_version())
    shown = runs.select(setting)
    verdict = "froze every gate" if shown.fired else "did not fire"
    assert f"H = {shown.decision_entropy:.3f} at T_freeze = 3: {verdict}" in svg


def test_errors_name_what_is_missing(runs: w.GateRuns) -> None:
    with pytest.raises(KeyError, match="no precomputed run"):
        runs.select(w.GateSetting(tau=0.3))
    with pytest.raises(ValueError, match="unknown control"):
        w.GateWidget(runs).set(temperature=1.0)
    with pytest.raises(ValueError, match="no gate-widget runs"):
        w.GateRuns([])


@pytest.fixture(scope="module")
def small() -> w.GateRuns:
    """The quick profile's shape: one task, one tau, soft only, one T_freeze."""
    grid = itertools.product(["mnist"], [0.5], [1.0, 10.0], [False], [0, 2])
    return w.GateRuns(fake_record(*point) for point in grid)


def test_a_small_grid_offers_only_the_controls_it_serves(small: w.GateRuns) -> None:
    widget = w.GateWidget(small)
    assert set(widget.controls) == {"selector_lr", "freezing", "eps_h", "rule"}
    for name, control in widget.controls.items():  # every option of every control
        for value in getattr(control, "options", [control.value]):
            widget.set(**{name: value[1] if isinstance(value, tuple) else value})
            assert widget.figure is not None
    with pytest.raises(ValueError, match="unknown control.*hard"):
        widget.set(hard=True)  # no KeyError inside a callback: no such control


def test_the_twin_opens_where_the_widget_and_the_text_do(small: w.GateRuns) -> None:
    start = w.collapse_setting(small)
    assert start.selector_lr == 10.0 and not start.freezing and start.t_freeze == 2
    spec = w.static_twin(small).spec
    # both open at the backbone's selector rate (chapter 10: "opens ... at the backbone's
    # rate"), for the reader to move to the collapse
    assert {p["name"]: p["value"] for p in spec["params"]}["lr"] == 1.0
    assert w.GateWidget(small).setting.selector_lr == 1.0
    assert w.opening_setting(small).selector_lr == 1.0


def test_the_twin_fits_a_phone_and_dashes_an_unfired_freeze(small: w.GateRuns) -> None:
    import json

    spec = w.static_twin(small).spec
    panels = spec["vconcat"]
    assert len(panels) == 3  # stacked, none side by side
    # each panel's plot area plus its y axis and padding within a 390-pixel column
    assert all(p.get("width", 0) + 80 <= 390 for p in panels if "width" in p)
    text = json.dumps(spec)
    assert '"strokeDash"' in text and "[5, 4]" in text


def test_draw_gates_shows_accuracy_beside_entropy(small: w.GateRuns) -> None:
    record = small.select(w.collapse_setting(small)).record
    figure = w.draw_gates(small, w.collapse_setting(small))
    (accuracy,) = figure.axes[2].get_lines()
    expected = [h["val_accuracy"] for h in record["history"]]
    np.testing.assert_allclose(accuracy.get_ydata(), expected)


def test_the_saved_widget_grid_has_a_rate_that_collapses_and_one_that_does_not() -> (
    None
):
    """chapter 10's walk: at one selector rate the unfrozen gates stay undecided (mean final
    entropy above 0.3 nats), at another they collapse (below 0.1)."""
    from normlab import results

    saved = results.largest(w.WIDGET_EXPERIMENT)
    assert saved is not None
    runs = saved.results
    unfrozen = runs[runs["freeze_at"] == 0]
    by_rate = unfrozen.groupby("selector_lr")["final_entropy"].mean()
    assert by_rate.max() > 0.3 and by_rate.min() < 0.1, by_rate
    assert set(unfrozen["data"]) == {"mnist", "mnist_restyled"}
    assert len({t for t in runs["freeze_at"] if t}) >= 3


def test_the_grid_table_names_the_rates_that_stay_undecided_and_collapse() -> None:
    """chapter 10's grid table (normlab.chapters.ch10): frozen runs left out, each
    setting averaged over every other, its gates undecided above 0.3 nats and collapsed
    below eps_H."""
    from normlab.chapters import ch10

    rows = [
        dict(selector_lr=r, tau=t, hard=h, seed=s, freeze_at=f, final_entropy=e)
        for r, e in ((0.1, 0.6), (1.0, 0.2), (10.0, 0.02))
        for t in (0.5, 2.0)
        for h in (False, True)
        for s in range(3)
        for f in (0, 3)
    ]
    frame = pd.DataFrame(rows)
    frame.loc[frame["freeze_at"] == 3, "final_entropy"] = 0.69  # frozen: left out
    frame.loc[frame["hard"], "final_entropy"] += 0.1
    frame.loc[frame["tau"] == 2.0, "final_entropy"] += 0.01
    grid = ch10.widget_grid(frame)
    assert grid["rate_undecided"] == 0.1 and grid["rate_collapsed"] == 10.0
    assert grid["h_undecided"] == pytest.approx(0.6 + 0.05 + 0.005)
    assert grid["unfrozen"] == 36 and grid["seeds"] == 3
    table = ch10.grid_table(frame).set_index("setting")
    assert table.loc["selector rate ×0.1", "gates end"] == "undecided"
    assert table.loc["selector rate ×10", "gates end"] == "collapsed"
    assert table.loc["hard gate", "final entropy"] == pytest.approx(
        table.loc["soft gate", "final entropy"] + 0.1
    )
    assert (table["runs"] == [12, 12, 12, 18, 18, 18, 18]).all()
    text = str(getattr(ch10.finding(frame), "data", ch10.finding(frame)))
    assert "×0.1" in text and "×10" in text
    frame["final_entropy"] = 0.2
    flat = str(getattr(ch10.finding(frame), "data", ch10.finding(frame)))
    assert "no rate both leaves them undecided" in flat
