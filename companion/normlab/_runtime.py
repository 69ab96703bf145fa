"""Run-time choices shared by every chapter: the profile, the device and the seed."""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch

from ._checks import seed as check_seed

# The package's version, as pyproject.toml states it (also ``normlab.__version__``); run
# records and manifests name it, so it lives below every module that writes them.
VERSION = "0.1.0"
PROFILES: tuple[str, ...] = ("quick", "cpu", "standard", "paper")
# Every experiment declares these; ``cpu`` is optional (the saved result sets that ship).
REQUIRED_PROFILES: tuple[str, ...] = ("quick", "standard", "paper")
PROFILE_ENV = "NORMLAB_PROFILE"
# Training and downloads both show bars; the rule lives here, below both of them.
PROGRESS_ENV = "NORMLAB_PROGRESS"


def profile() -> str:
    """Return the active profile: ``quick``, ``cpu``, ``standard`` or ``paper``.

    ``$NORMLAB_PROFILE`` decides when set; otherwise the profile is ``quick``, with or
    without CUDA (on a GPU, ``quick`` runs there, and fast). A larger profile is always
    asked for by name, so that opening a chapter never starts hours of runs.

    - ``quick``: CPU, offline, generated or shipped data; used by CI and the HTML build.
    - ``cpu``: CPU, offline, at least 3 seeds and larger grids, about 90 CPU-minutes per
      chapter (45 minutes on 2 cores); the saved result sets that ship with the book. Never the default.
    - ``standard``: a GPU with the real datasets and shortened schedules.
    - ``paper``: the papers' full recipes.
    """
    value = os.environ.get(PROFILE_ENV)
    if value is None or value.strip() == "":
        return "quick"
    value = value.strip().lower()
    if value not in PROFILES:
        raise ValueError(
            f"{PROFILE_ENV}={os.environ[PROFILE_ENV]!r} is not a profile; "
            f"expected one of {', '.join(PROFILES)}"
        )
    return value


def check_profile(name: str | None) -> str:
    """Validate a profile name, or return the active one when ``name`` is None."""
    if name is None:
        return profile()
    if name not in PROFILES:
        raise ValueError(
            f"profile={name!r} is not a profile; expected one of {', '.join(PROFILES)}"
        )
    return name


def device() -> torch.device:
    """Return the best available device: ``cuda``, then ``mps``, then ``cpu``."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch (CPU and CUDA) and return a seeded CPU generator.

    The returned generator is for code that wants its own stream of random numbers
    without touching the global one.
    """
    check_seed("seed", seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def progress_default(device: torch.device | str | None = None) -> bool:
    """Whether progress bars show by default.

    ``$NORMLAB_PROGRESS`` = ``0`` or ``1`` decides when set. Otherwise bars show on a
    terminal (stderr is a TTY) and whenever training runs on a GPU, where runs are long
    enough to need one (``tqdm.auto`` draws a widget in notebooks). Quick-profile CPU runs
    in notebooks, nbval and the book build therefore stay quiet.
    """
    value = os.environ.get(PROGRESS_ENV, "").strip()
    if value:
        return value.lower() not in ("0", "false", "no", "off")
    on_gpu = device is not None and torch.device(device).type == "cuda"
    return on_gpu or bool(getattr(sys.stderr, "isatty", lambda: False)())
