"""A population's forward pass written over the member dimension, without ``torch.vmap``.

On the book's tiny models ``vmap``'s per-operation cost is most of a population step. A
model built only of layers with a stacked form here runs them directly on ``(K, B, ...)``
tensors and ``(K, ...)`` parameters: one ``baddbmm`` per linear layer, each normaliser over
its features with the member's own weights, BatchNorm as one ``batch_norm`` over ``K x H``
channels (so each member's statistics and running buffers are its own).
:func:`ensemble_forward` says whether a template has such a form, and gives it;
:class:`normlab.population.Population` uses it where it exists and ``vmap`` elsewhere (the
CNN, any layer not listed in :data:`_LAYERS`). The gate studies' ViT-Lite has its own
stacked form, in :mod:`normlab._population_vit`.

The arithmetic is a member's single run's, summed in another order where the kernels differ
(batched matmuls), so a member agrees with its single run to float rounding, as under
``vmap`` (``tests/test_population.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._population_vit import EnsembleForward, vit_ensemble
from .functional._common import _inverse_homogeneous, _norm_floor, power_of_two_scale
from .layers.affine import AffineLikeLinear, L2Norm, NormLikeLinear
from .models.mlp import MLP
from .models.vit import ViTLite

__all__ = ["EnsembleForward", "ensemble_forward"]

Tensors = Mapping[str, Tensor]
#: One layer over the member dimension: ``(module, its parameters, its buffers, x)``, the
#: dicts keyed by the module's own names (``weight``, ``running_mean``, ...).
_Layer = Callable[[nn.Module, Tensors, Tensors, Tensor], Tensor]


def _per_member(v: Tensor) -> Tensor:
    """A ``(K, H)`` parameter shaped to broadcast over ``(K, B, H)``."""
    return v.unsqueeze(1)


def _linear(m: nn.Module, p: Tensors, b: Tensors, x: Tensor) -> Tensor:
    weight, bias = p["weight"].mT, p.get("bias")
    if bias is None:
        return torch.bmm(x, weight)
    return torch.baddbmm(_per_member(bias), x, weight)


def _affine_like(m: nn.Module, p: Tensors, b: Tensors, x: Tensor) -> Tensor:
    """:func:`normlab.functional.affine_like_linear`'s plain expressions, batched."""
    scale = power_of_two_scale(x, -1, 1.0)
    scaled = x / scale
    norm = torch.linalg.vector_norm(scaled, dim=-1, keepdim=True)
    weight, bias = p["weight"].mT, p.get("bias")
    if bias is None:
        z = torch.bmm(scaled, weight)
    else:
        z = torch.baddbmm(torch.div(_per_member(bias), scale), scaled, weight)
    return z * _inverse_homogeneous(norm.square(), scale)


def _norm_like(m: nn.Module, p: Tensors, b: Tensors, x: Tensor) -> Tensor:
    """:func:`normlab.functional.norm_like_linear`'s plain expressions, batched."""
    floor = _norm_floor(m.eps, x.dtype)
    scale = power_of_two_scale(x, -1, floor)
    scaled = x / scale
    sq_norm = scaled.square().sum(-1, keepdim=True)
    z = torch.bmm(scaled, p["weight"].mT)
    factor = torch.rsqrt(sq_norm.clamp_min((floor / scale).square()))
    bias = p.get("bias")
    if bias is None:
        return z * factor
    return torch.addcmul(_per_member(bias), z, factor)


def _layer_norm(m: nn.Module, p: Tensors, b: Tensors, x: Tensor) -> Tensor:
    y = F.layer_norm(x, m.normalized_shape, None, None, m.eps)
    if "weight" in p:
        y = y * _per_member(p["weight"])
    if "bias" in p:
        y = y + _per_member(p["bias"])
    return y


def _rms_norm(m: nn.Module, p: Tensors, b: Tensors, x: Tensor) -> Tensor:
    y = F.rms_norm(x, m.normalized_shape, None, m.eps)
    return y * _per_member(p["weight"]) if "weight" in p else y


def _batch_norm(m: nn.Module, p: Tensors, b: Tensors, x: Tensor) -> Tensor:
    """Each member's BatchNorm as one over ``K x H`` channels: the statistics of a channel
    are over the batch only, so a member's are its own, and its running buffers (viewed
    flat) are updated in place as its single run's are."""
    k, batch, h = x.shape
    flat = x.transpose(0, 1).reshape(batch, k * h)
    update = m.training and m.track_running_stats
    if update:
        b["num_batches_tracked"].add_(1)

    def flat_or_none(t: Tensor | None) -> Tensor | None:
        return None if t is None else t.reshape(k * h)

    out = F.batch_norm(
        flat,
        flat_or_none(b.get("running_mean")),
        flat_or_none(b.get("running_var")),
        flat_or_none(p.get("weight")),
        flat_or_none(p.get("bias")),
        m.training or not m.track_running_stats,
        m.momentum,
        m.eps,
    )
    return out.view(batch, k, h).transpose(0, 1)


def _pointwise(m: nn.Module, p: Tensors, b: Tensors, x: Tensor) -> Tensor:
    """A parameter-free layer over the last dimension: the module itself, on any batch."""
    return m(x)


_LAYERS: dict[type[nn.Module], _Layer] = {
    nn.Linear: _linear,
    AffineLikeLinear: _affine_like,
    NormLikeLinear: _norm_like,
    nn.LayerNorm: _layer_norm,
    nn.RMSNorm: _rms_norm,
    nn.BatchNorm1d: _batch_norm,
    nn.Tanh: _pointwise,
    nn.ReLU: _pointwise,
    nn.LeakyReLU: _pointwise,
    nn.GELU: _pointwise,
    nn.Identity: _pointwise,
    L2Norm: _pointwise,
}


def _supported(m: nn.Module) -> bool:
    """Whether ``m``'s stacked form here is exactly its forward (exact types only: a
    subclass may compute otherwise)."""
    layer = _LAYERS.get(type(m))
    if layer is None or m._forward_hooks or m._forward_pre_hooks:
        return False
    if isinstance(m, L2Norm):
        return all(d < 0 for d in m.dim)  # the features only, not the member dimension
    if isinstance(m, (nn.LayerNorm, nn.RMSNorm)):
        return len(m.normalized_shape) == 1
    if isinstance(m, nn.BatchNorm1d):
        return m.momentum is not None  # a cumulative average counts per member
    return True


def ensemble_forward(
    template: nn.Module, *, vit: bool = True
) -> EnsembleForward | None:
    """The forward pass of a population of ``template`` over the member dimension, or None
    where it has none (then ``vmap`` runs it): an :class:`~normlab.models.MLP` whose layers
    all have a stacked form in :data:`_LAYERS`, or (unless ``vit`` is False) a ViT-Lite of
    the gate studies (:mod:`normlab._population_vit`)."""
    if type(template) is ViTLite:
        return vit_ensemble(template) if vit else None
    if type(template) is not MLP or template._forward_hooks:
        return None
    layers = [(f"hidden.{i}.", m) for i, m in enumerate(template.hidden)]
    layers.append(("head.", template.head))
    if not all(_supported(m) for _, m in layers):
        return None
    steps = [
        (
            m,
            _LAYERS[type(m)],
            [(n, prefix + n) for n, _ in m.named_parameters()],
            [(n, prefix + n) for n, _ in m.named_buffers()],
        )
        for prefix, m in layers
    ]

    def forward(
        params: Tensors,
        buffers: Tensors,
        x: Tensor,
        noise: Tensors,
        frozen: Tensors,
        probes: Sequence[str],
    ) -> tuple[Tensor, dict[str, Tensor]]:
        if noise or probes:
            raise ValueError(
                f"an MLP has no gate: noise {list(noise)}, probes {probes}"
            )
        x = x.flatten(2)  # MLP.forward's flatten, after the member dimension
        for m, layer, param_names, buffer_names in steps:
            own_p = {n: params[full] for n, full in param_names}
            own_b = {n: buffers[full] for n, full in buffer_names}
            x = layer(m, own_p, own_b, x)
        return x, {}

    return forward
