"""normlab.figures: every figure fits the book's text column, and at its displayed size its
smallest text is at least 9 CSS px; panels too wide for the column wrap onto more rows."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import pkgutil
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.text import Text
from normlab import figures, results
from normlab.divergence import least_squares_study
from normlab.figures.effects import VERDICT_COLOURS
from PIL import Image

#: The smallest text a reader should see, in CSS px (the issue's floor).
MIN_TEXT_PX = 9


def _gates() -> pd.DataFrame:
    rows = [
        {
            "data": data,
            "run_id": f"{data}-{seed}",
            "epoch": epoch,
            "position": pos,
            "layer": f"block{pos}",
            "entropy": 0.6 - 0.1 * epoch + 0.01 * seed,
            "p_dyt": 0.5 + 0.1 * pos,
        }
        for data in ("pos", "sst2")
        for seed in range(3)
        for epoch in range(1, 4)
        for pos in range(2)
    ]
    return pd.DataFrame(rows)


def _severities() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "normaliser": name,
                "run_id": f"{name}-{seed}",
                "severity": sev,
                "corruption": "noise",
                "accuracy": 0.9 - 0.1 * sev + 0.01 * seed,
            }
            for name in ("layernorm", "autonorm")
            for seed in range(3)
            for sev in range(4)
        ]
    )


def _summary(panels: int) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "normaliser": name,
                "lr": lr,
                "mean": 0.5 + 0.1 * lr,
                "ci95": 0.02,
                "width": 16 * 2**p,
            }
            for name in ("none", "batchnorm", "layernorm", "affine_like")
            for lr in (0.01, 0.1, 1.0)
            for p in range(panels)
        ]
    )


def _draw(results: pd.DataFrame, ax) -> None:
    ax.bar([figures.label(n) for n in results["normaliser"]], results["mean"])
    ax.set_ylabel("mean test accuracy")


def _study_gates() -> pd.DataFrame:
    """A gate study's gate table: two tasks, the learned gate and the gate frozen at epoch
    2, three seeds, five layers."""
    layers = [f"encoder.blocks.{b}.norm{n}" for b in range(2) for n in (1, 2)]
    return pd.DataFrame(
        {
            "data": data,
            "arm": arm,
            "seed": seed,
            "run_id": f"{data}-{arm}-{seed}",
            "epoch": epoch,
            "position": position,
            "layer": layer,
            "entropy": 0.69 / epoch + 0.01 * seed,
            "p_dyt": 0.5,
            "p_ln": 0.5,
            "tau": 0.5,
        }
        for data in ("mnist", "mnist_restyled")
        for arm in ("autonorm", "freeze_at_2")
        for seed in range(3)
        for epoch in range(1, 7)
        for position, layer in enumerate([*layers, "encoder.norm"])
    )


def _sweep() -> pd.DataFrame:
    """A :func:`normlab.claims.tables.sweep_table`: two tasks, both rules, three T_freeze,
    eight eps_H."""
    return pd.DataFrame(
        {
            "data": data,
            "rule": rule,
            "t_freeze": t,
            "eps_h": eps,
            "lead": 0.02 * (eps - 0.3) * (1 if rule == "high" else -1),
            "fired": float((eps <= 0.1 * t) == (rule == "high")),
        }
        for data in ("mnist", "mnist_restyled")
        for rule in ("high", "low")
        for t in (4, 8, 14)
        for eps in (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    )


def _tau_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    taus = [0.1, 0.2, 0.5, 1.0, 2.0]
    estimator = pd.DataFrame(
        {"tau": taus, "variance": [0.1 / t for t in taus], "SNR": [t for t in taus]}
    )
    in_net = pd.DataFrame(
        {("snr", "mean"): [0.1, 0.2, 0.3], ("snr", "std"): [0.01] * 3},
        index=pd.Index([0.1, 0.5, 2.0], name="tau"),
    )
    accuracy = pd.DataFrame(
        {"tau": [0.1, 0.5, 2.0], "mean": [0.9, 0.92, 0.91], "ci95": [0.01] * 3}
    )
    return estimator, in_net, accuracy


def _outcomes(count: int) -> list[SimpleNamespace]:
    """Outcomes as :func:`normlab.figures.forest` reads them: a claim id and its effects."""
    verdicts = tuple(VERDICT_COLOURS)  # every verdict an effect can have
    return [
        SimpleNamespace(
            claim=SimpleNamespace(id=f"A{i}"),
            effects=[
                (
                    f"affine-like minus plain, fully connected nets of width {16 * i}",
                    SimpleNamespace(mean=0.01 * i, half=0.02),
                    verdicts[i % len(verdicts)],
                )
            ],
        )
        for i in range(count)
    ]


def _fc_runs() -> pd.DataFrame:
    """Runs of Part I's correction-lead figure: at width 8 batchnorm wins on val but none on
    test, so the lead is taken over batchnorm; at width 16 none wins on val."""
    val = {8: {"none": 0.7, "batchnorm": 0.8}, 16: {"none": 0.8, "batchnorm": 0.7}}
    test = {"none": 0.9, "batchnorm": 0.6, "affine_like": 0.85, "norm_like": 0.75}
    return pd.DataFrame(
        {
            "optimizer": "sgd",
            "activation": "tanh",
            "depth": 2,
            "width": width,
            "normaliser": name,
            "lr": 0.1,
            "seed": seed,
            "val_metric": val[width].get(name, 0.75),
            "test_metric": test[name] + 0.01 * seed * (name == "affine_like"),
            "metric": "accuracy",
            "higher_is_better": True,
        }
        for width in (8, 16)
        for name in test
        for seed in range(3)
    )


def test_every_report_belongs_to_a_registered_experiment() -> None:
    from normlab import experiments
    from normlab.figures.reports import REPORTS

    assert set(REPORTS) <= set(experiments.names())
    assert figures.report_figures("gate_widget") is None  # draws none


def test_the_corrections_lead_is_over_the_rival_chosen_on_val() -> None:
    leads = figures.correction_leads(_fc_runs()).set_index(["width", "normaliser"])
    assert leads.loc[(8, "affine_like"), "mean"] == pytest.approx(0.26)  # - batchnorm
    assert leads.loc[(16, "affine_like"), "mean"] == pytest.approx(-0.04)  # - none
    assert leads.loc[(8, "norm_like"), "mean"] == pytest.approx(0.15)
    assert (leads["n"] == 3).all()


def _mechanism() -> pd.DataFrame:
    """A mechanism table (normlab.analysis.mechanism) of two budgets, inits and rates."""
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        [
            {
                "epochs": e,
                "init": i,
                "lr": lr,
                "selector_lr": 1.0,
                "mean": rng.normal(0, 0.05),
                "ci95": 0.02,
                "early": rng.uniform(),
            }
            for e in (3, 8)
            for i in ("trunc_normal_0.02", "torch_default")
            for lr in (1e-3, 3e-3, 1e-2)
        ]
    )


def _least_squares():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(6, 8, dtype=torch.float64, generator=gen)
    y = torch.randn(6, 2, dtype=torch.float64, generator=gen)
    return least_squares_study(x, y, shared_lr=0.8, lrs=(0.1, 1.0, 3.0), epochs=3)


def _mix_figure() -> Figure:
    from normlab.chapters import ch11

    bottleneck, mix = (
        results.largest(n).results for n in ("gate_bottleneck", "gate_mix")
    )
    study = ch11.mix_runs(bottleneck, mix)
    summary = ch11.mix_summary(study)
    return figures.mix_figure(summary, study, "the mix or the gate")


def _rule_figure() -> Figure:
    from normlab.analysis.gates import at_defaults
    from normlab.claims.tables import sweep_table

    runs = at_defaults(results.largest("gate_bottleneck").results)
    return figures.rule_figure(sweep_table(runs, eps_grid=[0.05, 0.3, 0.6]), runs)


FIGURES = {
    "lead_figure": lambda: figures.lead_figure(_fc_runs()),
    "training_curves": lambda: figures.training_curves(
        {
            "layernorm": [
                [{"epoch": e, "val_accuracy": 0.5 + 0.1 * e} for e in range(1, 4)]
            ]
        }
    ),
    "metric_vs, four panels": lambda: figures.metric_vs(
        _summary(4), "lr", col="width", logx=True, title="four widths"
    ),
    "heatmap": lambda: figures.heatmap(
        pd.DataFrame(np.arange(12.0).reshape(3, 4), index=["none", "l2", "rmsnorm"])
    ),
    "normaliser_heatmap": lambda: figures.normaliser_heatmap(
        _summary(3), "width", metric="accuracy", title="by width"
    ),
    "entropy_curves": lambda: figures.entropy_curves(_gates()),
    "gate_heatmaps": lambda: figures.gate_heatmaps(_gates()),
    "severity_curves": lambda: figures.severity_curves(_severities()),
    "interval_bars": lambda: figures.interval_bars(
        pd.DataFrame(
            {"normaliser": ["none", "layernorm"], "mean": [0.1, 0.2], "ci95": [0.01, 0]}
        ),
        references={"paper": 0.15},
    ),
    "corruption_gallery": lambda: figures.corruption_gallery(torch.rand(3, 16, 16)),
    "plot_update_sizes": lambda: figures.plot_update_sizes(3.0, 0.05, 2),
    "plot_update_size_curves": lambda: figures.plot_update_size_curves(
        [1.0, 3.0], 0.01, [1, 4, 16]
    ),
    "plot_kernels": lambda: figures.plot_kernels(
        {"none": torch.eye(3), "affine_like": torch.eye(3), "norm_like": torch.eye(3)}
    ),
    "plot_ratio_bars": lambda: figures.plot_ratio_bars(
        {o: {"none": 3.0, "affine_like": 1.0} for o in ("SGD", "momentum", "Adam")},
        ylabel="r",
    ),
    "plot_least_squares": lambda: figures.plot_least_squares(_least_squares()),
    "forest": lambda: figures.forest(_outcomes(30)),
    "forest, nothing judged": lambda: figures.forest([]),
    # Part II (chapters 10-15)
    "relaxed_histograms": lambda: figures.relaxed_histograms(
        {t: np.linspace(0, 1, 200) ** t for t in (0.1, 0.5, 1.0, 2.0, 5.0)},
        "relaxed samples",
    ),
    "gradient_against_tau": lambda: figures.gradient_against_tau(
        pd.DataFrame(
            {"tau": [0.1, 0.5, 2.0], "variance (trace)": [5, 1, 0.2], "mean grad": 0.2}
        ),
        0.21,
        [4.5, 0.9, 0.22],
    ),
    "telemetry_entropy": lambda: figures.telemetry_entropy(
        _study_gates().query("arm == 'autonorm' and seed == 0 and data == 'mnist'"),
        2,
        0.1,
        "one run",
    ),
    "example_images": lambda: figures.example_images(
        {"8×8 digits": torch.rand(8, 1, 8, 8), "restyled": torch.rand(8, 1, 8, 8)}
    ),
    "entropy_figure": lambda: figures.entropy_figure(
        _study_gates().query("arm == 'autonorm'"), "learned gate, cpu set"
    ),
    "freeze_figure": lambda: figures.freeze_figure(_study_gates(), 2),
    "sweep_figure": lambda: figures.sweep_figure(_sweep()),
    "tau_figure": lambda: figures.tau_figure(*_tau_inputs()),
    "mechanism_figure": lambda: figures.mechanism_figure(
        _mechanism(), budgets={3: "279 steps", 8: "744 steps"}
    ),
    "draw_arms, beside": lambda: (
        figures.beside(
            "gate_bottleneck",
            results.largest("gate_bottleneck").results,
            figures.draw_arms,
            title="test accuracy per arm",
        ).figure
    ),
    "gate_heatmaps, three tasks": lambda: figures.gate_heatmaps(
        pd.concat([_gates(), _gates().assign(data="fashion_mnist")]), title="three"
    ),
    "mix_figure": lambda: _mix_figure(),
    "rule_figure": lambda: _rule_figure(),
    "draw_beside": lambda: figures.draw_beside(
        _summary(1),
        "live run: quick profile, stand-in data (digits), 3 seeds, 36 runs, "
        "a CPU with a long model name that wraps onto a second line",
        _draw,
        saved=_summary(1),
        saved_label="saved set: cpu profile, stand-in data (digits), 5 seeds, 60 runs",
        title="live above saved",
    ),
}


def _png_width(figure: Figure) -> int:
    """The width of the PNG the inline backend shows (IPython saves with a tight box)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return Image.open(io.BytesIO(buffer.getvalue())).size[0]


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_each_figure_fits_the_column_with_legible_text(name: str) -> None:
    before = plt.get_fignums()
    figure = FIGURES[name]()
    assert isinstance(figure, Figure) and plt.get_fignums() == before
    assert figure.get_dpi() == figures.DPI
    width = _png_width(figure)
    # the tight box may reach a few pixels past the figure for a label at its edge
    assert width <= figures.COLUMN_PX * 1.05, f"{name}: {width} px wide"
    shown = min(1.0, figures.COLUMN_PX / width)
    texts = [
        t
        for t in figure.findobj(Text)
        if t.get_visible()
        and t.get_text().strip()
        and t.get_figure(root=True) is figure  # a subfigure's text too
    ]
    smallest = min(t.get_fontsize() for t in texts) * figure.dpi / 72 * shown
    assert smallest >= MIN_TEXT_PX, f"{name}: smallest text {smallest:.1f} px"


def test_a_row_too_wide_for_the_column_wraps_and_keeps_its_indexing() -> None:
    with figures.style():
        figure, axes = figures.new_figure(ncols=5, size=(4.0, 3.0))
    assert axes.shape == (1, 5) and len(figure.axes) == 5  # the sixth slot is removed
    assert figure.get_figwidth() <= figures.COLUMN_INCHES + 1e-9
    boxes = [ax.get_subplotspec() for ax in axes[0]]
    assert [(b.rowspan.start, b.colspan.start) for b in boxes] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (2, 0),
    ]
    with figures.style():
        narrow, two = figures.new_figure(ncols=2, size=(5.0, 3.6))
        fits, _ = figures.new_figure(ncols=1, size=(5.0, 3.6))
    assert two.shape == (1, 2) and narrow.get_figwidth() == pytest.approx(
        figures.COLUMN_INCHES
    )
    assert tuple(fits.get_size_inches()) == (5.0, 3.6)  # already fits: unchanged
    with pytest.raises(ValueError, match="ncols and nrows"):
        figures.new_figure(ncols=0)


def test_beside_stacks_the_saved_set_below_the_live_run() -> None:
    figure = FIGURES["draw_beside"]()
    live, saved = figure.axes
    assert live.get_title().startswith("live run") and "\n" in live.get_title()
    assert saved.get_title().startswith("saved set")
    assert live.get_position().y0 > saved.get_position().y1  # one above the other
    alone = figures.draw_beside(
        _summary(1), "live run", _draw, missing="no saved set yet"
    )
    assert len(alone.axes) == 1 and "no saved set" in alone.get_supxlabel()


MODULES = [
    m.name
    for m in pkgutil.iter_modules(figures.__path__, "normlab.figures.")
    if not m.name.endswith("__init__")
]


@pytest.mark.parametrize("name", ["normlab.figures", *MODULES])
def test_no_pyplot_inside(name: str) -> None:
    tree = ast.parse(inspect.getsource(importlib.import_module(name)))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert not any("pyplot" in name for name in imported)


def test_the_forest_keeps_most_of_the_width_for_the_plot() -> None:
    figure = figures.forest(_outcomes(30))
    figure.canvas.draw()
    ax = figure.axes[0]
    assert len(ax.get_yticklabels()) == 30 and ax.get_position().width > 0.5
    colours = {line.get_color() for line in ax.lines if len(line.get_xdata())}
    assert set(VERDICT_COLOURS.values()) <= colours
