"""normlab.figures (curves, heat maps, the theory figures): figures are returned (never shown), in one style, with the
registry's colours and labels; data are drawn as given."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from normlab import figures, normalisers
from scipy import stats


def test_colours_and_labels_come_from_the_registry() -> None:
    assert figures.colours(["affine_like"]) == {
        "affine_like": normalisers.colour("affine_like")
    }
    assert (
        figures.label("affine_like") == "affine-like"
        and figures.label("layernorm") == "LayerNorm"
    )
    assert (
        figures.label("batch_size") == "batch-size"
    )  # not a normaliser: underscores shown as hyphens
    # names outside the registry take palette colours that no name of the same figure has
    mixed = figures.colours(["none", "budget_a", "affine_like", "budget_b"])
    assert len(set(mixed.values())) == 4 and set(mixed.values()) <= set(
        normalisers.PALETTE
    )
    assert mixed["none"] == normalisers.colour("none")
    assert figures.colours(["x", "y"]) == figures.colours(["x", "y"])
    assert figures.STYLE["axes.prop_cycle"].by_key()["color"] == list(
        normalisers.PALETTE
    )


def test_training_curves_mean_and_ci_band() -> None:
    before = plt.get_fignums()
    histories = {
        "layernorm": [
            [{"epoch": e, "val_accuracy": v} for e, v in enumerate(seq, 1)]
            for seq in ([0.5, 0.7, 0.8], [0.6, 0.8, 0.9], [0.4, 0.75, 0.85])
        ]
    }
    figure = figures.training_curves(histories, key="val_accuracy")
    assert (
        isinstance(figure, Figure) and plt.get_fignums() == before
    )  # nothing registered with pyplot
    ax = figure.axes[0]
    line = ax.lines[0]
    assert np.allclose(line.get_ydata(), [0.5, 0.75, 0.85])
    assert to_hex(line.get_color()) == normalisers.colour("layernorm").lower()
    band = ax.collections[0].get_paths()[0].vertices
    curves = np.array([[0.5, 0.7, 0.8], [0.6, 0.8, 0.9], [0.4, 0.75, 0.85]])
    half = stats.t.ppf(0.975, 2) * curves.std(axis=0, ddof=1) / np.sqrt(3)
    for epoch, mean, h in zip([1, 2, 3], curves.mean(axis=0), half):
        at = band[np.isclose(band[:, 0], epoch), 1]
        assert np.isclose(at.min(), mean - h) and np.isclose(at.max(), mean + h)


def test_metric_vs_draws_means_and_error_bars() -> None:
    table = pd.DataFrame(
        {
            "normaliser": ["none"] * 3 + ["affine_like"] * 3,
            "batch_size": [8, 32, 128] * 2,
            "mean": [0.9, 0.8, 0.7, 0.95, 0.9, 0.6],
            "ci95": [0.01, 0.02, 0.03, 0.0, 0.01, 0.05],
        }
    )
    figure = figures.metric_vs(table, "batch_size", logx=True, base=2)
    ax = figure.axes[0]
    assert ax.get_xscale() == "log"
    assert {t.get_text() for t in figure.legends[0].get_texts()} == {
        "plain",
        "affine-like",
    }  # registry labels
    data = [
        line
        for line in ax.lines
        if len(line.get_xdata()) == 3 and line.get_marker() == "o"
    ]
    assert sorted(
        tuple(np.round(np.asarray(line.get_ydata(), dtype=float), 6)) for line in data
    ) == [(0.9, 0.8, 0.7), (0.95, 0.9, 0.6)]
    bars = ax.collections[
        0
    ].get_segments()  # error bars of the first series: mean -/+ ci95
    assert np.allclose(
        [seg[:, 1] for seg in bars], [[0.89, 0.91], [0.78, 0.82], [0.67, 0.73]]
    )


def test_metric_vs_panels() -> None:
    table = pd.DataFrame(
        {
            "normaliser": ["none", "none"],
            "lr": [0.1, 1.0],
            "mean": [0.5, 0.6],
            "ci95": [0.1, 0.1],
            "activation": ["tanh", "relu"],
        }
    )
    figure = figures.metric_vs(table, "lr", col="activation")
    assert [ax.get_title() for ax in figure.axes] == [
        "activation = relu",
        "activation = tanh",
    ]


def test_heatmap_annotates_every_cell() -> None:
    table = pd.DataFrame(
        [[0.1, 0.2, np.nan], [0.4, 0.5, 0.6]],
        index=["none", "affine_like"],
        columns=[16, 64, 256],
    )
    figure = figures.heatmap(table, fmt=".1f")
    texts = sorted(t.get_text() for t in figure.axes[0].texts)
    assert texts == sorted(["0.1", "0.2", "nan", "0.4", "0.5", "0.6"])
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()] == [
        "plain",
        "affine-like",
    ]


THEORY_FIGURES = {
    "plot_update_sizes": lambda: figures.plot_update_sizes(3.0, 0.05, 2),
    "plot_update_size_curves": lambda: figures.plot_update_size_curves(
        [1.0, 3.0], 0.01, [1, 4]
    ),
    "plot_ratio_scatter": lambda: figures.plot_ratio_scatter(
        torch.tensor([1.0, 4.0]),
        {
            "norm_like": torch.tensor([2.0, 2.0]),
            "one at a time": torch.tensor([2.0, 5.0]),
        },
    ),
    "plot_kernels": lambda: figures.plot_kernels(
        {"none": torch.eye(3), "affine_like": torch.eye(3)}
    ),
    "plot_ratio_bars": lambda: figures.plot_ratio_bars(
        {"SGD": {"none": 3.0, "affine_like": 1.0}}, ylabel="r"
    ),
}


@pytest.mark.parametrize("name", sorted(THEORY_FIGURES))
def test_theory_figures_share_the_style_without_pyplot(name: str) -> None:
    before = plt.get_fignums()
    figure = THEORY_FIGURES[name]()
    assert isinstance(figure, Figure) and plt.get_fignums() == before
    assert figure.get_dpi() == figures.STYLE["figure.dpi"]
    drawn = {
        to_hex(c)
        for ax in figure.axes
        for c in [line.get_color() for line in ax.lines]
        + [p.get_facecolor() for p in ax.patches]
        + [
            tuple(col.get_facecolor()[0])
            for col in ax.collections
            if len(col.get_facecolor())
        ]
    }
    palette = {c.lower() for c in normalisers.PALETTE}
    assert (
        drawn <= palette or name == "plot_kernels"
    )  # kernels: a diverging colour map, no series


def test_theory_figures_colour_each_layer_kind_by_the_registry() -> None:
    figure = figures.plot_update_size_curves([1.0, 3.0], 0.01, [1])
    lines = {
        t.get_text(): line
        for t, line in zip(
            figure.axes[0].get_legend().get_texts(), figure.axes[0].lines
        )
    }
    assert set(lines) == {normalisers.label(k) for k in figures.LAYER_KINDS}
    for kind in figures.LAYER_KINDS:
        assert (
            to_hex(lines[normalisers.label(kind)].get_color())
            == normalisers.colour(kind).lower()
        )
    assert set(figures.LAYER_KINDS) == {"none", "norm_like", "affine_like"}
    with pytest.raises(ValueError, match="kind='norm-like' is not known"):
        figures.make_layer("norm-like", 2, 2)
