"""The book's figures (kept for the chapters that import it): see :mod:`normlab.figures`."""

from __future__ import annotations

from .figures.column import (
    COLUMN_INCHES,
    MIN_FONT_PT,
    STYLE,
    colours,
    finish,
    label,
    new_figure,
    style,
)
from .figures.curves import metric_vs, training_curves
from .figures.heatmaps import heatmap, normaliser_heatmap
from .normalisers import PALETTE

__all__ = [
    "COLUMN_INCHES",
    "MIN_FONT_PT",
    "PALETTE",
    "STYLE",
    "colours",
    "finish",
    "heatmap",
    "label",
    "metric_vs",
    "new_figure",
    "normaliser_heatmap",
    "style",
    "training_curves",
]
