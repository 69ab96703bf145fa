"""The AutoNorm paper's stated settings, each written once; the package reads them here.

The paper states its gate temperature, its entropy threshold and the epoch of AutoNorm-S's
decision, but not its total number of epochs, so the book states its own ``T_freeze`` in
steps and as a share of each run (``normlab.experiments.gate_study``).
"""

from __future__ import annotations

__all__ = ["TAU", "EPS_H", "T_FREEZE_EPOCHS", "FREEZE_RULES", "DYT_ALPHA_INIT"]

TAU = 0.5  # Gumbel-Softmax temperature of the per-layer gate (fixed, soft relaxation)
EPS_H = 0.1  # AutoNorm-S: a gate whose entropy is below this (nats) has decided
T_FREEZE_EPOCHS = 10  # AutoNorm-S checks each gate's entropy at this epoch
# AutoNorm-S's readings of its rule: "high", the paper's (freeze if H >= EPS_H at
# T_FREEZE_EPOCHS), and "low", the opposite (freeze once H < EPS_H). Here, below both the
# normaliser registry and normlab.gates, which check a rule against it.
FREEZE_RULES: tuple[str, ...] = ("high", "low")
DYT_ALPHA_INIT = 0.5  # DyT's alpha at init for non-LLM models (Zhu et al., 2025)
