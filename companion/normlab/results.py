"""Saved result sets: real runs, larger than the quick profile, that ship with the package.

A saved set is one experiment and profile, packed into three plain-text files inside the
package, so an installed wheel, Colab and a checkout all find the same evidence::

    normlab/saved/<experiment>/<profile>/runs.jsonl     one run record a line, sorted by run id
    normlab/saved/<experiment>/<profile>/results.csv    the tidy table of those runs
    normlab/saved/<experiment>/<profile>/manifest.json  how, where and when it was made, digests

``runs.jsonl`` is strict JSON (a non-finite number is ``null``; see :mod:`normlab._records`)
and sorted, so git stores its revisions compactly and a diff reads as the runs that changed.
Make or extend one (resumable; the runner's per-run files are its scratch form until packed)::

    python -m normlab save fc_normalisers --profile cpu --threads 1
    python -m normlab save autonorm_vision --profile standard --shard 3/8

Every reader of a set (chapters, the scorecard, widgets, verification) goes through
:func:`load`, which returns a set only after checking its files, its manifest (which
carries its own digest), its grid and its table (:mod:`normlab._saved_io`), and raises a
:class:`SetError` naming the file otherwise. ``save`` writes into the reader's own folder
(:func:`default_root`: ``$NORMLAB_RESULTS``, the package's ``saved/`` in a git checkout,
else ``~/normlab-results``); reads look there first, then at the shipped sets
(:func:`roots`). A chapter shows its live quick run beside the largest saved set with
:func:`normlab.figures.beside`; :func:`normlab.verification.verify` adds re-runs of a
sample of its records (``python -m normlab verify``).
"""

from __future__ import annotations

import io
import os
import platform
import shlex
import sys
import time
import warnings
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from . import _provenance
from ._io import write_text_atomic
from ._lock import FileLock
from ._provenance import cpu_model, fingerprint
from ._records import dumps
from ._runtime import PROFILES, VERSION, check_profile
from ._saved_io import (
    FORMAT,
    MANIFEST,
    STAGING,
    TABLE,
    SetError,
    open_set,
    parse_packed,
    previous_manifest,
    renewed,
    signed,
)
from ._saved_io import sha as _sha
from .experiments.runner import (
    PACKED,
    RunSettings,
    finished_records,
    records_table,
    results_folder,
)

__all__ = [
    "SavedSet",
    "SetError",
    "SkippedSetWarning",
    "default_root",
    "shipped_root",
    "roots",
    "fingerprint",
    "saved_sets",
    "largest",
    "load",
    "pack",
    "repack",
    "save",
    "finish_pending",
    "PACK_WAIT",
    "STAGING",
    "ROOT",
    "RESULTS_ENV",
    "HOME_RESULTS",
    "hardware",
    "live_label",
]

#: The folder above the package, a git checkout's root, where :func:`default_root` looks for
#: ``.git`` (in an installed package, site-packages' parent).
ROOT = Path(__file__).resolve().parents[2]
#: The environment variable naming the reader's results folder (:func:`default_root`).
RESULTS_ENV = "NORMLAB_RESULTS"


#: The reader's results folder outside a git checkout when ``$NORMLAB_RESULTS`` is unset (an
#: installed package's own folder is in site-packages, which the next install replaces).
HOME_RESULTS = Path("~") / "normlab-results"


def shipped_root() -> Path:
    """The sets shipped inside the package (``normlab/saved``)."""
    return Path(str(resources.files("normlab").joinpath("saved")))


def default_root() -> Path:
    """The reader's results folder, where ``save`` writes: ``$NORMLAB_RESULTS`` when set;
    else, in a git checkout, the package's ``saved/`` (the shipped sets are made there);
    else ``~/normlab-results``."""
    env = os.environ.get(RESULTS_ENV)
    if env:
        return Path(env).expanduser()
    in_checkout = (ROOT / ".git").exists() and (ROOT / "pyproject.toml").is_file()
    return shipped_root() if in_checkout else HOME_RESULTS.expanduser()


def roots() -> list[Path]:
    """Where saved sets are read from, in order: :func:`default_root` (the reader's own),
    then :func:`shipped_root` (one folder when they are the same)."""
    found: list[Path] = []
    for root in (default_root(), shipped_root()):
        if all(root.resolve() != seen.resolve() for seen in found):
            found.append(root)
    return found


# ------------------------------------------------------------------------ the machine


def hardware(device: str) -> dict[str, Any]:
    """What the runs ran on: device, CPU model, core count, torch threads, GPU name."""
    gpu = (
        torch.cuda.get_device_name(0)
        if device.startswith("cuda") and torch.cuda.is_available()
        else None
    )
    return {
        "device": device,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": gpu,
        "platform": platform.platform(),
    }


# -------------------------------------------------------------------------- one set


@dataclass
class SavedSet:
    """One saved result set, as :func:`load` checked it: its folder, its manifest, and
    (parsed on demand from the bytes that were checked) its records and results table."""

    folder: Path
    manifest: dict[str, Any]
    _packed: bytes = field(repr=False)
    _table: bytes = field(repr=False)
    _records: list[dict[str, Any]] | None = field(default=None, repr=False)

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
        return self.manifest["runs"]

    def records(self) -> list[dict[str, Any]]:
        """Every run record of the set (``runs.jsonl``), schema-checked, in run-id order."""
        if self._records is None:
            self._records = parse_packed(self._packed)
        return self._records

    @property
    def results(self) -> pd.DataFrame:
        """The set's ``results.csv`` (one row per run)."""
        return pd.read_csv(io.BytesIO(self._table))

    def seed_range(self) -> tuple[int, int]:
        """The fewest and the most seeds a configuration of the set ran (a claim's plan can
        run some for more seeds than others): a configuration is a value of each column of
        the results table between ``profile`` and ``seed``, as the runner writes it."""
        table = self.results
        columns = list(table.columns)
        config = columns[columns.index("profile") + 1 : columns.index("seed")]
        if not config:
            n = int(table["seed"].nunique())
            return n, n
        per = table.groupby(config, dropna=False)["seed"].nunique()
        return int(per.min()), int(per.max())

    def label(self) -> str:
        """One line for a figure or a table: profile, data, seeds, runs and hardware."""
        from .data.sources import data_label

        m = self.manifest
        hw = m["hardware"]["gpu"] or m["hardware"]["cpu_model"]
        fewest, most = self.seed_range()
        seeds = f"{most}" if fewest == most else f"{fewest} to {most}"
        return (
            f"saved set: {m['profile']} profile, {m['data']} data ({data_label(self.results)}), "
            f"{seeds} seeds, {self.runs} runs, {hw}, {m['wall_seconds'] / 60:.0f} min"
        )


def load(folder: str | Path, *, partial: bool = False) -> SavedSet:
    """The saved set in ``folder`` (``<root>/<experiment>/<profile>``), read only after
    every check passes: regular files within their size limits, strict JSON, the manifest's
    schema and its own digest, the folder it is in, the digests of ``runs.jsonl``,
    ``results.csv`` and every record, the runs of the experiment's grid, and a table that
    holds the records' values. Any failure is a :class:`SetError` naming the set and the
    file. A set is checked once per process for the bytes read; a changed byte is checked
    again. ``partial`` accepts a set missing some of its grid's runs (a sharded save under
    way); chapters, the scorecard and ``verify`` never pass it."""
    opened = open_set(folder, partial=partial)
    return SavedSet(
        opened.folder, opened.manifest, opened.packed, opened.table, opened.records
    )


class SkippedSetWarning(UserWarning):
    """A set in the reader's own results folder that fails its checks: named and skipped,
    so that the shipped sets are still read (a shipped set that fails raises)."""


def _own_sets(folder: Path, pattern: str) -> list[SavedSet]:
    """The sets under the reader's own ``folder``; one that fails its checks is skipped
    with a :class:`SkippedSetWarning` naming it and its first problem."""
    found = []
    for path in sorted(folder.glob(pattern)):
        try:
            found.append(load(path.parent))
        except SetError as err:
            warnings.warn(
                f"skipped the saved set in {path.parent} (your results folder): {err}",
                SkippedSetWarning,
                stacklevel=3,
            )
    return found


def saved_sets(
    experiment: str | None = None, root: str | Path | None = None
) -> list[SavedSet]:
    """Every saved set under ``root``, by default under each of :func:`roots` (the reader's
    own first), of one experiment when given, sorted by folder within each root. A set
    that fails its checks raises a :class:`SetError`, except one in the reader's own
    folder when ``root`` is not given: that one is skipped with a
    :class:`SkippedSetWarning` naming it."""
    pattern = f"{experiment}/*/{MANIFEST}" if experiment else f"*/*/{MANIFEST}"
    if root is not None:
        return [load(p.parent) for p in sorted(Path(root).glob(pattern))]
    shipped = shipped_root().resolve()
    found: list[SavedSet] = []
    for folder in roots():
        if folder.resolve() == shipped:
            found += [load(p.parent) for p in sorted(folder.glob(pattern))]
        else:
            found += _own_sets(folder, pattern)
    return found


# the (chosen, passed over) folders already said, so that each is said once a process
_SAID: set[tuple[str, ...]] = set()


def _say_which(chosen: SavedSet, sets: list[SavedSet]) -> None:
    """Print (to stderr, once) which of two sets of one name is read: the reader's own or
    the shipped one."""
    same = [
        s
        for s in sets
        if (s.experiment, s.profile) == (chosen.experiment, chosen.profile)
        and s.folder != chosen.folder
    ]
    key = (str(chosen.folder), *sorted(str(s.folder) for s in same))
    if not same or key in _SAID:
        return
    _SAID.add(key)
    shipped = shipped_root().resolve()
    whose = "the shipped" if chosen.folder.resolve().is_relative_to(shipped) else "your"
    others = ", ".join(str(s.folder) for s in same)
    print(
        f"{chosen.experiment}/{chosen.profile}: reading {whose} set in {chosen.folder} "
        f"({chosen.runs} runs), not the one of the same name in {others}",
        file=sys.stderr,
    )


def largest(experiment: str, root: str | Path | None = None) -> SavedSet | None:
    """The saved set of ``experiment`` with the most runs (ties: the larger profile, then
    the reader's own over a shipped one), from :func:`saved_sets`, or None. Where the
    reader's folder and the shipped sets both hold its experiment and profile, which one
    is read is printed (stderr)."""
    sets = saved_sets(experiment, root)
    if not sets:
        return None
    chosen = max(sets, key=lambda s: (s.runs, PROFILES.index(s.profile)))
    _say_which(chosen, sets)
    return chosen


def repack(folder: str | Path) -> SavedSet:
    """Rewrite the manifest of the set in ``folder`` in this normlab's format, keeping
    ``runs.jsonl``, ``results.csv`` and all the manifest says (commands, which commit made
    which runs, ``exact_on``, times, digests). Nothing is written unless both files match
    the old manifest's digests and the re-packed set passes every check (a SetError)."""
    write_text_atomic(Path(folder) / MANIFEST, renewed(folder))
    return load(folder)


# ------------------------------------------------------------------------------ save


def _data_kind(records: list[dict[str, Any]]) -> tuple[str, list[str]]:
    from .data.registry import REAL

    # the offline dataset a grid chose (its source setting) names the data, else the task
    names = sorted(
        {str(r["config"].get("source") or r["config"].get("data")) for r in records}
    )
    stand_in = [
        bool(r["stand_in"]) if "stand_in" in r else r["config"].get("data") not in REAL
        for r in records
    ]
    kind = "stand-in" if all(stand_in) else "real" if not any(stand_in) else "mixed"
    return kind, names


def _origins(
    records: list[dict[str, Any]], old: dict[str, Any]
) -> tuple[dict[str, list[str]], dict[str, Any] | None]:
    """Which commit made which run, and the one fingerprint on which every run was made.

    Each record names its own commit and fingerprint (``made_by``, written when the run
    finished), so an interrupted and resumed ``save`` loses neither. A record from before
    ``made_by`` keeps what the old manifest said of it (``unknown`` if it said nothing).
    The fingerprint is None when the runs were made on different numerics, or on a GPU.
    """
    owner = {i: c for c, runs in old.get("commits", {}).items() for i in runs}
    commits: dict[str, list[str]] = {}
    prints = []
    for record in records:
        made = record.get("made_by")
        if isinstance(made, dict):
            commit, print_ = str(made.get("commit")), made.get("fingerprint")
        else:
            commit, print_ = owner.get(record["run_id"], "unknown"), old.get("exact_on")
        commits.setdefault(commit, []).append(record["run_id"])
        prints.append(print_)
    same = all(p == prints[0] for p in prints)
    return commits, prints[0] if same else None


def pack(
    folder: str | Path,
    *,
    command: str,
    wall_seconds: float,
    device: str,
    keep: Collection[str] | None = None,
) -> SavedSet:
    """Pack every record in ``folder`` (its ``runs.jsonl`` and the runner's scratch files)
    into ``runs.jsonl``, ``results.csv`` and ``manifest.json``, then remove the scratch;
    with ``keep``, only the records whose run id it holds (the others are dropped).

    Wall time and commands accumulate over resumed or sharded invocations. ``commits``
    and ``exact_on`` (the fingerprint on which re-runs reproduce every record exactly,
    None when the runs were made on different numerics or a GPU) come from each record's
    own ``made_by`` (:func:`_origins`).
    """
    folder = Path(folder)
    # shards of one set pack into it as each finishes: one at a time, and each removes
    # only the scratch records it packed (another shard may be writing more meanwhile)
    lock = FileLock(folder / "checkpoints" / "pack.lock")
    lock.wait(PACK_WAIT, doing=f"packing {folder}")
    try:
        scratch = sorted((folder / "runs").glob("*.json"))
        packed = _pack_locked(folder, command, wall_seconds, device, keep)
        for path in scratch:
            path.unlink(missing_ok=True)
    finally:
        lock.release(remove=True)
    for leftover in ("runs", "checkpoints"):
        try:
            (folder / leftover).rmdir()
        except OSError:  # absent, or not empty: another shard is still running
            pass
    return packed


def _pack_locked(
    folder: Path,
    command: str,
    wall_seconds: float,
    device: str,
    keep: Collection[str] | None = None,
) -> SavedSet:
    """:func:`pack`'s work, under its lock."""
    finish_pending(folder)
    records = list(finished_records(folder).values())
    if keep is not None:
        kept = [r for r in records if r["run_id"] in keep]
        if len(kept) < len(records):
            print(f"dropped {len(records) - len(kept)} records outside the grid")
        records = kept
    if not records:
        raise ValueError(f"no run records in {folder}")
    old = previous_manifest(folder)
    lines = [dumps(r) for r in records]
    ids = [r["run_id"] for r in records]
    first = records[0]
    commits, exact_on = _origins(records, old)
    kind, datasets = _data_kind(records)
    packed = "".join(line + "\n" for line in lines)
    table = records_table(records).to_csv(index=False)
    manifest = {
        "format": FORMAT,
        "experiment": first["experiment"],
        "profile": first["profile"],
        "runs": len(records),
        # the grid's seed count: a shard's records may skip a seed another shard runs
        "seeds": 1 + max(int(r["config"]["seed"]) for r in records),
        "data": kind,
        "datasets": datasets,
        "commands": [*old.get("commands", []), command],
        "command": command,
        "hardware": hardware(device),
        "wall_seconds": float(old.get("wall_seconds", 0.0)) + wall_seconds,
        "exact_on": exact_on,
        "normlab_version": VERSION,
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "created": old.get("created", time.strftime("%Y-%m-%dT%H:%M:%S%z")),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "files": {PACKED: _sha(packed), TABLE: _sha(table)},
        "records": {i: _sha(line) for i, line in zip(ids, lines)},
        "commits": commits,
    }
    _replace_as_one(folder, {PACKED: packed, TABLE: table, MANIFEST: signed(manifest)})
    return load(folder, partial=True)


#: How long :func:`pack` waits for another process packing the same set (a pack takes
#: seconds) before it gives up with a :class:`~normlab._lock.LockError` naming that process.
PACK_WAIT = 300.0


def _move(source: Path, target: Path) -> None:
    """Rename ``source`` over ``target`` (atomic within a folder)."""
    os.replace(source, target)


def _clear_staging(stage: Path) -> None:
    """Remove the staging folder (a link in its place is removed, not followed)."""
    if stage.is_symlink() or not stage.is_dir():
        stage.unlink()
        return
    for child in stage.iterdir():
        child.unlink()
    stage.rmdir()


def finish_pending(folder: str | Path) -> None:
    """Complete or undo a :func:`pack` that stopped part-way in ``folder``: when its staged
    manifest was written (the journal's commit point), move the staged files still there
    into place, the manifest last; else discard the staging, and the old set stands. Safe
    to repeat at any point, so a killed ``save`` always resumes."""
    folder = Path(folder)
    stage = folder / STAGING
    if not os.path.lexists(stage):
        return
    committed = (
        stage.is_dir() and not stage.is_symlink() and (stage / MANIFEST).is_file()
    )
    if committed:
        for name in (PACKED, TABLE, MANIFEST):
            if (stage / name).is_file():
                _move(stage / name, folder / name)
    _clear_staging(stage)


def _replace_as_one(folder: Path, files: dict[str, str]) -> None:
    """Replace the set's files as one: each is written into :data:`STAGING`, the manifest
    last (the commit point), then moved into place, the manifest last, by
    :func:`finish_pending`, which also completes the move after a kill."""
    stage = folder / STAGING
    if os.path.lexists(stage):
        _clear_staging(stage)  # an uncommitted staging: finish_pending ran before this
    stage.mkdir()
    for name in (PACKED, TABLE, MANIFEST):
        write_text_atomic(stage / name, files[name])
    finish_pending(folder)


def _command(root: Path | None) -> str:
    """The command that made the set, as a reader can copy it: no ``--root`` when it is the
    default, else ``--root`` relative to the working directory (a path of the machine that
    made the set means nothing elsewhere)."""
    args = list(sys.argv[1:])
    default = root is None or root.resolve() == default_root().resolve()
    for i, arg in enumerate(args):
        if arg == "--root" and i + 1 < len(args):
            if default:
                del args[i : i + 2]
            else:  # relative to where the command ran, never this machine's absolute path
                args[i + 1] = os.path.relpath(Path(args[i + 1]).resolve())
            break
    return " ".join(shlex.quote(a) for a in ["python", "-m", "normlab", *args])


def save(
    experiment: str,
    settings: RunSettings,
    *,
    root: str | Path | None = None,
    command: str | None = None,
    allow_dirty: bool = False,
    prune: bool = False,
) -> SavedSet:
    """Run (or resume) ``experiment`` with ``settings`` into ``root``, by default the
    reader's results folder (:func:`default_root`), then :func:`pack` it.

    ``settings.profile`` must be given, and the quick profile is refused: a saved set exists
    to show more than the live run does. Without ``settings.device`` the runs are made on
    the CPU. ``settings.progress`` (None: on a terminal) shows the progress bars.
    A set is evidence, so it is made from committed code: in a git checkout whose package
    code has uncommitted changes, ``save`` refuses unless ``allow_dirty`` (the manifest's
    ``commits`` then name ``<commit>+dirty``). ``prune`` drops the records the grid no
    longer holds (a confirmation moved to the rate a widened pilot chose), keeping the
    manifest's history; the command it is given records it.
    """
    from . import experiments

    profile = check_profile(settings.profile)
    if settings.profile is None or profile == "quick":
        raise ValueError(
            f"settings.profile={settings.profile!r}: the quick profile (the default) is what "
            "chapters run live; save a cpu, standard or paper set"
        )
    commit = _provenance.git_commit()
    if commit.endswith("+dirty") and not allow_dirty:
        raise ValueError(
            f"the package's code differs from commit {commit.removesuffix('+dirty')}: "
            "commit it first, so that the set names the code that made it, or pass "
            "allow_dirty=True (--allow-dirty), which the manifest records as +dirty"
        )
    from .experiments.grid import run_id

    grid = experiments.get(experiment).grid(profile)
    keep = (
        {run_id(experiment, c) for c in grid.configs(settings.seeds)} if prune else None
    )
    settings = replace(settings, profile=profile, device=settings.device or "cpu")
    root_given = Path(root) if root is not None else None
    root = root_given or default_root()
    started = time.perf_counter()
    folder = results_folder(experiment, root, profile)
    lock = FileLock(folder / "checkpoints" / "pack.lock")
    if os.path.lexists(folder / STAGING):  # a pack killed part-way: finish it first
        lock.wait(PACK_WAIT, doing=f"packing {folder}")
        try:
            finish_pending(folder)
        finally:
            lock.release()
    done = settings.run(experiment, root)
    return pack(
        done.folder,
        command=command or _command(root_given),
        wall_seconds=time.perf_counter() - started,
        device=settings.device,
        keep=keep,
    )


# ---------------------------------------------------------------------------- beside


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
        f"{seeds} seeds, {len(results)} runs, {cpu_model()}"
    )
