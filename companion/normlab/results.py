"""Saved result sets: real runs, larger than the quick profile, that ship with the book.

A saved set is the runner's folder for one experiment and profile, kept under the tracked
``results/`` folder of the repository, plus a ``manifest.json``::

    results/<experiment>/<profile>/runs/<run_id>.json   one record per run (the runner's)
    results/<experiment>/<profile>/results.csv          the tidy table (the runner's)
    results/<experiment>/<profile>/manifest.json        how, where and when it was made

Make one (resumable; shards may run on different machines into the same folder)::

    python -m normlab save fc_normalisers --profile cpu --threads 1
    python -m normlab save autonorm_vision --profile standard --shard 3/8

A chapter shows its live quick run beside the largest saved set with :func:`beside`.
:func:`verify` re-runs one configuration of a set and compares the metrics, so a shipped
number cannot drift from the code, and checks every record against the digest in the
manifest, so a number edited by hand is caught.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ._io import write_text_atomic
from ._runtime import PROFILES, check_profile

__all__ = [
    "SavedSet",
    "Mismatch",
    "default_root",
    "saved_sets",
    "largest",
    "load",
    "save",
    "verify",
    "beside",
    "RERUN_ATOL",
    "RERUN_RTOL",
]

ROOT = Path(__file__).resolve().parents[2]
RESULTS_ENV = "NORMLAB_RESULTS"
MANIFEST = "manifest.json"

# Re-run tolerance on another torch version or CPU. A different BLAS sums in another order
# (relative changes near 1e-7 per product); a few hundred SGD steps amplify that into small
# weight changes that flip a handful of borderline test predictions. On the 361-image digits
# test split one prediction is 0.0028, so 0.03 allows about ten flips: far above that noise,
# far below the differences between normalisers the chapters discuss. Losses get 5 % relative.
# Hand edits are caught exactly, on any machine, by the per-record digests of the manifest.
RERUN_ATOL = 0.03
RERUN_RTOL = 0.05
_COMPARED = (
    "val_metric",
    "test_metric",
    "train_loss",
    "val_loss",
    "test_loss",
    "diverged",
)


def default_root() -> Path:
    """``$NORMLAB_RESULTS`` when set, else the repository's tracked ``results/`` folder."""
    return Path(os.environ.get(RESULTS_ENV) or ROOT / "results")


# ------------------------------------------------------------------------ the machine


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "companion"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}{'+dirty' if dirty else ''}"


def hardware(device: str) -> dict[str, Any]:
    """What the runs ran on: device, CPU model, core count, torch threads, GPU name."""
    gpu = (
        torch.cuda.get_device_name(0)
        if device.startswith("cuda") and torch.cuda.is_available()
        else None
    )
    return {
        "device": device,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": gpu,
        "platform": platform.platform(),
    }


# -------------------------------------------------------------------------- one set


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class SavedSet:
    """One saved result set: its folder, its manifest and (loaded on demand) its results table."""

    folder: Path
    manifest: dict[str, Any]

    @property
    def experiment(self) -> str:
        return self.manifest["experiment"]

    @property
    def profile(self) -> str:
        return self.manifest["profile"]

    @property
    def on_gpu(self) -> bool:
        return str(self.manifest["hardware"]["device"]).startswith("cuda")

    @property
    def runs(self) -> int:
        return len(self.manifest["records"])

    @property
    def results(self) -> pd.DataFrame:
        """The set's ``results.csv`` (the runner's tidy table)."""
        return pd.read_csv(self.folder / "results.csv")

    def label(self) -> str:
        """One line for a figure or a table: profile, data, seeds, runs and hardware."""
        m = self.manifest
        hw = m["hardware"]["gpu"] or m["hardware"]["cpu_model"]
        return (
            f"saved set: {m['profile']} profile, {m['data']} data ({', '.join(m['datasets'])}), "
            f"{m['seeds']} seeds, {self.runs} runs, {hw}, {m['wall_seconds'] / 60:.0f} min"
        )


def load(folder: str | Path) -> SavedSet:
    """The saved set in ``folder`` (a ValueError if it has no manifest)."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise ValueError(
            f"folder={str(folder)!r} holds no {MANIFEST}; make a set with `python -m normlab save`"
        )
    return SavedSet(folder, json.loads(path.read_text()))


def saved_sets(
    experiment: str | None = None, root: str | Path | None = None
) -> list[SavedSet]:
    """Every saved set under ``root`` (of one experiment when given), sorted by folder."""
    root = Path(root) if root is not None else default_root()
    pattern = f"{experiment}/*/{MANIFEST}" if experiment else f"*/*/{MANIFEST}"
    return [load(p.parent) for p in sorted(root.glob(pattern))]


def largest(experiment: str, root: str | Path | None = None) -> SavedSet | None:
    """The saved set of ``experiment`` with the most runs (ties: the larger profile), or None."""
    sets = saved_sets(experiment, root)
    if not sets:
        return None
    return max(sets, key=lambda s: (s.runs, PROFILES.index(s.profile)))


# ------------------------------------------------------------------------------ save


def _data_kind(records: list[dict[str, Any]]) -> tuple[str, list[str]]:
    from .data.registry import REAL

    names = sorted({str(r["config"].get("data")) for r in records})
    stand_in = [
        bool(r["stand_in"]) if "stand_in" in r else r["config"].get("data") not in REAL
        for r in records
    ]
    kind = "stand-in" if all(stand_in) else "real" if not any(stand_in) else "mixed"
    return kind, names


def _records(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    return [
        (p, json.loads(p.read_text())) for p in sorted((folder / "runs").glob("*.json"))
    ]


def write_manifest(
    folder: Path, *, command: str, wall_seconds: float, device: str
) -> dict[str, Any]:
    """(Re)write ``folder/manifest.json`` from the records now in the folder.

    Wall time and commands accumulate over resumed or sharded invocations.
    """
    from . import __version__

    records = _records(folder)
    if not records:
        raise ValueError(f"no run records in {folder / 'runs'}")
    old = (
        json.loads((folder / MANIFEST).read_text())
        if (folder / MANIFEST).is_file()
        else {}
    )
    first = records[0][1]
    kind, datasets = _data_kind([r for _, r in records])
    manifest = {
        "experiment": first["experiment"],
        "profile": first["profile"],
        "commands": [*old.get("commands", []), command],
        "command": command,
        "data": kind,
        "datasets": datasets,
        "seeds": len({r["config"]["seed"] for _, r in records}),
        "hardware": hardware(device),
        "wall_seconds": float(old.get("wall_seconds", 0.0)) + wall_seconds,
        "normlab_version": __version__,
        "git_commit": _git_commit(),
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "created": old.get("created", time.strftime("%Y-%m-%dT%H:%M:%S%z")),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "records": {p.name: _digest(p) for p, _ in records},
        "results_csv": _digest(folder / "results.csv"),
    }
    write_text_atomic(folder / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return manifest


def save(
    experiment: str,
    *,
    profile: str,
    root: str | Path | None = None,
    shard: str | None = None,
    seeds: int | None = None,
    device: str = "cpu",
    command: str | None = None,
    progress: bool | None = None,
) -> SavedSet:
    """Run (or resume) ``experiment`` into the saved-results folder, then write its manifest.

    The quick profile is refused: a saved set exists to show more than the live run does.
    ``progress`` (None: on a terminal) shows the runs' and the training's progress bars.
    """
    from . import experiments

    profile = check_profile(profile)
    if profile == "quick":
        raise ValueError(
            "profile='quick' is what chapters run live; save a cpu, standard or paper set"
        )
    experiments.get(experiment).grid(profile)
    root = Path(root) if root is not None else default_root()
    started = time.perf_counter()
    done = experiments.run(
        experiment,
        profile=profile,
        out=root,
        seeds=seeds,
        device=device,
        shard=shard,
        progress=progress,
    )
    command = command or " ".join(
        shlex.quote(a) for a in ["python", "-m", "normlab", *sys.argv[1:]]
    )
    write_manifest(
        done.folder,
        command=command,
        wall_seconds=time.perf_counter() - started,
        device=device,
    )
    return load(done.folder)


# ---------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class Mismatch:
    """One problem :func:`verify` found: where, and what differs."""

    where: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


def _close(a: Any, b: Any, exact: bool, key: str) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if exact:
        return a == b
    if key.endswith("metric"):
        return abs(a - b) <= RERUN_ATOL
    return abs(a - b) <= RERUN_RTOL * max(abs(a), abs(b))


def check_format(saved: SavedSet) -> list[Mismatch]:
    """Records match the manifest's digests, the table matches the records, nothing is missing."""
    from .experiments import load_results

    problems = []
    found = {p.name: p for p in (saved.folder / "runs").glob("*.json")}
    for name, digest in saved.manifest["records"].items():
        if name not in found:
            problems.append(Mismatch(name, "listed in the manifest but missing"))
        elif _digest(found[name]) != digest:
            problems.append(
                Mismatch(
                    name,
                    "edited since the set was made (digest differs from the manifest)",
                )
            )
    for name in sorted(set(found) - set(saved.manifest["records"])):
        problems.append(Mismatch(name, "not listed in the manifest"))
    if _digest(saved.folder / "results.csv") != saved.manifest["results_csv"]:
        problems.append(
            Mismatch(
                "results.csv",
                "edited since the set was made (digest differs from the manifest)",
            )
        )
    table = load_results(saved.experiment, saved.folder.parent.parent, saved.profile)
    csv = saved.results.set_index("run_id")
    for key in _COMPARED:
        for run_id, value in zip(table["run_id"], table[key]):
            if run_id not in csv.index or not _close(
                value, csv.at[run_id, key], True, key
            ):
                problems.append(
                    Mismatch(
                        f"results.csv {run_id}", f"{key} differs from its JSON record"
                    )
                )
    return problems


def verify(saved: SavedSet, run_id: str | None = None) -> list[Mismatch]:
    """Check a saved set; returns the problems found (an empty list when it is sound).

    Always: :func:`check_format`. For a set made on a CPU, also re-run one configuration
    (``run_id``, default the first) on the CPU and compare its metrics with the record:
    exactly when this machine's torch version and CPU model equal the manifest's (the engine
    is deterministic on the CPU), else within :data:`RERUN_ATOL` (metrics) and
    :data:`RERUN_RTOL` (losses). Sets made on a GPU are checked for format only.
    """
    from .experiments import RunContext, get

    problems = check_format(saved)
    if saved.on_gpu:
        return problems
    run_id = run_id or sorted(saved.manifest["records"])[0].removesuffix(".json")
    record = json.loads((saved.folder / "runs" / f"{run_id}.json").read_text())
    hw = saved.manifest["hardware"]
    exact = (
        saved.manifest["torch_version"] == torch.__version__
        and hw["cpu_model"] == _cpu_model()
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(int(hw.get("torch_threads") or 1))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            outcome = get(saved.experiment).run_one(
                dict(record["config"]),
                RunContext(
                    device=torch.device("cpu"), checkpoint_dir=Path(tmp) / "ckpt"
                ),
            )
    finally:
        torch.set_num_threads(threads)
    for key in _COMPARED:
        new, old = outcome["metrics"][key], record["metrics"][key]
        if not _close(new, old, exact, key):
            how = (
                "exactly" if exact else f"within atol {RERUN_ATOL} / rtol {RERUN_RTOL}"
            )
            problems.append(
                Mismatch(
                    f"re-run of {run_id}",
                    f"{key} = {new!r}, saved {old!r} (compared {how})",
                )
            )
    return problems


# ---------------------------------------------------------------------------- beside


@dataclass
class Beside:
    """What :func:`beside` showed: the figure, and the live and saved tables with their labels."""

    figure: Any
    live_label: str
    saved: SavedSet | None


def live_label(results: pd.DataFrame) -> str:
    """One line describing a live run's table: profile, data, seeds, runs and this machine."""
    from .data.registry import REAL

    datasets = sorted(results["data"].astype(str).unique()) if "data" in results else []
    profile = (
        results["profile"].iloc[0] if "profile" in results and len(results) else "?"
    )
    real = profile != "quick" and all(d in REAL for d in datasets)
    seeds = results["seed"].nunique() if "seed" in results else 0
    return (
        f"live run: {profile} profile, {'real' if real else 'stand-in'} data ({', '.join(datasets)}), "
        f"{seeds} seeds, {len(results)} runs, {_cpu_model()}"
    )


def beside(
    experiment: str,
    live: pd.DataFrame,
    draw: Callable[[pd.DataFrame, Any], None],
    *,
    root: str | Path | None = None,
    title: str | None = None,
) -> Beside:
    """Draw the live run and, beside it, the largest saved set of ``experiment``.

    ``draw(results, ax)`` draws one results table on one matplotlib axis; it is called for the
    live table and for the saved set's, so the two panels differ only in their data. Each
    panel is titled with its label (profile, data, seeds, hardware). Without a saved set the
    figure has one panel and says so.
    """
    import matplotlib.pyplot as plt

    if not isinstance(live, pd.DataFrame) or live.empty:
        raise ValueError(
            "live must be a non-empty results table (experiments.load_results or report().results)"
        )
    saved = largest(experiment, root)
    panels = 2 if saved is not None else 1
    fig, axes = plt.subplots(
        1, panels, figsize=(6.2 * panels, 4.2), squeeze=False, layout="constrained"
    )
    label = live_label(live)
    draw(live, axes[0, 0])
    axes[0, 0].set_title(_wrap(label), fontsize=8)
    if saved is not None:
        draw(saved.results, axes[0, 1])
        axes[0, 1].set_title(_wrap(saved.label()), fontsize=8)
    else:
        fig.text(
            0.5,
            -0.02,
            f"No saved set of {experiment} yet: `python -m normlab save {experiment} --profile cpu`",
            ha="center",
            fontsize=8,
        )
    if title:
        fig.suptitle(title)
    return Beside(figure=fig, live_label=label, saved=saved)


def _wrap(text: str, width: int = 70) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))
