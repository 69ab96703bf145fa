"""The exact measurements behind A1-A7: each a float64 run of the package against its formula.

Each ``measure_aN()`` returns :class:`~normlab.claims.registry.Check` values: relative
deviations that the algebra says are zero, and contrasts it says are not. Part I's
declarations (:mod:`normlab.claims.part1`) attach them to their claims.
"""

from __future__ import annotations

import math

import torch

from .registry import Check

__all__ = [f"measure_a{i}" for i in range(1, 8)]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def _data(
    batch: int = 5, features: int = 6, outputs: int = 3, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, features, generator=gen, dtype=torch.float64) * 2
    g = torch.randn(batch, outputs, generator=gen, dtype=torch.float64)
    return x, g


def _linear(cls: type, features: int = 6, outputs: int = 3) -> torch.nn.Module:
    torch.manual_seed(0)
    return cls(features, outputs, dtype=torch.float64)


# Labels write a minus as U+2212 against the letter it negates (never before a bracket):
# a table that wraps them then never parts a sign from its term.
def measure_a1() -> list[Check]:
    from ..divergence import measure_update

    x, g = _data(batch=1)
    m = measure_update(_linear(torch.nn.Linear), x, g, lr=0.1, kernel=False)
    predicted = -0.1 * (x.square().sum() + 1) * g
    return [
        Check(
            "dz against \u2212\u03b7(\u2016x\u2016\u00b2+1) g",
            _rel(m.effective, predicted),
        ),
        Check(
            "dz against the ideal \u2212\u03b7 g (the divergence)",
            _rel(m.effective, m.ideal),
            zero=False,
        ),
    ]


def measure_a2() -> list[Check]:
    from ..divergence import measure_update

    x, g = _data()
    m = measure_update(_linear(torch.nn.Linear), x, g, lr=0.1)
    K = x @ x.T + 1
    off = K - torch.diag(torch.diag(K))
    return [
        Check(
            "dz against \u2212\u03b7 (XX\u1d40+1) g / B",
            _rel(m.effective, -(0.1 / len(x)) * K @ g),
        ),
        Check("tangent kernel against XX^T + 1", _rel(m.kernel, K)),
        Check("cross-sample terms of the kernel", float(off.abs().max()), zero=False),
    ]


def measure_a3() -> list[Check]:
    from ..divergence import tangent_kernel
    from ..layers import NormLikeLinear

    x, _ = _data()
    layer = _linear(NormLikeLinear)
    xh = x / x.norm(dim=1, keepdim=True)
    K = tangent_kernel(layer, x)
    with torch.no_grad():
        scaled = _rel(layer(3.7 * x), layer(x))
    return [
        Check("kernel against xh_i . xh_j + 1", _rel(K, xh @ xh.T + 1)),
        Check(
            "kernel diagonal against 2",
            _rel(torch.diag(K), torch.full((len(x),), 2.0, dtype=x.dtype)),
        ),
        Check("z(3.7 x) against z(x) (scale invariance)", scaled),
    ]


def measure_a4() -> list[Check]:
    from ..divergence import measure_each_sample, tangent_kernel
    from ..layers import AffineLikeLinear

    x, g = _data()
    layer = _linear(AffineLikeLinear)
    aug = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
    aug = aug / aug.norm(dim=1, keepdim=True)
    each = max(
        _rel(m.effective, m.ideal) for m in measure_each_sample(layer, x, g, lr=0.1)
    )
    with torch.no_grad():
        scaled = _rel(layer(3.7 * x), layer(x))
    return [
        Check("single-sample dz against -eta g", each),
        Check(
            "kernel against the cosine Gram of [x; 1]",
            _rel(tangent_kernel(layer, x), aug @ aug.T),
        ),
        Check("z(3.7 x) against z(x) (not scale-invariant)", scaled, zero=False),
    ]


def measure_a5() -> list[Check]:
    from ..divergence import measure_each_sample
    from ..layers import AffineLikeLinear, Gain

    x, g = _data()
    layer = torch.nn.Sequential(_linear(AffineLikeLinear), Gain(3, dtype=torch.float64))
    each = max(
        _rel(m.effective, m.ideal) for m in measure_each_sample(layer, x, g, lr=0.1)
    )
    return [
        Check(
            "single-sample dz against -eta g, gain after the correction",
            each,
            zero=False,
        )
    ]


def measure_a6() -> list[Check]:
    from ..divergence import measure_each_sample, tangent_kernel
    from ..layers import PatchNormConv2d

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 5, 5, generator=gen, dtype=torch.float64)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(2, 3, 3, padding=1, dtype=torch.float64)
    patches = torch.nn.functional.unfold(x, 3, padding=1)[0].T  # (positions, C*k*k)
    plain = _rel(tangent_kernel(conv, x), patches @ patches.T + 1)
    torch.manual_seed(0)
    corrected = PatchNormConv2d(
        2, 3, 3, padding=1, mode="affine_like", dtype=torch.float64
    )
    K = tangent_kernel(corrected, x)
    g = torch.randn(corrected(x).shape, generator=gen, dtype=torch.float64)
    (m,) = measure_each_sample(corrected, x, g, lr=0.1)
    return [
        Check("conv kernel against patch_p . patch_q + 1", plain),
        Check(
            "PatchNorm kernel diagonal against 1",
            _rel(torch.diag(K), torch.ones(len(K), dtype=K.dtype)),
        ),
        Check(
            "PatchNorm single-sample dz against -eta g (partial correction)",
            _rel(m.effective, m.ideal),
            zero=False,
        ),
    ]


def measure_a7() -> list[Check]:
    from ..layers import Gain, L2Norm

    d = 16
    x, _ = _data(batch=8, features=d)
    rms = torch.nn.RMSNorm(d, eps=0.0, dtype=torch.float64)
    gain = Gain(d, dtype=torch.float64)
    with torch.no_grad():
        rms.weight.normal_(generator=torch.Generator().manual_seed(1))
        gain.weight.copy_(rms.weight)
        return [
            Check(
                "RMSNorm(x) against gain(sqrt(d) * L2(x))",
                _rel(rms(x), gain(math.sqrt(d) * L2Norm()(x))),
            )
        ]
