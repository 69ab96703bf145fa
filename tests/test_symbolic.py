"""SymPy derivations equal the closed forms of the affine divergence."""

from __future__ import annotations

import pytest
import sympy as sp
from normlab import symbolic


def is_zero(expr: sp.MatrixBase | sp.Expr) -> bool:
    if isinstance(expr, sp.MatrixBase):
        return all(sp.simplify(e) == 0 for e in expr)
    return sp.simplify(expr) == 0


def sq(v: sp.Matrix) -> sp.Expr:
    return (v.T * v)[0, 0]


@pytest.mark.parametrize(
    "kind,factor", [("none", None), ("norm_like", 2), ("affine_like", 1)]
)
def test_single_sample_update(kind: str, factor: int | None) -> None:
    d = symbolic.linear_update(kind, n_in=3, n_out=2)
    x, g = d.symbols["x"][0], d.symbols["g"][0]
    expected_factor = sq(x) + 1 if factor is None else factor
    assert is_zero(d.effective - (-d.eta * expected_factor * g))
    assert is_zero(d.ideal - (-d.eta * g))
    assert is_zero(d.kernel[0, 0] - expected_factor)


def test_plain_gradients_are_outer_product_and_g() -> None:
    d = symbolic.linear_update("none", n_in=2, n_out=2)
    x, g = d.symbols["x"][0], d.symbols["g"][0]
    assert is_zero(d.grads["W"] - g * x.T)
    assert is_zero(d.grads["b"] - g)


def _expected_batch_kernel(kind: str, xs: list[sp.Matrix]) -> sp.Matrix:
    n = len(xs)
    if kind == "none":
        return sp.Matrix(n, n, lambda i, j: (xs[i].T * xs[j])[0, 0] + 1)
    if kind == "norm_like":
        return sp.Matrix(
            n,
            n,
            lambda i, j: (xs[i].T * xs[j])[0, 0] / sp.sqrt(sq(xs[i]) * sq(xs[j])) + 1,
        )
    return sp.Matrix(
        n,
        n,
        lambda i, j: (
            ((xs[i].T * xs[j])[0, 0] + 1)
            / (sp.sqrt(sq(xs[i]) + 1) * sp.sqrt(sq(xs[j]) + 1))
        ),
    )


@pytest.mark.parametrize("kind", symbolic.KINDS)
def test_batch_kernel_and_update(kind: str) -> None:
    d = symbolic.batch_update(kind, batch=2, n_in=2, n_out=1)
    xs, gs = d.symbols["x"], d.symbols["g"]
    K = _expected_batch_kernel(kind, xs)
    assert is_zero(d.kernel - K)
    for i in range(2):
        expected = -(d.eta / 2) * sum(
            (K[i, j] * gs[j] for j in range(2)), sp.zeros(1, 1)
        )
        assert is_zero(d.effective[:, i] - expected)


def test_batch_with_several_outputs_keeps_units_separate() -> None:
    d = symbolic.batch_update("none", batch=2, n_in=1, n_out=2)
    xs, gs = d.symbols["x"], d.symbols["g"]
    K = _expected_batch_kernel("none", xs)
    expected = -(d.eta / 2) * (K[0, 0] * gs[0] + K[0, 1] * gs[1])
    assert is_zero(d.effective[:, 0] - expected)


@pytest.mark.parametrize("in_channels,padding", [(1, 0), (2, 1)])
def test_conv1d_couples_positions_through_patch_products(
    in_channels: int, padding: int
) -> None:
    length, k = 3, 2
    d = symbolic.conv1d_update(
        "none", length=length, kernel_size=k, in_channels=in_channels, padding=padding
    )
    # independent patches, built here from the symbol names
    names = (
        (lambda c, t: f"x_{t + 1}")
        if in_channels == 1
        else (lambda c, t: f"x_{c + 1}{t + 1}")
    )
    padded = [
        [0] * padding
        + [sp.Symbol(names(c, t), real=True) for t in range(length)]
        + [0] * padding
        for c in range(in_channels)
    ]
    positions = length + 2 * padding - k + 1
    patches = [
        sp.Matrix([padded[c][p + t] for c in range(in_channels) for t in range(k)])
        for p in range(positions)
    ]
    K = sp.Matrix(
        positions, positions, lambda p, q: (patches[p].T * patches[q])[0, 0] + 1
    )
    assert d.kernel.shape == (positions, positions)
    assert is_zero(d.kernel - K)
    gs = d.symbols["g"]
    expected = -d.eta * sum((K[0, q] * gs[q] for q in range(positions)), sp.zeros(1, 1))
    assert is_zero(d.effective[:, 0] - expected)


def test_conv1d_affine_mode_has_unit_diagonal_and_cross_terms() -> None:
    d = symbolic.conv1d_update("affine_like", length=3, kernel_size=2)
    assert all(sp.simplify(d.kernel[p, p] - 1) == 0 for p in range(2))
    assert sp.simplify(d.kernel[0, 1]) != 0


def test_vector_form_matches_explicit_derivation() -> None:
    v = symbolic.vector_form()
    assert str(v["dL/dW"]) == "g*x.T"
    explicit = symbolic.vector_form(n_in=3, n_out=2)
    s = explicit["symbols"]
    x, g = s["x"].as_explicit(), s["g"].as_explicit()
    assert is_zero(explicit["dz"].as_explicit() - (-s["eta"] * (sq(x) + 1) * g))


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="kind"):
        symbolic.linear_update("batch")
    with pytest.raises(ValueError, match="n_in"):
        symbolic.linear_update("none", n_in=0)
    with pytest.raises(ValueError, match="kernel_size"):
        symbolic.conv1d_update(length=2, kernel_size=3)


@pytest.mark.parametrize("kind", symbolic.KINDS)
def test_stable_rates_are_zero_to_two_over_the_one_sample_kernel(kind: str) -> None:
    factor, rates = symbolic.stable_rates(kind, n_in=2)
    one = symbolic.linear_update(kind, n_in=2, n_out=1)
    k = one.kernel[0, 0]
    assert sp.simplify(factor - (1 - one.eta * k)) == 0
    assert rates == sp.Interval.open(0, sp.simplify(2 / k))
    expected_cap = {"none": None, "norm_like": 1, "affine_like": 2}[kind]
    if expected_cap is not None:
        assert rates == sp.Interval.open(0, expected_cap)
