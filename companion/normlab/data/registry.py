"""Name -> loader registry behind :func:`normlab.data.load`."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .types import DataSplit

SPLITS: tuple[str, ...] = ("train", "val", "test")

Loader = Callable[..., DataSplit]
_LOADERS: dict[str, Loader] = {}


def register(name: str) -> Callable[[Loader], Loader]:
    """Register ``fn(split, *, root, download) -> DataSplit`` under ``name``."""

    def wrap(fn: Loader) -> Loader:
        _LOADERS[name] = fn
        return fn

    return wrap


def names() -> list[str]:
    """Every dataset name that :func:`load` accepts."""
    from . import standins  # noqa: F401  (registers the stand-ins)

    return sorted(_LOADERS)


def load(name: str, split: str, *, root: str | Path | None = None, download: bool = True) -> DataSplit:
    """Load one split of one dataset as tensors plus metadata."""
    known = names()
    if name not in known:
        raise ValueError(f"name={name!r} is not a dataset; expected one of {', '.join(known)}")
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not a split; expected one of {', '.join(SPLITS)}")
    return _LOADERS[name](split, root=root, download=download)
