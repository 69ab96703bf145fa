"""Numerical measurement of the affine divergence: ideal versus effective activation updates.

Loss convention. For a batch of ``B`` samples with outputs ``z_j`` and a chosen upstream
gradient ``g_j`` per sample, the loss is the mean ``L = (1/B) sum_j g_j . z_j``, so
``dL/dz_j = g_j / B`` and one SGD step of rate ``eta`` would ideally move every output by
``-eta g_j`` (steepest descent on the activations with the per-sample loss ``g_j . z_j``).

:func:`measure_update` takes REAL optimiser steps on a copy of any module and reports how far
the outputs actually moved. It also computes the induced kernel ``K``: with "sites" the
output entries of one feature vector (a sample of a linear layer, a sample-and-position of a
convolution),

    dz_i = -(eta/B) sum_j K_ij g_j,      K_ij = (d z_i[u] / d theta) . (d z_j[u] / d theta),

the tangent kernel of output unit ``u`` (default 0), computed exactly from the Jacobian with
``torch.func``. For every layer in :mod:`normlab.layers`, ``nn.Linear`` and ``nn.Conv2d`` the
output is linear in the parameters and the same kernel holds for every unit, so one SGD step
satisfies the formula exactly; for other modules it is the first-order prediction.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, jacrev

from . import normalisers
from ._checks import positive_int

__all__ = [
    "OptimizerSpec",
    "UpdateMeasurement",
    "measure_update",
    "tangent_kernel",
    "measure_each_sample",
    "single_sample_ratios",
    "ResidualBlock",
    "SelfAttention",
    "offdiagonal_share",
    "layer_inputs",
    "kernel_coupling",
    "augmented_unit",
    "l1_over_l2_augmented",
    "label_gradients",
    "largest_stable_rate",
    "sgd_least_squares",
    "kernel_sgd_least_squares",
    "LeastSquaresStudy",
    "least_squares_study",
]

OptimizerSpec = torch.optim.Optimizer | Callable[..., torch.optim.Optimizer]


@dataclass
class UpdateMeasurement:
    """Ideal and effective output updates of one measurement.

    Attributes:
        ideal: ``-steps * eta * g``, shaped like the output.
        effective: ``z_after - z_before``, shaped like the output.
        ratio: per sample, ``|effective_i| / |ideal_i|`` (norms over everything but dim 0).
        cosine: per sample, cosine between ``effective_i`` and ``ideal_i``.
        kernel: ``(S, S)`` induced kernel over sites, or ``None`` when not requested.
        grad_output: the upstream gradient ``g`` that was used.
        lr: the learning rate ``eta``.
        batch_size: ``B``, the size of dim 0 of the input.
        steps: the number of optimiser steps taken.
        feature_dim: the output dimension holding the features of one site.
        per_step: the output change of each step, ``z_k - z_{k-1}``.
    """

    ideal: Tensor
    effective: Tensor
    ratio: Tensor
    cosine: Tensor
    kernel: Tensor | None
    grad_output: Tensor
    lr: float
    batch_size: int
    steps: int
    feature_dim: int
    per_step: list[Tensor] = field(default_factory=list)

    def predicted(self) -> Tensor:
        """The kernel's prediction of one SGD step, ``-(eta/B) K g``, shaped like the output."""
        if self.kernel is None:
            raise ValueError(
                "this measurement has no kernel; call measure_update(..., kernel=True)"
            )
        g_sites = _to_sites(self.grad_output, self.feature_dim)
        update = -(self.lr / self.batch_size) * (self.kernel @ g_sites)
        return _from_sites(update, self.grad_output.shape, self.feature_dim)


def _feature_dim(layer: nn.Module, feature_dim: int | None) -> int:
    if feature_dim is not None:
        return feature_dim
    return 1 if isinstance(layer, nn.modules.conv._ConvNd) else -1


def _to_sites(t: Tensor, feature_dim: int) -> Tensor:
    moved = t.movedim(feature_dim, -1)
    return moved.reshape(-1, moved.shape[-1])


def _from_sites(sites: Tensor, shape: torch.Size, feature_dim: int) -> Tensor:
    moved_shape = list(shape)
    moved_shape.append(moved_shape.pop(feature_dim))
    return sites.reshape(moved_shape).movedim(-1, feature_dim)


def _bind_optimizer(
    optimizer: OptimizerSpec,
    original: nn.Module,
    work: nn.Module,
    lr: float | None,
    kwargs: dict[str, Any],
) -> torch.optim.Optimizer:
    """An optimiser over ``work``'s parameters, from a factory or a constructed optimiser."""
    if isinstance(optimizer, torch.optim.Optimizer):
        if lr is not None or kwargs:
            raise ValueError(
                "optimizer is already constructed: set lr and its options there, "
                "not in measure_update"
            )
        index = {id(p): i for i, p in enumerate(original.parameters())}
        copies = list(work.parameters())
        groups = []
        for group in optimizer.param_groups:
            missing = [p for p in group["params"] if id(p) not in index]
            if missing:
                raise ValueError("optimizer holds parameters that are not the layer's")
            options = {k: v for k, v in group.items() if k != "params"}
            groups.append(
                {**options, "params": [copies[index[id(p)]] for p in group["params"]]}
            )
        clone = type(optimizer)(groups, **optimizer.defaults)
        clone.load_state_dict(optimizer.state_dict())
        return clone
    if not callable(optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer or a factory, got {optimizer!r}"
        )
    return optimizer(work.parameters(), lr=0.1 if lr is None else lr, **kwargs)


def _learning_rate(opt: torch.optim.Optimizer) -> float:
    rates = {float(group["lr"]) for group in opt.param_groups}
    if len(rates) != 1:
        raise ValueError(
            f"every parameter group must share one learning rate, got {sorted(rates)}"
        )
    return rates.pop()


def tangent_kernel(
    layer: nn.Module, x: Tensor, *, unit: int = 0, feature_dim: int | None = None
) -> Tensor:
    """The ``(S, S)`` tangent kernel of output unit ``unit`` over all sites of ``layer(x)``.

    ``K_ij = (d z_i[unit]/d theta) . (d z_j[unit]/d theta)`` over the trainable parameters,
    from the exact Jacobian (``torch.func.jacrev``). The layer is not modified.
    """
    fdim = _feature_dim(layer, feature_dim)
    params = {
        name: p.detach() for name, p in layer.named_parameters() if p.requires_grad
    }
    if not params:
        raise ValueError("layer has no trainable parameters")
    buffers = {name: b.detach().clone() for name, b in layer.named_buffers()}

    def unit_outputs(p: dict[str, Tensor]) -> Tensor:
        return _to_sites(functional_call(layer, (p, buffers), (x,)), fdim)[:, unit]

    jac = jacrev(unit_outputs)(params)
    sites = next(iter(jac.values())).shape[0]
    J = torch.cat([j.reshape(sites, -1) for j in jac.values()], dim=1)
    return J @ J.T


def measure_update(
    layer: nn.Module,
    x: Tensor,
    g: Tensor,
    optimizer: OptimizerSpec = torch.optim.SGD,
    *,
    lr: float | None = None,
    steps: int = 1,
    kernel: bool = True,
    unit: int = 0,
    feature_dim: int | None = None,
    **optimizer_kwargs: Any,
) -> UpdateMeasurement:
    """Take ``steps`` real optimiser steps on a copy of ``layer`` and compare the output moves.

    Args:
        layer: any module; it is deep-copied and never modified.
        x: input batch; dim 0 is the batch (size ``B``).
        g: upstream gradient per sample, shaped like ``layer(x)``; the loss is
            ``L = (1/B) sum_j g_j . z_j`` at every step.
        optimizer: a factory called as ``optimizer(params, lr=lr, **optimizer_kwargs)`` (e.g.
            ``torch.optim.SGD``, ``torch.optim.Adam``, a ``functools.partial``), giving a fresh
            state; or an already constructed optimiser over ``layer``'s parameters, which is
            cloned with its state onto the copy.
        lr: learning rate for a factory (default 0.1); must be ``None`` for a constructed one.
        steps: number of optimiser steps; the ideal update is ``-steps * eta * g``.
        kernel: also compute the induced kernel (see :func:`tangent_kernel`).
        unit: output unit whose tangent kernel is reported.
        feature_dim: output dimension of the features (default: 1 for convolutions, else -1).
        **optimizer_kwargs: passed to the factory (``momentum=0.9``, ``betas=...``).
    """
    if not isinstance(layer, nn.Module):
        raise TypeError(f"layer must be an nn.Module, got {type(layer).__name__}")
    positive_int("steps", steps)
    if not isinstance(x, Tensor) or x.dim() < 1:
        raise ValueError("x must be a tensor with a batch dimension")
    work = copy.deepcopy(layer)
    opt = _bind_optimizer(optimizer, layer, work, lr, optimizer_kwargs)
    eta = _learning_rate(opt)
    batch = x.shape[0]
    with torch.no_grad():
        z_before = work(x)
    if not isinstance(g, Tensor) or g.shape != z_before.shape:
        raise ValueError(
            f"g must be a tensor shaped like layer(x) {tuple(z_before.shape)}, "
            f"got {tuple(g.shape) if isinstance(g, Tensor) else type(g).__name__}"
        )
    fdim = _feature_dim(layer, feature_dim)
    K = tangent_kernel(layer, x, unit=unit, feature_dim=fdim) if kernel else None

    per_step, z_prev = [], z_before
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = (work(x) * g).sum() / batch
        loss.backward()
        opt.step()
        with torch.no_grad():
            z_now = work(x)
        per_step.append(z_now - z_prev)
        z_prev = z_now

    effective = z_prev - z_before
    ideal = -steps * eta * g
    flat_eff, flat_ideal = effective.reshape(batch, -1), ideal.reshape(batch, -1)
    ratio = flat_eff.norm(dim=1) / flat_ideal.norm(dim=1)
    cosine = F.cosine_similarity(flat_eff, flat_ideal, dim=1)
    return UpdateMeasurement(
        ideal=ideal,
        effective=effective,
        ratio=ratio,
        cosine=cosine,
        kernel=K,
        grad_output=g,
        lr=eta,
        batch_size=batch,
        steps=steps,
        feature_dim=fdim,
        per_step=per_step,
    )


def measure_each_sample(
    layer: nn.Module,
    x: Tensor,
    g: Tensor,
    optimizer: OptimizerSpec = torch.optim.SGD,
    **kwargs: Any,
) -> list[UpdateMeasurement]:
    """:func:`measure_update` on each sample alone (a batch of 1), without the kernel.

    ``kwargs`` go to :func:`measure_update` (``lr``, ``steps``, optimiser arguments). Every
    sample starts from the same copy of ``layer``.
    """
    return [
        measure_update(
            layer, x[i : i + 1], g[i : i + 1], optimizer, kernel=False, **kwargs
        )
        for i in range(x.shape[0])
    ]


def single_sample_ratios(
    layer: nn.Module, x: Tensor, g: Tensor, *, lr: float = 0.1
) -> Tensor:
    """``|effective| / |ideal|`` of one SGD step taken on each sample alone (batch of 1)."""
    return torch.cat([m.ratio for m in measure_each_sample(layer, x, g, lr=lr)])


def offdiagonal_share(kernel: Tensor) -> float:
    r"""The share of a kernel's absolute mass that lies off its diagonal.

    .. math::
        s = \frac{\sum_{i \ne j} \lvert K_{ij} \rvert}{\sum_{i, j} \lvert K_{ij} \rvert}

    0 when every site's update depends on its own error only; it grows towards 1 as the
    other sites' errors (cross-sample or cross-position terms) dominate the update.
    """
    if (
        not isinstance(kernel, Tensor)
        or kernel.dim() != 2
        or kernel.shape[0] != kernel.shape[1]
    ):
        raise ValueError(
            f"kernel must be a square 2-D tensor, got {getattr(kernel, 'shape', type(kernel).__name__)}"
        )
    total = kernel.abs().sum()
    if not total > 0:
        raise ValueError("kernel is all zeros: its off-diagonal share is undefined")
    return float((total - kernel.diagonal().abs().sum()) / total)


def _check_samples(x: Any) -> None:
    """``x`` is a 2-D floating tensor ``(samples, features)``."""
    if not isinstance(x, Tensor) or x.dim() != 2 or not x.is_floating_point():
        raise ValueError(
            "x must be a 2-D floating tensor (samples, features), got "
            f"{getattr(x, 'shape', type(x).__name__)} {getattr(x, 'dtype', '')}".rstrip()
        )


def augmented_unit(x: Tensor) -> Tensor:
    r"""Each sample's augmented input ``[x; 1]`` scaled to unit length.

    .. math::
        u_i = \frac{[x_i; 1]}{\lVert [x_i; 1] \rVert_2}, \qquad
        K_{ij} = u_i \cdot u_j

    The Gram matrix :math:`K` of these vectors is the tangent kernel of the affine-like
    layer (:class:`normlab.layers.AffineLikeLinear`), for any unit: its diagonal is exactly
    1, its off-diagonal entries are the cosines of the augmented inputs.

    Shape:
        - x: :math:`(N, d)`, floating point.
        - Output: :math:`(N, d + 1)`, same dtype, every row of norm 1.
    """
    _check_samples(x)
    augmented = torch.cat([x, x.new_ones(len(x), 1)], dim=1)
    return augmented / augmented.norm(dim=1, keepdim=True)


def l1_over_l2_augmented(x: Tensor) -> Tensor:
    r"""Adam's first-step factor for the affine-like layer: the l1/l2 ratio of ``[x; 1]``.

    On Adam's first step (:math:`\epsilon \to 0`) every weight moves by
    :math:`-\eta\,\mathrm{sign}(\partial L / \partial w)`, and the affine-like layer's
    output moves by :math:`-\eta\, \rho(x)\, \mathrm{sign}(g)` with

    .. math::
        \rho(x) = \frac{\lVert x \rVert_1 + 1}{\sqrt{\lVert x \rVert_2^2 + 1}}
        = \frac{\lVert [x; 1] \rVert_1}{\lVert [x; 1] \rVert_2} \in \bigl[1, \sqrt{d + 1}\bigr],

    1 exactly when :math:`x = 0` (a single non-zero entry), :math:`\sqrt{d + 1}` exactly when
    every :math:`\lvert x_k \rvert = 1` (all entries of one size). The ratio is scale-free
    in ``[x; 1]``, so it is the l1 norm of :func:`augmented_unit`.

    Shape:
        - x: :math:`(N, d)`, floating point.
        - Output: :math:`(N,)`.
    """
    return augmented_unit(x).abs().sum(dim=1)


def label_gradients(logits: Tensor, labels: Tensor) -> Tensor:
    r"""The upstream gradient of each sample's cross-entropy against its real label.

    .. math::
        g_j = \frac{\partial}{\partial z_j}\bigl(-\log \mathrm{softmax}(z_j)_{y_j}\bigr)
            = \mathrm{softmax}(z_j) - e_{y_j}

    Unlike independent random vectors, these are correlated across samples: every ``g_j``
    shares the positive softmax part, and samples of one class share the ``-e_y`` part.

    Shape:
        - logits: :math:`(B, C)`; labels: :math:`(B,)` integers in ``[0, C)``.
        - Output: :math:`(B, C)`, detached.
    """
    if logits.dim() != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(
            f"logits must be (B, C) and labels (B,), got {tuple(logits.shape)} and "
            f"{tuple(labels.shape)}"
        )
    probs = torch.softmax(logits.detach(), dim=1)
    return probs - F.one_hot(labels.long(), logits.shape[1]).to(probs.dtype)


def largest_stable_rate(layer: nn.Module, x: Tensor) -> float:
    r"""The largest SGD rate at which one step on any one sample of ``x`` shrinks its error.

    On the squared error :math:`\tfrac12\lVert z - y\rVert^2`, one SGD step on sample
    :math:`i` alone multiplies its residual by :math:`1 - \eta K_{ii}` (for a layer whose
    output is linear in its parameters), which shrinks it for :math:`0 < \eta < 2/K_{ii}`.
    Returns :math:`2 / \max_i K_{ii}`, with :math:`K` the :func:`tangent_kernel`:
    :math:`2/\max_i(\lVert x_i\rVert^2 + 1)` for ``nn.Linear``, 2 for the affine-like layer.
    """
    return 2.0 / float(tangent_kernel(layer, x).diagonal().max())


def _epoch_orders(n: int, epochs: int, seed: int) -> list[list[int]]:
    """The seeded order in which each epoch visits the ``n`` samples."""
    order = torch.Generator().manual_seed(seed)
    return [torch.randperm(n, generator=order).tolist() for _ in range(epochs)]


def sgd_least_squares(
    layer: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    lr: float,
    epochs: int = 40,
    seed: int = 0,
    blowup: float = 1e8,
    per_step: bool = False,
) -> Tensor:
    """Fit a copy of ``layer`` to ``y`` by SGD with batch size 1 on ``|z - y|^2 / 2``.

    Each epoch visits every sample once in a seeded random order (the same orders for every
    layer and rate given the same ``seed``). Returns the training loss, the mean over samples
    of ``|layer(x_i) - y_i|^2 / 2``, before training and after each epoch (``epochs + 1``
    values), or after each step with ``per_step`` (``epochs * len(x) + 1`` values); once it
    passes ``blowup`` or stops being finite, the run stops and the remaining entries are
    ``inf``. ``layer`` is not modified.
    """
    positive_int("epochs", epochs)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y need one row per sample, got {x.shape}, {y.shape}")
    work = copy.deepcopy(layer)
    opt = torch.optim.SGD(work.parameters(), lr=lr)

    def step(i: int) -> None:
        opt.zero_grad(set_to_none=True)
        (0.5 * (work(x[i : i + 1]) - y[i : i + 1]).square().sum()).backward()
        opt.step()

    def loss() -> float:
        with torch.no_grad():
            return float(0.5 * (work(x) - y).square().sum(dim=1).mean())

    return _record(step, loss, len(x), epochs, seed, blowup, per_step)


def _record(
    step: Callable[[int], None],
    loss: Callable[[], float],
    n: int,
    epochs: int,
    seed: int,
    blowup: float,
    per_step: bool,
) -> Tensor:
    """Run ``epochs`` seeded epochs of ``step(i)`` and record ``loss()`` (see
    :func:`sgd_least_squares`)."""
    positive_int("epochs", epochs)
    orders = _epoch_orders(n, epochs, seed)
    chunks = [[i] for order in orders for i in order] if per_step else orders
    losses = torch.full((len(chunks) + 1,), float("inf"), dtype=torch.float64)
    losses[0] = loss()
    for at, chunk in enumerate(chunks, start=1):
        for i in chunk:
            step(i)
        current = loss()
        if not current < blowup:
            break
        losses[at] = current
    return losses


def kernel_sgd_least_squares(
    kernel: Tensor,
    residual: Tensor,
    *,
    lr: float,
    epochs: int = 40,
    seed: int = 0,
    blowup: float = 1e8,
    per_step: bool = False,
) -> Tensor:
    r""":func:`sgd_least_squares` run on the outputs alone, through the tangent kernel.

    For a layer whose output is linear in its parameters, with one kernel ``K`` for every
    output unit (``nn.Linear`` and the corrected layers), a step on sample :math:`i` moves
    every sample's residual by :math:`r_j \leftarrow r_j - \eta K_{ji} r_i`: the parameters
    are never needed. ``residual`` is ``layer(x) - y`` before training; the epochs' orders
    and the returned losses are those of :func:`sgd_least_squares` with the same ``seed``.
    """
    r = residual.detach().clone().to(kernel.dtype)

    def step(i: int) -> None:
        r.sub_(lr * kernel[:, i : i + 1] * r[i])

    def loss() -> float:
        return float(0.5 * r.square().sum(dim=1).mean())

    return _record(step, loss, len(r), epochs, seed, blowup, per_step)


@dataclass
class LeastSquaresStudy:
    """Plain and corrected linear layers fitted by SGD: see :func:`least_squares_study`.

    Attributes:
        caps: per layer kind, :func:`largest_stable_rate` on the data.
        shared_lr: the one rate of ``curves``.
        curves: per kind, the training loss after each step at ``shared_lr``
            (``epochs * N + 1`` values for ``N`` samples).
        lrs: the swept rates.
        final: per kind, the training loss after the last epoch at each of ``lrs``
            (``inf`` where the run blew up).
        epochs: the epochs of every run.
    """

    caps: dict[str, float]
    shared_lr: float
    curves: dict[str, Tensor]
    lrs: list[float]
    final: dict[str, Tensor]
    epochs: int


def least_squares_study(
    x: Tensor,
    y: Tensor,
    *,
    kinds: tuple[str, ...] = ("none", "affine_like"),
    shared_lr: float = 0.5,
    lrs: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0),
    epochs: int = 30,
    seed: int = 0,
) -> LeastSquaresStudy:
    """The simplest model where ``|x|^2 + 1`` caps the SGD rate: a linear layer on least squares.

    For each layer kind of the registry (``none``: ``nn.Linear``; ``affine_like``;
    ``norm_like``), one seeded layer ``x.shape[1] -> y.shape[1]`` is fitted with
    :func:`sgd_least_squares` at ``shared_lr`` (the curves, trained for real) and at every
    rate of ``lrs`` (through the tangent kernel, :func:`kernel_sgd_least_squares`: the same
    runs, to rounding, without the parameters).
    """
    caps, curves, final = {}, {}, {}
    for kind in kinds:
        torch.manual_seed(seed)
        layer = normalisers.get(kind).linear_layer(
            x.shape[1], y.shape[1], dtype=x.dtype
        )
        kernel = tangent_kernel(layer, x)
        caps[kind] = 2.0 / float(kernel.diagonal().max())
        curves[kind] = sgd_least_squares(
            layer, x, y, lr=shared_lr, epochs=epochs, seed=seed, per_step=True
        )
        with torch.no_grad():
            start = layer(x) - y
        run = functools.partial(
            kernel_sgd_least_squares, kernel, start, epochs=epochs, seed=seed
        )
        final[kind] = torch.stack([run(lr=lr)[-1] for lr in lrs])
    return LeastSquaresStudy(caps, shared_lr, curves, list(lrs), final, epochs)


def layer_inputs(model: nn.Module, layers: list[nn.Module], x: Tensor) -> list[Tensor]:
    """The inputs each of ``layers`` receives when ``model(x)`` runs (eval mode, no grad).

    These are the real activations a layer's update kernel is built from, e.g. to measure
    :func:`tangent_kernel` on a trained network. ``model``'s train/eval mode is restored.
    """
    seen: dict[int, Tensor] = {}
    hooks = [
        layer.register_forward_pre_hook(
            lambda module, args: seen.setdefault(id(module), args[0].detach())
        )
        for layer in layers
    ]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(x)
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    missing = [i for i, layer in enumerate(layers) if id(layer) not in seen]
    if missing:
        raise ValueError(f"layers at positions {missing} were not called by model(x)")
    return [seen[id(layer)] for layer in layers]


def kernel_coupling(model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    """Cross-sample coupling of the update kernels of a trained MLP on the batch ``x``.

    For every linear layer that reads hidden activations (all but the first), the tangent
    kernel over the batch (:func:`tangent_kernel`) is built from the
    real inputs that layer receives. Returned, averaged over those layers:

    - ``gram_offdiag``: the share of the kernel's absolute mass off the diagonal
      (:func:`offdiagonal_share`), what the other samples contribute to a
      sample's update;
    - ``gram_cosine``: the mean of :math:`|K_{ij}| / \\sqrt{K_{ii} K_{jj}}` over pairs
      ``i != j``, the coupling of one pair whatever the batch size.
    """
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)][1:]
    if not linears or x.shape[0] < 2:
        raise ValueError(
            "kernel_coupling needs a model with at least two linear layers and a batch of >= 2"
        )
    inputs = layer_inputs(model, linears, x)
    shares, cosines = [], []
    for layer, inp in zip(linears, inputs):
        kernel = tangent_kernel(layer, inp).double()
        shares.append(offdiagonal_share(kernel))
        scale = kernel.diagonal().clamp_min(torch.finfo(kernel.dtype).tiny).rsqrt()
        normalised = (kernel * scale[:, None] * scale[None, :]).abs()
        n = kernel.shape[0]
        cosines.append(
            float((normalised.sum() - normalised.diagonal().sum()) / (n * (n - 1)))
        )
    return {
        "gram_offdiag": float(np.mean(shares)),
        "gram_cosine": float(np.mean(cosines)),
    }


class ResidualBlock(nn.Module):
    r"""A residual block :math:`z = x + W_2 \tanh(W_1 x + b_1) + b_2`, to measure beyond one layer.

    Args:
        dim: features of ``x`` and ``z``.
        hidden: width of the inner layer.
        linear: factory for both inner layers, e.g. ``nn.Linear`` or ``AffineLikeLinear``.

    Shape:
        - Input: :math:`(*, \text{dim})`. Output: same shape.
    """

    def __init__(
        self, dim: int, hidden: int, linear: Callable[[int, int], nn.Module] = nn.Linear
    ) -> None:
        super().__init__()
        self.inner = linear(dim, hidden)
        self.outer = linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.outer(torch.tanh(self.inner(x)))


class SelfAttention(nn.Module):
    r"""One self-attention layer, :math:`z = \mathrm{MHA}(x, x, x)`, batch first.

    Args:
        dim: token features.
        heads: attention heads (must divide ``dim``).

    Shape:
        - Input: :math:`(B, T, \text{dim})`. Output: same shape.
    """

    def __init__(self, dim: int, heads: int = 1) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.attn(x, x, x, need_weights=False)
        return out
