"""Figures of chapters 13-15 (kept for the chapters that import it): see
:mod:`normlab.figures`."""

from __future__ import annotations

from .figures.gates import entropy_curves, gate_heatmaps
from .figures.intervals import draw_by_normaliser, interval_bars
from .figures.robustness import corruption_gallery, severity_curves

__all__ = [
    "corruption_gallery",
    "draw_by_normaliser",
    "entropy_curves",
    "gate_heatmaps",
    "interval_bars",
    "severity_curves",
]
