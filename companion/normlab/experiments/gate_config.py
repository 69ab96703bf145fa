"""A gate-study run's configuration (:mod:`.gate_runs`): one frozen dataclass from grid to loop.

A grid (:mod:`.gate_grids`) writes each run's configuration as a plain dict, which the
runner hashes into the run's id and stores as the record's ``config``; neither changes.
:meth:`GateConfig.from_config` builds the run's :class:`GateConfig` from that dict once,
refusing an unknown or a missing key, and the loop reads its typed fields from then on.
What the run's *arm* makes of it (the normaliser in every slot, the gate's freeze, its
samples, its gradient) is :class:`ArmSettings`, resolved by :func:`arm_settings`::

    config = GateConfig.from_config(grid_config)
    settings = arm_settings(config)  # settings.config is config
    model = gate_vit(train, settings)

:meth:`GateConfig.as_config` gives the grid's dict back, key for key, so the run id of a
config built in code is the one its grid would give it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..gates import FREEZE_PREFIX, READY_ARM, READY_LEAD, SAMPLE_PREFIX
from .part2 import adamw_recipe

__all__ = ["ARMS", "GateConfig", "ArmSettings", "arm_settings"]

# arm -> (normaliser, the ArmSettings it sets besides); freeze_at_<T> and sample_at_<T>
# are read from the arm's name (arm_settings)
ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    "frozen_ln": ("frozen_ln", {}),
    "autonorm_random": ("autonorm_random", {}),
    "autonorm": ("autonorm", {}),
    "autonorm_hard": ("autonorm", {"hard": True}),
    "autonorm_exact": ("autonorm", {"gate_grad": "exact"}),
    "dyt": ("dyt", {}),
    "autonorm_fixed": ("autonorm", {"selector": "fixed"}),
    READY_ARM: ("autonorm", {"ready_lead": READY_LEAD}),
}

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
            continue  # not a plain value (ArmSettings.config)
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
    # what fills the normalisation slots: an arm of ARMS (or freeze_at_<T>, sample_at_<T>),
    # or a normaliser by name with the gate's settings given directly (gate_widget); each
    # of these is the ArmSettings field of its name, which says what it does
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


@dataclass(frozen=True)
class ArmSettings:
    """A run's arm resolved (:func:`arm_settings`): what fills its normalisation slots and
    what its gates do, every setting given a value."""

    config: GateConfig  # the run's own settings: its backbone, recipe, tau and rates
    normaliser: str  # in every slot, by its name in normlab.normalisers
    hard: bool = False  # straight-through (hard) gate samples
    # freeze every gate at the end of this epoch: AutoNorm-S at eps_h = 0 under the
    # paper's rule, which always fires (AutoNormS); 0: never
    freeze_at: int = 0
    # stop the gates learning at the end of this epoch but keep them sampling
    # (StopSelector); 0: never
    stop_at: int = 0
    # the gates' gradient: the Gumbel-Softmax sample's ("gumbel"), or the exact gradient
    # of the expected loss ("exact", ExactGateGrad)
    gate_grad: str = "gumbel"
    # AutoNorm's selector; "fixed": the candidates mixed 50/50, no gate; None: learned
    selector: str | None = None
    # autonorm_s_ready: decide once validation accuracy has left chance by this much
    # (ReadyAutoNormS); None: no such decision
    ready_lead: float | None = None

    def __post_init__(self) -> None:
        _check_fields(self)
        if not isinstance(self.config, GateConfig):
            raise TypeError(
                f"ArmSettings.config must be a GateConfig, got {type(self.config).__name__}"
            )
        for key in ("freeze_at", "stop_at"):
            if getattr(self, key) and self.normaliser != "autonorm":
                raise ValueError(
                    f"{key} needs the learned gate (normaliser 'autonorm'), got {self.normaliser!r}"
                )
        if self.gate_grad not in ("gumbel", "exact"):
            raise ValueError(
                f"gate_grad={self.gate_grad!r}; expected 'gumbel' or 'exact'"
            )

    @property
    def ready_after(self) -> int:
        """The first epoch at which ``autonorm_s_ready`` may decide: the end of warm-up."""
        return max(1, math.ceil(self.config.warmup * self.config.epochs))


# what an arm sets, or a config without one gives directly
_ARM_FIELDS = tuple(
    f.name for f in dataclasses.fields(ArmSettings) if f.name != "config"
)


def _arm_sets(arm: str) -> dict[str, Any]:
    """The :class:`ArmSettings` fields that ``arm`` sets."""
    for prefix, key in ((FREEZE_PREFIX, "freeze_at"), (SAMPLE_PREFIX, "stop_at")):
        if arm.startswith(prefix) and arm[len(prefix) :].isdigit():
            return {"normaliser": "autonorm", key: int(arm[len(prefix) :])}
    if arm in ARMS:
        normaliser, overrides = ARMS[arm]
        return {"normaliser": normaliser, **overrides}
    raise ValueError(
        f"arm={arm!r} is not known; expected one of {', '.join(ARMS)}, "
        f"{FREEZE_PREFIX}<epoch> or {SAMPLE_PREFIX}<epoch>"
    )


def arm_settings(config: GateConfig) -> ArmSettings:
    """The run's normaliser and gate settings: ``config``'s ``arm`` (if any) applied.

    Without an arm, the config's ``normaliser`` and gate settings (``hard``,
    ``freeze_at``, ...: the fields of :class:`ArmSettings`) say it; an arm sets the
    normaliser itself, and a config that also gives a setting its arm sets is refused.
    The rest default as :class:`ArmSettings` says (soft samples, no freeze).
    """
    if not isinstance(config, GateConfig):
        raise TypeError(
            f"arm_settings takes a GateConfig, got {type(config).__name__}; "
            "GateConfig.from_config(config) builds one from a grid's dict"
        )
    given = {
        key: getattr(config, key)
        for key in _ARM_FIELDS
        if getattr(config, key) is not None
    }
    if config.arm is None:
        if "normaliser" not in given:
            raise ValueError("a gate-study config needs an 'arm' or a 'normaliser'")
        return ArmSettings(config, **given)
    sets = _arm_sets(config.arm)
    both = [key for key in given if key in sets]
    if both:
        raise ValueError(
            f"arm={config.arm!r} sets {', '.join(both)}; the config also gives "
            + ", ".join(f"{key}={given[key]!r}" for key in both)
        )
    return ArmSettings(config, **{**given, **sets})
