"""``python -m normlab``: list, run (sharded), report, and clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from normlab.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
SHARD = "0/20"  # three quick fc_normalisers runs with one seed


def run_args(out: Path, *extra: str, shard: str = SHARD) -> list[str]:
    """``python -m normlab run`` of one shard of quick fc_normalisers runs, one seed."""
    return [
        "run",
        "fc_normalisers",
        "--profile",
        "quick",
        "--out",
        str(out),
        "--seeds",
        "1",
        "--shard",
        shard,
        "--no-progress",
        *extra,
    ]


def test_list(capsys) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "fc_normalisers" in out and "batch_size" in out and "cnn_normalisers" in out
    from normlab import experiments

    quick = experiments.get("fc_normalisers").grid("quick").size()
    assert f"{quick} runs" in out


def test_run_then_report(tmp_path: Path, capsys) -> None:
    out = tmp_path / "results"
    args = run_args(out, "--device", "cpu", shard="1/20")
    assert main(args) == 0
    from normlab import experiments

    expected = len(
        experiments.shard(
            experiments.get("fc_normalisers").runs("quick", seeds=1), "1/20"
        )
    )
    runs = sorted((out / "fc_normalisers" / "quick" / "runs").glob("*.json"))
    assert len(runs) == expected > 0
    assert f"ran {expected}, skipped 0" in capsys.readouterr().out
    assert main(args) == 0
    assert f"ran 0, skipped {expected}" in capsys.readouterr().out
    assert (
        main(["report", "fc_normalisers", "--profile", "quick", "--out", str(out)]) == 0
    )
    printed = capsys.readouterr().out
    assert "ci95" in printed and "summary.csv" in printed
    assert (
        out / "fc_normalisers" / "quick" / "figures" / "lr_sensitivity.png"
    ).stat().st_size > 0


def test_clear_errors(tmp_path: Path, capsys) -> None:
    assert main(["run", "nope", "--out", str(tmp_path)]) == 2
    assert "fc_normalisers" in capsys.readouterr().err  # lists the valid names
    assert (
        main(
            [
                "run",
                "fc_normalisers",
                "--profile",
                "quick",
                "--out",
                str(tmp_path),
                "--shard",
                "4/4",
            ]
        )
        == 2
    )
    assert "0 <= K < N" in capsys.readouterr().err
    assert not (tmp_path / "fc_normalisers").exists()
    assert (
        main(["report", "batch_size", "--profile", "quick", "--out", str(tmp_path)])
        == 2
    )
    assert "no run records" in capsys.readouterr().err


def test_python_dash_m_list() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "companion"),
        "NORMLAB_PROFILE": "quick",
    }
    done = subprocess.run(
        [sys.executable, "-m", "normlab", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "fc_normalisers" in done.stdout
