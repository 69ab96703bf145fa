"""The command line: ``python -m normlab list | run | report``.

Examples::

    python -m normlab list
    python -m normlab run fc_normalisers --profile quick --out results
    python -m normlab run fc_normalisers --profile standard --shard 3/8   # machine 3 of 8
    python -m normlab report fc_normalisers --profile standard --out results
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ._runtime import PROFILES


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m normlab", description="Run the book's experiments.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the experiments, with run counts and expected times per profile")
    run = commands.add_parser("run", help="run (or resume) an experiment's grid")
    run.add_argument("name")
    run.add_argument("--profile", choices=PROFILES, default=None, help="default: $NORMLAB_PROFILE, else by device")
    run.add_argument("--out", default="results", help="results folder (default: results)")
    run.add_argument("--seeds", type=int, default=None, help="number of seeds (default: the profile's)")
    run.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: the best available)")
    run.add_argument("--shard", default=None, help="K/N: run shard K (from 0) of N, e.g. $SLURM_ARRAY_TASK_ID/8")
    run.add_argument("--threads", type=int, default=None,
                     help="CPU threads for torch (1 is fastest for the quick profile on a busy machine)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    report = commands.add_parser("report", help="merge shards, write the summary table and figures")
    report.add_argument("name")
    report.add_argument("--profile", choices=PROFILES, default=None)
    report.add_argument("--out", default="results")
    return parser


def _list() -> None:
    from . import experiments

    width = max(len("experiment"), *(len(name) for name in experiments.names()))
    header = f"{'experiment':<{width}} {'chapter':<8}" + "".join(f"{p:>22}" for p in PROFILES)
    print(header)
    print("-" * len(header))
    for name in experiments.names():
        exp = experiments.get(name)
        cells = "".join(
            f"{f'{exp.grid(p).size()} runs, ~{_duration(exp.expected_seconds(p))}' if p in exp.profiles else '-':>22}"
            for p in PROFILES)
        print(f"{name:<{width}} {exp.chapter:<8}{cells}")
        print(f"    {exp.title}")
    print("\nTimes: quick and cpu measured on a 2-core CPU with --threads 1 (cpu: saved result sets, '-' where "
          "none is declared); standard/paper estimated for one GPU, before sharding.")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m normlab`` and the ``normlab`` script; returns the exit status."""
    args = _parser().parse_args(argv)
    from . import experiments

    try:
        if args.command == "list":
            _list()
        elif args.command == "run":
            experiments.get(args.name)
            experiments.parse_shard(args.shard)
            if args.threads is not None:
                if args.threads < 1:
                    raise ValueError(f"--threads must be a positive int, got {args.threads}")
                import torch

                torch.set_num_threads(args.threads)
            done = experiments.run(args.name, profile=args.profile, out=args.out, seeds=args.seeds,
                                   device=args.device, shard=args.shard,
                                   progress=False if args.no_progress else None)
            print(f"{args.name}: ran {len(done.ran)}, skipped {len(done.skipped)} finished; "
                  f"records in {done.folder / 'runs'}, table {done.results_csv}")
        else:
            rep = experiments.report(args.name, out=args.out, profile=args.profile)
            import pandas as pd

            with pd.option_context("display.width", 160, "display.max_rows", 200, "display.max_columns", 30):
                print(rep.summary.to_string(index=False))
            for stem, path in rep.paths.items():
                print(f"{stem}: {path}")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
