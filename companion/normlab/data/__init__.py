"""Datasets: the papers' real datasets and the offline stand-ins of the quick profile.

Every loader returns a :class:`DataSplit`. ``load(name, split)`` loads one dataset by name;
``SOURCES[task, profile]`` (or ``source(task, profile)``) says which datasets serve a task
in a profile, and ``for_profile(task, profile)`` loads them; ``corrupt`` applies the
CIFAR-10-C corruptions to any image batch; ``load_cifar10_c`` loads one CIFAR-10-C
condition.
"""

from __future__ import annotations

from ._common import SPLITS
from ._download import ChecksumError, OfflineError, cache_root
from .corruptions import CORRUPTIONS, corrupt
from .registry import REAL, load, names
from .sources import (
    OFFLINE_PROFILES,
    SOURCES,
    TITLES,
    Source,
    for_profile,
    served_by,
    source,
    title,
)
from .types import IGNORE_INDEX, PAD_ID, TASKS, DataSplit
from .vision import CIFAR10_C_CORRUPTIONS, load_cifar10_c

__all__ = [
    "CIFAR10_C_CORRUPTIONS",
    "CORRUPTIONS",
    "ChecksumError",
    "DataSplit",
    "IGNORE_INDEX",
    "OFFLINE_PROFILES",
    "OfflineError",
    "PAD_ID",
    "REAL",
    "SOURCES",
    "SPLITS",
    "Source",
    "TASKS",
    "TITLES",
    "cache_root",
    "corrupt",
    "for_profile",
    "load",
    "load_cifar10_c",
    "names",
    "served_by",
    "source",
    "title",
]
