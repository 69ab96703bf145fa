"""``normlab.functional``: each function is its layer's forward, bit for bit, with exact
float64 gradients."""

from __future__ import annotations

import doctest
from collections.abc import Callable

import pytest
import torch
from normlab import functional as NF
from normlab.functional import _affine, _gate
from normlab.functional._common import _SumOfSquares
from normlab.layers import (
    AffineLikeLinear,
    DyT,
    L2Norm,
    NormLikeLinear,
    NormSelector,
    PatchNormConv2d,
    token_pool,
)
from torch import Tensor, nn

F64 = torch.float64


def _randomise(module: nn.Module) -> nn.Module:
    """Random parameters, so that no identity initialisation hides a difference."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


# (layer, the same computation through normlab.functional, input shape)
Pair = tuple[nn.Module, Callable[[nn.Module, Tensor], Tensor], tuple[int, ...]]


def _pairs(dtype: torch.dtype) -> dict[str, Pair]:
    conv = dict(stride=2, padding=1, dilation=1)
    return {
        "affine_like": (
            AffineLikeLinear(7, 5, dtype=dtype),
            lambda m, x: NF.affine_like_linear(x, m.weight, m.bias),
            (3, 4, 7),
        ),
        "affine_like_no_bias": (
            AffineLikeLinear(7, 5, bias=False, dtype=dtype),
            lambda m, x: NF.affine_like_linear(x, m.weight),
            (3, 7),
        ),
        "norm_like": (
            NormLikeLinear(7, 5, eps=1e-3, dtype=dtype),
            lambda m, x: NF.norm_like_linear(x, m.weight, m.bias, eps=1e-3),
            (3, 4, 7),
        ),
        "norm_like_no_bias": (
            NormLikeLinear(7, 5, bias=False, dtype=dtype),
            lambda m, x: NF.norm_like_linear(x, m.weight),
            (3, 7),
        ),
        "l2": (
            L2Norm(dim=(1, 2)),
            lambda m, x: NF.l2_normalize(x, (1, 2)),
            (3, 4, 5),
        ),
        "patch_affine": (
            PatchNormConv2d(2, 3, 3, **conv, dtype=dtype),
            lambda m, x: NF.patch_norm_conv2d(x, m.weight, m.bias, **conv),
            (2, 2, 5, 5),
        ),
        "patch_norm": (
            PatchNormConv2d(2, 3, 3, **conv, mode="norm_like", dtype=dtype),
            lambda m, x: NF.patch_norm_conv2d(
                x, m.weight, m.bias, **conv, mode="norm_like"
            ),
            (2, 2, 5, 5),
        ),
        "dyt": (
            DyT((3, 4), dtype=dtype),
            lambda m, x: NF.dyt(x, m.alpha, m.weight, m.bias),
            (2, 5, 3, 4),
        ),
        "dyt_no_bias": (
            DyT(4, bias=False, dtype=dtype),
            lambda m, x: NF.dyt(x, m.alpha, m.weight),
            (2, 5, 4),
        ),
        "dyt_no_affine": (
            DyT(4, elementwise_affine=False, dtype=dtype),
            lambda m, x: NF.dyt(x, m.alpha),
            (2, 5, 4),
        ),
    }


NAMES = list(_pairs(torch.float32))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("name", NAMES)
def test_each_function_is_its_layer_bit_for_bit(name: str, scale: float) -> None:
    torch.manual_seed(0)
    layer, fn, shape = _pairs(torch.float32)[name]
    _randomise(layer)
    x = torch.randn(shape) * scale
    assert torch.equal(fn(layer, x), layer(x))


@pytest.mark.parametrize("name", NAMES)
def test_each_function_gradchecks_in_float64(name: str) -> None:
    torch.manual_seed(2)
    layer, fn, shape = _pairs(F64)[name]
    _randomise(layer)
    names = [n for n, _ in layer.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in layer.parameters()]
    x = (torch.randn(shape, dtype=F64) + 0.3).requires_grad_()

    def through_function(inp: Tensor, *values: Tensor) -> Tensor:
        return fn(_View(dict(zip(names, values, strict=True))), inp)

    assert torch.autograd.gradcheck(through_function, (x, *params))


class _View:
    """Stands in for a layer in the pairs above: its attributes are the given tensors, so
    that gradcheck differentiates the function with respect to each parameter."""

    def __init__(self, values: dict[str, Tensor]) -> None:
        self.__dict__.update(values)


def test_reflect_padding_is_the_layers_own() -> None:
    """Other padding modes pad first, then convolve with no padding, as ``nn.Conv2d`` does."""
    torch.manual_seed(3)
    layer = _randomise(PatchNormConv2d(2, 3, 3, padding=1, padding_mode="reflect"))
    x = torch.randn(2, 2, 6, 6)
    padded = torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect")
    assert torch.equal(layer(x), NF.patch_norm_conv2d(padded, layer.weight, layer.bias))


def test_dyt_without_its_affine_is_tanh() -> None:
    x, alpha = torch.randn(4, 6), torch.tensor(0.7)
    assert torch.equal(NF.dyt(x, alpha), torch.tanh(alpha * x))
    bias = torch.randn(6)
    assert torch.equal(NF.dyt(x, alpha, bias=bias), torch.tanh(alpha * x) + bias)


def test_ada_norm_gradchecks_in_float64_with_its_factor_held() -> None:
    """At ``k=0`` AdaNorm is LayerNorm, gradchecked as it is; at ``k > 0`` its gradient is
    that of the same expression with the factor :math:`C(1 - k y)` a constant, bit for bit,
    and that expression gradchecks."""
    torch.manual_seed(2)
    shape, k, scale, eps = (3, 4), 0.2, 1.5, 1e-3
    x = (torch.randn(2, 5, 3, 4, dtype=F64) + 0.3).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda inp: NF.ada_norm(inp, shape, 0.0, scale, eps), (x,)
    )
    factor = scale * (1.0 - k * torch.nn.functional.layer_norm(x, shape, eps=eps))
    factor = factor.detach()

    def held(inp: Tensor) -> Tensor:
        return factor * torch.nn.functional.layer_norm(inp, shape, eps=eps)

    assert torch.autograd.gradcheck(held, (x,))
    v = torch.randn(x.shape, dtype=F64)
    (got,) = torch.autograd.grad(NF.ada_norm(x, shape, k, scale, eps), x, v)
    (want,) = torch.autograd.grad(held(x), x, v)
    assert torch.equal(got, want)


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_norm_selector_is_its_layer_bit_for_bit(training: bool, hard: bool) -> None:
    torch.manual_seed(0)
    layer = _randomise(NormSelector((3, 4), k=3, hidden=5, hard=hard)).train(training)
    x = torch.randn(2, 5, 3, 4)
    torch.manual_seed(5)  # the same Gumbel noise for both
    got = layer(x)
    logits = NF.at_least_float32(layer.mlp(token_pool(x, 2)))
    torch.manual_seed(5)
    assert torch.equal(got, NF.norm_selector(logits, layer.tau, hard, training))
    assert torch.equal(layer.last_probs, torch.softmax(logits, dim=-1))


def test_norm_selector_holds_frozen_members_to_their_probabilities() -> None:
    logits = torch.randn(4, 2, generator=torch.Generator().manual_seed(3))
    noise = NF.sample_gumbel(logits.shape, generator=torch.Generator().manual_seed(4))
    members = torch.tensor([True, False, True, False]).unsqueeze(-1)
    got = NF.norm_selector(
        logits, 0.5, training=True, noise=noise, frozen_members=members
    )
    sampled = NF.gumbel_softmax(logits, 0.5, noise=noise)
    assert torch.equal(got, torch.where(members, torch.softmax(logits, -1), sampled))
    frozen = NF.norm_selector(logits, 0.5, training=True, noise=noise, frozen=True)
    assert torch.equal(frozen, torch.softmax(logits, -1))


@pytest.mark.parametrize("training", [False, True])
def test_norm_selector_gradchecks_in_float64(training: bool) -> None:
    """Soft weights only: the straight-through gradient of ``hard`` is by design not the
    derivative of its one-hot value."""
    logits = torch.randn(4, 3, dtype=F64, requires_grad=True)
    noise = NF.sample_gumbel(logits.shape, generator=torch.Generator().manual_seed(4))
    assert torch.autograd.gradcheck(
        lambda ell: NF.norm_selector(ell, 0.7, training=training, noise=noise),
        (logits,),
    )


EXAMPLED = [
    name for name in NF.__all__ if "Examples::" in (getattr(NF, name).__doc__ or "")
]


def test_the_part_two_gain_and_rms_norm2d_functions_have_examples() -> None:
    assert {"ada_norm", "film_norm", "gain", "rms_norm2d", "norm_selector"} <= set(
        EXAMPLED
    )


@pytest.mark.parametrize("name", EXAMPLED)
def test_docstring_examples_run(name: str) -> None:
    fn = getattr(NF, name)
    # a reader's namespace: torch, its functional module as F and normlab.functional's
    globs = {"torch": torch, "F": torch.nn.functional}
    globs |= {n: getattr(NF, n) for n in NF.__all__}
    (test,) = doctest.DocTestFinder(recurse=False).find(fn, name, globs=globs)
    assert test.examples
    torch.manual_seed(0)
    report: list[str] = []
    result = doctest.DocTestRunner().run(test, out=report.append)
    assert result.failed == 0, "".join(report)


def test_patch_norm_refuses_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="affine_like"):
        NF.patch_norm_conv2d(torch.randn(1, 1, 3, 3), torch.randn(1, 1, 3, 3), mode="x")


# ------------------------------------------ the fast paths are autograd's formulas, bit for bit

_BITS = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.float16: torch.int16,
}


def _same_bits(a: Tensor, b: Tensor) -> bool:
    return torch.equal(a.view(_BITS[a.dtype]), b.view(_BITS[b.dtype]))


def _rows(dtype: torch.dtype) -> Tensor:
    """Samples at many scales, a blank one and, but in float16 (whose norms accumulate in
    float32), one whose squares underflow, so that its norm is 0."""
    torch.manual_seed(3)
    x = torch.randn(8, 37, dtype=torch.float64) * torch.logspace(-3, 3, 8)[:, None]
    x[2] = 0.0
    x[5] = 0.0
    tiny = {torch.float32: 1e-30, torch.float64: 1e-170, torch.float16: 1e-7}[dtype]
    x[5, :3] = torch.tensor([tiny, -tiny, tiny / 10])
    return x.to(dtype)


def _value_and_grad(fn: Callable[[Tensor], Tensor], x: Tensor) -> tuple[Tensor, Tensor]:
    x = x.clone().requires_grad_()
    out = fn(x)
    upstream = torch.linspace(-2.0, 3.0, out.numel(), dtype=out.dtype).view(out.shape)
    return out.detach(), torch.autograd.grad(out, x, upstream)[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_the_sum_of_squares_has_autograds_gradients_bit_for_bit(
    dtype: torch.dtype,
) -> None:
    """The custom backward pass (no copy of ``x ** 1``) returns exactly what autograd returns
    for the plain expression, zero rows included."""
    x = _rows(dtype)
    pairs = [
        (
            lambda v: _SumOfSquares.apply(v, -1),
            lambda v: v.square().sum(-1, keepdim=True),
        ),
        (
            lambda v: _SumOfSquares.apply(v.view(2, 4, 37), (1, 2)),
            lambda v: v.view(2, 4, 37).square().sum((1, 2), keepdim=True),
        ),
    ]
    for fast, plain in pairs:
        for got, want in zip(_value_and_grad(fast, x), _value_and_grad(plain, x)):
            assert _same_bits(got, want)


def _images(dtype: torch.dtype) -> Tensor:
    """Images at many scales, a blank one, and one whose only pixel is 1, so that its
    patches' norms sit exactly at PatchNorm's floor of 1 (clamp_min's tie)."""
    torch.manual_seed(4)
    x = torch.randn(6, 3, 6, 6, dtype=torch.float64)
    x = x * torch.logspace(-2, 2, 6, dtype=torch.float64)[:, None, None, None]
    x[1] = 0.0
    x[4] = 0.0
    x[4, 1, 2, 3] = 1.0
    return x.to(dtype)


def _one_node_cases(dtype: torch.dtype) -> dict[str, tuple[Callable, Tensor, tuple]]:
    """(function of (x, weight, bias), input, (weight shape, bias shape)) per fast path."""
    rows = _rows(dtype)
    rows[6] = 0.0
    rows[6, 4] = 1e-3  # a norm exactly at the floor eps = 1e-3 (clamp_min's tie)
    conv = dict(stride=2, padding=1)
    return {
        "affine_like": (NF.affine_like_linear, rows, ((5, 37), (5,))),
        "norm_like": (
            lambda x, w, b: NF.norm_like_linear(x, w, b, eps=1e-3),
            rows,
            ((5, 37), (5,)),
        ),
        "affine_like_3d": (
            NF.affine_like_linear,
            rows.view(2, 4, 37),
            ((5, 37), (5,)),
        ),
        "patch_affine": (
            lambda x, w, b: NF.patch_norm_conv2d(x, w, b, **conv),
            _images(dtype),
            ((4, 3, 3, 3), (4,)),
        ),
        "patch_norm": (
            lambda x, w, b: NF.patch_norm_conv2d(x, w, b, **conv, mode="norm_like"),
            _images(dtype),
            ((4, 3, 3, 3), (4,)),
        ),
        # as many outputs as inputs (and, for PatchNorm, the same size): the backward
        # passes then write their last products into spent temporaries (out=)
        "affine_like_square": (NF.affine_like_linear, rows, ((37, 37), (37,))),
        "norm_like_square": (
            lambda x, w, b: NF.norm_like_linear(x, w, b, eps=1e-3),
            rows,
            ((37, 37), (37,)),
        ),
        "patch_affine_same": (
            lambda x, w, b: NF.patch_norm_conv2d(x, w, b, padding=1),
            _images(dtype),
            ((3, 3, 3, 3), (3,)),
        ),
        "patch_norm_same": (
            lambda x, w, b: NF.patch_norm_conv2d(x, w, b, padding=1, mode="norm_like"),
            _images(dtype),
            ((3, 3, 3, 3), (3,)),
        ),
        # one output channel: the channel sum of g z is g z itself, no new tensor
        "patch_one_channel": (
            lambda x, w, b: NF.patch_norm_conv2d(x[:, :1], w, b, padding=1),
            _images(dtype),
            ((1, 1, 3, 3), (1,)),
        ),
    }


ONE_NODE_CASES = list(_one_node_cases(torch.float32))


def _plain_expressions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every function take the path of ``torch.func`` transforms and autocast: the
    plain expressions, without the hand-written backward nodes."""
    for module in (_affine, _gate):
        monkeypatch.setattr(module, "_composite", lambda x: True)


def _one_node(out: Tensor) -> bool:
    """Whether ``out``'s graph holds one of the layers' own backward nodes."""
    seen, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__.startswith(("_AffineLike", "_NormLike", "_PatchNorm")):
            return True
        stack.extend(next_node for next_node, _ in node.next_functions)
    return False


def _outputs_and_grads(fn: Callable, x: Tensor, weight: Tensor, bias: Tensor | None):
    inputs = [t.clone().requires_grad_() for t in (x, weight, bias) if t is not None]
    out = fn(*inputs) if bias is not None else fn(*inputs, None)
    upstream = torch.linspace(-2.0, 3.0, out.numel(), dtype=out.dtype).view(out.shape)
    return out, [out.detach(), *torch.autograd.grad(out, inputs, upstream)]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", ONE_NODE_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_the_one_node_layers_have_autograds_gradients_bit_for_bit(
    dtype: torch.dtype, case: str, bias: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hand-written backward passes return exactly what autograd returns for the plain
    expressions (the path taken under ``torch.func`` transforms and autocast), for the
    input, the weight and the bias: blank samples, underflowing norms and norms exactly at
    the floor (where clamp_min's gradient is split) included."""
    fn, x, (w_shape, b_shape) = _one_node_cases(dtype)[case]
    g = torch.Generator().manual_seed(5)
    weight = torch.randn(w_shape, generator=g, dtype=torch.float64).to(dtype)
    b = (
        torch.randn(b_shape, generator=g, dtype=torch.float64).to(dtype)
        if bias
        else None
    )
    out, fast = _outputs_and_grads(fn, x, weight, b)
    assert _one_node(out)  # the hand-written backward is the one tested
    _plain_expressions(monkeypatch)
    plain_out, plain = _outputs_and_grads(fn, x, weight, b)
    assert not _one_node(plain_out)
    assert len(fast) == len(plain)
    for got, want in zip(fast, plain):
        assert _same_bits(got, want)


def _random_rows(dtype: torch.dtype, seed: int, features: int) -> Tensor:
    """Samples whose magnitudes span the dtype's range (1e-300 to 1e300 in float64, 1e-37
    to 3e37 in float32), with a blank sample, a one-hot one and a half-blank one."""
    g = torch.Generator().manual_seed(seed)
    top = {torch.float64: 300.0, torch.float32: 37.0, torch.float16: 4.0}[dtype]
    x = torch.randn(9, features, generator=g, dtype=torch.float64)
    x = x * 10.0 ** torch.linspace(-top, top, 9, dtype=torch.float64)[:, None]
    x = x[torch.randperm(9, generator=g)]
    x[0], x[1, 1:], x[2, : features // 2] = 0.0, 0.0, 0.0
    return x.to(dtype)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize(
    "layer", ["affine_like", "norm_like", "patch_affine", "patch_norm"]
)
def test_the_one_node_layers_match_autograd_over_the_dtypes_range(
    dtype: torch.dtype, layer: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random weights and inputs from the dtype's smallest to its largest magnitudes, as many
    outputs as inputs (the spent temporaries reused): the hand-written backward passes give
    autograd's output and gradients bit for bit."""
    g = torch.Generator().manual_seed(100 + seed)
    if layer.startswith("patch"):
        x = _random_rows(dtype, seed, 4 * 25).view(9, 4, 5, 5)
        w_shape = (4, 4, 3, 3)
        mode = "affine_like" if layer == "patch_affine" else "norm_like"

        def fn(x, w, b):
            return NF.patch_norm_conv2d(x, w, b, padding=1, mode=mode, eps=1e-3)
    else:
        x, w_shape = _random_rows(dtype, seed, 24), (24, 24)
        linear = (
            NF.affine_like_linear if layer == "affine_like" else NF.norm_like_linear
        )

        def fn(x, w, b):
            return linear(x, w, b)

    weight = torch.randn(w_shape, generator=g, dtype=torch.float64).to(dtype)
    bias = torch.randn(w_shape[0], generator=g, dtype=torch.float64).to(dtype)
    out, fast = _outputs_and_grads(fn, x, weight, bias)
    assert _one_node(out)
    _plain_expressions(monkeypatch)
    _, plain = _outputs_and_grads(fn, x, weight, bias)
    for got, want in zip(fast, plain, strict=True):
        assert _same_bits(got, want)


def _upstream(kind: str, out: Tensor) -> Tensor:
    """An upstream gradient laid out as ``kind``: contiguous, a broadcast scalar (what
    ``out.sum()`` sends back) or transposed (not contiguous)."""
    g = torch.Generator().manual_seed(11)
    if kind == "scalar":
        return torch.full((), 0.75, dtype=out.dtype).expand(out.shape)
    flat = torch.randn(out.shape[-1], out.numel() // out.shape[-1], generator=g)
    flat = flat.to(out.dtype)
    if kind == "transposed":
        return (
            flat.t().view(out.shape) if out.dim() == 2 else flat.t().reshape(out.shape)
        )
    return flat.reshape(out.shape)


@pytest.mark.parametrize("kind", ["contiguous", "scalar", "transposed"])
@pytest.mark.parametrize("case", ["affine_like_square", "norm_like_square"])
def test_reused_temporaries_give_autograds_bits_for_any_upstream_layout(
    case: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the spent temporaries reused, an upstream gradient that is a broadcast scalar
    (what ``out.sum()`` sends back, the reuse path the benchmarks take) or transposed gives
    autograd's output and gradients bit for bit, as a contiguous one does."""
    fn, x, (w_shape, b_shape) = _one_node_cases(torch.float32)[case]
    g = torch.Generator().manual_seed(12)
    weight, bias = torch.randn(w_shape, generator=g), torch.randn(b_shape, generator=g)

    def grads() -> list[Tensor]:
        inputs = [t.clone().requires_grad_() for t in (x, weight, bias)]
        out = fn(*inputs)
        return [out.detach(), *torch.autograd.grad(out, inputs, _upstream(kind, out))]

    fast = grads()
    _plain_expressions(monkeypatch)
    for got, want in zip(fast, grads(), strict=True):
        assert _same_bits(got, want)


def _frexp_scale(x: Tensor, dim: int, floor: float) -> Tensor:
    """The power-of-two scale as issue 39's second pass computed it (frexp, half, where)."""
    largest = torch.maximum(x.amax(dim, keepdim=True), -x.amin(dim, keepdim=True))
    mantissa, _ = torch.frexp(largest.clamp_min(floor))
    half = largest.clamp_min(floor) / (2 * mantissa)
    return torch.where(half <= torch.finfo(x.dtype).max / 2, half * 2, half)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16]
)
def test_the_scale_is_the_frexp_formulas_bit_for_bit(dtype: torch.dtype) -> None:
    """``largest / mantissa`` clamped to the top power of two is the earlier formula's
    scale, bit for bit: every binade, the top one (where the next power of two is not
    finite), the smallest normal number, zeros, inf and NaN (a NaN scale)."""
    info = torch.finfo(dtype)
    exponents = torch.arange(-130.0, 130.0, dtype=torch.float64)
    values = (2.0**exponents) * torch.rand(exponents.shape, dtype=torch.float64).add(1)
    special = [0.0, -0.0, info.tiny, info.max, -info.max, info.max / 2, float("inf")]
    special += [-float("inf"), float("nan"), 1.0, 0.5, 2.0, 3.0]
    x = torch.cat([values, torch.tensor(special, dtype=torch.float64)]).to(dtype)
    rows = torch.stack([x, -x, x.flip(0)], dim=1)  # each value the largest of a row
    for floor in (1.0, info.tiny, 1e-3):
        got = NF.power_of_two_scale(rows, -1, floor)
        want = _frexp_scale(rows, -1, floor)
        assert torch.equal(got.view(_BITS_ALL[dtype]), want.view(_BITS_ALL[dtype]))
    assert NF.power_of_two_scale(rows, -1, 1.0)[-7].isnan()  # inf in the row: NaN


_BITS_ALL = {**_BITS, torch.bfloat16: torch.int16}


def test_the_scale_is_the_largest_magnitudes_power_of_two() -> None:
    """``power_of_two_scale`` reads the largest magnitude as max(max x, -min x): the same
    number as ``vector_norm(x, inf)``, so the same scale."""
    x = _rows(torch.float32)
    x[0, 4] = -7.5e3  # a negative entry is the largest
    largest = torch.linalg.vector_norm(x, float("inf"), -1, keepdim=True).clamp_min(1.0)
    scale = NF.power_of_two_scale(x, -1, 1.0)
    assert torch.equal(torch.frexp(scale)[0], torch.full_like(scale, 0.5))
    assert (scale > largest).all() and (scale <= 2 * largest).all()
    assert scale[0].item() == 8192.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize(
    "selector, hard, shape, masked",
    [
        ("learned", False, (6, 16), False),
        ("learned", False, (6, 5, 16), True),
        ("learned", True, (3, 4, 5, 16), False),
        ("random", False, (6, 5, 16), False),
    ],
)
def test_autonorm_has_autograds_gradients_bit_for_bit(
    dtype: torch.dtype,
    selector: str,
    hard: bool,
    shape: tuple[int, ...],
    masked: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AutoNorm's one-node mix (:func:`normlab.functional.autonorm_mix`) gives the output
    and every gradient (input, alpha, both candidates' affines, the selector's weights)
    that autograd gives for the plain expression, the input's gradient summed in the same
    order (a residual branch's, DyT's, LayerNorm's, then the selector's)."""
    from normlab.layers import AutoNorm

    torch.manual_seed(1)
    layer = AutoNorm(16, selector=selector, hard=hard, dtype=dtype).train()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64) * 0.5)
    x = (torch.randn(shape, dtype=torch.float64) * 2).to(dtype)
    mask = torch.rand(shape[:-1]) > 0.3 if masked else None
    if mask is not None:
        mask[:, 0] = True

    def run() -> list[Tensor]:
        torch.manual_seed(7)  # the same Gumbel noise or random weights
        layer.zero_grad(set_to_none=True)
        inp = x.clone().requires_grad_()
        out = layer(inp, mask) + inp  # a residual branch: three terms in the gradient
        out.backward(
            torch.linspace(-2.0, 3.0, out.numel(), dtype=dtype).view(out.shape)
        )
        return [out.detach(), inp.grad, *(p.grad for p in layer.parameters())]

    fast = run()
    _plain_expressions(monkeypatch)
    plain = run()
    bits = {torch.float32: torch.int32, torch.float64: torch.int64}
    bits[torch.bfloat16] = torch.int16
    for got, want in zip(fast, plain, strict=True):
        assert got is not None and want is not None
        assert torch.equal(got.view(bits[dtype]), want.view(bits[dtype]))


def test_the_hand_written_backward_passes_are_once_differentiable() -> None:
    """A second derivative through a hand-written backward raises instead of returning
    one that misses the terms the saved intermediates would have carried."""
    x = torch.randn(4, 6, requires_grad=True)
    weight, bias = torch.randn(3, 6), torch.randn(3)
    (grad,) = torch.autograd.grad(
        NF.affine_like_linear(x, weight, bias).square().sum(), x, create_graph=True
    )
    with pytest.raises(RuntimeError, match="once_differentiable|differentiable"):
        grad.sum().backward()


def test_gain_is_the_layers_forward_and_gradchecks() -> None:
    from normlab.layers import Gain

    layer = Gain(5, init=1.5, dtype=F64)
    x = torch.randn(3, 4, 5, dtype=F64, requires_grad=True)
    assert torch.equal(layer(x), NF.gain(x, layer.weight))
    weight = torch.randn(5, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(NF.gain, (x, weight))
    with pytest.raises(ValueError, match=r"num_features=5\), got \(3, 4\)"):
        NF.gain(torch.randn(3, 4, dtype=F64), weight)


def test_ada_and_film_norm_are_the_layers_forwards_and_gradcheck() -> None:
    from normlab.layers import AdaNorm, FiLMNorm

    x = torch.randn(3, 4, 5, dtype=F64, requires_grad=True)
    ada = AdaNorm(5, k=0.2, scale=1.5)
    assert torch.equal(ada(x), NF.ada_norm(x, (5,), 0.2, 1.5))
    assert torch.autograd.gradcheck(lambda t: NF.ada_norm(t, (5,), 0.0, 1.5), (x,))
    film = FiLMNorm(5, dtype=F64)
    torch.nn.init.normal_(film.condition[2].weight)
    d_gamma, beta = film.condition(x.mean(dim=1)).chunk(2, dim=-1)
    assert torch.equal(film(x), NF.film_norm(x, d_gamma, beta, (5,)))
    d_gamma, beta = (torch.randn(3, 5, dtype=F64, requires_grad=True) for _ in "ab")
    assert torch.autograd.gradcheck(
        lambda *t: NF.film_norm(*t, (5,)), (x, d_gamma, beta)
    )
    with pytest.raises(
        ValueError, match=r"normalized_shape \(5,\); expected \(\*, 5\)"
    ):
        NF.ada_norm(torch.randn(3, 4, dtype=F64), (5,))


def test_rms_norm2d_is_the_layers_forward_and_gradchecks() -> None:
    from normlab.layers import RMSNorm2d

    layer = RMSNorm2d(3).double()
    x = torch.randn(2, 3, 4, 4, dtype=F64, requires_grad=True)
    assert torch.equal(layer(x), NF.rms_norm2d(x, layer.weight, layer.eps))
    weight = torch.randn(3, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(NF.rms_norm2d, (x, weight))
