"""Part II: adaptive normalisers (DyT, AdaNorm, FiLMNorm) and AutoNorm's learned gate.

Every normaliser here takes the same ``normalized_shape`` as :class:`torch.nn.LayerNorm`
(an int or a tuple: the trailing dimensions it normalises) plus ``device``/``dtype``, so
each one drops into a timm-style model as ``norm_layer=``. ``norm_layer(name, **kwargs)``
returns such a factory by name, for experiment tables.

Inputs have shape ``(N, *tokens, *normalized_shape)``: a batch dimension first, any number
of token dimensions, then the normalised dimensions. Layers that look at a whole sample
(FiLMNorm, NormSelector, AutoNorm) pool over the token dimensions; they accept an optional
boolean ``token_mask`` of shape ``(N, *tokens)`` (True = a real token) so that padding does
not leak into the pooled vector.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

ShapeLike = Union[int, Sequence[int], torch.Size]
NormFactory = Callable[..., nn.Module]

CANDIDATES: tuple[str, ...] = ("dyt", "ln")
SELECTOR_MODES: tuple[str, ...] = ("learned", "random")


def _as_shape(normalized_shape: ShapeLike) -> tuple[int, ...]:
    """Validate ``normalized_shape`` the way ``nn.LayerNorm`` reads it."""
    if isinstance(normalized_shape, (bool, str)):
        raise TypeError(f"normalized_shape must be an int or a tuple of ints, got {normalized_shape!r}")
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    try:
        shape = tuple(int(d) for d in normalized_shape)
    except TypeError as err:
        raise TypeError(
            f"normalized_shape must be an int or a tuple of ints, got {normalized_shape!r}"
        ) from err
    if not shape or any(d < 1 for d in shape):
        raise ValueError(f"normalized_shape must hold positive sizes, got {normalized_shape!r}")
    return shape


def _check_input(x: torch.Tensor, shape: tuple[int, ...], min_extra_dims: int = 0) -> None:
    """Raise a clear error when ``x`` does not end with ``shape``."""
    if x.dim() < len(shape) + min_extra_dims or tuple(x.shape[x.dim() - len(shape):]) != shape:
        lead = "(N, *tokens, " if min_extra_dims else "(*, "
        raise ValueError(
            f"input of shape {tuple(x.shape)} does not match normalized_shape {shape}; "
            f"expected {lead}{', '.join(map(str, shape))})"
        )


def _check_tau(tau: float) -> float:
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not math.isfinite(tau) or tau <= 0:
        raise ValueError(f"tau must be a finite float > 0, got {tau!r}")
    return float(tau)


def token_pool(x: torch.Tensor, ndim_normalized: int, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over the token dimensions: ``(N, *tokens, *shape) -> (N, prod(shape))``.

    The token dimensions are all dimensions except the batch (first) and the
    ``ndim_normalized`` trailing ones; a 2-D input ``(N, D)`` has none and is returned as is.
    ``token_mask`` (bool, ``(N, *tokens)``, True = real token) restricts the mean to real
    tokens; a sample with no real token pools to zeros.
    """
    n = x.shape[0]
    token_dims = tuple(range(1, x.dim() - ndim_normalized))
    if not token_dims:
        return x.reshape(n, -1)
    if token_mask is None:
        return x.mean(dim=token_dims).reshape(n, -1)
    if token_mask.shape != x.shape[: 1 + len(token_dims)]:
        raise ValueError(
            f"token_mask of shape {tuple(token_mask.shape)} does not match the batch and token "
            f"dimensions {tuple(x.shape[: 1 + len(token_dims)])} of the input"
        )
    weight = token_mask.to(x.dtype).reshape(*token_mask.shape, *([1] * ndim_normalized))
    total = (x * weight).sum(dim=token_dims)
    count = weight.sum(dim=token_dims).clamp_min(1.0)
    return (total / count).reshape(n, -1)


def _at_least_float32(t: torch.Tensor) -> torch.Tensor:
    """Upcast bf16/fp16 to float32 (float64 stays float64)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def _per_sample(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reshape a per-sample tensor ``(N,)`` to broadcast against ``x`` ``(N, ...)``."""
    return v.reshape(v.shape[0], *([1] * (x.dim() - 1)))


class DyT(nn.Module):
    r"""Dynamic Tanh (Zhu et al., 2025), a normaliser without statistics.

    .. math::
        \mathrm{DyT}(x) = \gamma \odot \tanh(\alpha x) + \beta

    :math:`\alpha` is one learnable scalar (``alpha``, initialised to ``alpha_init``, 0.5 in
    the paper for non-LLM models); :math:`\gamma` (``weight``, ones) and :math:`\beta`
    (``bias``, zeros) are per channel over ``normalized_shape``.

    Shape:
        - Input: :math:`(*, \text{normalized\_shape})`
        - Output: same shape as the input
    """

    def __init__(
        self,
        normalized_shape: ShapeLike,
        alpha_init: float = 0.5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not math.isfinite(alpha_init):
            raise ValueError(f"alpha_init must be a finite float, got {alpha_init!r}")
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = _as_shape(normalized_shape)
        self.alpha_init = float(alpha_init)
        self.alpha = nn.Parameter(torch.empty((), **factory))
        self.weight = nn.Parameter(torch.empty(self.normalized_shape, **factory))
        self.bias = nn.Parameter(torch.empty(self.normalized_shape, **factory))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.constant_(self.alpha, self.alpha_init)
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.normalized_shape)
        return torch.addcmul(self.bias, self.weight, torch.tanh(self.alpha * x))

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, alpha_init={self.alpha_init}"


class AdaNorm(nn.Module):
    r"""AdaNorm (Xu et al., 2019): LayerNorm without gain or bias, with an adaptive scale.

    .. math::
        y = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad
        \mathrm{AdaNorm}(x) = C \,\bigl(1 - k\, \mathrm{sg}(y)\bigr) \odot y

    :math:`\mu, \sigma^2` are the mean and biased variance over ``normalized_shape`` (the
    LayerNorm convention, so ``k=0, scale=1`` is exactly LayerNorm without affine; Xu et
    al.'s script divides by the unbiased std plus eps instead). ``sg`` is stop-gradient: the
    factor :math:`1 - k y` is treated as a constant in the backward pass, which is what makes
    the gradient of AdaNorm differ from that of the plain cubic :math:`C(y - k y^2)`.
    ``k`` defaults to the paper's 0.1. ``scale`` (:math:`C`) defaults to 1 (our choice: it
    keeps the output at LayerNorm's unit scale, like the gain LN starts with; Xu et al.'s
    IWSLT script uses 2). No learned parameters.

    Shape:
        - Input: :math:`(*, \text{normalized\_shape})`
        - Output: same shape as the input
    """

    def __init__(
        self,
        normalized_shape: ShapeLike,
        k: float = 0.1,
        scale: float = 1.0,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not math.isfinite(k) or k < 0:
            raise ValueError(f"k must be a finite float >= 0, got {k!r}")
        if not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale must be a finite float > 0, got {scale!r}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps!r}")
        self.normalized_shape = _as_shape(normalized_shape)
        self.k = float(k)
        self.scale = float(scale)
        self.eps = float(eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, self.normalized_shape)
        y = F.layer_norm(x, self.normalized_shape, eps=self.eps)
        return self.scale * (1.0 - self.k * y.detach()) * y

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, k={self.k}, scale={self.scale}, eps={self.eps}"


class FiLMNorm(nn.Module):
    r"""FiLM-style adaptive LayerNorm, conditioned on the sample's own pooled input.

    .. math::
        \bar x = \mathrm{pool}(x), \qquad
        [\Delta\gamma, \beta] = W_2\, \mathrm{ReLU}(W_1 \bar x + b_1) + b_2, \qquad
        \mathrm{FiLMNorm}(x) = \mathrm{LN}(x) \odot (1 + \Delta\gamma) + \beta

    ``LN`` has no affine parameters; ``pool`` is the mean over the token dimensions (none
    for a 2-D input, real tokens only when ``token_mask`` is given). Perez et al.'s FiLM
    predicts :math:`\gamma, \beta` from an external condition; with none, the input itself
    conditions (the adaLN form). The last layer starts at zero, so the layer starts as plain
    LayerNorm. ``hidden`` defaults to ``max(1, D // 2)`` with ``D = prod(normalized_shape)``.

    Shape:
        - Input: :math:`(N, *, \text{normalized\_shape})`
        - Output: same shape as the input
    """

    pools_tokens = True

    def __init__(
        self,
        normalized_shape: ShapeLike,
        hidden: int | None = None,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = _as_shape(normalized_shape)
        features = math.prod(self.normalized_shape)
        hidden = max(1, features // 2) if hidden is None else hidden
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"hidden must be a positive int, got {hidden!r}")
        self.eps = float(eps)
        self.hidden = hidden
        self.condition = nn.Sequential(
            nn.Linear(features, hidden, **factory),
            nn.ReLU(),
            nn.Linear(hidden, 2 * features, **factory),
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.condition[0].reset_parameters()
        nn.init.zeros_(self.condition[2].weight)
        nn.init.zeros_(self.condition[2].bias)

    def forward(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_input(x, self.normalized_shape, min_extra_dims=1)
        pooled = token_pool(x, len(self.normalized_shape), token_mask)
        d_gamma, beta = self.condition(pooled).chunk(2, dim=-1)
        view = (x.shape[0], *([1] * (x.dim() - 1 - len(self.normalized_shape))), *self.normalized_shape)
        y = F.layer_norm(x, self.normalized_shape, eps=self.eps)
        return torch.addcmul(beta.reshape(view), y, 1.0 + d_gamma.reshape(view))

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, hidden={self.hidden}, eps={self.eps}"


def sample_gumbel(shape: Sequence[int] | torch.Size, *, device: torch.device | str | None = None,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    r"""Standard Gumbel noise :math:`G = -\log E`, :math:`E \sim \mathrm{Exp}(1)`, in float32.

    Sampling :math:`E` directly (rather than :math:`-\log(-\log U)`) needs one logarithm; it
    is clamped away from zero so that :math:`G` is always finite (at most about 87).
    """
    e = torch.empty(tuple(shape), device=device, dtype=torch.float32).exponential_(generator=generator)
    return -e.clamp_min_(torch.finfo(torch.float32).tiny).log()


def gumbel_softmax(logits: torch.Tensor, tau: float, hard: bool = False,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    r"""Gumbel-Softmax (Jang et al. 2017; Maddison et al. 2017) over the last dimension.

    .. math::
        w = \mathrm{softmax}\bigl((\ell + G) / \tau\bigr), \qquad G_i \sim \mathrm{Gumbel}(0, 1)

    As :math:`\tau \to 0`, :math:`w` tends to the one-hot vector of
    :math:`\arg\max(\ell + G)`, which is distributed as :math:`\mathrm{softmax}(\ell)` (the
    Gumbel-max trick). ``hard=True`` is the straight-through estimator: the forward value is
    that one-hot vector, the gradient is the soft one. Computed in float32 whatever the
    dtype of ``logits`` is lower (bf16 or fp16 overflow at small ``tau``); returns float32
    (float64 for float64 logits).
    """
    tau = _check_tau(tau)
    noise = sample_gumbel(logits.shape, device=logits.device, generator=generator)
    soft = torch.softmax((_at_least_float32(logits) + noise) / tau, dim=-1)
    if not hard:
        return soft
    index = soft.argmax(dim=-1, keepdim=True)
    one_hot = torch.zeros_like(soft).scatter_(-1, index, 1.0)
    return one_hot - soft.detach() + soft


class NormSelector(nn.Module):
    r"""AutoNorm's gate: per-sample mixing weights over ``k`` candidate normalisers.

    .. math::
        \ell = W_2\, \mathrm{ReLU}(W_1\, \mathrm{pool}(x) + b_1) + b_2 \in \mathbb{R}^k, \qquad
        w = \mathrm{GumbelSoftmax}(\ell, \tau)

    ``pool`` is the mean over tokens (:func:`token_pool`); ``hidden`` defaults to
    ``max(1, D // 2)`` as in the AutoNorm code. In training mode the weights are sampled
    (soft, or one-hot straight-through when ``hard``). In eval mode, or when ``frozen`` (set
    by the AutoNorm-S schedule), they are deterministic: :math:`\mathrm{softmax}(\ell)`, the
    probabilities the samples follow, or its one-hot argmax when ``hard``. Every forward
    stores ``last_logits`` and ``last_probs`` (:math:`\mathrm{softmax}(\ell)`, float32,
    detached) for telemetry.

    Shape:
        - Input: :math:`(N, *, \text{normalized\_shape})`
        - Output: :math:`(N, k)`, float32 (float64 for float64 input)
    """

    pools_tokens = True

    def __init__(
        self,
        normalized_shape: ShapeLike,
        k: int = 2,
        hidden: int | None = None,
        tau: float = 0.5,
        hard: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = _as_shape(normalized_shape)
        if isinstance(k, bool) or not isinstance(k, int) or k < 2:
            raise ValueError(f"k (the number of candidates) must be an int >= 2, got {k!r}")
        features = math.prod(self.normalized_shape)
        hidden = max(1, features // 2) if hidden is None else hidden
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"hidden must be a positive int, got {hidden!r}")
        if not isinstance(hard, bool):
            raise TypeError(f"hard must be a bool, got {hard!r}")
        self.k = k
        self.hidden = hidden
        self.tau = _check_tau(tau)
        self.hard = hard
        self.frozen = False
        self.mlp = nn.Sequential(nn.Linear(features, hidden, **factory), nn.ReLU(), nn.Linear(hidden, k, **factory))
        self.last_logits: torch.Tensor | None = None
        self.last_probs: torch.Tensor | None = None

    @property
    def tau(self) -> float:
        """The Gumbel-Softmax temperature, a float > 0."""
        return self._tau

    @tau.setter
    def tau(self, value: float) -> None:
        self._tau = _check_tau(value)

    def reset_parameters(self) -> None:
        self.mlp[0].reset_parameters()
        self.mlp[2].reset_parameters()

    def forward(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_input(x, self.normalized_shape, min_extra_dims=1)
        logits = _at_least_float32(self.mlp(token_pool(x, len(self.normalized_shape), token_mask)))
        probs = torch.softmax(logits, dim=-1)
        self.last_logits = logits.detach()
        self.last_probs = probs.detach()
        if self.training and not self.frozen:
            return gumbel_softmax(logits, self.tau, self.hard)
        if self.hard:
            return F.one_hot(logits.argmax(dim=-1), self.k).to(logits.dtype)
        return probs

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, k={self.k}, hidden={self.hidden}, tau={self.tau}, hard={self.hard}"


class AutoNorm(nn.Module):
    r"""AutoNorm: a learned, per-sample mixture of DyT and LayerNorm.

    .. math::
        \mathrm{AutoNorm}(x) = w_{\mathrm{DyT}}(x)\, \mathrm{DyT}(x) + w_{\mathrm{LN}}(x)\, \mathrm{LN}(x),
        \qquad w_{\mathrm{DyT}} + w_{\mathrm{LN}} = 1

    With ``selector="learned"`` the weights come from a :class:`NormSelector` (Gumbel-Softmax
    at temperature ``tau``, soft by default as in the paper, straight-through when ``hard``).
    With ``selector="random"`` (the paper's Random Selector) there are no gate parameters:
    in training, each sample draws :math:`w_{\mathrm{DyT}} \sim U(0, 1)` afresh at every
    forward and :math:`w_{\mathrm{LN}} = 1 - w_{\mathrm{DyT}}` (per sample, our choice); in
    eval both weights are 1/2, the mean of that distribution.

    ``pin`` (``"dyt"``, ``"ln"`` or None) forces the gate onto one candidate: the layer then
    returns exactly that candidate's output, for tests and ablations. The candidates are
    ordered as :data:`CANDIDATES` = ``("dyt", "ln")``; ``last_probs`` (per-sample gate
    probabilities, ``(N, 2)``, at least float32) and ``last_logits`` hold the last forward's gate, detached
    (the drawn weights for the random selector, which has no logits; None when pinned).

    Shape:
        - Input: :math:`(N, *, \text{normalized\_shape})`
        - Output: same shape as the input
    """

    pools_tokens = True

    def __init__(
        self,
        normalized_shape: ShapeLike,
        tau: float = 0.5,
        hard: bool = False,
        selector_hidden: int | None = None,
        selector: str = "learned",
        alpha_init: float = 0.5,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if selector not in SELECTOR_MODES:
            raise ValueError(f"selector={selector!r} is not a selector mode; expected one of {', '.join(SELECTOR_MODES)}")
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = _as_shape(normalized_shape)
        self.selector_mode = selector
        self.dyt = DyT(self.normalized_shape, alpha_init=alpha_init, **factory)
        self.ln = nn.LayerNorm(self.normalized_shape, eps=eps, **factory)
        self.selector = (
            NormSelector(self.normalized_shape, k=len(CANDIDATES), hidden=selector_hidden, tau=tau, hard=hard, **factory)
            if selector == "learned" else None
        )
        if selector == "random":
            _check_tau(tau)  # unused by the random selector, but the same arguments are checked
        self.pin = None
        self.last_logits: torch.Tensor | None = None
        self.last_probs: torch.Tensor | None = None

    @property
    def pin(self) -> str | None:
        """The candidate the gate is forced onto (``"dyt"``, ``"ln"``), or None."""
        return self._pin

    @pin.setter
    def pin(self, value: str | None) -> None:
        if value is not None and value not in CANDIDATES:
            raise ValueError(f"pin={value!r} is not a candidate; expected one of {', '.join(CANDIDATES)} or None")
        self._pin = value

    def reset_parameters(self) -> None:
        self.dyt.reset_parameters()
        self.ln.reset_parameters()
        if self.selector is not None:
            self.selector.reset_parameters()

    def gate(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The mixing weights ``(N, 2)`` (float32) for ``x``, in the order of ``CANDIDATES``."""
        if self.selector is not None:
            weights = self.selector(x, token_mask)
            self.last_logits, self.last_probs = self.selector.last_logits, self.selector.last_probs
            return weights
        if self.training:
            w_dyt = torch.rand(x.shape[0], device=x.device)
        else:
            w_dyt = torch.full((x.shape[0],), 0.5, device=x.device)
        weights = torch.stack([w_dyt, 1.0 - w_dyt], dim=-1)
        self.last_logits, self.last_probs = None, weights
        return weights

    def forward(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_input(x, self.normalized_shape, min_extra_dims=1)
        if self.pin is not None:
            self.last_logits = self.last_probs = None
            return self.dyt(x) if self.pin == "dyt" else self.ln(x)
        weights = self.gate(x, token_mask).to(x.dtype)
        w_dyt, w_ln = _per_sample(weights[:, 0], x), _per_sample(weights[:, 1], x)
        # w_dyt (g_d tanh(a x) + b_d) + w_ln (g_l y + b_l), with the per-channel affines folded
        # into per-sample coefficients: two full-size products instead of four.
        scale_dyt, scale_ln = w_dyt * self.dyt.weight, w_ln * self.ln.weight
        shift = torch.addcmul(w_ln * self.ln.bias, w_dyt, self.dyt.bias)
        y = F.layer_norm(x, self.normalized_shape, eps=self.ln.eps)
        return torch.addcmul(torch.addcmul(shift, scale_ln, y), scale_dyt, torch.tanh(self.dyt.alpha * x))

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, selector={self.selector_mode!r}, pin={self.pin!r}"


NORM_LAYERS: dict[str, NormFactory] = {
    "layernorm": nn.LayerNorm,
    "frozen_ln": nn.LayerNorm,
    "dyt": DyT,
    "adanorm": AdaNorm,
    "film": FiLMNorm,
    "autonorm": AutoNorm,
    "autonorm_random": functools.partial(AutoNorm, selector="random"),
}


def norm_layer(name: str, **kwargs: Any) -> NormFactory:
    """Return the factory ``normalized_shape -> nn.Module`` registered under ``name``.

    ``kwargs`` are bound into the factory (``norm_layer("autonorm", tau=0.5)``). Names:
    ``layernorm`` and ``frozen_ln`` (both ``nn.LayerNorm``; the paper calls static LN
    "FrozenLN"), ``dyt``, ``adanorm``, ``film``, ``autonorm``, ``autonorm_random``.
    AutoNorm-S is the ``autonorm`` layer trained with :class:`normlab.gates.AutoNormS`.
    """
    if name not in NORM_LAYERS:
        raise ValueError(f"norm_layer name {name!r} is unknown; expected one of {', '.join(NORM_LAYERS)}")
    factory = NORM_LAYERS[name]
    return functools.partial(factory, **kwargs) if kwargs else factory


def resolve_norm_layer(norm_layer_or_name: NormFactory | str) -> NormFactory:
    """Accept a factory or a registered name; return a factory."""
    if isinstance(norm_layer_or_name, str):
        return norm_layer(norm_layer_or_name)
    if not callable(norm_layer_or_name):
        raise TypeError(f"norm_layer must be a callable factory or a name, got {norm_layer_or_name!r}")
    return norm_layer_or_name
