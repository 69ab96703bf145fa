"""Datasets: the papers' real datasets and the offline stand-ins of the quick profile.

Every loader returns a :class:`DataSplit`. ``load(name, split)`` loads one dataset by name;
``for_profile(task, profile)`` picks the real dataset or its stand-in.
"""
from __future__ import annotations

from .types import IGNORE_INDEX, PAD_ID, TASKS, DataSplit
from .registry import SPLITS, load, names

__all__ = ["DataSplit", "IGNORE_INDEX", "PAD_ID", "SPLITS", "TASKS", "load", "names"]
