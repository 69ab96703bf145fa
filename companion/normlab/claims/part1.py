"""Part I's claims (the affine divergence, A1-A15): their declarations.

A1-A7 are settled by the exact measurements of :mod:`normlab.claims.exact`. A8-A15 are judged
on the saved sets of chapters 6-8 (5,000 real MNIST digits on the CPU: a stand-in for
CIFAR-10, so a verdict there tests the mechanism), every arm at its learning rate chosen on
validation, through the one paired comparison (:func:`normlab.claims.paired`): their
quantities are in :mod:`normlab.claims.part1_comparisons` (A8-A11, A14, A15) and
:mod:`normlab.claims.part1_batch` (A12, A13).
"""

from __future__ import annotations

from .exact import (
    measure_a1,
    measure_a2,
    measure_a3,
    measure_a4,
    measure_a5,
    measure_a6,
    measure_a7,
)
from .part1_batch import (
    ACCURACY_SLOPE_MARGIN,
    OTHERS,
    SLOPE_MARGIN,
    _a12,
    _a13,
)
from .part1_comparisons import _a8, _a9, _a10, _a11, _a14, _a15
from .registry import Measurement, Test, declare
from .rules import AtLeast, Directional, Equivalent

__all__ = ["ACCURACY_MARGIN"]

ACCURACY_MARGIN = 0.01  # one accuracy point: "matches", "on par"
_PAIRED = (
    "paired by seed at the lr chosen on val per configuration, mean over configurations"
)

_A = "I"

declare(
    id="A1",
    part=_A,
    kind="exact",
    # U+2212 minus and U+03B7 eta: a minus sign never parts from what it negates where
    # the sentence wraps in a table, as an ASCII hyphen may
    sentence="One SGD step on an affine layer z = Wx + b moves z by \u2212\u03b7 (\u2016x\u2016\u00b2 + 1) g, "
    "not the ideal \u2212\u03b7 g.",
    chapter=2,
    test=Measurement(
        measure=measure_a1,
        says="relative deviation of a real SGD step from the formula",
    ),
)
declare(
    id="A2",
    part=_A,
    kind="exact",
    sentence="In a batch, the effective update is \u2212\u03b7 \u03a3_j (x_i \u00b7 x_j + 1) g_j / B: "
    "kernel XX\u1d40 + 1, with cross-sample terms.",
    chapter=2,
    test=Measurement(
        measure=measure_a2, says="real step and tangent kernel against XX^T + 1"
    ),
)
declare(
    id="A3",
    part=_A,
    kind="exact",
    sentence="Norm-like correction W (x/|x|) + b: kernel xh_i . xh_j + 1, diagonal exactly 2; "
    "scale-invariant, loses the radial degree of freedom.",
    chapter=3,
    test=Measurement(
        measure=measure_a3, says="tangent kernel and outputs under rescaling"
    ),
)
declare(
    id="A4",
    part=_A,
    kind="exact",
    sentence="Affine-like correction (Wx + b)/sqrt(|x|^2 + 1): single-sample update exactly \u2212\u03b7 g "
    "(kernel = cosine Gram of [x; 1]); not scale-invariant.",
    chapter=3,
    test=Measurement(
        measure=measure_a4,
        says="single-sample steps, tangent kernel, outputs under rescaling",
    ),
)
declare(
    id="A5",
    part=_A,
    kind="exact",
    sentence="A learned scale placed after the correction breaks the exact cancellation.",
    chapter=3,
    test=Measurement(
        measure=measure_a5, says="single-sample step of affine-like followed by a gain"
    ),
)
declare(
    id="A6",
    part=_A,
    kind="exact",
    sentence="In a convolution, shared weights couple output positions p, q through "
    "patch_p . patch_q + 1, so the single-sample correction is only partial.",
    chapter=4,
    test=Measurement(
        measure=measure_a6,
        says="conv tangent kernel; PatchNorm kernel diagonal and single-sample step",
    ),
)
declare(
    id="A7",
    part=_A,
    kind="conceptual",
    sentence="A normaliser is better seen as a nonlinear, activation-like map plus a "
    "parameterised scale (e.g. RMSNorm = sqrt(d) * L2 map, then a gain).",
    chapter=3,
    test=Measurement(
        measure=measure_a7,
        says="RMSNorm against sqrt(d) L2 then a gain",
        tolerance=1e-12,
    ),
)
declare(
    id="A8",
    part=_A,
    kind="empirical",
    sentence="Fully-connected nets on CIFAR-10: affine-like is best, norm-like next, both ahead of "
    "none, BatchNorm, LayerNorm, RMSNorm and L2.",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a8,
        rule=Directional(+1),
        says=f"test accuracy differences, {_PAIRED}",
    ),
)
declare(
    id="A9",
    part=_A,
    kind="empirical",
    sentence="The lead of the corrections grows with depth and width.",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a9,
        rule=Directional(+1),
        says="the lead (best correction minus the strongest rival, chosen on val) against log2 width, "
        "and deepest minus shallowest, per seed",
    ),
)
declare(
    id="A10",
    part=_A,
    kind="empirical",
    sentence="The lead is clearest with tanh (against leaky-ReLU).",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a10,
        rule=Directional(+1),
        says=f"lead with tanh minus lead with leaky-ReLU, {_PAIRED}",
    ),
)
declare(
    id="A11",
    part=_A,
    kind="empirical",
    sentence="One exception: 3 layers, width 16, where norm-like is slightly ahead of "
    "affine-like.",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a11,
        rule=Directional(+1),
        says="norm_like minus affine_like at depth 3, width 16",
    ),
)
declare(
    id="A12",
    part=_A,
    kind="empirical",
    sentence="Accuracy falls as the batch size grows for norm-like and affine-like "
    "(significant negative slopes).",
    chapter=7,
    datasets=("cifar10",),
    test=Test(
        experiment="batch_size",
        quantity=_a12,
        rule=Directional(+1),
        says="two readings, each batch size's rate chosen on one half of the seeds and read "
        "on the other (cross-fitted). The paper's: per seed, the least-squares slope of the "
        "test accuracy after a fixed number of epochs against log2(batch size), for each "
        "correction (negative: accuracy falls). The mechanism's: the slope of log2(epochs "
        "to a target validation accuracy), each batch size at its rate with the fewest "
        f"steps, each correction's minus the mean of {OTHERS}'s (positive: the correction "
        "leaves perfect scaling sooner)",
    ),
)
declare(
    id="A13",
    part=_A,
    kind="empirical",
    sentence="LayerNorm is roughly flat over batch size; BatchNorm, RMSNorm and no "
    "normalisation are flat or rising.",
    chapter=7,
    datasets=("cifar10",),
    test=Test(
        experiment="batch_size",
        quantity=_a13,
        rule=AtLeast(ACCURACY_SLOPE_MARGIN),
        says="two readings, cross-fitted as A12's. The paper's: each normaliser's slope of "
        "the test accuracy at fixed epochs per doubling of the batch, LayerNorm's within "
        f"±{ACCURACY_SLOPE_MARGIN} (equivalence), the others' not below "
        f"-{ACCURACY_SLOPE_MARGIN}. The mechanism's: slopes of log2(epochs to a target "
        f"validation accuracy) per doubling (0: perfect scaling), LayerNorm's within "
        f"±{SLOPE_MARGIN}, the others' at most +{SLOPE_MARGIN}",
    ),
)
declare(
    id="A14",
    part=_A,
    kind="empirical",
    sentence="In convolutional nets, PatchNorm is roughly on par with LayerNorm and RMSNorm, "
    "with smaller margins than in fully-connected nets.",
    chapter=8,
    datasets=("cifar10",),
    test=Test(
        experiment="cnn_normalisers",
        quantity=_a14,
        rule=Equivalent(ACCURACY_MARGIN),
        says=f"PatchNorm's better mode minus the stronger of LayerNorm and RMSNorm, {_PAIRED}; margin "
        f"{ACCURACY_MARGIN} (the margins in fully-connected nets are compared in the chapter, not "
        f"judged)",
    ),
)
declare(
    id="A15",
    part=_A,
    kind="empirical",
    sentence="Affine-like, which is not scale-invariant, matches or beats the scale-invariant "
    "normalisers: scale invariance is not what makes normalisation work.",
    chapter=6,
    datasets=("cifar10",),
    test=Test(
        experiment="fc_normalisers",
        quantity=_a15,
        rule=AtLeast(ACCURACY_MARGIN),
        says=f"affine_like minus the strongest scale-invariant normaliser, {_PAIRED}; margin {ACCURACY_MARGIN}",
    ),
)
