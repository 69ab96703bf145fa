"""normlab: the companion package to the book on normalisation in neural networks.

Submodules (imported on first use, so ``import normlab`` stays light):

- ``normlab.layers``: normalisers and corrected layers (Part I and Part II).
- ``normlab.functional``: the layers' functional forms, as ``torch.nn.functional``.
- ``normlab.symbolic``: SymPy derivations of the affine divergence.
- ``normlab.divergence``: numerical measurement of effective activation updates.
- ``normlab.data``: real datasets and offline stand-ins.
- ``normlab.models``: MLPs and Transformer backbones taking a ``norm_layer``.
- ``normlab.training``: the one training loop (``fit``, ``FitConfig``, ``evaluate``).
- ``normlab.population``: K seeds of one configuration trained as one batched model
  (``fit_population``, beside ``fit``).
- ``normlab.checkpoint``: atomic, exactly resumable checkpoints of a ``fit``.
- ``normlab.callbacks``: the callback protocol of the training loop.
- ``normlab.experiments``: declared experiment grids and their runner.
- ``normlab.gates``: AutoNorm gate telemetry and the AutoNorm-S schedule.
- ``normlab.figures``: the book's figures, the only module that draws.
- ``normlab.normalisers``: the one registry of normaliser names, labels, colours and layers.
- ``normlab.claims``: every claim of both papers, with its test and verdict rule.
- ``normlab.results``: saved result sets that ship with the book, and their checks.
- ``normlab.stats``: confidence intervals, paired differences, slopes and equivalence tests.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._runtime import PROFILES, VERSION, device, profile, seed_everything
from .display import show_source

__version__ = VERSION

_SUBMODULES = (
    "layers",
    "functional",
    "symbolic",
    "divergence",
    "data",
    "models",
    "training",
    "population",
    "checkpoint",
    "callbacks",
    "experiments",
    "gates",
    "figures",
    "normalisers",
    "claims",
    "results",
    "stats",
)

__all__ = [
    "PROFILES",
    "device",
    "profile",
    "seed_everything",
    "show_source",
    *_SUBMODULES,
]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'normlab' has no attribute {name!r}")
