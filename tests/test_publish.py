"""The publish workflow (.github/workflows/publish.yml) and ``make publish``, linted: the
book's Colab buttons open ``notebooks/<chapter>.ipynb`` on ``_config.yml``'s pages branch,
and these are what put the notebooks there. No GitHub Actions linter is installed, so the
checks are structural: the YAML, the triggers, the ``make book`` step and the publish step's
branch and folder, against ``_config.yml`` and the Makefile. Nothing here publishes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "publish.yml"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
#: An action's reference: owner/name@version (a tag or a commit), or a local ./path.
ACTION = re.compile(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[\w.-]+|\./[\w./-]+")


def _workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def _triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    """The ``on:`` mapping (YAML 1.1 reads the bare key ``on`` as True)."""
    on = workflow.get("on", workflow.get(True))
    assert isinstance(on, dict), "on: must be a mapping of events"
    return on


def _steps() -> list[dict[str, Any]]:
    jobs = _workflow()["jobs"]
    assert isinstance(jobs, dict) and len(jobs) == 1, "one job: build, then publish"
    (job,) = jobs.values()
    assert job.get("runs-on"), "the job names its runner"
    steps = job["steps"]
    assert isinstance(steps, list) and steps
    return steps


def test_the_workflow_is_valid_and_complete() -> None:
    """Parses; name, triggers, permissions, one job of steps that each use an action or
    run a command (never both), each action pinned to a version."""
    workflow = _workflow()
    assert isinstance(workflow, dict) and workflow.get("name")
    assert set(workflow) <= {
        "name",
        "on",
        True,
        "permissions",
        "concurrency",
        "jobs",
        "env",
    }
    assert workflow["permissions"] == {"contents": "write"}, (
        "pushing a branch needs write"
    )
    for step in _steps():
        assert isinstance(step, dict) and step.get("name"), step
        assert ("uses" in step) != ("run" in step), f"{step['name']}: uses or run"
        if "uses" in step:
            assert ACTION.fullmatch(step["uses"]), (
                f"{step['uses']}: not owner/name@version"
            )
        assert set(step) <= {"name", "uses", "run", "with", "env", "if", "id"}, step


def test_it_runs_on_every_push_to_the_configured_branch_and_by_hand() -> None:
    on = _triggers(_workflow())
    assert on["push"]["branches"] == [CONFIG["repository"]["branch"]]
    assert "workflow_dispatch" in on
    assert "pull_request" not in on, "a pull request must not publish"


def test_it_builds_with_make_book_after_checking_out_the_code() -> None:
    steps = _steps()
    uses = [s.get("uses", "") for s in steps]
    runs = [s.get("run", "").strip() for s in steps]
    assert runs.count("make book") == 1, "the book is built with the README's make book"
    build = runs.index("make book")
    checkout = next(i for i, u in enumerate(uses) if u.startswith("actions/checkout@"))
    python = next(
        i for i, u in enumerate(uses) if u.startswith("actions/setup-python@")
    )
    assert checkout < build and python < build


def test_it_publishes_build_html_to_the_colab_buttons_branch() -> None:
    """The publish step comes after the build and pushes _build/html, whose notebooks/
    the Colab buttons open, to launch_buttons.pages_branch of the configured repository."""
    steps = _steps()
    build = next(
        i for i, s in enumerate(steps) if s.get("run", "").strip() == "make book"
    )
    publish = [
        (i, s) for i, s in enumerate(steps) if "gh-pages" in s.get("uses", "").lower()
    ]
    assert len(publish) == 1, "one publish step"
    at, step = publish[0]
    assert at > build
    settings = step["with"]
    assert settings["publish_branch"] == CONFIG["launch_buttons"]["pages_branch"]
    assert Path(settings["publish_dir"]) == Path("_build/html")
    assert settings["github_token"] == "${{ secrets.GITHUB_TOKEN }}"
    assert settings.get("enable_jekyll") is False, "Jekyll would hide _static/"
    assert CONFIG["repository"]["url"].startswith("https://github.com/")


def test_make_book_publishes_the_reader_notebooks_beside_the_html() -> None:
    """What the workflow publishes holds the notebooks: make book writes them into
    _build/html/notebooks/, the folder the Colab links name."""
    makefile = (ROOT / "Makefile").read_text()
    book = makefile[makefile.index("\nbook:") :].split("\n\n", 1)[0]
    assert "PYTHONPATH=book/_ext $(BIN)/python -m normlab_book.reader _build" in book
    from normlab_book.reader import NOTEBOOKS, colab_link

    link = colab_link("https://c", CONFIG["repository"]["url"], "b", "01_x")
    assert link.endswith(f"/blob/b/{NOTEBOOKS}/01_x.ipynb") and NOTEBOOKS == "notebooks"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_publish_builds_then_pushes_build_html_to_the_pages_branch() -> None:
    """``make -n`` prints without running: the target builds the book first, then pushes
    a commit of _build/html from a temporary worktree to the configured branch."""
    printed = subprocess.run(
        ["make", "-n", "-o", "book", "publish"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    branch = CONFIG["launch_buttons"]["pages_branch"]
    assert "git worktree add" in printed
    assert '_build/html/." .' in printed
    assert f"git push --force origin HEAD:refs/heads/{branch}" in printed
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^publish: book$", makefile, re.M), "make publish builds first"
    assert "publish" in re.search(r"^\.PHONY:.*$", makefile, re.M)[0]
