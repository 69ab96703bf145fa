"""A gate-study run's configuration (:mod:`.gate_runs`): one frozen dataclass from grid to loop.

A grid (:mod:`.gate_grids`) writes each run's configuration as a plain dict, which the
runner hashes into the run's id and stores as the record's ``config``; neither changes.
:meth:`GateConfig.from_config` builds the run's :class:`GateConfig` from that dict once,
refusing an unknown or a missing key, and the loop reads its typed fields from then on.
:meth:`GateConfig.as_config` gives the grid's dict back, key for key, so the run id of a
config built in code is the one its grid would give it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .part2 import adamw_recipe

__all__ = ["GateConfig"]

# what an annotation's type name accepts (an int is a float too: JSON writes 1.0 as 1)
_ACCEPTS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
}


def _check_fields(obj: Any) -> None:
    """A TypeError naming the first field of dataclass ``obj`` whose value is not of its
    annotated type (``int``, ``float``, ``str`` or ``bool``, ``| None`` where optional)."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        kind, _, rest = str(f.type).partition(" | ")
        if kind not in _ACCEPTS:
            continue  # not a plain value
        optional = rest == "None"
        if value is None and optional:
            continue
        # bool is an int to Python; only a bool field takes True or False
        if isinstance(value, _ACCEPTS[kind]) and (
            kind == "bool" or not isinstance(value, bool)
        ):
            continue
        expected = f"{kind} or None" if optional else kind
        raise TypeError(
            f"{type(obj).__name__}.{f.name} must be {expected}, got {value!r} "
            f"({type(value).__name__})"
        )


@dataclass(frozen=True)
class GateConfig:
    """One gate-study run's configuration: every key its grid writes, typed.

    The fields without a default are in every grid's configs. Those that default to None
    are *absent* from a config unless given (None is never a value of theirs), so that
    :meth:`as_config` gives back exactly the dict :meth:`from_config` was built from.
    """

    # the task (normlab.experiments.gate_runs.TASKS) and the data profile serving it
    data: str
    data_profile: str
    # the ViT-Lite backbone (normlab.models.vit.vit_config)
    dim: int
    depth: int
    heads: int
    patch_size: int
    init: str
    readout: str
    # the optimisation recipe: AdamW, linear warm-up over the fraction `warmup` of all
    # steps, then cosine (normlab.experiments.part2.adamw_recipe)
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup: float
    label_smoothing: float
    seed: int
    # the gate: the Gumbel-Softmax temperature, and the selector's learning rate as a
    # multiple of the backbone's (SelectorLR; 1.0 adds no callback)
    tau: float
    selector_lr: float
    # the offline dataset serving `data` (normlab.data.sources.CHOICES); absent: its default
    source: str | None = None
    # what fills the normalisation slots: an arm of gate_runs.ARMS (or freeze_at_<T>,
    # sample_at_<T>), or a normaliser by name with the gate's settings given directly
    # (gate_widget), as gate_runs.arm_settings reads them
    arm: str | None = None
    normaliser: str | None = None
    hard: bool | None = None
    freeze_at: int | None = None
    stop_at: int | None = None
    gate_grad: str | None = None
    selector: str | None = None
    ready_lead: float | None = None
    # DyT's initial alpha, alone or in AutoNorm's mix (gate_mix); absent: the layer's default
    alpha_init: float | None = None
    # a real AutoNorm-S schedule, all three or none (chapter 12 checks compose_schedule
    # against one): its rule ("high" or "low"), decision epoch and entropy threshold
    rule: str | None = None
    t_freeze: int | None = None
    eps_h: float | None = None

    def __post_init__(self) -> None:
        _check_fields(self)
        schedule = {"rule": self.rule, "t_freeze": self.t_freeze, "eps_h": self.eps_h}
        given = [key for key, value in schedule.items() if value is not None]
        if given and len(given) < len(schedule):
            missing = [key for key in schedule if key not in given]
            raise ValueError(
                f"a real AutoNorm-S run needs rule, t_freeze and eps_h together; "
                f"the config gives {', '.join(given)} without {', '.join(missing)}"
            )

    @classmethod
    def keys(cls) -> tuple[list[str], list[str]]:
        """The keys a config must have, and those it may have."""
        fields = dataclasses.fields(cls)
        required = [f.name for f in fields if f.default is dataclasses.MISSING]
        return required, [f.name for f in fields if f.name not in required]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> GateConfig:
        """The run's :class:`GateConfig` from its grid's dict (or a record's ``config``).

        Raises ValueError naming any key that is not a setting of a gate run, a required
        one that is missing, or an optional one given as None (left out, it round-trips);
        TypeError naming a value of the wrong type.
        """
        if not isinstance(config, Mapping):
            raise TypeError(
                f"a gate run's config must be a mapping of its settings, got "
                f"{type(config).__name__}"
            )
        required, optional = cls.keys()
        unknown = [key for key in config if key not in (*required, *optional)]
        if unknown:
            raise ValueError(
                f"unknown gate-run setting(s) {', '.join(map(repr, unknown))}; a gate "
                f"config takes {', '.join(required)} and optionally {', '.join(optional)}"
            )
        missing = [key for key in required if key not in config]
        if missing:
            raise ValueError(
                f"missing gate-run setting(s) {', '.join(map(repr, missing))}; a gate "
                f"config must give every one of {', '.join(required)}"
            )
        empty = [key for key in optional if key in config and config[key] is None]
        if empty:
            raise ValueError(
                f"{', '.join(map(repr, empty))}: None; leave an optional gate-run "
                "setting out of the config rather than give it None"
            )
        return cls(**config)

    def as_config(self) -> dict[str, Any]:
        """The config dict this was built from: every field, those absent left out."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None
        }

    def recipe(self, task: str) -> dict[str, Any]:
        """The run's :func:`normlab.training.fit` settings for a ``task`` of its data
        (:func:`~normlab.experiments.part2.adamw_recipe`)."""
        return adamw_recipe(self.as_config(), task)
