"""Figures of the Part I theory chapters (kept for the chapters that import it): see
:mod:`normlab.figures.theory`."""

from __future__ import annotations

from .figures import theory
from .figures.theory import *  # noqa: F403

__all__ = list(theory.__all__)
