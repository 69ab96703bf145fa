"""Models that take a ``norm_layer`` factory, so any normaliser drops in."""
from __future__ import annotations
