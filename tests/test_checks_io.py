"""The shared validators and the atomic writer."""

from __future__ import annotations

import math

import pytest
from normlab import _checks, _io


@pytest.mark.parametrize("bad", [0, -1, 1.0, True, "3", None])
def test_positive_int_rejects_and_names_the_argument(bad: object) -> None:
    with pytest.raises(ValueError, match=r"^width must be a positive int, got"):
        _checks.positive_int("width", bad)


def test_positive_int_and_non_negative_int_accept() -> None:
    assert _checks.positive_int("n", 3) == 3
    assert _checks.non_negative_int("n", 0) == 0
    with pytest.raises(ValueError, match="depth must be a non-negative int"):
        _checks.non_negative_int("depth", -1)


@pytest.mark.parametrize("bad", [0, -0.1, math.inf, math.nan, False, "1"])
def test_positive_number_rejects_non_finite_and_non_positive(bad: object) -> None:
    with pytest.raises(ValueError, match="tau must be a positive finite number"):
        _checks.positive_number("tau", bad)
    assert _checks.positive_number("tau", 2) == 2.0


def test_fraction_bounds() -> None:
    assert _checks.fraction("p", 0.0) == 0.0
    assert _checks.fraction("p", 1, closed_right=True) == 1.0
    for bad in (1.0, -0.01, math.nan):
        with pytest.raises(ValueError, match=r"p must be a number in \[0, 1\)"):
            _checks.fraction("p", bad)


def test_one_of_lists_the_choices() -> None:
    assert _checks.one_of("kind", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match="kind='c' is not known; expected one of a, b"):
        _checks.one_of("kind", "c", ("a", "b"))


def test_write_atomic_replaces_whole_and_leaves_no_temporary(tmp_path) -> None:
    target = tmp_path / "sub" / "out.txt"
    _io.write_text_atomic(target, "first")
    _io.write_text_atomic(target, "second")
    assert target.read_text() == "second"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_write_atomic_keeps_the_old_file_when_writing_fails(tmp_path) -> None:
    target = tmp_path / "out.txt"
    _io.write_text_atomic(target, "old")

    def fail(f):
        f.write(b"partial")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        _io.write_atomic(target, fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
