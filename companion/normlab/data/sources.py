"""Which datasets load for a task in a profile: the one table every experiment reads.

A *task* is one of the papers' datasets (:data:`normlab.data.REAL`). In the offline
profiles (``quick``, ``cpu``) it is served by its stand-in; in ``standard`` and ``paper``
by the real dataset. :data:`SOURCES` maps every ``(task, profile)`` pair that loads to the
:class:`Source` it loads, and :func:`for_profile` loads it. CIFAR-10, CIFAR-100, SVHN and
CIFAR-10-C have no offline stand-in (no offline dataset trains like them at CPU scale;
:data:`STAND_INS` says what the chapters read instead): they load in the GPU profiles only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._checks import one_of
from .._runtime import PROFILES, check_profile
from .registry import REAL, load
from .types import DataSplit

__all__ = [
    "OFFLINE_PROFILES",
    "Source",
    "CHOICES",
    "SOURCES",
    "TITLES",
    "RESTYLED",
    "StandIn",
    "STAND_INS",
    "title",
    "served_by",
    "source",
    "for_profile",
    "data_label",
]

# Profiles that run on a CPU without a network, on the offline stand-ins.
OFFLINE_PROFILES: tuple[str, ...] = ("quick", "cpu")


@dataclass(frozen=True)
class Source:
    """The datasets behind one task in one profile: ``fit`` for the train and val splits,
    ``test`` for the test split (different only for the corrupted test sets)."""

    fit: str
    test: str


_STANDINS: dict[str, Source] = {
    "mnist": Source("digits", "digits"),
    "fashion_mnist": Source("shapes_stationary", "shapes_stationary"),
    "ptb_pos": Source("pos_grammar", "pos_grammar"),
    "sst2": Source("sentiment_grammar", "sentiment_grammar"),
    "energy_efficiency": Source("diabetes", "diabetes"),
    "california_housing": Source("diabetes", "diabetes"),
}
# CIFAR-10-C is a test set only: train and validate on clean CIFAR-10.
_REAL: dict[str, Source] = {
    task: Source("cifar10" if task == "cifar10_c" else task, task) for task in REAL
}

# The offline datasets a grid may name instead of a task's default stand-in (its ``source``
# setting): MNIST's default is the 8x8 toy, which the Part II sets were made on; Part I's
# sets name the real 5,000-digit sample, their primary data.
CHOICES: dict[str, tuple[str, ...]] = {
    "mnist": ("digits", "mnist_5k"),
    # chapter 14: a generated regression whose test split holds 1,000 rows
    "energy_efficiency": ("diabetes", "friedman"),
    "california_housing": ("diabetes", "friedman"),
}

SOURCES: dict[tuple[str, str], Source] = {
    (task, profile): (_STANDINS if profile in OFFLINE_PROFILES else _REAL)[task]
    for task in REAL
    for profile in PROFILES
    if profile not in OFFLINE_PROFILES or task in _STANDINS
}


# What each dataset is called in prose, tables and figures.
TITLES: dict[str, str] = {
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "svhn": "SVHN",
    "cifar10_c": "CIFAR-10-C",
    "ptb_pos": "PTB POS tagging",
    "sst2": "SST-2",
    "energy_efficiency": "Energy efficiency",
    "california_housing": "California housing",
    "digits": "8×8 digits",
    "mnist_5k": "real MNIST, 5,000 digits",
    "shapes_stationary": "synthetic shapes in one style",
    "pos_grammar": "a synthetic tagging grammar",
    "sentiment_grammar": "a synthetic sentiment grammar",
    "diabetes": "scikit-learn's diabetes regression",
    "friedman": "Friedman's generated regression, 5,000 rows",
}
RESTYLED = "_restyled"  # a task whose every image is redrawn in its own style


@dataclass(frozen=True)
class StandIn:
    """What serves one of the papers' vision datasets on the CPU.

    ``task`` is the gate grids' ``data`` value, ``source`` their ``source`` value (the
    offline dataset loaded), ``dataset`` the name :func:`served_by` gives the result (with
    ``_restyled`` where every image is restyled), ``keeps`` the property of the paper's
    dataset the stand-in keeps, the one its claims are about. ``task`` None: no stand-in
    of the gate studies trains at CPU scale, and ``keeps`` says what, if anything, the
    other chapters read instead."""

    task: str | None
    source: str | None
    dataset: str | None
    keeps: str


#: The one table of what serves each of the papers' vision datasets on the CPU: the gate
#: studies' (chapters 11 and 12, claims N1-N3, N5, N13, N14) stand-ins, each kept because it
#: trains at CPU scale (FrozenLN between chance + 0.1 and 0.97 in 8 epochs; the saved set
#: gate_bottleneck/cpu holds the numbers), and None where no offline dataset does (the
#: generated colour shapes, once the stand-in for CIFAR-10/100, SVHN and CIFAR-10-C, stayed
#: at 0.10-0.18 accuracy at CPU scale and were removed).
STAND_INS: dict[str, StandIn] = {
    "mnist": StandIn(
        "mnist",
        "mnist_5k",
        "mnist_5k",
        "real handwritten digits in one grey style: a stationary task",
    ),
    "cifar10": StandIn(
        "mnist_restyled",
        "digits",
        f"digits{RESTYLED}",
        "every image in its own contrast, brightness, polarity and noise, so the inputs' "
        "statistics vary from sample to sample: a diverse, non-stationary task",
    ),
    "fashion_mnist": StandIn(
        None, None, None, "none on the CPU (the grey shapes are a different task)"
    ),
    "cifar100": StandIn(
        None, None, None, "none on the CPU (generated colour shapes stayed near chance)"
    ),
    "svhn": StandIn(
        None, None, None, "none on the CPU (generated colour shapes stayed near chance)"
    ),
    "cifar10_c": StandIn(
        None,
        None,
        None,
        "none of the gate studies'; chapter 15 corrupts real MNIST's 5,000 digits "
        "(mnist_5k) with normlab.data.corrupt's 10 corruptions x 5 severities instead",
    ),
}


def title(name: str) -> str:
    """The prose name of a dataset (``digits`` -> "8×8 digits"); a restyled task says so."""
    base = name.removesuffix(RESTYLED)
    one_of("name", base, tuple(TITLES))
    return ("restyled " if name.endswith(RESTYLED) else "") + TITLES[base]


def served_by(
    task: str,
    profile: str | None = None,
    chosen: str | Mapping[str, str] | None = None,
) -> str:
    """The dataset that served ``task`` (a real task, or one restyled) in ``profile``,
    ``chosen`` being the grid's ``source`` setting where it has one (a mapping: the source
    per task, for a set whose tasks chose different ones)."""
    if isinstance(chosen, Mapping):
        chosen = chosen.get(task)
    base = task.removesuffix(RESTYLED)
    if base not in REAL:
        return task
    return source(base, profile, chosen).fit + (
        RESTYLED if task.endswith(RESTYLED) else ""
    )


def source(task: str, profile: str | None = None, chosen: str | None = None) -> Source:
    """The :class:`Source` of ``task`` in ``profile`` (None: the active profile); ``chosen``
    names one of the task's :data:`CHOICES` instead of the default, in an offline profile.
    A task without an offline stand-in (:data:`STAND_INS`) raises a ValueError offline."""
    one_of("task", task, REAL)
    profile = check_profile(profile)
    if (task, profile) not in SOURCES:
        found = STAND_INS.get(task)
        why = (
            "none on the CPU"
            if found is None
            else found.keeps
            if found.task is None
            else f"the gate studies read task {found.task!r} with source "
            f"{found.source!r} instead"
        )
        raise ValueError(
            f"task={task!r} has no offline stand-in in profile {profile!r} ({why}; "
            f"normlab.data.sources.STAND_INS): run it in the standard or paper profile"
        )
    if chosen is None:
        return SOURCES[task, profile]
    if profile not in OFFLINE_PROFILES:
        raise ValueError(
            f"source={chosen!r} names an offline dataset; profile {profile!r} loads {task}"
        )
    one_of("source", chosen, CHOICES.get(task, (SOURCES[task, profile].fit,)))
    return Source(chosen, chosen)


def for_profile(
    task: str,
    profile: str | None = None,
    *,
    root: str | Path | None = None,
    chosen: str | None = None,
) -> dict[str, DataSplit]:
    """The ``train``, ``val`` and ``test`` splits for ``task`` in ``profile``.

    ``profile`` None means the active one (:func:`normlab.profile`). ``standard`` and
    ``paper`` load the real dataset (downloading it if needed); ``quick`` and ``cpu`` load
    its offline stand-in, so notebooks never branch on the network themselves:

    ====================  ============================  =====================================
    task                  quick and cpu stand-in        what it keeps
    ====================  ============================  =====================================
    mnist                 digits (or mnist_5k)          real grey digits, 10 classes
    fashion_mnist         shapes_stationary             grey, one fixed style, 10 classes
    ptb_pos               pos_grammar                   tagging that needs context
    sst2                  sentiment_grammar             labels that need negation, order
    energy_efficiency     diabetes                      small tabular regression
    california_housing    diabetes                      tabular regression
    ====================  ============================  =====================================

    ``cifar10``, ``cifar100``, ``svhn`` and ``cifar10_c`` have no offline stand-in (a
    ValueError names :data:`STAND_INS`); ``cifar10_c`` in the standard and paper profiles
    trains and validates on ``cifar10`` and tests on ``cifar10_c``. ``chosen`` picks one of the task's :data:`CHOICES` in an
    offline profile (``mnist_5k``: 5,000 real MNIST digits). Every returned split has
    ``meta["stand_in"]`` set.
    """
    found = source(task, profile, chosen)
    return {
        "train": load(found.fit, "train", root=root),
        "val": load(found.fit, "val", root=root),
        "test": load(found.test, "test", root=root),
    }


def data_label(results: Any) -> str:
    """The data behind a results table, as a reader reads it: the title of the dataset
    that served each task in the table's data profile (its ``source`` where the grid chose
    one), e.g. "real MNIST, 5,000 digits" or "8×8 digits, restyled 8×8 digits"."""
    columns = [c for c in ("data", "data_profile", "source") if c in results]
    if "data" not in columns:
        return "data not recorded"
    seen = results[columns].drop_duplicates().to_dict("records")
    return ", ".join(
        dict.fromkeys(
            title(
                served_by(
                    str(row["data"]),
                    row.get("data_profile"),
                    row.get("source") if isinstance(row.get("source"), str) else None,
                )
            )
            for row in seen
        )
    )
