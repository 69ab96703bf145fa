"""environment.yml (conda) and pyproject.toml list the same dependencies."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def canonical(requirement: str) -> str:
    """'scikit-learn >= 1.3' -> 'scikit-learn>=1.3' with a normalised name."""
    requirement = requirement.replace(" ", "")
    match = re.match(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?(.*)", requirement)
    assert match, requirement
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    return name + match.group(3)


def pyproject_requirements(text: str) -> set[str]:
    project = tomllib.loads(text)["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += [r for r in extra if not r.startswith("normlab")]
    return {canonical(r) for r in reqs}


def environment_requirements(text: str) -> set[str]:
    env = yaml.safe_load(text)
    reqs = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            reqs += [r for r in dep.get("pip", []) if not r.startswith("-e")]
        elif not dep.startswith(("python", "pip")):
            reqs.append(dep)
    return {canonical(r) for r in reqs}


def test_environment_matches_pyproject() -> None:
    ours = pyproject_requirements((ROOT / "pyproject.toml").read_text())
    conda = environment_requirements((ROOT / "environment.yml").read_text())
    assert ours == conda, (
        f"only in pyproject: {sorted(ours - conda)}; only in environment.yml: {sorted(conda - ours)}"
    )


def test_no_pins_of_torch_or_numpy() -> None:
    for req in pyproject_requirements((ROOT / "pyproject.toml").read_text()):
        if req.startswith(("torch", "numpy")):
            assert "==" not in req and "<" not in req, req


def test_comparison_notices_a_difference() -> None:
    """The guard itself: a dependency missing from one side is reported."""
    text = re.sub(r"(?m)^\s*- sympy.*\n", "", (ROOT / "environment.yml").read_text())
    assert environment_requirements(text) != pyproject_requirements(
        (ROOT / "pyproject.toml").read_text()
    )
