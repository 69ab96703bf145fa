"""The command line: ``python -m normlab list | run | report | save | verify | scorecard``.

Examples::

    python -m normlab list
    python -m normlab run fc_normalisers --profile quick --out results
    python -m normlab run fc_normalisers --profile standard --shard 3/8   # machine 3 of 8
    python -m normlab run fc_normalisers --profile paper --executor slurm --partition gpu
    python -m normlab report fc_normalisers --profile standard --out runs
    python -m normlab save fc_normalisers --profile cpu --threads 1      # a set that ships in results/
    python -m normlab verify                                             # re-check every saved set
    python -m normlab scorecard --format markdown --out scorecard.md
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._runtime import PROFILES

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_OUT = "runs"  # scratch runs; shipped sets are made with `save` into results/


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m normlab", description="Run the book's experiments."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "list", help="the experiments, with run counts and expected times per profile"
    )
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
    from .experiments import cluster

    cluster.add_arguments(run)
    report = commands.add_parser(
        "report", help="merge shards, write the summary table and figures"
    )
    report.add_argument("name")
    report.add_argument("--profile", choices=PROFILES, default=None)
    report.add_argument("--out", default=str(DEFAULT_OUT))
    save = commands.add_parser(
        "save",
        help="run (or resume) a saved result set in results/ and write its manifest",
    )
    save.add_argument("name")
    save.add_argument(
        "--profile", choices=[p for p in PROFILES if p != "quick"], required=True
    )
    save.add_argument(
        "--root",
        default=None,
        help="saved-results folder (default: the repository's results/)",
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
    verify = commands.add_parser(
        "verify",
        help="check saved sets: digests, table, and a re-run of one configuration",
    )
    verify.add_argument(
        "name",
        nargs="?",
        default=None,
        help="one experiment (default: every saved set)",
    )
    verify.add_argument("--root", default=None)
    card = commands.add_parser(
        "scorecard", help="every claim, the paper's number, ours and the verdict"
    )
    card.add_argument("--format", choices=("text", "markdown", "csv"), default="text")
    card.add_argument(
        "--out", default=None, help="write to this file instead of the terminal"
    )
    card.add_argument(
        "--root",
        default=None,
        help="saved-results folder (default: the repository's results/)",
    )
    return parser


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


def _run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What ``run`` and ``save`` share: the name and shard are checked and torch's threads set
    before anything runs; returns the keyword arguments both pass on."""
    from . import experiments

    experiments.get(args.name)
    experiments.parse_shard(args.shard)
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be a positive int, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    return {
        "profile": args.profile,
        "seeds": args.seeds,
        "device": args.device,
        "shard": args.shard,
    }


def _verify(name: str | None, root: str | None) -> int:
    from . import results

    sets = results.saved_sets(name, root)
    if not sets:
        print("no saved sets found")
        return 0
    failed = 0
    for saved in sets:
        problems = results.verify(saved)
        kind = "format only (made on a GPU)" if saved.on_gpu else "format + re-run"
        print(
            f"{saved.experiment}/{saved.profile}: {kind}: {'ok' if not problems else 'FAILED'}"
        )
        for problem in problems:
            print(f"    {problem}")
        failed += bool(problems)
    return 1 if failed else 0


def _scorecard_text(table: pd.DataFrame, width: int = 100) -> str:
    """The scorecard for a terminal: a heading line per claim, then its numbers, wrapped."""
    import textwrap

    lines: list[str] = []
    for row in table.itertuples(index=False):
        lines.append(
            f"{row.id:<4} {row.verdict.upper():<24} {row.kind} (chapter {row.chapter}): {row.claim}"
        )
        fields = [("paper", row.paper), ("ours", row.ours)]
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


def _scorecard(fmt: str, out: str | None, root: str | None) -> None:
    from . import claims
    from ._io import write_text_atomic

    table = claims.scorecard(root=root)[
        ["id", "kind", "paper", "ours", "n", "profile", "data", "verdict", "chapter"]
    ]
    if fmt == "csv":
        text = table.to_csv(index=False)
    elif fmt == "markdown":
        text = claims.markdown(table)
    else:
        text = _scorecard_text(claims.scorecard(root=root))
    if out:
        write_text_atomic(out, text)
        print(f"scorecard ({len(table)} claims) written to {out}")
    else:
        print(text, end="")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m normlab`` and the ``normlab`` script; returns the exit status."""
    args = _parser().parse_args(argv)
    from . import experiments

    try:
        if args.command == "list":
            _list()
        elif args.command == "run" and args.executor is not None:
            from .experiments import cluster

            print(cluster.run_from_args(args, _run_settings(args)))
        elif args.command == "run":
            done = experiments.run(
                args.name,
                out=args.out,
                progress=False if args.no_progress else None,
                **_run_settings(args),
            )
            print(
                f"{args.name}: ran {len(done.ran)}, skipped {len(done.skipped)} finished; "
                f"records in {done.folder / 'runs'}, table {done.results_csv}"
            )
        elif args.command == "save":
            from . import results

            saved = results.save(args.name, root=args.root, **_run_settings(args))
            print(f"{saved.label()}\nin {saved.folder}")
        elif args.command == "verify":
            return _verify(args.name, args.root)
        elif args.command == "scorecard":
            _scorecard(args.format, args.out, args.root)
        else:
            rep = experiments.report(args.name, out=args.out, profile=args.profile)
            import pandas as pd

            with pd.option_context(
                "display.width", 160, "display.max_rows", 200, "display.max_columns", 30
            ):
                print(rep.summary.to_string(index=False))
            for stem, path in rep.paths.items():
                print(f"{stem}: {path}")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
