"""The core install holds what the library imports; the chapters' packages are extras.

A module that needs an optional package imports it through ``normlab._extras.require``,
which names the extra when the package is missing. Each test hides packages in a fresh
interpreter (``sys.modules[name] = None`` makes ``import name`` fail) and checks what a
user without the extra sees.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from normlab._extras import EXTRAS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "companion" / "normlab"

#: Modules of other work in progress that still import an optional package directly:
#: (module path, package, why). The lead empties this after merging.
DIRECT_IMPORTS = (
    ("widgets/live.py", "ipywidgets", "the widget is rewritten on another branch"),
    ("widgets/twin.py", "altair", "the widget is rewritten on another branch"),
)


def run_hidden(hidden: list[str], code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter in which the ``hidden`` modules cannot be imported."""
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in hidden)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "companion")}
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_library_imports_without_any_extra() -> None:
    library = (
        "normlab",
        "normlab.layers",
        "normlab.models",
        "normlab.data",
        "normlab.normalisers",
        "normlab.training",
        "normlab.gates",
        "normlab.divergence",
        "normlab.experiments",
        "normlab.results",
    )
    code = "import importlib\n" + "".join(
        f"importlib.import_module({m!r})\n" for m in library
    )
    code += "import normlab.layers as L; print(L.AutoNorm(8))\n"
    done = run_hidden(sorted(EXTRAS), code)
    assert done.returncode == 0, done.stderr
    assert "AutoNorm" in done.stdout


@pytest.mark.parametrize(
    "module, code, extra",
    [
        ("sympy", "import normlab.symbolic", "symbolic"),
        (
            "nltk",
            "from normlab.data.text import read_treebank; read_treebank('.')",
            "text",
        ),
        (
            "altair",
            "from normlab import interactive; interactive.vegalite_version()",
            "interactive",
        ),
        (
            "vl_convert",
            "from normlab import interactive; interactive.bundle()",
            "interactive",
        ),
    ],
)
def test_a_missing_extra_is_named(module: str, code: str, extra: str) -> None:
    done = run_hidden([module], code)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("normlab._extras.MissingExtraError: "), done.stderr
    distribution = EXTRAS[module][0]
    assert f"needs {distribution}, which is not installed" in last
    assert f'pip install "normlab[{extra}]"' in last


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.\-]+", r).group(0).lower() for r in requirements}


def test_every_optional_package_is_in_its_extra_and_not_in_the_core() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    core = _requirement_names(project["dependencies"])
    for distribution, extra in EXTRAS.values():
        assert distribution in _requirement_names(extras[extra]), (distribution, extra)
        assert distribution not in core, f"{distribution} is a core dependency"
    notebooks = extras["notebooks"][0]
    assert {extra for _, extra in EXTRAS.values()} == set(
        re.search(r"\[(.*)\]", notebooks).group(1).split(",")
    )
    for needs_chapters in ("book", "lab"):
        assert "normlab[notebooks]" in extras[needs_chapters], needs_chapters


def test_optional_packages_are_imported_through_require() -> None:
    """No module imports an optional package with ``import``: only through ``require``."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                top = (name or "").split(".")[0]
                if top in EXTRAS:
                    found.add((path.relative_to(PACKAGE).as_posix(), top))
    allowed = {(where, module) for where, module, _ in DIRECT_IMPORTS}
    assert found <= allowed, (
        f"import these through normlab._extras.require: {sorted(found - allowed)}"
    )
    assert allowed - {("data/text.py", "nltk")} <= found, (
        "an exception no longer applies"
    )
