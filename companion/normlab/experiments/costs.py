"""What a chapter's experiments would cost in the larger profiles, and the commands that run them.

Every experiment chapter calls :func:`larger_profiles` once, so that a reader who opens it
in the default ``quick`` profile (on a GPU too) sees what ``standard`` (one GPU) and
``paper`` (a cluster) would cost, by the registry's estimate, before starting either.
"""

from __future__ import annotations

from .registry import get, names

__all__ = [
    "CPU_BUDGET_MIN",
    "chapter_experiments",
    "gpu_time",
    "larger_profiles",
    "STANDARD_BUDGET_MIN",
]

# The most GPU-minutes a standard grid may take by the registry's estimate (tests check it).
STANDARD_BUDGET_MIN = 45.0
# The CPU-minutes a chapter's saved cpu sets may take: about 90, 45 minutes on the book's
# 2 cores (the cpu profile in appendix_reproducing.md).
CPU_BUDGET_MIN = 90.0


def gpu_time(seconds: float) -> str:
    """``seconds`` of one GPU as ``"12 GPU-min"`` or ``"3.4 GPU-h"``."""
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} GPU-min"
    return f"{seconds / 3600:.1f} GPU-h"


def chapter_experiments(chapter: str) -> list[str]:
    """The registered experiments of ``chapter`` (e.g. ``"6"``), sorted by name."""
    found = [n for n in names() if get(n).chapter == str(chapter)]
    if not found:
        chapters = sorted({get(n).chapter for n in names()}, key=int)
        raise ValueError(
            f"chapter={chapter!r} has no experiments; expected one of {', '.join(chapters)}"
        )
    return found


def larger_profiles(chapter: str) -> str:
    """The standard and paper grids of ``chapter``'s experiments: runs, estimated GPU time,
    and the commands that run them on one GPU and on a Slurm cluster, in lines that fit the
    book's 88-column code column."""
    lines = [
        f"Larger profiles of chapter {chapter} (registry estimates, before sharding):"
    ]
    experiments = chapter_experiments(chapter)
    width = max(len(n) for n in experiments)
    for name in experiments:
        exp = get(name)
        for profile, where in (("standard", "one GPU"), ("paper", "a cluster")):
            lines.append(
                f"  {name:<{width}}  {profile:<8} {exp.grid(profile).size():>6} runs, "
                f"~{gpu_time(exp.expected_seconds(profile))} ({where})"
            )
    joined = " ".join(experiments)
    lines += [
        "One GPU (or set NORMLAB_PROFILE=standard before opening this notebook):",
        *(
            f"  python -m normlab run {n} --profile standard --out runs"
            for n in experiments
        ),
        "A Slurm cluster (pip install 'normlab[cluster]'; resubmit to resume):",
        f"  for e in {joined}; do",
        "    python -m normlab run $e --profile paper --out runs \\",
        "      --executor slurm --partition gpu --time 240 --gpus-per-task 1",
        "  done",
    ]
    return "\n".join(lines)
