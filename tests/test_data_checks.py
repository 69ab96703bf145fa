"""Bad data fails before training with a clear error (issue 15): one test per case.

Each test asserts the exception type and the key words of its message, and, for ``fit``,
that no training happened (the model's parameters are untouched).
"""

from __future__ import annotations

from pathlib import Path

import normlab
import pytest
import torch
from normlab import _evaluation, training
from normlab.data import DataSplit, load
from normlab.training import FitConfig, evaluate, fit
from torch import nn

CLASSES = {"classes": [str(c) for c in range(10)]}


@pytest.fixture(scope="module")
def digits() -> tuple[DataSplit, DataSplit]:
    return load("digits", "train"), load("digits", "val")


def small_model() -> nn.Module:
    normlab.seed_everything(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.Tanh(), nn.Linear(16, 10))


def quick_fit(
    model: nn.Module, train: DataSplit, val: DataSplit, **settings
) -> training.History:
    return fit(
        model,
        train,
        val,
        **{
            "epochs": 1,
            "batch_size": 32,
            "lr": 0.1,
            "device": "cpu",
            "progress": False,
            **settings,
        },
    )


def untouched(model: nn.Module, before: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def toy(y: torch.Tensor, **meta) -> DataSplit:
    return DataSplit(torch.zeros(len(y), 3), y, "classification", "toy", "train", meta)


def test_evaluate_refuses_an_empty_split(digits) -> None:
    empty = digits[1].subset(slice(0, 0))
    assert len(empty) == 0  # a filter may select no rows: the split itself is allowed
    with pytest.raises(ValueError, match=r"split digits/val is empty"):
        evaluate(small_model(), empty)


def test_fit_refuses_an_empty_val_split(digits) -> None:
    train, val = digits
    model = small_model()
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"val split digits/val is empty"):
        quick_fit(model, train, val.subset(torch.zeros(len(val), dtype=torch.bool)))
    assert untouched(model, before)


def test_labels_outside_the_class_range_are_refused() -> None:
    y = torch.tensor([0, 12, 3, 12, -1, 9])
    with pytest.raises(ValueError) as info:
        toy(y, **CLASSES)
    message = str(info.value)
    for words in (
        "toy/train",
        "[0, 10)",
        "10 classes",
        "12 (2 entries)",
        "-1 (1 entry)",
    ):
        assert words in message
    with pytest.raises(
        ValueError,
        match=r"\[0, 8\) of its 8 tags or IGNORE_INDEX \(-100\): -5 \(1 entry\)",
    ):
        DataSplit(
            torch.ones(1, 3, dtype=torch.long),
            torch.tensor([[1, -5, -100]]),
            "tagging",
            "toy",
            "train",
            {"tags": list("abcdefgh")},
        )


def test_labels_changed_in_place_are_caught_before_training(digits) -> None:
    """Tensors are mutable: fit checks the labels again (``split.to`` rebuilds the split)."""
    train, val = digits
    bad = train.subset(slice(None))
    bad.y = bad.y.clone()
    bad.y[[3, 7]] = 10
    model = small_model()
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"digits/train.*\[0, 10\).*10 \(2 entries\)"):
        quick_fit(model, bad, val)
    assert untouched(model, before)


def test_a_split_needs_its_label_names() -> None:
    with pytest.raises(
        ValueError, match=r"classification split toy/train needs meta\['classes'\]"
    ):
        toy(torch.tensor([0, 1]))
    with pytest.raises(
        ValueError, match=r"tagging split toy/train needs meta\['tags'\]"
    ):
        DataSplit(
            torch.ones(1, 2, dtype=torch.long),
            torch.zeros(1, 2, dtype=torch.long),
            "tagging",
            "toy",
            "train",
        )


def test_float_class_labels_are_refused_with_the_expected_dtype() -> None:
    with pytest.raises(
        TypeError,
        match=r"y of classification split toy/train must be torch\.int64.*got torch\.float32",
    ):
        toy(torch.tensor([0.0, 1.0]), **CLASSES)
    with pytest.raises(
        TypeError,
        match=r"x of regression split toy/train must be a floating dtype, got torch\.int64",
    ):
        DataSplit(
            torch.zeros(2, 3, dtype=torch.long),
            torch.zeros(2),
            "regression",
            "toy",
            "train",
        )


def test_tagging_padding_must_be_ignored() -> None:
    x = torch.tensor([[5, 6, 0]])  # the last token is padding
    with pytest.raises(
        ValueError, match=r"tags 1 padding token.*first in row 0.*IGNORE_INDEX \(-100\)"
    ):
        DataSplit(
            x,
            torch.tensor([[1, 2, 3]]),
            "tagging",
            "toy",
            "train",
            {"tags": list("abcd")},
        )


@pytest.mark.parametrize("where", ["train", "val"])
def test_non_finite_inputs_are_refused_before_training(digits, where: str) -> None:
    train, val = digits
    target = train if where == "train" else val
    x = target.x.clone()
    x[4, 0, 1, 1] = float("nan")
    x[4, 0, 2, 2] = float("inf")
    x[9, 0, 0, 0] = -float("inf")
    bad = DataSplit(x, target.y, target.task, target.name, target.split, target.meta)
    splits = (bad, val) if where == "train" else (train, bad)
    model = small_model()
    before = snapshot(model)
    with pytest.raises(
        ValueError,
        match=rf"x of split digits/{where} holds 3 non-finite value\(s\).*first in row 4",
    ):
        quick_fit(model, *splits)
    assert untouched(model, before)
    with pytest.raises(ValueError, match=rf"digits/{where} holds 3 non-finite"):
        evaluate(model, bad)


def test_non_finite_regression_targets_are_refused() -> None:
    y = torch.zeros(6)
    y[2] = float("nan")
    split = DataSplit(torch.zeros(6, 3), y, "regression", "toy", "val")
    with pytest.raises(
        ValueError, match=r"y of split toy/val holds 1 non-finite value\(s\).*row 2"
    ):
        evaluate(nn.Linear(3, 1), split)


def test_the_finite_check_runs_once_per_fit(digits, monkeypatch) -> None:
    """One pass over both splits per fit, not one per epoch or batch."""
    calls = []
    check = _evaluation._check_finite
    monkeypatch.setattr(
        _evaluation,
        "_check_finite",
        lambda *splits: calls.append(len(splits)) or check(*splits),
    )
    quick_fit(small_model(), *digits, epochs=2)
    assert calls == [2]


def test_a_model_that_does_not_fit_the_data_names_the_sample_shape(digits) -> None:
    train, val = digits
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(784, 10)
    )  # built for 28x28 images, given 8x8 digits
    before = snapshot(model)
    pattern = r"split digits/train \(sample shape \(1, 8, 8\).*mat1 and mat2 shapes cannot be multiplied"
    with pytest.raises(ValueError, match=pattern) as info:
        quick_fit(model, train, val)
    assert isinstance(
        info.value.__cause__, RuntimeError
    )  # torch's error stays attached
    assert untouched(model, before)
    with pytest.raises(
        ValueError, match=r"split digits/val \(sample shape \(1, 8, 8\).*mat1 and mat2"
    ):
        evaluate(model, val)
    cropped = DataSplit(
        val.x[:, :, :7, :7], val.y, val.task, val.name, val.split, val.meta
    )
    with pytest.raises(
        ValueError, match=r"split digits/val \(sample shape \(1, 7, 7\).*mat1 and mat2"
    ):
        quick_fit(small_model(), train, cropped)  # train fits the model, val does not


def test_checkpoint_dir_pointing_at_a_file_is_refused(digits, tmp_path: Path) -> None:
    existing = tmp_path / "notes.txt"
    existing.write_text("not a folder")
    with pytest.raises(
        ValueError,
        match=r"checkpoint_dir=.*notes\.txt' is an existing file; expected a folder",
    ):
        quick_fit(small_model(), *digits, checkpoint_dir=existing)
    with pytest.raises(
        ValueError, match=r"checkpoint_dir=.*lies under .*notes\.txt, which is a file"
    ):
        FitConfig(epochs=1, batch_size=1, lr=0.1, checkpoint_dir=existing / "run")


def test_large_finite_inputs_are_not_mistaken_for_non_finite(digits) -> None:
    """The fast check sums the inputs; a sum that overflows must fall back to the exact scan."""
    x = torch.full((4, 3), 3e38)
    assert not torch.isfinite(x.sum())
    split = DataSplit(x, torch.zeros(4), "regression", "toy", "val")
    _evaluation._check_finite(split)  # no error: every value is finite
    x[1, 2] = float("-inf")
    with pytest.raises(ValueError, match=r"1 non-finite value\(s\).*row 1"):
        _evaluation._check_finite(split)
