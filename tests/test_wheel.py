"""The built wheel carries the saved sets: installed into a fresh folder and run from an
empty one, it finds every shipped set and gives the checkout's scorecard verdicts, and a
chapter runs from it with only what ``normlab[notebooks]`` installs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from normlab import claims, experiments, results

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
    # every set the checkout ships, among them every cpu set a claim reads
    tested = {
        c.test.experiment for c in claims.CLAIMS.values() if c.kind == "empirical"
    }
    read = {f"{n}/cpu" for n in tested if "cpu" in experiments.get(n).profiles}
    assert there["sets"] == here and read and read <= set(here)
    table = claims.scorecard()
    assert there["verdicts"] == dict(zip(table["id"], table["verdict"]))
    packaged = {p.name for p in Path(there["shipped"]).rglob("*") if p.is_file()}
    assert packaged == {"runs.jsonl", "results.csv", "manifest.json"}


#: A chapter that reads a shipped set, glues numbers and shows a widget: run from the
#: wheel in an empty folder, as a Colab reader runs it after the install cell.
WHEEL_CHAPTER = "10_gate.ipynb"
#: What the book's build has and a reader's ``normlab[notebooks]`` does not.
BUILD_ONLY = ("myst_nb", "jupyter_book", "sphinx")


def test_a_chapter_runs_from_the_wheel_in_an_empty_folder(
    installed: Path, tmp_path: Path, monkeypatch
) -> None:
    import nbformat
    from nbclient import NotebookClient

    # the build's packages made unimportable, so a chapter that needs one fails here
    blocked = tmp_path / "blocked"
    for name in BUILD_ONLY:
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(
            f"raise ImportError('{name} is not in normlab[notebooks]')\n"
        )
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(blocked), str(installed)]))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NORMLAB_PROFILE", "quick")
    monkeypatch.delenv(results.RESULTS_ENV, raising=False)
    monkeypatch.delenv("MPLBACKEND", raising=False)
    chapter = nbformat.read(ROOT / "book" / WHEEL_CHAPTER, as_version=4)
    chapter.cells.insert(
        0,
        nbformat.v4.new_code_cell(
            "import normlab, pathlib\n"
            f"assert pathlib.Path(normlab.__file__).is_relative_to({str(installed)!r})"
        ),
    )
    NotebookClient(
        chapter, timeout=300, resources={"metadata": {"path": str(empty)}}
    ).execute()
    assert list(empty.iterdir()) == []  # the chapter wrote nothing where it ran
