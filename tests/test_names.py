"""normlab.names: one reader-facing name per key, the same in tables and figures."""

from __future__ import annotations

import pandas as pd
import pytest
from normlab import figures
from normlab.display import table
from normlab.names import display_name, layer_name


@pytest.mark.parametrize(
    "key, column, profile, shown",
    [
        ("frozen_ln", None, None, "FrozenLN"),
        ("autonorm_random", "arm", None, "Random Selector"),
        ("autonorm_hard", "arm", None, "AutoNorm, hard gate"),
        ("freeze_at_8", "arm", None, "gate frozen at epoch 8"),
        ("mnist", "data", "quick", "8×8 digits"),
        ("mnist_restyled", "data", "cpu", "restyled 8×8 digits"),
        ("mnist", "data", "standard", "MNIST"),
        ("ptb_pos", "data", "cpu", "synthetic tagging grammar"),
        # no offline stand-in: the real dataset (a GPU profile's table, read offline)
        ("cifar10", "data", "quick", "CIFAR-10"),
        ("cifar10", "data", "cpu", "CIFAR-10"),
        ("cls", "readout", None, "class token"),
        ("trunc_normal_0.02", "init", None, "truncated normal, std 0.02"),
        ("encoder.blocks.2.norm1", "layer", None, "block 3, norm 1"),
        ("encoder.norm", "layer", None, "final norm"),
        # a value of another column, and anything unknown, are left alone
        ("mean", None, None, "mean"),
        ("mnist", "lr", "quick", "mnist"),
        (0.5, "data", None, 0.5),
    ],
)
def test_each_key_has_one_reader_facing_name(key, column, profile, shown) -> None:
    assert display_name(key, column, profile) == shown


def test_figures_and_tables_use_the_same_names() -> None:
    for key in ("frozen_ln", "autonorm_hard", "freeze_at_3", "mnist_restyled"):
        assert figures.label(key) == display_name(key)
    assert figures.label("gaussian_noise") == "gaussian-noise"  # no name: readable
    assert layer_name("head") == "head"


def test_a_table_shows_no_internal_key() -> None:
    frame = pd.DataFrame(
        {
            "data": ["mnist", "mnist_restyled"],
            "arm": ["frozen_ln", "autonorm_hard"],
            "autonorm_random": [0.9, 0.8],
            "n": [3, 3],
        }
    ).set_index("data")
    html = table(frame, index=True, profile="cpu").to_html()
    for key in ("frozen_ln", "autonorm_hard", "autonorm_random", ">mnist"):
        assert key not in html
    for name in ("FrozenLN", "AutoNorm, hard gate", "Random Selector", "8×8 digits"):
        assert name in html
    plain = table(pd.DataFrame({"n": [1, 2]})).data
    assert list(plain["n"]) == [1, 2] and plain["n"].dtype.kind == "i"
