"""Part II's claim rules: one CIFAR-10 stand-in, N2 on the exact-gradient control, N7 on the
drop under corruption, and the gate claims that need a deep enough stand-in."""

from __future__ import annotations

import pandas as pd
import pytest
from normlab import claims
from normlab.claims import part2_gates, part2_tasks
from normlab.stats import Interval

SEEDS = range(4)


def gate_rows(scores: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    """A gate-study table: (data, arm) -> one test accuracy per seed (val = test)."""
    rows = [
        {
            "data": data,
            "arm": arm,
            "seed": seed,
            "lr": 3e-3,
            "init": "torch_default",
            "readout": "cls",
            "selector_lr": 1.0,
            "tau": 0.5,
            "metric": "accuracy",
            "higher_is_better": True,
            "data_profile": "quick",
            "profile": "cpu",
            "val_metric": value,
            "test_metric": value,
            "decision_entropy": 0.3,
            "epochs": 8,
            "train_loss": 1.0 - value,
        }
        for (data, arm), values in scores.items()
        for seed, value in zip(SEEDS, values)
    ]
    return pd.DataFrame(rows)


def test_n1_and_n3_read_the_same_cifar10_standin() -> None:
    table = gate_rows(
        {
            ("mnist", "autonorm"): [0.9, 0.91, 0.92, 0.93],
            ("mnist", "autonorm_random"): [0.8, 0.81, 0.82, 0.83],
            ("mnist_restyled", "autonorm"): [0.6, 0.61, 0.62, 0.63],
            ("mnist_restyled", "autonorm_random"): [0.7, 0.71, 0.72, 0.73],
            ("mnist_restyled", "frozen_ln"): [0.65, 0.66, 0.67, 0.68],
            ("mnist_restyled", "freeze_at_8"): [0.64, 0.65, 0.66, 0.67],
        }
    )
    n1, stationary = part2_gates._n1_gate(table)
    n3 = part2_gates._n3_gate(table)
    assert stationary.label.startswith("autonorm - autonorm_random on mnist (")
    assert stationary.samples == pytest.approx([0.1] * 4)
    assert n1.label.startswith("autonorm - autonorm_random on mnist_restyled (")
    assert all(" on mnist_restyled (" in e.label for e in n3)
    # each label states its regime: the schedule, the freeze decision, the final losses
    assert all("freeze decided at epoch 8, fired on" in e.label for e in n3)
    assert "final training loss autonorm " in n1.label
    assert n1.samples == pytest.approx([-0.1] * 4)  # learned minus random there
    # the hinge configurations do not enter the claim: a second readout changes nothing
    other = table.assign(readout="mean", test_metric=0.0, val_metric=0.0)
    again, _ = part2_gates._n1_gate(pd.concat([table, other], ignore_index=True))
    assert again.samples == pytest.approx(n1.samples)


@pytest.mark.parametrize(
    ("mean", "verdict"),
    [
        (0.5, claims.SUPPORTED),
        (-0.5, claims.CONTRADICTED),
        (0.0, claims.INCONCLUSIVE),
    ],
)
def test_n2_reads_the_exact_gradient_control(mean: float, verdict: str) -> None:
    """N2 compares the gate trained with the exact gradient against the Gumbel-Softmax
    one at the same forward noise, so it can be supported or contradicted."""
    n2 = claims.get("N2")
    assert n2.test.experiment == "gate_regime"  # past the plateau
    assert n2.test.regimes == ("gate_bottleneck",)  # the short budget, its sensitivity
    assert "exact gradient" in n2.test.says
    assert n2.test.rule.verdict(Interval(mean, 0.1, 5)) == verdict


def test_n7_is_judged_on_the_drop_with_clean_accuracy_beside_it() -> None:
    """autonorm_s is worse clean and under corruption by the same amount: no difference
    in the drop, whatever the clean deficit."""
    rows = []
    for name, clean in (("autonorm_s", 0.80), ("frozen_ln", 0.90)):
        for seed in SEEDS:
            noise = 0.01 * seed
            rows.append(
                {
                    "data": "fashion_mnist",
                    "normaliser": name,
                    "seed": seed,
                    "lr": 1e-2,
                    "metric": "accuracy",
                    "higher_is_better": True,
                    "data_profile": "quick",
                    "profile": "cpu",
                    "val_metric": clean + noise,
                    "test_metric": clean + noise,
                    "mean_corruption_accuracy": clean - 0.2 + noise * (seed % 2),
                }
            )
    (effect,) = part2_tasks._n7(pd.DataFrame(rows))
    assert effect.samples == pytest.approx([0.0] * 4, abs=1e-12)
    assert "clean accuracy 0.815 vs 0.915" in effect.label
    assert effect.arms[0].score == pytest.approx(0.815)


def test_gate_claims_need_a_deep_enough_standin() -> None:
    table = pd.DataFrame(
        {"data": ["ptb_pos", "sst2", "fashion_mnist"], "depth": [1, 1, 1]}
    )
    with pytest.raises(claims.Unmeasurable, match="not testable on this stand-in"):
        part2_gates._n10(table)
    with pytest.raises(claims.Unmeasurable, match="4 or more"):
        part2_gates._n11(table)
