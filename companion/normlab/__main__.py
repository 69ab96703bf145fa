"""The command line: ``python -m normlab list | run | report | save | verify | scorecard``.

Examples::

    python -m normlab list
    python -m normlab run fc_normalisers --profile quick --out results
    python -m normlab run fc_normalisers --profile standard --shard 3/8   # machine 3 of 8
    python -m normlab run fc_normalisers --profile paper --executor slurm --partition gpu
    python -m normlab report fc_normalisers --profile standard --out runs
    python -m normlab save fc_normalisers --profile cpu --threads 1      # a set that ships in normlab/saved/
    python -m normlab verify                                             # re-check every saved set
    python -m normlab verify cnn_normalisers --sample 8                  # re-run 8 of its records
    python -m normlab scorecard --format markdown --out scorecard.md
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from . import __version__
from ._runtime import PROFILES

if TYPE_CHECKING:
    import pandas as pd

    from .experiments import RunSettings

# Scratch runs; shipped sets are made with `save` into normlab/saved/.
DEFAULT_OUT = "runs"


_ROOT_HELP = (
    "results folder to write (default: $NORMLAB_RESULTS, else the package's saved/ in a git "
    "checkout, else ~/normlab-results)"
)
_READ_ROOT_HELP = "results folder to read (default: the one save writes, then the package's shipped sets)"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _parser() -> argparse.ArgumentParser:
    """The command line: one ``_add_<command>`` helper per subcommand."""
    parser = argparse.ArgumentParser(
        prog="python -m normlab", description="Run the book's experiments."
    )
    parser.add_argument("--version", action="version", version=f"normlab {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "list", help="the experiments, with run counts and expected times per profile"
    )
    _add_run(commands)
    _add_report(commands)
    _add_save(commands)
    _add_verify(commands)
    _add_scorecard(commands)
    return parser


def _add_run(commands: argparse._SubParsersAction) -> None:
    """``run``: run (or resume) one experiment's grid."""
    run = commands.add_parser("run", help="run (or resume) an experiment's grid")
    run.add_argument("name")
    run.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help="default: $NORMLAB_PROFILE, else quick",
    )
    run.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help=f"results folder (default: {DEFAULT_OUT})",
    )
    run.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="number of seeds (default: the profile's)",
    )
    run.add_argument(
        "--device",
        default=None,
        help="cpu, cuda, cuda:1, ... (default: the best available)",
    )
    run.add_argument(
        "--shard",
        default=None,
        help="K/N: run shard K (from 0) of N, e.g. $SLURM_ARRAY_TASK_ID/8",
    )
    run.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (1 is fastest for the quick profile on a busy machine)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_population(run)
    from .experiments import cluster

    cluster.add_arguments(run)


def _add_population(parser: argparse.ArgumentParser) -> None:
    """``--population K`` and ``--population-rates``, for ``run`` and ``save``."""
    parser.add_argument(
        "--population",
        type=int,
        default=None,
        metavar="K",
        help="train runs that differ only in seed as populations of at most K, one "
        "batched model each (normlab.population); one record per run as ever",
    )
    parser.add_argument(
        "--population-rates",
        action="store_true",
        help="with --population: runs that differ only in seed and lr share a population",
    )


def _add_report(commands: argparse._SubParsersAction) -> None:
    """``report``: merge shards and write the summary table and figures."""
    report = commands.add_parser(
        "report", help="merge shards, write the summary table and figures"
    )
    report.add_argument("name")
    report.add_argument("--profile", choices=PROFILES, default=None)
    report.add_argument("--out", default=str(DEFAULT_OUT))


def _add_save(commands: argparse._SubParsersAction) -> None:
    """``save``: make and pack a saved result set."""
    save = commands.add_parser(
        "save",
        help="run (or resume) a saved result set in your results folder and pack it",
    )
    save.add_argument("name")
    save.add_argument(
        "--profile", choices=[p for p in PROFILES if p != "quick"], required=True
    )
    save.add_argument(
        "--root",
        default=None,
        help=_ROOT_HELP,
    )
    save.add_argument("--seeds", type=int, default=None)
    save.add_argument("--device", default="cpu")
    save.add_argument(
        "--shard", default=None, help="K/N: run shard K (from 0) of N into the same set"
    )
    save.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (recorded in the manifest)",
    )
    save.add_argument(
        "--allow-dirty",
        action="store_true",
        help="save from package code with uncommitted changes (recorded as +dirty)",
    )
    save.add_argument(
        "--prune",
        action="store_true",
        help="drop the set's records that its grid no longer holds (a confirmation moved "
        "to another rate); the manifest records the command",
    )
    _add_population(save)


def _add_verify(commands: argparse._SubParsersAction) -> None:
    """``verify``: check saved sets and re-run a sample of their records."""
    verify = commands.add_parser(
        "verify",
        help="check saved sets: digests, schema, grid, table, and re-runs of a sample",
        description="Exit status: 0 when every set holds, 1 on a mismatch, 2 on a usage error.",
    )
    verify.add_argument(
        "name",
        nargs="*",
        default=[],
        help="experiments to check (default: every saved set)",
    )
    verify.add_argument("--root", default=None, help=_READ_ROOT_HELP)
    verify.add_argument(
        "--sample",
        type=int,
        default=3,
        help="records re-run per set, spread across its arms (default: 3)",
    )
    verify.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds of re-runs per set: sample records that took at most that long "
        "to make, and stop when the next would not fit (at least one always runs)",
    )


def _add_scorecard(commands: argparse._SubParsersAction) -> None:
    """``scorecard``: every claim and its verdict."""
    card = commands.add_parser(
        "scorecard", help="every claim, the paper's number, ours and the verdict"
    )
    card.add_argument("--format", choices=("text", "markdown", "csv"), default="text")
    card.add_argument(
        "--json",
        action="store_true",
        help="print (or write) every claim as a strict JSON list instead of --format",
    )
    card.add_argument(
        "--out", default=None, help="write to this file instead of the terminal"
    )
    card.add_argument(
        "--root",
        default=None,
        help=_READ_ROOT_HELP,
    )


def _list() -> None:
    from . import experiments

    width = max(len("experiment"), *(len(name) for name in experiments.names()))
    header = f"{'experiment':<{width}} {'chapter':<8}" + "".join(
        f"{p:>22}" for p in PROFILES
    )
    print(header)
    print("-" * len(header))
    for name in experiments.names():
        exp = experiments.get(name)
        cells = "".join(
            f"{f'{exp.grid(p).size()} runs, ~{_duration(exp.expected_seconds(p))}' if p in exp.profiles else '-':>22}"
            for p in PROFILES
        )
        print(f"{name:<{width}} {exp.chapter:<8}{cells}")
        print(f"    {exp.title}")
    print(
        "\nTimes: quick and cpu measured on a 2-core CPU with --threads 1 (cpu: saved result sets, '-' where "
        "none is declared); standard/paper estimated for one GPU, before sharding."
    )


def _run_settings(args: argparse.Namespace) -> RunSettings:
    """What ``run`` and ``save`` share: the name and shard are checked and torch's threads set
    before anything runs; returns the settings both pass on."""
    from . import experiments

    experiments.get(args.name)
    _check_seeds(args.seeds)
    experiments.parse_shard(args.shard)
    _check_device(args.device)
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be a positive int, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    if args.population is not None and args.population < 1:
        raise ValueError(f"--population must be a positive int, got {args.population}")
    if args.population_rates and args.population is None:
        raise ValueError("--population-rates needs --population K")
    return experiments.RunSettings(
        profile=args.profile,
        seeds=args.seeds,
        device=args.device,
        shard=args.shard,
        population=args.population,
        rates=args.population_rates,
    )


def _check_seeds(value: int | None) -> None:
    """A ValueError naming ``--seeds`` unless it is None or an int from 1 to ``MAX_SEEDS``:
    checked before the grid is built, which a huge count would take minutes and gigabytes to
    do."""
    from .experiments.grid import MAX_SEEDS

    if value is not None and not 1 <= value <= MAX_SEEDS:
        raise ValueError(f"--seeds must be an int from 1 to {MAX_SEEDS}, got {value}")


#: The device types the training loop runs on; torch knows others (meta, xpu, hpu, ...) that
#: this package has never run on, or that hold no data (meta).
DEVICE_TYPES = ("cpu", "cuda", "mps")
_DEVICES_EXPECTED = "expected cpu, cuda, cuda:N or mps"


def _check_device(value: str | None) -> None:
    """A ValueError naming ``--device`` unless it is a torch device this machine has, of one
    of :data:`DEVICE_TYPES`."""
    if value is None:
        return
    import torch

    try:
        device = torch.device(value)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"--device {value!r} is not a torch device; {_DEVICES_EXPECTED}"
        ) from err
    if device.type not in DEVICE_TYPES:
        raise ValueError(
            f"--device {value!r}: normlab does not run on {device.type!r} devices; "
            f"{_DEVICES_EXPECTED} (where this machine has them)"
        )
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(
                f"--device {value!r}: this machine has no CUDA GPU available to torch "
                f"{torch.__version__}; use --device cpu"
            )
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"--device {value!r}: this machine has {count} CUDA GPU(s), cuda:0 to "
                f"cuda:{count - 1}"
            )
    mps = getattr(torch.backends, "mps", None)
    if device.type == "mps" and not (mps is not None and mps.is_available()):
        raise ValueError(f"--device {value!r}: MPS is not available on this machine")


def _check_writable(folder: str, option: str) -> None:
    """A ValueError naming ``option`` unless ``folder`` is (or can be made) a writable folder."""
    import tempfile
    from pathlib import Path

    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ValueError(
            f"{option} {folder!r} is not a writable folder ({_os_message(err)})"
        ) from err


def _os_message(err: OSError) -> str:
    """``strerror: filename`` for an OSError that has them, else its own message."""
    if err.strerror and err.filename:
        return f"{err.strerror}: {err.filename}"
    return str(err)


def _verify(
    names: Sequence[str], root: str | None, sample: int, budget: float | None
) -> int:
    from pathlib import Path

    from . import results, verification

    if sample < 1:
        raise ValueError(f"--sample must be a positive int, got {sample}")
    if budget is not None and not 0 < budget < 1e6:
        raise ValueError(f"--budget must be a positive number of seconds, got {budget}")
    wheres = [Path(root)] if root else results.roots()
    where = " or ".join(str(w) for w in wheres)
    folders = [
        p.parent for w in wheres for p in sorted(w.glob(f"*/*/{results.MANIFEST}"))
    ]
    if not folders:
        raise ValueError(f"no saved sets under {where}")
    known = sorted({f.parent.name for f in folders})
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"no saved set named {unknown[0]!r} under {where}; saved sets: "
            f"{', '.join(known)}"
        )
    chosen = [f for f in folders if not names or f.parent.name in names]
    failed = 0
    for folder in chosen:
        try:
            outcome = verification.verify(results.load(folder), k=sample, budget=budget)
        except results.SetError as err:  # refused before anything is re-run
            print(f"{err.name}: FAILED")
            for problem in err.problems:
                print(f"    {problem}")
            failed += 1
            continue
        print(outcome.summary(), flush=True)
        for problem in outcome.problems:
            print(f"    {problem}")
        failed += not outcome.ok
    return 1 if failed else 0


def _scorecard_text(table: pd.DataFrame, width: int = 100) -> str:
    """The scorecard for a terminal: a heading line per claim, then its numbers, wrapped."""
    import textwrap

    lines: list[str] = []
    for row in table.itertuples(index=False):
        lines.append(
            f"{row.id:<4} {row.category.upper():<24} {row.kind} (chapter {row.chapter}): {row.claim}"
        )
        fields = [("paper", row.paper), ("ours", row.ours)]
        if row.verdict != row.category:  # each effect's verdict, named
            fields.insert(0, ("says", row.verdict))
        if row.n not in ("", "-"):
            fields.append(
                ("from", f"n={row.n}, {row.profile} profile, {row.data} data")
            )
        for name, value in fields:
            if value not in ("", "-"):
                lines.extend(
                    textwrap.wrap(
                        str(value),
                        width,
                        initial_indent=f"     {name:<6}",
                        subsequent_indent=" " * 11,
                    )
                )
    return "\n".join(lines) + "\n"


def _check_out_file(out: str) -> None:
    """A ValueError naming ``--out`` when it exists and is not a regular file, or is a
    symbolic link: writing renames a new file over the path, which would replace a device
    (``/dev/null``), a pipe or the link itself."""
    from pathlib import Path

    path = Path(out)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        kind = "a symbolic link" if path.is_symlink() else "not a regular file"
        raise ValueError(
            f"--out {out!r} is {kind}, which writing would replace; expected the path of a "
            "new or regular file"
        )


def _check_root(root: str | None) -> None:
    """A ValueError naming ``--root`` unless it is None or a folder holding saved sets."""
    from pathlib import Path

    if root is not None and not Path(root).is_dir():
        raise ValueError(
            f"--root {root!r} is not a folder; expected a saved-results folder (by default "
            "the package's saved/)"
        )
    if root is not None and not any(Path(root).glob("*/*/manifest.json")):
        raise ValueError(
            f"--root {root!r} holds no saved sets (<experiment>/<profile>/manifest.json); "
            "expected a saved-results folder (by default the package's saved/)"
        )


def _scorecard(
    fmt: str, out: str | None, root: str | None, as_json: bool = False
) -> None:
    from . import claims
    from ._io import write_text_atomic

    _check_root(root)
    if out:
        _check_out_file(out)
    if as_json:
        import json

        records = claims.scorecard_records(root=root)
        count = len(records)
        text = json.dumps(records, allow_nan=False, indent=1) + "\n"
    else:
        full = claims.scorecard(root=root)
        count = len(full)
        columns = ["id", "kind", "paper", "ours", "n", "profile", "data", "verdict"]
        table = full[[*columns, "chapter"]]
        if fmt == "csv":
            text = table.to_csv(index=False)
        elif fmt == "markdown":
            text = claims.markdown(table)
        else:
            text = _scorecard_text(full)
    if out:
        try:
            write_text_atomic(out, text)
        except OSError as err:
            raise ValueError(
                f"--out {out!r} cannot be written ({_os_message(err)}); give a file path in "
                "a writable folder"
            ) from err
        print(f"scorecard ({count} claims) written to {out}")
    else:
        print(text, end="")


def _run(args: argparse.Namespace) -> None:
    """``run`` on this machine: the grid's runs into ``--out``, resuming finished ones."""
    settings = _run_settings(args)
    _check_writable(args.out, "--out")
    progress = False if args.no_progress else None
    done = replace(settings, progress=progress).run(args.name, args.out)
    print(
        f"{args.name}: ran {len(done.ran)}, skipped {len(done.skipped)} finished; "
        f"records in {done.folder / 'runs'}, table {done.results_csv}"
    )


def _save(args: argparse.Namespace) -> None:
    """``save``: run (or resume) a saved set of the package's results."""
    from . import results

    settings = _run_settings(args)
    if args.root is not None:
        _check_writable(args.root, "--root")
    saved = results.save(
        args.name,
        settings,
        root=args.root,
        allow_dirty=args.allow_dirty,
        prune=args.prune,
    )
    print(f"{saved.label()}\nin {saved.folder}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m normlab`` and the ``normlab`` script; returns the exit status."""
    args = _parser().parse_args(argv)
    from . import experiments
    from .checkpoint import CheckpointError
    from .data import ChecksumError, OfflineError
    from .results import SetError
    from .training import DivergenceError

    try:
        if args.command == "list":
            _list()
        elif args.command == "run" and args.executor is not None:
            from .experiments import cluster

            print(cluster.run_from_args(args, _run_settings(args)))
        elif args.command == "run":
            _run(args)
        elif args.command == "save":
            _save(args)
        elif args.command == "verify":
            return _verify(args.name, args.root, args.sample, args.budget)
        elif args.command == "scorecard":
            _scorecard(args.format, args.out, args.root, args.json)
        else:
            from .figures.reports import report_figures

            rep = experiments.report(
                args.name,
                out=args.out,
                profile=args.profile,
                figures=report_figures(args.name),
            )
            import pandas as pd

            with pd.option_context(
                "display.width", 160, "display.max_rows", 200, "display.max_columns", 30
            ):
                print(rep.summary.to_string(index=False))
            for stem, path in rep.paths.items():
                print(f"{stem}: {path}")
    except KeyboardInterrupt:
        print(
            "error: interrupted; every finished run is saved, and the same command resumes",
            file=sys.stderr,
        )
        return 130
    except SetError as err:
        # a saved set that fails its checks is a mismatch (1), as in verify, not a usage error
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (
        ValueError,
        CheckpointError,
        DivergenceError,
        OfflineError,
        ChecksumError,
    ) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {_os_message(err)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
