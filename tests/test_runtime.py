"""normlab's run-time choices: profile, device, seeding, and showing source."""

from __future__ import annotations

import random

import normlab
import numpy as np
import pytest
import torch


def test_profile_defaults_to_quick_without_cuda(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NORMLAB_PROFILE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert normlab.profile() == "quick"


def test_profile_defaults_to_quick_with_cuda(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Opening a chapter on a GPU (Colab) must not start hours of runs: quick still."""
    monkeypatch.delenv("NORMLAB_PROFILE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert normlab.device().type == "cuda"  # the patch is seen: CUDA reported present
    assert normlab.profile() == "quick"


@pytest.mark.parametrize("value", ["quick", "cpu", "standard", "paper", " Paper "])
def test_profile_from_environment(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("NORMLAB_PROFILE", value)
    assert normlab.profile() == value.strip().lower()


def test_bad_profile_lists_the_valid_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NORMLAB_PROFILE", "fast")
    with pytest.raises(ValueError, match="quick, cpu, standard, paper") as info:
        normlab.profile()
    assert "fast" in str(info.value)


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps")],
)
def test_device_prefers_cuda_then_mps(
    monkeypatch: pytest.MonkeyPatch, cuda: bool, mps: bool, expected: str
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert normlab.device() == torch.device(expected)


def test_device_is_cpu_without_accelerators(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert normlab.device() == torch.device("cpu")


def test_seed_everything_repeats_all_generators() -> None:
    def draw() -> tuple[float, float, float, float]:
        gen = normlab.seed_everything(123)
        return (
            random.random(),
            float(np.random.rand()),
            float(torch.rand(())),
            float(torch.rand((), generator=gen)),
        )

    assert draw() == draw()
    normlab.seed_everything(124)
    assert float(torch.rand(())) != draw()[2]


@pytest.mark.parametrize("seed", [-1, 1.5, "1", True])
def test_seed_everything_rejects_bad_seeds(seed: object) -> None:
    with pytest.raises(ValueError, match="seed"):
        normlab.seed_everything(seed)  # type: ignore[arg-type]


def test_show_source_renders_highlighted_package_code() -> None:
    view = normlab.show_source(normlab.seed_everything)
    assert repr(view).startswith("def seed_everything(seed: int)")
    html = view._repr_html_()
    assert "normlab._runtime" in html and "<span" in html and "seed_everything" in html


def test_show_source_refuses_foreign_objects() -> None:
    with pytest.raises(TypeError, match="normlab"):
        normlab.show_source(np.mean)


def test_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        normlab.no_such_thing  # noqa: B018
