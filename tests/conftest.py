"""Shared test set-up: tests run in the quick profile, on the CPU, with a fixed seed."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("NORMLAB_PROFILE", "quick")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def root() -> Path:
    """The repository root."""
    return ROOT
