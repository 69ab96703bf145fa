"""Shared test set-up: tests run in the quick profile, on the CPU, with a fixed seed."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
# The book's tooling (normlab_book: the reader notebooks, the Sphinx extensions) lives beside
# the book, not in the installed package; the tests import it from the checkout.
sys.path.insert(0, str(ROOT / "book" / "_ext"))
os.environ.setdefault("NORMLAB_PROFILE", "quick")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def root() -> Path:
    """The repository root."""
    return ROOT


@pytest.fixture(autouse=True, scope="session")
def one_thread_from_the_start():
    """One torch thread before any module-scoped fixture trains: a set a fixture saves and
    the save a test makes must run on the same thread count, whatever OMP_NUM_THREADS the
    suite was started with (two threads round differently from one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def one_thread(one_thread_from_the_start):
    """Run every test on one torch thread: on a loaded 2-core machine, two OpenMP threads
    per process can stall small-model training by 10-100x (measured: 1.5 s vs 120 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def interruptible_children():
    """SIGINT handled in this process while the test runs, so that the children it starts
    (itself or through submitit) can be interrupted. A background job (``nohup ... &``, a
    CI runner) starts with SIGINT ignored, and an ignored signal stays ignored across
    ``exec``, so a child would never see its Ctrl-C; a handled one is reset to the default
    there, and Python turns it into KeyboardInterrupt."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def unclaimed_root(tmp_path: Path) -> Path:
    """A results folder whose one saved set (a copy of the shipped gate_widget set) no
    claim reads: the scorecard from it has no evidence for any empirical claim, and it is
    not empty (``scorecard --root`` of a folder without sets is an error)."""
    import shutil

    from normlab import results

    folder = tmp_path / "unclaimed"
    shutil.copytree(results.shipped_root() / "gate_widget", folder / "gate_widget")
    return folder
