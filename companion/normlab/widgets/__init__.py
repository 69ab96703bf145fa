"""Chapter 10's gate-collapse widget: sliders over a grid of precomputed runs.

Training even a tiny AutoNorm ViT takes seconds, too slow to follow a slider. So the
``gate_widget`` experiment trains one run per point of a small grid, and the widget only
looks runs up and draws them.

- :mod:`~normlab.widgets.runs`: :class:`GateRuns`, the runs, indexed by their settings
  (:class:`GateSetting`); :meth:`GateRuns.select` applies a freezing rule;
  :func:`collapse_setting`, where the grid's gates collapse, and :func:`opening_setting`,
  where the widget opens.
- :mod:`~normlab.widgets.live`: :func:`draw_gates`, one setting as a figure (entropy per
  layer over training, the freeze marked; the final gate weight per layer; validation
  accuracy over training), and :class:`GateWidget`, ipywidgets controls wired to it.
- :mod:`~normlab.widgets.twin`: :func:`static_twin`, the same controls and views as a
  Vega-Lite chart that needs no kernel, for readers of the HTML book (:func:`twin_tables`:
  the runs it inlines).
"""

from __future__ import annotations

from .live import GateWidget, draw_gates
from .runs import (
    WIDGET_EXPERIMENT,
    GateRuns,
    GateSetting,
    Shown,
    collapse_setting,
    opening_setting,
)
from .twin import static_twin, twin_tables

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
