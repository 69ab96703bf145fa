"""Datasets: the papers' real datasets and the offline stand-ins of the quick profile.

Every loader returns a :class:`DataSplit`. ``load(name, split)`` loads one dataset by name;
``for_profile(task, profile)`` picks the real dataset or its stand-in; ``corrupt`` applies
the CIFAR-10-C corruptions to any image batch; ``load_cifar10_c`` loads one CIFAR-10-C
condition.
"""
from __future__ import annotations

from ._download import ChecksumError, OfflineError, cache_root
from .corruptions import CORRUPTIONS, corrupt
from .registry import REAL, SPLITS, for_profile, load, names
from .types import IGNORE_INDEX, PAD_ID, TASKS, DataSplit
from .vision import CIFAR10_C_CORRUPTIONS, load_cifar10_c

__all__ = [
    "CIFAR10_C_CORRUPTIONS", "CORRUPTIONS", "ChecksumError", "DataSplit", "IGNORE_INDEX", "OfflineError",
    "PAD_ID", "REAL", "SPLITS", "TASKS", "cache_root", "corrupt", "for_profile", "load", "load_cifar10_c", "names",
]
