"""The book's figures, in one style sized to the text column; each returns a ``Figure``.

- :mod:`~normlab.figures.column`: the style, the registered colours and display names, and
  :func:`new_figure`, which keeps every figure to the width of the text column;
- :mod:`~normlab.figures.curves`: a metric per epoch, or against a swept variable;
- :mod:`~normlab.figures.heatmaps`: annotated tables of numbers;
- :mod:`~normlab.figures.intervals`: means with their 95 % intervals, per row or normaliser;
- :mod:`~normlab.figures.gates`: AutoNorm's gates during training;
- :mod:`~normlab.figures.gate_entropy`: the gate studies' entropy per layer, static, as a
  chart with controls, or live;
- :mod:`~normlab.figures.gumbel`: chapter 10's Gumbel-Softmax samples, gradient and one
  run's gate entropy;
- :mod:`~normlab.figures.gate_study`: the gate studies' example images, arms, AutoNorm-S's
  rule sweep, the bottleneck's mechanism sweep and the gradient against tau;
- :mod:`~normlab.figures.part1`: Part I's results against a swept variable, on an axis;
- :mod:`~normlab.figures.batch`: chapter 7's steps to a target against the batch size;
- :mod:`~normlab.figures.reports`: the figures ``python -m normlab report`` writes;
- :mod:`~normlab.figures.robustness`: accuracy under corruption;
- :mod:`~normlab.figures.theory`: the Part I theory chapters' measurements;
- :mod:`~normlab.figures.live_and_saved`: a live run above a saved set;
- :mod:`~normlab.figures.effects`: the scorecard's effects with their intervals and
  margins, one panel per unit.

Figures are built without pyplot, so nothing here calls ``plt.show`` or leaves a figure
open; a figure returned as a cell's last expression is shown once.
"""

from __future__ import annotations

from .batch import draw_kernel, draw_steps, fixed_epochs_figure, scaling_figure
from .column import (
    COLUMN_INCHES,
    COLUMN_PX,
    DPI,
    MIN_FONT_PT,
    STYLE,
    colours,
    finish,
    label,
    new_figure,
    style,
)
from .curves import metric_vs, training_curves
from .effects import forest, forest_by_unit, regime_forest
from .gate_entropy import (
    entropy_explorer,
    entropy_figure,
    entropy_twin,
    freeze_figure,
    task_title,
)
from .gate_study import (
    draw_arms,
    example_images,
    mechanism_figure,
    mix_figure,
    rule_figure,
    sweep_figure,
    tau_figure,
)
from .gates import entropy_curves, gate_heatmaps
from .gumbel import gradient_against_tau, relaxed_histograms, telemetry_entropy
from .heatmaps import heatmap, normaliser_heatmap
from .intervals import draw_by_normaliser, interval_bars
from .live_and_saved import Beside, beside, draw_beside
from .part1 import (
    correction_leads,
    draw_band,
    draw_batch_curves,
    draw_coupling,
    draw_lr_sensitivity,
    lead_figure,
)
from .reports import report_figures
from .robustness import corruption_gallery, severity_curves
from .theory import (
    LAYER_KINDS,
    make_layer,
    plot_kernels,
    plot_least_squares,
    plot_ratio_bars,
    plot_ratio_scatter,
    plot_update_size_curves,
    plot_update_sizes,
    update_sizes,
)

__all__ = [
    "COLUMN_INCHES",
    "COLUMN_PX",
    "DPI",
    "LAYER_KINDS",
    "MIN_FONT_PT",
    "STYLE",
    "Beside",
    "beside",
    "draw_beside",
    "colours",
    "correction_leads",
    "corruption_gallery",
    "draw_arms",
    "draw_band",
    "draw_batch_curves",
    "draw_by_normaliser",
    "draw_coupling",
    "draw_kernel",
    "draw_lr_sensitivity",
    "draw_steps",
    "entropy_curves",
    "entropy_explorer",
    "entropy_figure",
    "entropy_twin",
    "example_images",
    "mechanism_figure",
    "finish",
    "fixed_epochs_figure",
    "forest",
    "forest_by_unit",
    "regime_forest",
    "freeze_figure",
    "gate_heatmaps",
    "gradient_against_tau",
    "heatmap",
    "interval_bars",
    "label",
    "lead_figure",
    "make_layer",
    "metric_vs",
    "new_figure",
    "normaliser_heatmap",
    "plot_kernels",
    "plot_ratio_bars",
    "plot_least_squares",
    "plot_ratio_scatter",
    "plot_update_size_curves",
    "plot_update_sizes",
    "relaxed_histograms",
    "report_figures",
    "scaling_figure",
    "severity_curves",
    "style",
    "mix_figure",
    "rule_figure",
    "sweep_figure",
    "task_title",
    "tau_figure",
    "telemetry_entropy",
    "training_curves",
    "update_sizes",
]
