"""AutoNorm's gate: the mix of its candidates, the Gumbel-Softmax sampling and the gate's
weights (:mod:`normlab.layers.gate`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from ._common import (
    _composite,
    _spare,
    _sum_to,
    _unless_held,
)

__all__ = [
    "autonorm_mix",
    "TAU_MIN",
    "check_tau",
    "at_least_float32",
    "sample_gumbel",
    "gumbel_softmax",
    "norm_selector",
]


class _AutoNormMix(torch.autograd.Function):
    """:func:`autonorm_mix` with one backward node whose gradients are autograd's for the
    plain expression, operation for operation (so bit for bit), without the copies
    ``addcmul``'s backward makes (``tanh(alpha x) * 1``, ``LN(x) * 1``) and with the
    products of the input's gradient taken in place."""

    @staticmethod
    def forward(ctx, x, x_ln, alpha, scale_dyt, scale_ln, shift, normalized_shape, eps):  # type: ignore[override]
        y, mean, rstd = torch.native_layer_norm(x, normalized_shape, None, None, eps)
        t = torch.mul(alpha, x).tanh_()  # tanh in place on the spent product
        out = torch.addcmul(shift, scale_ln, y).addcmul_(scale_dyt, t)
        ctx.save_for_backward(x, alpha, scale_dyt, scale_ln, y, mean, rstd, t)
        ctx.normalized_shape = normalized_shape
        ctx.shapes = (shift.shape,)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        x, alpha, scale_dyt, scale_ln, y, mean, rstd, t = ctx.saved_tensors
        need = ctx.needs_input_grad
        (shift_shape,) = ctx.shapes
        gx_dyt = gx_ln = g_alpha = g_dyt = g_ln = g_shift = None
        # full-size temporaries whose values are spent are reused (out=): each fresh 2 MB
        # tensor costs page faults, once the heap is trimmed, on top of its pass
        tmp = None
        if need[3]:
            tmp = torch.mul(g, t)
            g_dyt = _sum_to(tmp, scale_dyt.shape)
            tmp = _unless_held(tmp, g_dyt)
        if need[4]:
            tmp = torch.mul(g, y, out=_spare(tmp, g, y))
            g_ln = _sum_to(tmp, scale_ln.shape)
            tmp = _unless_held(tmp, g_ln)
        if need[5]:
            g_shift = _sum_to(g, shift_shape)
        if need[0] or need[2]:
            # DyT's branch: addcmul's, tanh's and the product alpha * x's backward passes
            g_ax = torch.mul(g, scale_dyt, out=_spare(tmp, g, scale_dyt))
            if _spare(g_ax, g_ax, t) is None:
                g_ax = torch.ops.aten.tanh_backward(g_ax, t)
            else:  # in place: the product is spent
                g_ax = torch.ops.aten.tanh_backward.grad_input(g_ax, t, grad_input=g_ax)
            tmp = None
            if need[2]:
                tmp = torch.mul(g_ax, x)
                # a scalar's sum as autograd takes it; a population's alpha per member
                g_alpha = tmp.sum() if alpha.dim() == 0 else _sum_to(tmp, alpha.shape)
            if need[0]:
                gx_dyt = g_ax.mul_(alpha)
        if need[1]:
            gx_ln = torch.ops.aten.native_layer_norm_backward(
                torch.mul(g, scale_ln, out=_spare(tmp, g, scale_ln)),
                x,
                ctx.normalized_shape,
                mean,
                rstd,
                None,
                None,
                [True, False, False],
            )[0]
        return gx_dyt, gx_ln, g_alpha, g_dyt, g_ln, g_shift, None, None


def autonorm_mix(
    x: Tensor,
    alpha: Tensor,
    scale_dyt: Tensor,
    scale_ln: Tensor,
    shift: Tensor,
    normalized_shape: tuple[int, ...],
    eps: float = 1e-5,
) -> Tensor:
    r""":math:`s_{\mathrm{DyT}} \odot \tanh(\alpha x) + s_{\mathrm{LN}} \odot
    \mathrm{LN}(x) + \beta`, LN without affine over ``normalized_shape``: AutoNorm's output
    once the gate weights and both candidates' affines are folded into per-sample
    coefficients ``scale_dyt``, ``scale_ln`` and ``shift`` (each broadcast against ``x``).
    ``alpha`` is a scalar, or broadcast too (a population's, one per member). See
    :class:`~normlab.layers.AutoNorm`."""
    if _composite(x):
        y = F.layer_norm(x, normalized_shape, eps=eps)
        return torch.addcmul(
            torch.addcmul(shift, scale_ln, y), scale_dyt, torch.tanh(alpha * x)
        )
    # x twice: its two gradients reach autograd's sum for x one after the other, DyT's
    # first, as the plain expression's two nodes send them (floating-point addition is
    # not associative, and x's gradient may already hold, say, a residual branch's)
    return _AutoNormMix.apply(
        x, x, alpha, scale_dyt, scale_ln, shift, tuple(normalized_shape), eps
    )


def at_least_float32(t: Tensor) -> Tensor:
    """Upcast bf16/fp16 to float32 (float64 stays float64)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


TAU_MIN = 1e-3
"""The smallest Gumbel-Softmax temperature accepted. Below it, float32's softmax of
``(logits + G) / tau`` is one-hot to rounding for any gap above about 0.1 between the
candidates, so the selector's gradients are exactly zero for almost every sample."""


def check_tau(value: float) -> float:
    """``value`` as a float if it is a finite temperature ``>= TAU_MIN`` (1e-3): below it,
    float32's softmax of ``(logits + G) / tau`` is one-hot to rounding for almost every
    sample, so the selector's gradients vanish."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < TAU_MIN
    ):
        raise ValueError(
            f"tau must be a finite number >= {TAU_MIN} (TAU_MIN: below it the selector's "
            f"gradients vanish in float32), got {value!r}"
        )
    return float(value)


def sample_gumbel(
    shape: Sequence[int] | torch.Size,
    *,
    device: torch.device | str | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    r"""Standard Gumbel noise :math:`G = -\log E`, :math:`E \sim \mathrm{Exp}(1)`, in float32.

    Sampling :math:`E` directly (rather than :math:`-\log(-\log U)`) needs one logarithm; it
    is clamped away from zero so that :math:`G` is always finite (at most about 87).
    """
    e = torch.empty(tuple(shape), device=device, dtype=torch.float32).exponential_(
        generator=generator
    )
    return -e.clamp_min_(torch.finfo(torch.float32).tiny).log()


def gumbel_softmax(
    logits: Tensor,
    tau: float,
    hard: bool = False,
    generator: torch.Generator | None = None,
    noise: Tensor | None = None,
) -> Tensor:
    r"""Gumbel-Softmax (Jang et al. 2017; Maddison et al. 2017) over the last dimension.

    .. math::
        w = \mathrm{softmax}\bigl((\ell + G) / \tau\bigr), \qquad G_i \sim \mathrm{Gumbel}(0, 1)

    As :math:`\tau \to 0`, :math:`w` tends to the one-hot vector of
    :math:`\arg\max(\ell + G)`, which is distributed as :math:`\mathrm{softmax}(\ell)` (the
    Gumbel-max trick). ``hard=True`` is the straight-through estimator: the forward value is
    that one-hot vector, the gradient is the soft one. Computed in float32 whatever the
    dtype of ``logits`` is lower (bf16 or fp16 overflow at small ``tau``); returns float32
    (float64 for float64 logits). ``noise`` (optional): the Gumbel noise, drawn by the
    caller (:mod:`normlab.population` draws each member's from its own stream).
    """
    tau = check_tau(tau)
    if noise is None:
        noise = sample_gumbel(logits.shape, device=logits.device, generator=generator)
    soft = torch.softmax((at_least_float32(logits) + noise) / tau, dim=-1)
    if not hard:
        return soft
    index = soft.argmax(dim=-1, keepdim=True)
    # a comparison, not an in-place scatter: vmap batches it (populations train this)
    one_hot = (torch.arange(soft.shape[-1], device=soft.device) == index).to(soft.dtype)
    return one_hot - soft.detach() + soft


def norm_selector(
    logits: Tensor,
    tau: float,
    hard: bool = False,
    training: bool = False,
    *,
    noise: Tensor | None = None,
    frozen: bool = False,
    frozen_members: Tensor | None = None,
) -> Tensor:
    r"""AutoNorm's gate weights from its logits :math:`\ell`: sampled in training, else the
    probabilities the samples follow.

    .. math::
        w = \begin{cases}
            \mathrm{GumbelSoftmax}(\ell, \tau) & \text{training, not frozen} \\
            \mathrm{softmax}(\ell) & \text{otherwise}
        \end{cases}

    With ``hard``, the straight-through one-hot weights in training and the one-hot
    :math:`\arg\max \ell` otherwise. See :class:`~normlab.layers.NormSelector`, which
    predicts :math:`\ell` from the sample's pooled input.

    Args:
        logits: :math:`\ell`, one row per sample, float32 or float64.
        tau: the Gumbel-Softmax temperature, at least :data:`TAU_MIN`.
        hard: one-hot weights instead of soft ones. Default: ``False``.
        training: whether to sample. Default: ``False``.
        noise: the Gumbel noise to sample with, drawn by the caller; None: drawn here.
        frozen: whether the weights are deterministic in training too. Default: ``False``.
        frozen_members: per sample, whether its weights are deterministic in training
            (a population's members whose gate is frozen); None: none is.

    Shape:
        - logits: :math:`(N, k)`
        - Output: :math:`(N, k)`, in the dtype of ``logits``

    Examples::

        >>> logits = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
        >>> torch.equal(norm_selector(logits, 0.5), torch.softmax(logits, dim=-1))
        True
        >>> norm_selector(logits, 0.5, hard=True).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        >>> norm_selector(logits, 0.5, training=True).sum(-1).tolist()
        [1.0, 1.0]
    """
    probs = torch.softmax(logits, dim=-1)
    if training and not frozen:
        weights = gumbel_softmax(logits, tau, hard, noise=noise)
        if frozen_members is not None:
            # population members whose gate AutoNorm-S froze: as a frozen gate, below
            weights = torch.where(
                frozen_members, _selected(logits, probs, hard), weights
            )
        return weights
    return _selected(logits, probs, hard)


def _selected(logits: Tensor, probs: Tensor, hard: bool) -> Tensor:
    """The deterministic gate weights: the one-hot argmax of ``logits`` when ``hard``, else
    ``probs``."""
    if hard:
        return F.one_hot(logits.argmax(dim=-1), logits.shape[-1]).to(logits.dtype)
    return probs
