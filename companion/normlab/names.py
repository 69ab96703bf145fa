"""What the book calls things: one mapping from the package's keys to reader-facing names.

Tables (:func:`normlab.display.table`) and figures (:func:`normlab.figures.label`) show a key
through :func:`display_name`, so a reader sees "FrozenLN", "Random Selector" and
"restyled 8×8 digits" where the runs record ``frozen_ln``, ``autonorm_random`` and
``mnist_restyled``:

- a registered normaliser: its label (:func:`normlab.normalisers.label`);
- a gate-study arm (``normlab.experiments.gate_study``): :data:`ARMS`, and
  ``freeze_at_<T>`` is "gate frozen at epoch T";
- a dataset (a task of :data:`normlab.data.REAL`, or one restyled): the title of the
  dataset that serves it in the profile (:func:`normlab.data.served_by`): in the
  offline profiles the stand-in ("8×8 digits"), on a GPU the dataset itself ("MNIST");
- a gate's layer path (``encoder.blocks.0.norm1``): "block 1, norm 1"; the encoder's last
  norm is "final norm";
- in a named column (:data:`VALUES`), the values of that column (an initialisation, a
  readout).

Anything else is returned unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from .data.sources import data_label

__all__ = ["ARMS", "VALUES", "data_label", "display_name", "layer_name"]

#: Gate-study arms that are not registered normalisers, by their reader-facing names.
ARMS: dict[str, str] = {
    "autonorm_hard": "AutoNorm, hard gate",
    "autonorm_exact": "AutoNorm, exact gradient",
    "autonorm_s_sample": "AutoNorm-S, freeze keeps sampling",
    "autonorm_fixed": "fixed 50/50 mix",
    "dyt_alpha_0.1": "DyT, alpha 0.1",
    "autonorm_s_ready": "AutoNorm-S, decided after warm-up",
}
_FREEZE_PREFIX = "freeze_at_"  # normlab.gates.FREEZE_PREFIX
_SAMPLE_PREFIX = "sample_at_"  # normlab.gates.SAMPLE_PREFIX
#: Values of a named column, by column: what a reader sees for each.
VALUES: dict[str, dict[str, str]] = {
    "init": {
        "torch_default": "torch's default",
        "default": "torch's default",
        "xavier_normal": "Xavier-normal",
        "trunc_normal_0.02": "truncated normal, std 0.02",
    },
    "optimizer": {"sgd": "SGD", "adam": "Adam"},
    "readout": {"cls": "class token", "mean": "mean of the tokens"},
}
_LAYER = re.compile(r"^(?:encoder\.)?blocks\.(\d+)\.norm(\d+)$")
_FINAL = {"encoder.norm"}


def layer_name(path: str) -> str:
    """A gate's layer as a reader reads it: ``encoder.blocks.0.norm1`` -> "block 1, norm 1",
    ``encoder.norm`` -> "final norm"; any other path unchanged."""
    found = _LAYER.match(path)
    if found:
        return f"block {int(found.group(1)) + 1}, norm {found.group(2)}"
    return "final norm" if path in _FINAL else path


def _dataset(key: str, profile: str | None, source: str | None = None) -> str | None:
    from .data import REAL
    from .data.sources import RESTYLED, TITLES, served_by, title

    base = key.removesuffix(RESTYLED)
    if base in REAL:
        try:
            return title(served_by(key, profile, source)).removeprefix("a ")
        except ValueError:
            # no offline stand-in: a GPU profile's table, on the real data
            return title(key).removeprefix("a ")
    if base in TITLES:
        return title(key).removeprefix("a ")
    return None


def display_name(
    key: Any,
    column: str | None = None,
    profile: str | None = None,
    source: str | None = None,
) -> Any:
    """The reader-facing name of ``key`` (see the module's list); ``column`` names the
    column it comes from (for :data:`VALUES`), ``profile`` the profile whose data a dataset
    key names (None: the active one) and ``source`` the dataset a grid chose to serve it
    (its ``source`` setting; None: the profile's). A key that names nothing is returned
    unchanged."""
    if not isinstance(key, str):
        return key
    if column in VALUES and key in VALUES[column]:
        return VALUES[column][key]
    from . import normalisers

    if key in normalisers.NORMALISERS:
        return normalisers.label(key)
    if key in ARMS:
        return ARMS[key]
    if key.startswith(_FREEZE_PREFIX) and key.removeprefix(_FREEZE_PREFIX).isdigit():
        return f"gate frozen at epoch {key.removeprefix(_FREEZE_PREFIX)}"
    if key.startswith(_SAMPLE_PREFIX) and key.removeprefix(_SAMPLE_PREFIX).isdigit():
        return f"gate stops learning at epoch {key.removeprefix(_SAMPLE_PREFIX)}, samples on"
    if column in (None, "data", "task"):
        dataset = _dataset(key, profile, source)
        if dataset is not None:
            return dataset
    return layer_name(key)
