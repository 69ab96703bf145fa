"""Part II's claims (AutoNorm and AutoNorm-S, N1-N14): their declarations.

The gate studies of chapters 11-13 compare AutoNorm's arms and read its gates, their
quantities in :mod:`normlab.claims.part2_gates`; the task studies of chapters 13-15 compare
normalisers, theirs in :mod:`normlab.claims.part2_tasks`. Every comparison of two arms goes
through :func:`normlab.claims.paired`. On the CPU, every dataset is a stand-in, so such a
verdict tests the mechanism only.
"""

from __future__ import annotations

from ..normalisers import PART2
from ..paper import EPS_H
from .part2_gates import (
    _n1_gate,
    _n2_gate,
    _n3_gate,
    _n5_gate,
    _n10,
    _n11,
    _n13_gate,
    _n14_gate,
)
from .part2_tasks import _n4, _n7, _n12, _on, _versus
from .registry import Test, declare
from .rules import AtLeast, Directional, Equivalent

__all__: list[str] = []

_N = "II"

declare(
    id="N1",
    part=_N,
    kind="empirical",
    sentence="On stationary vision, the learned gate (AutoNorm, unfrozen) does worse than the "
    "Random Selector: the stabilisation bottleneck.",
    chapter=11,
    paper={"AutoNorm (CIFAR-10)": 84.35, "Random": 85.48},
    datasets=("cifar10",),
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n1_gate,
        rule=Directional(-1),
        says="autonorm minus autonorm_random test accuracy, paired by seed, lr chosen on val, "
        "on CIFAR-10 when present (else its stand-in, the restyled digits) and on a "
        "stationary task (real MNIST); trained past the plateau, the short budget a "
        "sensitivity",
    ),
)
declare(
    id="N2",
    part=_N,
    kind="empirical",
    sentence="The cause: the Gumbel-Softmax gate's gradient variance is high, so gates cannot "
    "specialise before the backbone's features mature.",
    chapter=11,
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n2_gate,
        rule=Directional(+1),
        says="the gate trained with the exact gradient of its expected (linearised) loss "
        "minus the Gumbel-Softmax gradient, the same sampled gate in the forward pass, test "
        "accuracy paired by seed, each at its lr chosen on val, per task: if the gradient's "
        "noise is the cause, removing it alone helps; trained past the plateau, the short "
        "budget a sensitivity",
    ),
)
declare(
    id="N3",
    part=_N,
    kind="empirical",
    sentence="AutoNorm-S recovers and leads on CIFAR-10.",
    chapter=12,
    paper={
        "AutoNorm-S": 86.35,
        "AutoNorm-S CI": 0.22,
        "FrozenLN": 82.97,
        "AdaNorm": 84.20,
    },
    datasets=("cifar10",),
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n3_gate,
        rule=Directional(+1),
        says=f"autonorm_s (the paper's rule, eps_H {EPS_H:g}, decided after warm-up) minus "
        "frozen_ln and minus autonorm, paired by seed, on CIFAR-10 when present, else the "
        "restyled (diverse) digits; trained past the plateau, the short budget (the "
        "freeze at a fixed epoch) a sensitivity",
    ),
)
declare(
    id="N4",
    part=_N,
    kind="empirical",
    sentence="CIFAR-100: AutoNorm-S has its largest vision lead.",
    chapter=15,
    paper={"AutoNorm-S": 67.15, "FrozenLN": 64.82},
    datasets=("cifar100",),
    test=Test(
        experiment="autonorm_vision",
        quantity=_n4,
        rule=Directional(+1),
        says="lead over frozen_ln on CIFAR-100 minus the next largest vision lead",
        min_profile="standard",
    ),
)
declare(
    id="N5",
    part=_N,
    kind="empirical",
    sentence="MNIST and Fashion-MNIST: no real gain (within the CI, or FrozenLN ahead).",
    chapter=12,
    paper={
        "MNIST AutoNorm-S": 99.18,
        "MNIST CI": 0.10,
        "MNIST FrozenLN": 98.82,
        "MNIST AdaNorm": 98.95,
        "F-MNIST AutoNorm-S": 92.95,
        "F-MNIST FrozenLN": 93.12,
        "F-MNIST AdaNorm": 92.48,
    },
    datasets=("mnist", "fashion_mnist"),
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n5_gate,
        rule=AtLeast(0.005, direction=-1),
        says="autonorm_s (decided after warm-up) minus frozen_ln on MNIST-like data; no gain "
        "beyond 0.005 (half an accuracy point); trained past the plateau, the short "
        "budget a sensitivity",
    ),
)
declare(
    id="N6",
    part=_N,
    kind="empirical",
    sentence="SVHN: AdaNorm is best.",
    chapter=15,
    paper={"AdaNorm": 91.10, "FrozenLN": 90.37, "AutoNorm-S": 89.38},
    datasets=("svhn",),
    test=Test(
        experiment="autonorm_vision",
        quantity=_on("svhn", "adanorm", [n for n in PART2 if n != "adanorm"]),
        rule=Directional(+1),
        says="adanorm minus the strongest other normaliser (chosen on val) on SVHN",
        min_profile="standard",
    ),
)
declare(
    id="N7",
    part=_N,
    kind="empirical",
    sentence="AutoNorm-S is more robust to corruption, significantly (p < 0.05).",
    chapter=15,
    paper={"AutoNorm-S CIFAR-10-C": 72.8, "FrozenLN": 68.2, "AdaNorm": 70.8},
    datasets=("cifar10_c",),
    test=Test(
        experiment="autonorm_robustness",
        quantity=_n7,
        rule=Directional(+1),
        says="the drop under corruption (clean accuracy minus mean corruption accuracy, every "
        "corruption and severity weighted alike; clean training), frozen_ln's minus "
        "autonorm_s's, paired by seed at the lr chosen on clean val; clean accuracies beside it",
    ),
)
declare(
    id="N8",
    part=_N,
    kind="empirical",
    sentence="PTB POS tagging: AutoNorm-S ahead (p < 0.01), lower perplexity.",
    chapter=13,
    paper={
        "AutoNorm-S": 97.42,
        "FrozenLN": 96.80,
        "AdaNorm": 97.15,
        "FiLM": 96.72,
        "AutoNorm-S ppl": 38.6,
        "FrozenLN ppl": 41.9,
    },
    datasets=("ptb_pos",),
    test=Test(
        experiment="autonorm_language",
        quantity=_versus(
            "ptb_pos", "autonorm_s", ["frozen_ln"], what=" token accuracy"
        ),
        rule=Directional(+1),
        says="autonorm_s minus frozen_ln token accuracy, paired by seed at the lr chosen on "
        "val (the perplexity half: chapter 13's bound)",
    ),
)
declare(
    id="N9",
    part=_N,
    kind="empirical",
    sentence="SST-2: AutoNorm-S ahead.",
    chapter=13,
    paper={"AutoNorm-S": 91.25, "FrozenLN": 89.42, "AdaNorm": 90.15, "FiLM": 88.95},
    datasets=("sst2",),
    test=Test(
        experiment="autonorm_language",
        quantity=_versus("sst2", "autonorm_s", ["frozen_ln"], what=" accuracy"),
        rule=Directional(+1),
        says="autonorm_s minus frozen_ln sentence accuracy, paired by seed at the lr chosen "
        "on val",
    ),
)
declare(
    id="N10",
    part=_N,
    kind="empirical",
    sentence="Language gate entropy stays high for longer than vision's.",
    chapter=13,
    datasets=("ptb_pos", "sst2", "mnist"),
    test=Test(
        experiment="autonorm_gates",
        quantity=_n10,
        rule=Directional(+1),
        says="learned AutoNorm, one budget: mean gate entropy over layers and epochs, and the gate entropy "
        "at matched progress (the first epoch at 80 % of the way from chance to the run's best validation "
        "accuracy), each language task minus the image task, seeds paired by index (independent runs)",
    ),
)
declare(
    id="N11",
    part=_N,
    kind="empirical",
    sentence="Per-layer gates: vision collapses to LayerNorm quickly; language keeps a mixed "
    "gate, deeper layers preferring DyT.",
    chapter=13,
    datasets=("ptb_pos", "sst2", "mnist"),
    test=Test(
        experiment="autonorm_gates",
        quantity=_n11,
        rule=Directional(+1),
        says=f"at the last epoch: image p_LN - 1/2; per language task, gate entropy - eps_H ({EPS_H}) and the "
        "slope of p_DyT over relative depth; every part must hold",
    ),
)
declare(
    id="N12",
    part=_N,
    kind="empirical",
    sentence="Tabular regression: negligible differences.",
    chapter=14,
    paper={
        "California AutoNorm-S": 0.4892,
        "California FrozenLN": 0.4905,
        "Energy AutoNorm-S": 22.75,
        "Energy AdaNorm": 22.78,
        "Energy FiLM": 22.82,
    },
    datasets=("california_housing", "energy_efficiency"),
    test=Test(
        experiment="autonorm_tabular",
        quantity=_n12,
        rule=Equivalent(0.02),
        says="relative RMSE difference (autonorm_s - frozen_ln)/frozen_ln; equivalent within ±2 %",
    ),
)
declare(
    id="N13",
    part=_N,
    kind="empirical",
    sentence="Hard (straight-through) gating converges slower than soft gating.",
    chapter=11,
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n13_gate,
        rule=Directional(+1),
        says="soft minus hard gate: mean validation accuracy over the epochs (area under "
        "the learning curve), paired by seed; trained past the plateau, the short budget a "
        "sensitivity",
    ),
)
declare(
    id="N14",
    part=_N,
    kind="empirical",
    sentence="Adaptive selection helps only when features are non-stationary: the lead orders "
    "CIFAR-100 > CIFAR-10 > MNIST / Fashion-MNIST.",
    chapter=12,
    datasets=("cifar100", "cifar10", "mnist", "fashion_mnist"),
    test=Test(
        experiment="gate_regime",
        regimes=("gate_bottleneck",),
        quantity=_n14_gate,
        rule=Directional(+1),
        says="lead of autonorm_s over frozen_ln on the more diverse data minus on the less "
        "diverse, paired by seed (CIFAR-100 > CIFAR-10 > MNIST on a GPU; restyled > plain "
        "digits on the CPU); trained past the plateau, the short budget a sensitivity",
    ),
)
