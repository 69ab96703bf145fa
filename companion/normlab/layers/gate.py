"""Part II: AutoNorm's learned gate, :class:`NormSelector` and :class:`AutoNorm`; the
Gumbel-Softmax sampling and the gate's weights are in :mod:`normlab.functional`.

The gate mixes the candidates :data:`CANDIDATES` = ``("dyt", "ln")`` per sample. Inputs have
shape ``(N, *tokens, *normalized_shape)``; the selector pools over the token dimensions and
accepts an optional boolean ``token_mask`` of shape ``(N, *tokens)`` (True = a real token),
so that padding does not leak into the pooled vector.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import functional as NF
from .._checks import one_of, positive_number
from ..functional import check_tau
from ..functional._common import _check_input as check_input
from ..paper import DYT_ALPHA_INIT, TAU
from ._common import (
    ShapeLike,
    as_shape,
    per_sample,
    pooled_mlp,
    token_pool,
)
from .candidates import DyT

__all__ = [
    "CANDIDATES",
    "SELECTOR_MODES",
    "NormSelector",
    "AutoNorm",
]

CANDIDATES: tuple[str, ...] = ("dyt", "ln")
SELECTOR_MODES: tuple[str, ...] = ("learned", "random", "fixed")


class NormSelector(nn.Module):
    r"""AutoNorm's gate: per-sample mixing weights over ``k`` candidate normalisers.

    .. math::
        \ell = W_2\, \mathrm{ReLU}(W_1\, \mathrm{pool}(x) + b_1) + b_2 \in \mathbb{R}^k, \qquad
        w = \mathrm{GumbelSoftmax}(\ell, \tau)

    ``pool`` is the mean over tokens (:func:`token_pool`); ``hidden`` defaults to
    ``max(1, D // 2)`` as in the AutoNorm code. In training mode the weights are sampled
    (soft, or one-hot straight-through when ``hard``). In eval mode, or when ``frozen`` (set
    by the AutoNorm-S schedule), they are deterministic: :math:`\mathrm{softmax}(\ell)`, the
    probabilities the samples follow, or its one-hot argmax when ``hard``. ``frozen`` is
    saved in the ``state_dict`` (its ``_extra_state``): loading a frozen selector's state
    freezes it again, its parameters with ``requires_grad=False`` as
    :func:`normlab.gates.freeze_selector` leaves them. Every forward stores ``last_logits``
    and ``last_probs`` (:math:`\mathrm{softmax}(\ell)`, float32, detached) for telemetry.

    Args:
        normalized_shape: the trailing dimensions, as for :class:`torch.nn.LayerNorm`.
        k: the number of candidates, at least 2. Default: ``2``.
        hidden: width of the MLP. Default: ``max(1, D // 2)``,
            :math:`D = \prod \text{normalized\_shape}`.
        tau: the Gumbel-Softmax temperature, at least :data:`~normlab.functional.TAU_MIN`. Default: ``0.5``.
        hard: straight-through one-hot weights instead of soft ones. Default: ``False``.
        device, dtype: where and in which dtype the parameters are made.

    Attributes:
        mlp: ``Linear(D, hidden) -> ReLU -> Linear(hidden, k)``: :math:`W_1` of shape
            ``(hidden, D)``, :math:`W_2` of shape ``(k, hidden)`` and their biases, all
            initialised as :class:`torch.nn.Linear`.
        frozen: whether the weights are deterministic in training too (``False`` at first).

    Shape:
        - Input: :math:`(N, *, \text{normalized\_shape})`
        - Output: :math:`(N, k)`, float32 (float64 for float64 input)

    Examples::

        >>> selector = NormSelector(64).eval()
        >>> weights = selector(torch.randn(8, 10, 64))
        >>> weights.shape
        torch.Size([8, 2])
        >>> torch.allclose(weights.sum(-1), torch.ones(8))
        True
    """

    pools_tokens = True

    #: Noise for the next training forward pass, drawn by a population
    #: (:mod:`normlab.population_noise`); None (always, in a single run): drawn here.
    noise: torch.Tensor | None = None
    #: Per population member, whether its gate is frozen (a bool per member under vmap);
    #: None (always, in a single run, whose ``frozen`` says it).
    frozen_members: torch.Tensor | None = None

    def __init__(
        self,
        normalized_shape: ShapeLike,
        k: int = 2,
        hidden: int | None = None,
        tau: float = TAU,
        hard: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = as_shape(normalized_shape)
        if isinstance(k, bool) or not isinstance(k, int) or k < 2:
            raise ValueError(
                f"k (the number of candidates) must be an int >= 2, got {k!r}"
            )
        if not isinstance(hard, bool):
            raise TypeError(f"hard must be a bool, got {hard!r}")
        self.k = k
        self.tau = tau
        self.hard = hard
        self.frozen = False
        self.mlp = pooled_mlp(math.prod(self.normalized_shape), hidden, k, **factory)
        self.hidden = self.mlp[0].out_features
        self.last_logits: torch.Tensor | None = None
        self.last_probs: torch.Tensor | None = None

    @property
    def tau(self) -> float:
        """The Gumbel-Softmax temperature, a float ``>= TAU_MIN``."""
        return self._tau

    @tau.setter
    def tau(self, value: float) -> None:
        self._tau = check_tau(value)

    def reset_parameters(self) -> None:
        self.mlp[0].reset_parameters()
        self.mlp[2].reset_parameters()

    def forward(
        self, x: torch.Tensor, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        check_input(x, self.normalized_shape, min_extra_dims=1)
        logits = NF.at_least_float32(
            self.mlp(token_pool(x, len(self.normalized_shape), token_mask))
        )
        self.last_logits = logits.detach()
        self.last_probs = torch.softmax(logits, dim=-1).detach()
        return NF.norm_selector(
            logits,
            self.tau,
            self.hard,
            self.training,
            noise=self.noise,
            frozen=self.frozen,
            frozen_members=self.frozen_members,
        )

    def get_extra_state(self) -> dict[str, bool]:
        return {"frozen": self.frozen}

    def set_extra_state(self, state: dict[str, bool]) -> None:
        self.frozen = bool(state["frozen"])
        if self.frozen:
            for param in self.parameters():
                param.requires_grad_(False)

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
    With ``selector="fixed"`` both weights are 1/2 always: the candidates' mix without a
    gate (in eval, the Random Selector is this mix).

    ``pin`` (``"dyt"``, ``"ln"`` or None) forces the gate onto one candidate: the layer then
    returns exactly that candidate's output, for tests and ablations. The candidates are
    ordered as :data:`CANDIDATES` = ``("dyt", "ln")``; ``last_probs`` (per-sample gate
    probabilities, ``(N, 2)``, at least float32) and ``last_logits`` hold the last forward's gate, detached
    (the drawn weights for the random selector, which has no logits; None when pinned).

    Args:
        normalized_shape: the trailing dimensions, as for :class:`torch.nn.LayerNorm`.
        tau: the gate's Gumbel-Softmax temperature. Default: ``0.5``.
        hard: straight-through one-hot gate weights. Default: ``False``.
        selector_hidden: width of the selector's MLP. Default: ``max(1, D // 2)``.
        selector: ``"learned"``, ``"random"`` or ``"fixed"``. Default: ``"learned"``.
        alpha_init: DyT's initial :math:`\alpha`. Default: ``0.5``
            (:data:`normlab.paper.DYT_ALPHA_INIT`).
        eps: LayerNorm's epsilon. Default: ``1e-5``.
        device, dtype: where and in which dtype the parameters are made.

    Attributes:
        dyt: the :class:`DyT` candidate (:math:`\alpha` = ``alpha_init``, :math:`\gamma`
            ones and :math:`\beta` zeros of shape ``normalized_shape``).
        ln: the :class:`torch.nn.LayerNorm` candidate (weight ones, bias zeros of shape
            ``normalized_shape``).
        selector: the :class:`NormSelector` (``k=2``); None for the random and fixed ones.

    Shape:
        - Input: :math:`(N, *, \text{normalized\_shape})`
        - Output: same shape as the input

    Examples::

        >>> layer = AutoNorm(64)  # in place of nn.LayerNorm(64)
        >>> x = torch.randn(8, 10, 64)
        >>> layer(x).shape
        torch.Size([8, 10, 64])
        >>> layer.last_probs.shape  # the gate's probabilities (DyT, LN) per sample
        torch.Size([8, 2])
        >>> layer.pin = "ln"
        >>> torch.equal(layer(x), layer.ln(x))
        True
    """

    pools_tokens = True

    #: Noise for the next training forward pass, drawn by a population
    #: (:mod:`normlab.population_noise`); None (always, in a single run): drawn here.
    noise: torch.Tensor | None = None

    def __init__(
        self,
        normalized_shape: ShapeLike,
        tau: float = TAU,
        hard: bool = False,
        selector_hidden: int | None = None,
        selector: str = "learned",
        alpha_init: float = DYT_ALPHA_INIT,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        one_of("selector", selector, SELECTOR_MODES)
        positive_number("eps", eps)
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = as_shape(normalized_shape)
        self.selector_mode = selector
        self.dyt = DyT(self.normalized_shape, alpha_init=alpha_init, **factory)
        self.ln = nn.LayerNorm(self.normalized_shape, eps=eps, **factory)
        self.selector = (
            NormSelector(
                self.normalized_shape,
                k=len(CANDIDATES),
                hidden=selector_hidden,
                tau=tau,
                hard=hard,
                **factory,
            )
            if selector == "learned"
            else None
        )
        if selector != "learned":
            check_tau(
                tau
            )  # unused by the random selector, but the same arguments are checked
        self.pin = None
        self.last_logits: torch.Tensor | None = None
        self.last_probs: torch.Tensor | None = None

    @property
    def pin(self) -> str | None:
        """The candidate the gate is forced onto (``"dyt"``, ``"ln"``), or None."""
        return self._pin

    @pin.setter
    def pin(self, value: str | None) -> None:
        self._pin = one_of("pin", value, (*CANDIDATES, None))

    def reset_parameters(self) -> None:
        self.dyt.reset_parameters()
        self.ln.reset_parameters()
        if self.selector is not None:
            self.selector.reset_parameters()

    def gate(
        self, x: torch.Tensor, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The mixing weights ``(N, 2)`` (float32) for ``x``, in the order of ``CANDIDATES``."""
        if self.selector is not None:
            weights = self.selector(x, token_mask)
            self.last_logits, self.last_probs = (
                self.selector.last_logits,
                self.selector.last_probs,
            )
            return weights
        if self.training and self.selector_mode == "random" and self.noise is not None:
            w_dyt = self.noise  # a population member's draw (normlab.population)
        elif self.training and self.selector_mode == "random":
            w_dyt = torch.rand(x.shape[0], device=x.device)
        else:
            w_dyt = torch.full((x.shape[0],), 0.5, device=x.device)
        weights = torch.stack([w_dyt, 1.0 - w_dyt], dim=-1)
        self.last_logits, self.last_probs = None, weights
        return weights

    def forward(
        self, x: torch.Tensor, token_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        check_input(x, self.normalized_shape, min_extra_dims=1)
        if self.pin is not None:
            self.last_logits = self.last_probs = None
            return self.dyt(x) if self.pin == "dyt" else self.ln(x)
        weights = self.gate(x, token_mask).to(x.dtype)
        w_dyt, w_ln = per_sample(weights[:, 0], x), per_sample(weights[:, 1], x)
        # w_dyt (g_d tanh(a x) + b_d) + w_ln (g_l y + b_l), with the per-channel affines folded
        # into per-sample coefficients: two full-size products instead of four.
        scale_dyt, scale_ln = w_dyt * self.dyt.weight, w_ln * self.ln.weight
        shift = torch.addcmul(w_ln * self.ln.bias, w_dyt, self.dyt.bias)
        return NF.autonorm_mix(
            x,
            self.dyt.alpha,
            scale_dyt,
            scale_ln,
            shift,
            self.normalized_shape,
            self.ln.eps,
        )

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, selector={self.selector_mode!r}, pin={self.pin!r}"
