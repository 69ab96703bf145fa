"""normlab.plots: figures are returned (never shown), colours are fixed, data are drawn as given."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from scipy import stats

from normlab import plots


def test_colours_are_fixed_per_normaliser() -> None:
    assert plots.colour("affine_like") == plots.COLOURS["affine_like"]
    assert plots.colour("something_new") == plots.colour("something_new")
    assert len(set(plots.COLOURS.values())) == len(plots.COLOURS)
    assert plots.label("affine_like") == "affine-like"


def test_training_curves_mean_and_ci_band() -> None:
    before = plt.get_fignums()
    histories = {"layernorm": [[{"epoch": e, "val_accuracy": v} for e, v in enumerate(seq, 1)]
                               for seq in ([0.5, 0.7, 0.8], [0.6, 0.8, 0.9], [0.4, 0.75, 0.85])]}
    figure = plots.training_curves(histories, key="val_accuracy")
    assert isinstance(figure, Figure) and plt.get_fignums() == before  # nothing registered with pyplot
    ax = figure.axes[0]
    line = ax.lines[0]
    assert np.allclose(line.get_ydata(), [0.5, 0.75, 0.85])
    assert to_hex(line.get_color()) == plots.COLOURS["layernorm"]
    band = ax.collections[0].get_paths()[0].vertices
    curves = np.array([[0.5, 0.7, 0.8], [0.6, 0.8, 0.9], [0.4, 0.75, 0.85]])
    half = stats.t.ppf(0.975, 2) * curves.std(axis=0, ddof=1) / np.sqrt(3)
    for epoch, mean, h in zip([1, 2, 3], curves.mean(axis=0), half):
        at = band[np.isclose(band[:, 0], epoch), 1]
        assert np.isclose(at.min(), mean - h) and np.isclose(at.max(), mean + h)


def test_metric_vs_draws_means_and_error_bars() -> None:
    table = pd.DataFrame({"normaliser": ["none"] * 3 + ["affine_like"] * 3, "batch_size": [8, 32, 128] * 2,
                          "mean": [0.9, 0.8, 0.7, 0.95, 0.9, 0.6], "ci95": [0.01, 0.02, 0.03, 0.0, 0.01, 0.05]})
    figure = plots.metric_vs(table, "batch_size", logx=True, base=2)
    ax = figure.axes[0]
    assert ax.get_xscale() == "log"
    lines = {plots.label(t.get_text()): t for t in figure.legends[0].get_texts()}
    assert set(lines) == {"none", "affine-like"}
    data = [line for line in ax.lines if len(line.get_xdata()) == 3 and line.get_marker() == "o"]
    assert sorted(tuple(np.round(np.asarray(line.get_ydata(), dtype=float), 6)) for line in data) == [(0.9, 0.8, 0.7), (0.95, 0.9, 0.6)]
    bars = ax.collections[0].get_segments()  # error bars of the first series: mean -/+ ci95
    assert np.allclose([seg[:, 1] for seg in bars], [[0.89, 0.91], [0.78, 0.82], [0.67, 0.73]])


def test_metric_vs_panels() -> None:
    table = pd.DataFrame({"normaliser": ["none", "none"], "lr": [0.1, 1.0], "mean": [0.5, 0.6], "ci95": [0.1, 0.1],
                          "activation": ["tanh", "relu"]})
    figure = plots.metric_vs(table, "lr", col="activation")
    assert [ax.get_title() for ax in figure.axes] == ["activation = relu", "activation = tanh"]


def test_heatmap_annotates_every_cell() -> None:
    table = pd.DataFrame([[0.1, 0.2, np.nan], [0.4, 0.5, 0.6]], index=["none", "affine_like"], columns=[16, 64, 256])
    figure = plots.heatmap(table, fmt=".1f")
    texts = sorted(t.get_text() for t in figure.axes[0].texts)
    assert texts == sorted(["0.1", "0.2", "nan", "0.4", "0.5", "0.6"])
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()] == ["none", "affine-like"]


@pytest.mark.parametrize("name", ["training_curves", "metric_vs", "heatmap"])
def test_no_show_inside(name: str) -> None:
    import inspect

    assert "plt.show" not in inspect.getsource(getattr(plots, name))
