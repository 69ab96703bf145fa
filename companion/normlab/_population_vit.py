"""A population of ViT-Lites run over the member dimension, without ``torch.vmap``.

Under ``vmap`` a ViT's attention cannot use ``F.scaled_dot_product_attention`` (its CPU
kernel has no batching rule), so it is written out as thousands of 5 x 5 matrix products,
and every small operation pays ``vmap``'s dispatch: a population step of 16 gate ViTs
costs about three times what one ViT costs on a batch 16 times as large. Here the members'
tokens are ``(K, B, T, D)`` tensors: each linear map is one ``baddbmm`` with the members'
own weights, attention runs every member's, sample's and head's sequence at once
(:class:`_FewTokenAttention`), and each normaliser applies the member's own parameters (LayerNorm, DyT, and AutoNorm with
its gate: the member's own Gumbel or uniform noise, its AutoNorm-S freeze, and its gate
probabilities kept for the telemetry, as :class:`normlab.population.Population` passes them).

The arithmetic is each member's single run's (``vmap``'s, for the gate's mix), summed in
another order where the kernels differ, so a member agrees with its single run to float
rounding (``tests/test_population_vit.py`` checks this against the modules one by one in
float64). :func:`vit_ensemble` gives the forward pass for a ViT built only of what is here
(no dropout, stochastic depth or LayerScale, which the gate studies never use), or None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from . import functional as NF
from .layers.candidates import DyT
from .layers.gate import AutoNorm
from .models.blocks import Attention, Block, DropPath, FeedForward, LayerScale
from .models.vit import ViTLite

__all__ = ["EnsembleForward", "vit_ensemble"]

Tensors = Mapping[str, Tensor]
#: A population's forward pass over the member dimension (here and in
#: :mod:`normlab._population_ensemble`): ``(params, buffers, x, noise, frozen, probes)`` ->
#: ``(output, probed)``: the stacked tensors by their module-state names, a ``(K, B, ...)``
#: input, each member's gate noise and AutoNorm-S freeze by module name (``(K, ...)``),
#: and the gates whose probabilities to return, stacked
#: (:meth:`normlab.population.Population.forward`).
EnsembleForward = Callable[
    [Tensors, Tensors, Tensor, Tensors, Tensors, Sequence[str]],
    tuple[Tensor, dict[str, Tensor]],
]


class _Pass:
    """One forward pass of the population: its tensors, and what the gates report."""

    def __init__(
        self, params: Tensors, noise: Tensors, frozen: Tensors, probes: Sequence[str]
    ) -> None:
        self.params, self.noise, self.frozen = params, noise, frozen
        self.probes = set(probes)
        self.probed: dict[str, Tensor] = {}

    def p(self, name: str) -> Tensor:
        return self.params[name]

    def member(self, name: str, ndim: int) -> Tensor:
        """Parameter ``name`` ``(K, *shape)`` shaped to broadcast over a ``(K, ...)``
        tensor of ``ndim`` dimensions, its own dimensions last."""
        v = self.p(name)
        return v.reshape(v.shape[0], *([1] * (ndim - v.dim())), *v.shape[1:])

    def linear(self, name: str, x: Tensor) -> Tensor:
        """``nn.Linear`` ``name`` on ``(K, ..., in)``: one ``baddbmm`` for all members."""
        k, features = x.shape[0], x.shape[-1]
        flat = x.reshape(k, -1, features)
        out = torch.baddbmm(
            self.p(f"{name}.bias").unsqueeze(1), flat, self.p(f"{name}.weight").mT
        )
        return out.view(*x.shape[:-1], out.shape[-1])

    def norm(self, name: str, m: nn.Module, x: Tensor) -> Tensor:
        if isinstance(m, AutoNorm):
            return self.autonorm(name, m, x)
        if isinstance(m, DyT):
            return self.dyt(name, x)
        y = F.layer_norm(x, m.normalized_shape, None, None, m.eps)
        return torch.addcmul(
            self.member(f"{name}.bias", x.dim()),
            self.member(f"{name}.weight", x.dim()),
            y,
        )

    def dyt(self, name: str, x: Tensor) -> Tensor:
        return NF.dyt(
            x,
            self.member(f"{name}.alpha", x.dim()),
            self.member(f"{name}.weight", x.dim()),
            self.member(f"{name}.bias", x.dim()),
        )

    def gate(self, name: str, m: AutoNorm, x: Tensor) -> Tensor:
        """The members' gate weights ``(K, B, 2)``, as :meth:`AutoNorm.gate` makes each."""
        selector = m.selector
        if selector is not None:
            pooled = x.mean(dim=tuple(range(2, x.dim() - 1)))  # over the tokens
            hidden = torch.relu(self.linear(f"{name}.selector.mlp.0", pooled))
            logits = NF.at_least_float32(self.linear(f"{name}.selector.mlp.2", hidden))
            probs = torch.softmax(logits, dim=-1).detach()
            frozen = self.frozen.get(f"{name}.selector")
            weights = NF.norm_selector(
                logits,
                selector.tau,
                selector.hard,
                selector.training,
                noise=self.noise.get(f"{name}.selector"),
                frozen=selector.frozen,
                frozen_members=None if frozen is None else frozen.view(-1, 1, 1),
            )
        else:
            shape = x.shape[:2]
            if m.training and m.selector_mode == "random":
                if name not in self.noise:
                    raise ValueError(
                        f"noise: the random selector {name!r} draws in training; a "
                        "population passes each member's draw (GateNoise)"
                    )
                w_dyt = self.noise[name]
            else:
                w_dyt = torch.full(shape, 0.5, device=x.device)
            weights = probs = torch.stack([w_dyt, 1.0 - w_dyt], dim=-1)
        if name in self.probes:
            self.probed[name] = probs
        return weights

    def autonorm(self, name: str, m: AutoNorm, x: Tensor) -> Tensor:
        if m.pin is not None:
            if m.pin == "dyt":
                return self.dyt(f"{name}.dyt", x)
            return self.norm(f"{name}.ln", m.ln, x)
        weights = self.gate(name, m, x).to(x.dtype)
        per_sample = (*weights.shape[:2], *([1] * (x.dim() - 2)))
        w_dyt, w_ln = weights[..., 0].view(per_sample), weights[..., 1].view(per_sample)
        ndim = x.dim()
        scale_dyt = w_dyt * self.member(f"{name}.dyt.weight", ndim)
        scale_ln = w_ln * self.member(f"{name}.ln.weight", ndim)
        shift = torch.addcmul(
            w_ln * self.member(f"{name}.ln.bias", ndim),
            w_dyt,
            self.member(f"{name}.dyt.bias", ndim),
        )
        return NF.autonorm_mix(
            x,
            self.member(f"{name}.dyt.alpha", ndim),
            scale_dyt,
            scale_ln,
            shift,
            m.normalized_shape,
            m.ln.eps,
        )

    def attention(self, name: str, m: Attention, x: Tensor) -> Tensor:
        k, n, length, dim = x.shape
        width = dim // m.heads
        # (3, tokens, head width, members x samples x heads): every sequence in the last
        # dimension, where the few tokens' products are long vectorised operations
        q, key, v = (
            self.linear(f"{name}.qkv", x)
            .view(k, n, length, 3, m.heads, width)
            .permute(3, 2, 5, 0, 1, 4)
            .reshape(3, length, width, k * n * m.heads)
            .unbind(0)
        )
        out = _FewTokenAttention.apply(q * width**-0.5, key, v)
        out = out.view(length, width, k, n, m.heads).permute(2, 3, 0, 4, 1)
        return self.linear(f"{name}.proj", out.reshape(k, n, length, dim))

    def block(self, name: str, m: Block, x: Tensor) -> Tensor:
        x = x + self.attention(
            f"{name}.attn", m.attn, self.norm(f"{name}.norm1", m.norm1, x)
        )
        mlp: FeedForward = m.mlp
        hidden = self.linear(f"{name}.mlp.fc1", self.norm(f"{name}.norm2", m.norm2, x))
        hidden = F.gelu(hidden, approximate=mlp.act.approximate)
        return x + self.linear(f"{name}.mlp.fc2", hidden)


class _FewTokenAttention(torch.autograd.Function):
    r"""Softmax attention for sequences of a few tokens, the sequences along the last
    dimension: ``q``, ``k``, ``v`` of shape ``(T, d, M)`` (tokens, head width, sequences),
    ``q`` already scaled by :math:`1/\sqrt{d}`;

    .. math::
        o_{i} = \sum_j p_{ij} v_j, \qquad p_{ij} = \mathrm{softmax}_j (q_i \cdot k_j)

    for every sequence at once. ``scaled_dot_product_attention`` runs each of the M
    sequences as its own few small matrix products; here each step is one operation over
    all M sequences, summed over the small dimensions in short loops of in-place
    ``addcmul``: about a third of its time for the gate ViT's 5 tokens. The backward pass is
    the same sums in the other direction (float64 ``gradcheck`` in the tests)."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor) -> Tensor:  # type: ignore[override]
        tokens, width = q.shape[:2]
        scores = q[:, None, 0] * k[None, :, 0]  # (T query, T key, M)
        for c in range(1, width):
            scores.addcmul_(q[:, None, c], k[None, :, c])
        p = torch.softmax(scores, dim=1)
        out = p[:, 0, None] * v[None, 0]  # (T, d, M)
        for j in range(1, tokens):
            out.addcmul_(p[:, j, None], v[None, j])
        ctx.save_for_backward(q, k, v, p)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # type: ignore[override]
        q, k, v, p = ctx.saved_tensors
        tokens, width = q.shape[:2]
        g_p = g[:, None, 0] * v[None, :, 0]
        for c in range(1, width):
            g_p.addcmul_(g[:, None, c], v[None, :, c])
        g_v = p[0, :, None] * g[0][None]
        for i in range(1, tokens):
            g_v.addcmul_(p[i, :, None], g[i][None])
        g_s = p * (g_p - (g_p * p).sum(dim=1, keepdim=True))  # softmax's backward
        g_q = g_s[:, 0, None] * k[None, 0]
        for j in range(1, tokens):
            g_q.addcmul_(g_s[:, j, None], k[None, j])
        g_k = g_s[0, :, None] * q[0][None]
        for i in range(1, tokens):
            g_k.addcmul_(g_s[i, :, None], q[i][None])
        return g_q, g_k, g_v


def _supported(vit: nn.Module) -> bool:
    """Whether every module of ``vit`` is one :class:`_Pass` computes as its own forward
    does (exact types; no dropout, stochastic depth, LayerScale or hooks)."""
    if type(vit) is not ViTLite:
        return False
    for m in vit.modules():
        if m._forward_hooks or m._forward_pre_hooks or isinstance(m, LayerScale):
            return False
        if isinstance(m, (nn.Dropout, DropPath)) and m.p > 0:
            return False
    norms = [vit.encoder.norm]
    for block in vit.encoder.blocks:
        if type(block.attn) is not Attention or block.attn.attn_dropout > 0:
            return False
        if type(block.mlp.act) is not nn.GELU:
            return False
        norms += [block.norm1, block.norm2]
    return all(_affine_norm(m) for m in norms)


def _affine_norm(m: nn.Module) -> bool:
    """A LayerNorm or DyT with its weight and bias, or an AutoNorm (whose have both)."""
    if type(m) is AutoNorm:
        return True
    return (
        type(m) in (nn.LayerNorm, DyT) and m.weight is not None and m.bias is not None
    )


def vit_ensemble(vit: nn.Module) -> EnsembleForward | None:
    """The forward pass of a population of ``vit`` over the member dimension, or None
    where :func:`_supported` says it has none (``vmap`` then runs it)."""
    if not _supported(vit):
        return None
    blocks = [(f"encoder.blocks.{i}", b) for i, b in enumerate(vit.encoder.blocks)]
    patch = vit.config.patch_size

    def forward(
        params: Tensors,
        buffers: Tensors,
        x: Tensor,
        noise: Tensors,
        frozen: Tensors,
        probes: Sequence[str],
    ) -> tuple[Tensor, dict[str, Tensor]]:
        run = _Pass(params, noise, frozen, probes)
        k, n, channels, height, width = x.shape
        rows, cols = height // patch, width // patch
        # the patch embedding (a convolution with stride = kernel) as one linear map
        patches = (
            x.reshape(k, n, channels, rows, patch, cols, patch)
            .permute(0, 1, 3, 5, 2, 4, 6)
            .reshape(k, n, rows * cols, channels * patch * patch)
        )
        weight = params["patch_embed.weight"].flatten(2)
        tokens = torch.baddbmm(
            params["patch_embed.bias"].unsqueeze(1),
            patches.reshape(k, n * rows * cols, -1),
            weight.mT,
        ).view(k, n, rows * cols, -1)
        if vit.cls_token is not None:
            cls = params["cls_token"].expand(k, n, 1, tokens.shape[-1])
            tokens = torch.cat([cls, tokens], dim=2)
        tokens = tokens + params["pos_embed"]
        for name, block in blocks:
            tokens = run.block(name, block, tokens)
        tokens = run.norm("encoder.norm", vit.encoder.norm, tokens)
        read = tokens[:, :, 0] if vit.cls_token is not None else tokens.mean(dim=2)
        return run.linear("head", read), run.probed

    return forward
