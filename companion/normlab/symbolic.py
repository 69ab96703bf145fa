"""SymPy derivations of the affine divergence.

Every derivation is done the long way, never by writing the answer in: build ``W``, ``b``
and the inputs as SymPy symbols, write the layer's output ``z``, differentiate the loss, take
one SGD step on the parameters, recompute ``z`` and simplify ``dz = z_after - z_before``.

Loss convention (as in :mod:`normlab.divergence`): with ``B`` samples and per-sample upstream
gradients ``g_j``, the loss is the mean ``L = (1/B) sum_j g_j . z_j``, so ``dL/dz_j = g_j / B``.
The induced kernel ``K`` is read off the result by differentiation:
``dz_i = -(eta/B) sum_j K_ij g_j``, so ``K_ij = -(B/eta) d(dz_i)/d(g_j)`` (first output unit).

Layer kinds (the registry's Part I names): ``"none"`` (``z = W x + b``), ``"norm_like"`` (``z = W x/|x| + b``) and
``"affine_like"``
(``z = (W x + b)/sqrt(|x|^2 + 1)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ._checks import non_negative_int, one_of, positive_ints
from ._extras import require

sp = require("sympy", "normlab.symbolic")

__all__ = [
    "KINDS",
    "Derivation",
    "linear_update",
    "batch_update",
    "conv1d_update",
    "vector_form",
    "Forward",
    "stable_rates",
]

KINDS: tuple[str, ...] = (
    "none",
    "norm_like",
    "affine_like",
)  # the registry's Part I spellings

#: A layer's forward pass on symbols, ``(W, b, x) -> y`` with each a SymPy matrix.
Forward = Callable[[sp.Matrix, sp.Matrix, sp.Matrix], sp.Matrix]


@dataclass(frozen=True)
class Derivation:
    """The result of one derivation, with its intermediate steps for display.

    Attributes:
        name: what was derived, in words.
        eta: the learning-rate symbol.
        outputs: ``z`` of each sample (or position) before the step, one column each.
        grads: ``dL/dW`` and ``dL/db``.
        effective: ``dz``, one column per sample (or position), simplified.
        ideal: ``-eta g``, same layout as ``effective``.
        kernel: ``K`` with ``dz_i = -(eta/B) sum_j K_ij g_j``, simplified.
        symbols: the symbols used (``W``, ``b``, ``x``, ``g``; matrices or lists of them).
        steps: ``(label, expression)`` pairs in the order a chapter shows them.
    """

    name: str
    eta: sp.Symbol
    outputs: sp.Matrix
    grads: dict[str, sp.Matrix]
    effective: sp.Matrix
    ideal: sp.Matrix
    kernel: sp.Matrix
    symbols: dict[str, object]
    steps: list[tuple[str, sp.Basic]] = field(default_factory=list)


def _layer(kind: str) -> Forward:
    """The forward map ``z(W, b, x)`` of one kind of layer, for one input column ``x``."""
    one_of("kind", kind, KINDS)

    def forward(W: sp.Matrix, b: sp.Matrix, x: sp.Matrix) -> sp.Matrix:
        sq_norm = (x.T * x)[0, 0]
        if kind == "none":
            return W * x + b
        if kind == "norm_like":
            return W * (x / sp.sqrt(sq_norm)) + b
        return (W * x + b) / sp.sqrt(sq_norm + 1)

    return forward


def _matrix_grad(loss: sp.Expr, P: sp.Matrix) -> sp.Matrix:
    return P.applyfunc(lambda entry: sp.diff(loss, entry))


def _derive(
    name: str,
    forward: Forward,
    W: sp.Matrix,
    b: sp.Matrix,
    xs: list[sp.Matrix],
    gs: list[sp.Matrix],
    batch: int,
    eta: sp.Symbol,
) -> Derivation:
    """Differentiate the mean loss, take one SGD step, recompute z, read off the kernel."""
    zs = [forward(W, b, x) for x in xs]
    loss = sum(((g.T * z)[0, 0] for g, z in zip(gs, zs)), sp.Integer(0)) / batch
    grad_W, grad_b = _matrix_grad(loss, W), _matrix_grad(loss, b)
    W_new, b_new = W - eta * grad_W, b - eta * grad_b
    dzs = [sp.simplify(forward(W_new, b_new, x) - z) for x, z in zip(xs, zs)]
    n = len(xs)
    kernel = sp.Matrix(
        n, n, lambda i, j: sp.simplify(-batch / eta * sp.diff(dzs[i][0], gs[j][0]))
    )
    effective = sp.Matrix.hstack(*dzs)
    ideal = sp.Matrix.hstack(*[-eta * g for g in gs])
    steps = [
        ("z", sp.Matrix.hstack(*zs)),
        (r"\partial L / \partial W", grad_W),
        (r"\partial L / \partial b", grad_b),
        (r"\Delta z = z' - z", effective),
        ("K", kernel),
    ]
    return Derivation(
        name=name,
        eta=eta,
        outputs=sp.Matrix.hstack(*zs),
        grads={"W": grad_W, "b": grad_b},
        effective=effective,
        ideal=ideal,
        kernel=kernel,
        symbols={"W": W, "b": b, "x": xs, "g": gs},
        steps=steps,
    )


def _params(n_out: int, n_in: int) -> tuple[sp.Matrix, sp.Matrix]:
    W = sp.Matrix(n_out, n_in, lambda i, k: sp.Symbol(f"w_{i + 1}{k + 1}", real=True))
    b = sp.Matrix(n_out, 1, lambda i, _: sp.Symbol(f"b_{i + 1}", real=True))
    return W, b


def linear_update(kind: str = "none", n_in: int = 3, n_out: int = 2) -> Derivation:
    """One sample, one SGD step on a ``kind`` layer with ``n_in`` inputs and ``n_out`` outputs.

    For ``"none"`` the result is ``dz = -eta (|x|^2 + 1) g``; ``kernel`` is the 1x1 factor.
    """
    one_of("kind", kind, KINDS)
    positive_ints(n_in=n_in, n_out=n_out)
    W, b = _params(n_out, n_in)
    x = sp.Matrix(sp.symbols(f"x_1:{n_in + 1}", real=True))
    g = sp.Matrix(sp.symbols(f"g_1:{n_out + 1}", real=True))
    eta = sp.Symbol("eta", positive=True)
    return _derive(f"{kind} layer, one sample", _layer(kind), W, b, [x], [g], 1, eta)


def batch_update(
    kind: str = "none", batch: int = 2, n_in: int = 2, n_out: int = 1
) -> Derivation:
    """``batch`` samples, mean-reduced loss, one SGD step on a ``kind`` layer.

    For ``"none"``: ``dz_i = -(eta/B) sum_j (x_i . x_j + 1) g_j``.
    """
    one_of("kind", kind, KINDS)
    positive_ints(batch=batch, n_in=n_in, n_out=n_out)
    W, b = _params(n_out, n_in)
    xs = [
        sp.Matrix(n_in, 1, lambda k, _, j=j: sp.Symbol(f"x_{j + 1}{k + 1}", real=True))
        for j in range(batch)
    ]
    gs = [
        sp.Matrix(n_out, 1, lambda i, _, j=j: sp.Symbol(f"g_{j + 1}{i + 1}", real=True))
        for j in range(batch)
    ]
    eta = sp.Symbol("eta", positive=True)
    return _derive(
        f"{kind} layer, batch of {batch}", _layer(kind), W, b, xs, gs, batch, eta
    )


def conv1d_update(
    kind: str = "none",
    length: int = 4,
    kernel_size: int = 2,
    in_channels: int = 1,
    padding: int = 0,
) -> Derivation:
    """One sample of a 1-D convolution (one output channel, stride 1), one SGD step.

    The output at position ``p`` is the ``kind`` layer applied to the patch ``P_p`` (all
    ``in_channels x kernel_size`` inputs it sees, padding zeros included), with the weights
    shared across positions. The loss sums over positions, ``L = sum_p g_p z_p``, so the
    kernel is positions x positions: ``dz_p = -eta sum_q K_pq g_q``; for ``"none"``,
    ``K_pq = P_p . P_q + 1``.
    """
    one_of("kind", kind, KINDS)
    positive_ints(length=length, kernel_size=kernel_size, in_channels=in_channels)
    non_negative_int("padding", padding)
    positions = length + 2 * padding - kernel_size + 1
    if positions <= 0:
        raise ValueError(
            f"kernel_size={kernel_size} is larger than the padded length "
            f"{length + 2 * padding}"
        )
    if in_channels == 1:
        signal = [[sp.Symbol(f"x_{t + 1}", real=True) for t in range(length)]]
    else:
        signal = [
            [sp.Symbol(f"x_{c + 1}{t + 1}", real=True) for t in range(length)]
            for c in range(in_channels)
        ]
    padded = [
        [sp.Integer(0)] * padding + row + [sp.Integer(0)] * padding for row in signal
    ]
    patches = [
        sp.Matrix(
            [padded[c][p + t] for c in range(in_channels) for t in range(kernel_size)]
        )
        for p in range(positions)
    ]
    W, b = _params(1, in_channels * kernel_size)
    gs = [sp.Matrix([sp.Symbol(f"g_{p + 1}", real=True)]) for p in range(positions)]
    eta = sp.Symbol("eta", positive=True)
    result = _derive(
        f"{kind} 1-D convolution, {positions} positions",
        _layer(kind),
        W,
        b,
        patches,
        gs,
        1,
        eta,
    )
    result.symbols["patches"] = patches
    return result


def vector_form(n_in: int | None = None, n_out: int | None = None) -> dict[str, object]:
    """The plain single-sample derivation with matrix symbols, by matrix calculus.

    ``W`` (``n_out x n_in``), ``b``, ``x`` and ``g`` are matrix symbols; sizes stay symbolic
    (``m x n``) unless given. Returns ``z``, the gradients ``dL/dW = g x^T`` and ``dL/db = g``
    of ``L = tr(g^T z)``, and ``dz = -eta g - eta g x^T x``, i.e. ``-eta (|x|^2 + 1) g``
    (``x^T x`` is a 1x1 matrix). With explicit sizes, ``.as_explicit()`` gives plain matrices.
    """
    if n_in is not None or n_out is not None:
        positive_ints(n_in=n_in, n_out=n_out)
    n = n_in if n_in is not None else sp.Symbol("n", integer=True, positive=True)
    m = n_out if n_out is not None else sp.Symbol("m", integer=True, positive=True)
    W, b = sp.MatrixSymbol("W", m, n), sp.MatrixSymbol("b", m, 1)
    x, g = sp.MatrixSymbol("x", n, 1), sp.MatrixSymbol("g", m, 1)
    eta = sp.Symbol("eta", positive=True)
    z = W * x + b
    loss = sp.Trace(g.T * z)
    grad_W, grad_b = sp.diff(loss, W), sp.diff(loss, b)
    z_new = (W - eta * grad_W) * x + (b - eta * grad_b)
    return {
        "z": z,
        "dL/dW": grad_W,
        "dL/db": grad_b,
        "dz": sp.expand(z_new - z),
        "symbols": {"W": W, "b": b, "x": x, "g": g, "eta": eta},
    }


def stable_rates(kind: str = "none", n_in: int = 2) -> tuple[sp.Expr, sp.Set]:
    """The squared-error residual after one SGD step on one sample, and the rates that shrink it.

    With the loss ``l = |z - y|^2 / 2`` the upstream gradient is the residual ``r = z - y``,
    so one step (:func:`linear_update`, with ``g = r``) leaves the residual
    ``r' = r + dz = (1 - eta k) r``, ``k`` the layer's one-sample kernel. Returns the factor
    ``r'/r`` (for the first output) and the set of rates ``eta > 0`` with ``|r'/r| < 1``:
    ``(0, 2/(|x|^2 + 1))`` for ``"none"``, ``(0, 1)`` for ``"norm_like"``, ``(0, 2)`` for
    ``"affine_like"``.
    """
    one = linear_update(kind, n_in=n_in, n_out=1)
    r = one.symbols["g"][0][0]
    factor = sp.simplify((r + one.effective[0]) / r)
    k = sp.simplify((1 - factor) / one.eta)  # the one-sample kernel, positive
    kappa = sp.Symbol("kappa", positive=True)
    rates = sp.solve_univariate_inequality(
        sp.Abs(1 - one.eta * kappa) < 1, one.eta, relational=False
    )
    return factor, rates.subs(kappa, k)
