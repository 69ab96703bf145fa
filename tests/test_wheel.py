"""The built wheel carries the saved sets: installed into a fresh folder and run from an
empty one, it finds every shipped set and gives the checkout's scorecard verdicts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from normlab import claims, results

ROOT = Path(__file__).resolve().parents[1]

_REPORT = """
import json, normlab
from normlab import claims, results
table = claims.scorecard()
print(json.dumps({
    "file": normlab.__file__,
    "root": str(results.default_root()),
    "shipped": str(results.shipped_root()),
    "sets": sorted(f"{s.experiment}/{s.profile}" for s in results.saved_sets()),
    "verdicts": dict(zip(table["id"], table["verdict"])),
}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel, built offline from a copy of the sources and installed with ``--target``."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "companion",
        source / "companion",
        ignore=shutil.ignore_patterns(
            "__pycache__", "*.egg-info", "runs", "checkpoints"
        ),
    )
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run([*build, "-q", "-w", str(tmp / "dist"), str(source)], check=True)
    (wheel,) = (tmp / "dist").glob("normlab-*.whl")
    target = tmp / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
        + ["--target", str(target), str(wheel)],
        check=True,
    )
    return target


def test_the_wheel_ships_the_sets_and_the_same_verdicts(
    installed: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != results.RESULTS_ENV}
    env["PYTHONPATH"] = str(installed)
    env["HOME"] = str(tmp_path / "home")
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _REPORT],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    there = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(there["file"]).is_relative_to(installed)  # the wheel, not the checkout
    assert Path(there["shipped"]).is_relative_to(installed)
    # save writes outside site-packages, into a folder of the reader's
    assert there["root"] == str(tmp_path / "home" / "normlab-results")
    here = sorted(f"{s.experiment}/{s.profile}" for s in results.saved_sets())
    assert there["sets"] == here and len(here) >= 10
    table = claims.scorecard()
    assert there["verdicts"] == dict(zip(table["id"], table["verdict"]))
    packaged = {p.name for p in Path(there["shipped"]).rglob("*") if p.is_file()}
    assert packaged == {"runs.jsonl", "results.csv", "manifest.json"}
