"""Argument validation shared by the whole package: one message style, one place.

Every check raises a ``ValueError`` (``TypeError`` for a wrong kind of object) whose message
names the argument, says what was expected and shows what was given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def positive_int(name: str, value: Any) -> int:
    """``value`` if it is an int >= 1 (bools rejected); a ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def non_negative_int(name: str, value: Any) -> int:
    """``value`` if it is an int >= 0 (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


MAX_SEED = 2**64 - 1  # torch's generators take seeds in [0, 2**64 - 1]


def seed(name: str, value: Any) -> int:
    """``value`` if it is an int in ``[0, MAX_SEED]`` (bools rejected)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 0 <= value <= MAX_SEED
    ):
        raise ValueError(f"{name} must be an int in [0, 2**64 - 1], got {value!r}")
    return value


def positive_number(name: str, value: Any) -> float:
    """``value`` as a float if it is a finite real number > 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def fraction(name: str, value: Any, *, closed_right: bool = False) -> float:
    """``value`` as a float in ``[0, 1)`` (``[0, 1]`` with ``closed_right``)."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
    )
    if not ok or value < 0 or (value > 1 if closed_right else value >= 1):
        raise ValueError(
            f"{name} must be a number in [0, 1{']' if closed_right else ')'}, got {value!r}"
        )
    return float(value)


def one_of(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices``; the message lists them."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(
            f"{name}={value!r} is not known; expected one of {', '.join(map(str, choices))}"
        )
    return value


def positive_ints(**values: Any) -> None:
    """:func:`positive_int` for each keyword: ``positive_ints(in_features=3, out_features=4)``."""
    for name, value in values.items():
        positive_int(name, value)
